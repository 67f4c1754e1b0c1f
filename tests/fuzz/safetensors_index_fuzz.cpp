// fuzz_safetensors_index: a sharded checkpoint, model.safetensors.index.json with its shard files,
// through read_checkpoint_index (tensor/safetensors.h). The input is the index text, then each
// shard file after a line "--shard--": the files the index names are opened in name order and
// get the shards in input order (a file without a shard cannot be read). A checkpoint that loads
// must make meta tensors and round-trip through its JSON.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "tensor/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::tensor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts = fuzz::split(fuzz::as_text(data, size), "\n--shard--\n", 9);
  size_t next = 1;
  auto open = [&](const std::filesystem::path& path) -> std::unique_ptr<ByteReader> {
    if (next >= parts.size()) SP_FAIL("cannot open '", path.string(), "': no such file");
    return memory_reader(parts[next++]);
  };
  Checkpoint ck;
  if (!fuzz::run([&] {
        ck = read_checkpoint_index(parts[0], "ckpt/model.safetensors.index.json", open);
      })) {
    return 0;
  }
  fuzz::run([&] {
    const NamedTensors named = to_named_tensors(ck);
    FUZZ_CHECK(named.size() == ck.tensors.size());
    (void)ck.numel();
    (void)ck.nbytes();
  });
  for (const CheckpointTensor& t : ck.tensors) {
    FUZZ_CHECK(t.file < ck.files.size() && ck.find(t.name) == &t);
  }
  // to_json / from_json round trip (headers come back without their entries, by design).
  const nlohmann::json j = ck;
  Checkpoint back = j.get<Checkpoint>();
  FUZZ_CHECK(back.tensors == ck.tensors && back.index_metadata == ck.index_metadata);
  FUZZ_CHECK(nlohmann::json(back) == j);
  return 0;
}
