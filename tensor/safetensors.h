// safetensors checkpoints read as meta tensors: only the JSON header of each file is read (8 + N
// bytes), never the data, so a multi-hundred-GB checkpoint is inspected in microseconds. Each tensor
// keeps where its bytes lie (file, absolute byte range, row-major strides) for materialization,
// where every rank reads only its own shard's bytes.
//   Checkpoint ck = read_checkpoint("llama/model.safetensors.index.json");  // or a .safetensors
//   for (const CheckpointTensor& t : ck.tensors) use(t.name, t.dtype, t.shape, ck.file_of(t), t.offset);
//   NamedTensors meta = to_named_tensors(ck);              // fresh meta tensors, one per entry
//   CheckpointReport r = check_checkpoint(ck, model);      // missing / unexpected / mis-shaped
//
// Note [safetensors format]
// A file is: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (the header), then the data
// buffer. The header is an object: an optional "__metadata__" {str: str}, and per tensor
// {"dtype": "BF16", "shape": [4096, 4096], "data_offsets": [begin, end]}, offsets relative to the
// first byte after the header. (https://github.com/huggingface/safetensors, README "Format".)
// A sharded checkpoint adds model.safetensors.index.json: {"metadata": {"total_size": bytes},
// "weight_map": {tensor name: file name next to the index}} (Hugging Face transformers'
// save_pretrained with max_shard_size).
//
// Note [Untrusted safetensors headers]
// A header is parsed by a schema-driven SAX handler: nothing deeper than the format's 3 levels
// (document, tensor entry, shape) is ever built, so hostile nesting costs one error, not memory.
// Rejected, each with one line naming the file and the tensor/field:
//   - files shorter than 8 bytes; N < 2, N > kMaxSafetensorsHeaderBytes, 8 + N beyond the file;
//   - JSON that is not valid UTF-8 JSON, not an object, or nested deeper than the format allows;
//   - duplicate keys (top level, in an entry, in __metadata__); unknown fields in an entry; a
//     missing dtype/shape/data_offsets; non-string __metadata__ values;
//   - dtype names outside the format (and format dtypes shardplan has no meta type for: U16, U32,
//     U64, F4, F6_*, F8_E8M0, named as such);
//   - shape entries that are not non-negative integers; numel * itemsize overflowing int64 or not
//     equal to end - begin; non-zero sizes whose product overflows int64 (a zero-size tensor's
//     strides); begin > end; end beyond the data buffer;
//   - ranges that overlap, leave a hole between tensors, or leave bytes after the last tensor.
//     Holes and trailing bytes are errors because the format requires the data buffer to be
//     covered exactly (safetensors' own loader, Metadata::validate, refuses such files too).
// An index is rejected for: invalid JSON (depth-limited too), a missing or non-object weight_map,
// non-string file names, file names that are absolute or leave the index's folder, files that do
// not exist, tensors absent from the file the index names, tensors in a file that the index maps
// elsewhere or not at all, and metadata.total_size differing from the sum of the tensors' bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/dim_vector.h"
#include "tensor/describe.h"
#include "tensor/dtype.h"

namespace shardplan::tensor {

class Module;

// Largest header accepted: 100 MB, the cap of the reference implementation
// (safetensors/src/tensor.rs, MAX_HEADER_SIZE = 100_000_000). A 405B checkpoint needs ~100 kB.
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// The header's deepest legitimate nesting: document -> tensor entry -> shape / data_offsets.
inline constexpr int kSafetensorsHeaderDepth = 3;
// Nesting allowed in an index file (its format needs 3: document -> metadata/weight_map -> value;
// the rest is room for free-form metadata).
inline constexpr int kMaxIndexDepth = 16;

// ---- dtype names of the format ----

// "BF16" -> kBFloat16, "F8_E4M3" -> kFloat8E4M3FN, ... Throws shardplan::Error naming the value:
// "unknown" for names outside the format, "not supported" for format dtypes without a meta type.
DType parse_safetensors_dtype(std::string_view name);
// The format's name of `t` ("BF16"); throws for complex128, which the format cannot hold.
std::string_view safetensors_dtype_name(DType t);

// ---- Where bytes come from ----

// Random-access reads of a file or a buffer. Header readers go through it, so a test (or a remote
// store) can count or serve exactly the bytes asked for.
class ByteReader {
 public:
  virtual ~ByteReader() = default;
  // Total bytes.
  virtual int64_t size() const = 0;
  // Exactly out.size() bytes at `offset` (callers stay within size()); throws shardplan::Error on
  // a failed or short read.
  virtual void read_at(int64_t offset, std::span<char> out) const = 0;
};

// A file opened once, read with pread: no mapping, no read-ahead of the data buffer by us.
std::unique_ptr<ByteReader> open_file_reader(const std::filesystem::path& path);
// A buffer the caller keeps alive.
std::unique_ptr<ByteReader> memory_reader(std::string_view bytes);

// ---- One file ----

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kFloat32;
  DimVector shape;
  int64_t begin = 0;  // data_offsets, relative to the data buffer (byte 8 + N of the file)
  int64_t end = 0;    // INVARIANT: end - begin == numel(shape) * itemsize(dtype)

