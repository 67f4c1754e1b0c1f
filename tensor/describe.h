// Describe a set of named tensors as JSON and load it back as meta tensors, keeping storage
// aliasing: shardplan's analogue of torch.save's metadata + torch.load(..., map_location='meta').
//   nlohmann::json j = describe({{"w", w}, {"w.T", transpose(w, 0, 1)}});
//   NamedTensors back = load_description(j);  // back[1] is a view of back[0], on one storage
// Format (Note [Tensor description format] in describe.cpp):
//   {"format": "shardplan.tensors", "version": 1,
//    "storages": [{"id": 0, "nbytes": 96, "device": "meta"}],
//    "tensors": [{"name": "w", "sizes": [4, 6], "strides": [6, 1], "storage_offset": 0,
//                 "dtype": "float32", "storage": 0, "view_of": null, "requires_grad": true,
//                 "is_leaf": true, "is_parameter": true}],
//    "metadata": {...}}   // optional, free-form (who wrote the file); ignored by the loader
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {

inline constexpr std::string_view kDescriptionFormat = "shardplan.tensors";
inline constexpr int64_t kDescriptionVersion = 1;
// Deepest JSON nesting accepted when parsing text. The format itself needs 4 levels (document,
// "tensors", an entry, "sizes"); the rest is room for "metadata". Bounds what hostile input costs.
inline constexpr int kMaxDescriptionDepth = 64;

// Names are unique and non-empty; order is kept (it is the order of the description).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct LoadOptions {
  // Where every storage is created, as torch.load's map_location. nullopt keeps the device each
  // storage was written with; cpu (or cuda) storages then allocate real, uninitialized memory.
  std::optional<Device> map_location = Device::meta();
};

// The description of `named`. Storage ids are assigned in order of first appearance (0, 1, ...),
// so describing the same tensors twice gives the same document. `view_of` names the first listed
// tensor that is the view's base (PyTorch's `._base`), or is null when that base is not listed:
// the view is then written like any tensor on its storage, aliasing kept through the storage id
// (torch.load does the same: it restores shared storages, not `._base`).
// Throws shardplan::Error for an undefined tensor or an empty or duplicate name.
nlohmann::json describe(const NamedTensors& named);
// describe() as text, one storage and one tensor per line (readable, diffs well); keys in the
// order of the format above.
std::string describe_to_string(const NamedTensors& named);

// Meta tensors (by default) from a description. Entries that share a storage id share one
// StorageImpl; an entry whose `view_of` names another entry is made with make_view, so is_view()
// holds and base() is that entry's root base. requires_grad, is_leaf and is_parameter are taken as
// written. The input is untrusted: any malformed field throws shardplan::Error naming the tensor or
// storage, the field, the bad value and the expected form.
NamedTensors load_description(const nlohmann::json& description, const LoadOptions& options = {});
// Parses `text` (nesting limited to kMaxDescriptionDepth), then load_description. `source` names
// the input in errors, with the byte position of a JSON syntax error.
NamedTensors load_description_string(std::string_view text, std::string_view source,
                                     const LoadOptions& options = {});
// Reads and loads a description file; errors start with the path.
NamedTensors load_description_file(const std::filesystem::path& path,
                                   const LoadOptions& options = {});

// What a set of named tensors adds up to.
struct TensorSetSummary {
  int64_t tensors = 0;
  int64_t storages = 0;    // distinct storages
  int64_t parameters = 0;  // elements of parameters, each storage element counted once
  int64_t bytes = 0;       // sum of the distinct storages' sizes
};
// Parameter elements are counted as the union, per storage, of the ranges dense parameters cover,
// so a tied weight listed under two names (or two parameters viewing one range) counts once and
// two parameters on disjoint slices of one storage count both. A parameter that is not dense (a
// strided slice, an expanded view) counts its numel, once per distinct layout. Throws
// shardplan::Error if a total overflows int64 (possible only for hostile descriptions).
TensorSetSummary summarize(const NamedTensors& named);

}  // namespace shardplan::tensor