  friend bool operator==(const SafetensorsEntry&, const SafetensorsEntry&) = default;
};

struct SafetensorsHeader {
  int64_t header_bytes = 0;  // N
  int64_t data_bytes = 0;    // file size - 8 - N; the entries cover it exactly
  // In file order (the format's writers sort by dtype then name; readers must not rely on it).
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // __metadata__

  // First byte of the data buffer in the file.
  int64_t data_start() const { return 8 + header_bytes; }
  friend bool operator==(const SafetensorsHeader&, const SafetensorsHeader&) = default;
};

// Validates and parses header text (the N bytes after the length) for a data buffer of
// `data_bytes`. `source` names the file in errors.
SafetensorsHeader parse_safetensors_header(std::string_view json_text, int64_t data_bytes,
                                           std::string_view source);
// Reads the length and the header (8 + N bytes, nothing else) from `reader`, then parses it.
SafetensorsHeader read_safetensors_header(const ByteReader& reader, std::string_view source);
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);

// ---- A checkpoint: one file or a sharded index ----

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  DimVector shape;
  DimVector strides;   // row-major, in elements (the format stores tensors C-contiguous)
  size_t file = 0;     // index into Checkpoint::files
  int64_t offset = 0;  // absolute byte offset of the first element in that file
  int64_t nbytes = 0;  // bytes [offset, offset + nbytes) of that file

  friend bool operator==(const CheckpointTensor&, const CheckpointTensor&) = default;
};

struct CheckpointFile {
  std::filesystem::path path;
  SafetensorsHeader header;
  friend bool operator==(const CheckpointFile&, const CheckpointFile&) = default;
};

struct Checkpoint {
  std::filesystem::path source;  // the .safetensors file or the index it was read from
  std::vector<CheckpointFile> files;
  // Sorted by name (unique across files).
  std::vector<CheckpointTensor> tensors;
  // The index's "metadata" as written (total_size checked), or null for a single file.
  nlohmann::json index_metadata;

  const std::filesystem::path& file_of(const CheckpointTensor& t) const { return files[t.file].path; }
  // The tensor named `name`, or nullptr.
  const CheckpointTensor* find(std::string_view name) const;
  // Sum of numel over tensors, and of nbytes (checked against overflow when read).
  int64_t numel() const;
  int64_t nbytes() const;
  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

// A .safetensors file, a model.safetensors.index.json (any name ending in ".json"), or a folder
// holding one of them (the index is preferred). Reads only headers, each shard's header once.
Checkpoint read_checkpoint(const std::filesystem::path& path);
// The index flow with the index text and shard readers supplied (tests, benchmarks): `open` is
// called once per distinct file named in weight_map.
Checkpoint read_checkpoint_index(
    std::string_view index_text, const std::filesystem::path& index_path,
    const std::function<std::unique_ptr<ByteReader>(const std::filesystem::path&)>& open);

// Fresh meta tensors (contiguous, own storage each), one per checkpoint tensor, in name order.
NamedTensors to_named_tensors(const Checkpoint& ck);

// nlohmann JSON of a checkpoint: files (path, header/data bytes, metadata) and tensors (name,
// dtype in the format's spelling, shape, file, offset, nbytes). Round-trips through from_json.
void to_json(nlohmann::json& j, const Checkpoint& ck);
void from_json(const nlohmann::json& j, Checkpoint& ck);

// ---- Checkpoint vs model ----

// What comparing a checkpoint with a model found. Findings, not errors: the caller decides.
struct CheckpointReport {
  struct Mismatch {
    std::string name;  // the checkpoint's name
    DimVector expected_shape, actual_shape;
    DType expected_dtype = DType::kFloat32, actual_dtype = DType::kFloat32;
    friend bool operator==(const Mismatch&, const Mismatch&) = default;
  };
  // Model names (parameters and persistent buffers) with no tensor in the checkpoint.
  std::vector<std::string> missing;
  // Checkpoint tensors the model has no parameter or buffer for.
  std::vector<std::string> unexpected;
  // Same name, different shape: the checkpoint cannot be loaded into this model.
  std::vector<Mismatch> shape_mismatches;
  // Same name and shape, different dtype: loadable with a cast (a warning).
  std::vector<Mismatch> dtype_mismatches;
  // Model names absent from the checkpoint but tied to a name that is present (Hugging Face omits
  // lm_head.weight when it is tied to the embedding): not missing.
  std::vector<std::string> tied_omitted;
  // A prefix the model has and the checkpoint lacks ("transformer." for GPT-2's base-model
  // checkpoints), stripped from model names before matching; "" when none was needed.
  std::string stripped_prefix;
  // Fused expert tensors (mlp.experts.gate_up_proj, down_proj: transformers 5's layout) that the
  // checkpoint stores one expert at a time, as the Hub's Mixtral, Qwen-MoE and DeepSeek files do
  // (Note [Experts stored one by one] in tensor/safetensors_check.cpp): present, every slice of
  // the right shape; materialize reads each slice into its place.
  std::vector<std::string> stacked_experts;
  // For a fused expert tensor stored one by one with slices absent: the names those slices would
  // have, in the naming of the slices present (the fused tensor itself is listed as missing).
  std::vector<std::string> missing_slices;
  // A multimodal checkpoint (Note [Multimodal checkpoints] in tensor/safetensors_check.cpp): the
  // prefix its language model is under ("language_model." or "model.language_model."; "" for a
  // language model's own checkpoint), and its tensors outside the language model (vision
  // encoder, projector), which are not loaded.
  std::string language_model_prefix;
  std::vector<std::string> outside_language_model;
  // Tensors of modules the checkpoint holds beside the model, which transformers skips when it
  // loads (CheckpointExpectations::beyond_model_prefixes: multi-token prediction layers).
  std::vector<std::string> beyond_model;
  // Persistent buffers transformers saves that shardplan's model does not build
  // (CheckpointExpectations::buffer_suffixes: DeepSeek's and GLM's router
  // e_score_correction_bias): matched by name, not loaded.
  std::vector<std::string> buffers;
  // A quantized checkpoint (Note [Quantized checkpoints] in tensor/safetensors_check.cpp): its
  // method, the scale tensors beside the weights, and the model tensors stored quantized under
  // other names (present, but not loadable as the model's dtype).
  std::string quant_method;
  std::vector<std::string> quantization_tensors;
  std::vector<std::string> stored_quantized;
  int64_t matched = 0;  // checkpoint tensors with the right name and shape

  // No missing, unexpected or mis-shaped tensors (dtype differences allowed).
  bool loadable() const {
    return missing.empty() && unexpected.empty() && shape_mismatches.empty();
  }
  friend bool operator==(const CheckpointReport&, const CheckpointReport&) = default;
};

// What the model's config says about its checkpoint beyond the module tree.
struct CheckpointExpectations {
  // Name prefixes of modules a checkpoint may hold beside the model ("model.layers.61." for
  // DeepSeek-V3's multi-token prediction layer): transformers' _keys_to_ignore_on_load_unexpected.
  std::vector<std::string> beyond_model_prefixes;
  // Substrings of such names wherever they stand (ModelFamily::unloaded_key: ERNIE 4.5's "mtp",
  // matched as transformers' _keys_to_ignore_on_load_unexpected patterns are, anywhere in a key).
  std::vector<std::string> beyond_model_substrings = {};
  // quantization_config.quant_method of the config ("fp8", "mxfp4", ...); "" for none.
  std::string quant_method;
  // Match the quantized forms whatever the method (set with quant_method; materialize sets it
  // alone to name a tensor stored quantized rather than missing).
  bool quantized_forms = false;
  // Name suffixes of persistent buffers a checkpoint holds and the model does not build
  // (".mlp.gate.e_score_correction_bias" for ModelFamily::router_score_bias): listed as buffers.
  std::vector<std::string> buffer_suffixes = {};
};

// Compares by name: the model's parameters and persistent buffers (every name of a tied tensor,
// as state_dict lists them) against the checkpoint's tensors. Lists are sorted by name.
CheckpointReport check_checkpoint(const Checkpoint& ck, const Module& model,
                                  const CheckpointExpectations& expect = {});

// The report, and where each model tensor's bytes lie: the concatenation, in order, of
// checkpoint tensors (indices into Checkpoint::tensors). One tensor for a name stored whole
// (under a name the report says how it matched, or a tie's other name); every slice, expert by
// expert, for a fused expert tensor stored one expert at a time.
struct CheckpointMatch {
  CheckpointReport report;
  std::unordered_map<std::string, std::vector<size_t>> parts;  // by model name
  // By model name: the checkpoint tensor (or slice) found with the wrong shape, where that is why
  // the name has no parts.
  std::unordered_map<std::string, CheckpointReport::Mismatch> mis_shaped;
  // Model names whose parts are experts' slices (their shapes are the slices').
  std::unordered_set<std::string> sliced;
  // The parts of model tensor `name`, nullptr when the checkpoint does not hold it whole.
  const std::vector<size_t>* parts_of(const std::string& name) const;
};
CheckpointMatch match_checkpoint(const Checkpoint& ck, const Module& model,
                                 const CheckpointExpectations& expect = {});

void to_json(nlohmann::json& j, const CheckpointReport& r);
void from_json(const nlohmann::json& j, CheckpointReport& r);

}  // namespace shardplan::tensor
