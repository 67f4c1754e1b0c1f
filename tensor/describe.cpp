#include "tensor/describe.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/strict_json.h"

// Note [Tensor description format]
// A description is what torch.save keeps of a tensor besides its data, for a list of named
// tensors: one entry per storage (id, size in bytes, device) and one per tensor (layout, dtype, the
// storage it lives on, autograd flags). Two entries on one storage id alias, whatever their
// layouts; that is all torch.load restores too. `view_of` adds what torch.load does not: the name
// of the listed tensor that is this one's `._base`, so the loader can make a real view (is_view(),
// base()). A view whose base is not listed (a causal-mask buffer sliced out of a larger tril) has
// view_of null and loads as a plain tensor on the shared storage.
//
// Loading treats the document as untrusted. Every field is required except `view_of` (null),
// `requires_grad` (false), `is_leaf` (true), `is_parameter` (false) and the free-form `metadata`;
// unknown fields are rejected so a misspelt optional field is not silently dropped. Sizes,
// strides, offsets and byte counts are non-negative int64 (PyTorch has no negative strides either)
// and every layout is checked against its storage before a tensor exists, so the TensorImpl
// invariants hold for anything that loads.

namespace shardplan::tensor {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kTopLevelFields[] = {"format", "version", "storages", "tensors", "metadata"};
constexpr const char* kStorageFields[] = {"id", "nbytes", "device"};
constexpr const char* kTensorFields[] = {"name",    "sizes",       "strides", "storage_offset",
                                         "dtype",   "storage",     "view_of", "requires_grad",
                                         "is_leaf", "is_parameter"};

// A JSON value as a message shows it: scalars as written, containers by kind (they may be huge).
std::string shown(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return quote_json(v.get_ref<const std::string&>());
    default:
      return v.dump();
  }
}

void check_fields(const json& object, std::span<const char* const> allowed,
                  const std::string& where) {
  for (const auto& item : object.items()) {
    const bool known = std::any_of(allowed.begin(), allowed.end(),
                                   [&](const char* name) { return item.key() == name; });
    if (known) continue;
    std::string expected;
    for (const char* name : allowed) expected += (expected.empty() ? "" : ", ") + std::string(name);
    SP_FAIL(where, ": unknown field ", quote_json(item.key()), " (expected: ", expected, ")");
  }
}

const json& required(const json& object, const char* field, const std::string& where) {
  const auto it = object.find(field);
  SP_CHECK(it != object.end(), where, ": missing field '", field, "'");
  return *it;
}

// A non-negative int64 from a JSON number; `what` names it ("nbytes", "sizes[1]").
int64_t count(const json& v, const std::string& where, std::string_view what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    SP_CHECK(u <= static_cast<uint64_t>(INT64_MAX), where, ": ", what, " is ", u,
             ", more than int64 can hold");
    return static_cast<int64_t>(u);
  }
  SP_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, where, ": ", what, " is ", shown(v),
           ", expected a non-negative integer");
  return v.get<int64_t>();
}

DimVector counts(const json& v, const std::string& where, const char* field) {
  SP_CHECK(v.is_array(), where, ": ", field, " is ", shown(v),
           ", expected an array of non-negative integers");
  DimVector out;
  for (size_t k = 0; k < v.size(); ++k) {
    out.push_back(count(v[k], where, std::string(field) + "[" + std::to_string(k) + "]"));
  }
  return out;
}

bool optional_flag(const json& object, const char* field, bool fallback, const std::string& where) {
  const auto it = object.find(field);
  if (it == object.end()) return fallback;
  SP_CHECK(it->is_boolean(), where, ": ", field, " is ", shown(*it), ", expected true or false");
  return it->get<bool>();
}

const std::string& text(const json& v, const std::string& where, const char* field) {
  SP_CHECK(v.is_string(), where, ": ", field, " is ", shown(v), ", expected a string");
  return v.get_ref<const std::string&>();
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t sum = 0;
  SP_CHECK(add_into(a, b, sum), "summarize: ", what, " overflow int64");
  return sum;
}

struct StorageEntry {
  int64_t id = 0;
  int64_t nbytes = 0;
  Device device;
  StoragePtr made;  // created on first use
};

struct TensorEntry {
  std::string where;  // "tensors[3] 'w'", for messages
  std::string name;
  DimVector sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::kFloat32;
  size_t storage = 0;  // index into the storage entries
  std::optional<std::string> view_of;
  size_t view_target = 0;  // index of the view_of entry, when view_of is set
  bool requires_grad = false, is_leaf = true, is_parameter = false;
};

std::vector<StorageEntry> parse_storages(const json& list) {
  SP_CHECK(list.is_array(), "storages is ", shown(list), ", expected an array");
  std::vector<StorageEntry> out;
  std::unordered_map<int64_t, size_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& s = list[i];
    std::string where = "storages[" + std::to_string(i) + "]";
    SP_CHECK(s.is_object(), where, " is ", shown(s), ", expected an object");
    check_fields(s, kStorageFields, where);
    StorageEntry e;
    e.id = count(required(s, "id", where), where, "id");
    where += " (id " + std::to_string(e.id) + ")";
    const auto [it, fresh] = seen.emplace(e.id, i);
    SP_CHECK(fresh, where, ": duplicate storage id ", e.id, ", already used by storages[",
             it->second, "]");
    e.nbytes = count(required(s, "nbytes", where), where, "nbytes");
    const std::string& device = text(required(s, "device", where), where, "device");
    try {
      e.device = parse_device(device);
    } catch (const Error& err) {
      SP_FAIL(where, ": device: ", err.what());
    }
    out.push_back(std::move(e));
  }
  return out;
}

// Checks that the layout fits int64 and its storage: the TensorImpl invariants, before any tensor.
void check_layout(const TensorEntry& t, const StorageEntry& storage) {
  int64_t numel = 1;
  bool overflow = false;
  for (int64_t s : t.sizes) overflow |= !mul_into(numel, s, numel);
  // A zero size makes numel 0 whatever overflowed before it, as in checked_numel.
  if (std::find(t.sizes.begin(), t.sizes.end(), 0) == t.sizes.end()) {
    SP_CHECK(!overflow, t.where, ": sizes ", t.sizes, " have more elements than int64 can count");
    int64_t bytes = 0;
    SP_CHECK(mul_into(numel, itemsize(t.dtype), bytes), t.where, ": sizes ", t.sizes, " of ",
             t.dtype, " take more bytes than int64 can count");
  }
  const int64_t elems = required_storage_elements(t.sizes, t.strides, t.offset, t.where.c_str());
  int64_t need = 0;
  SP_CHECK(mul_into(elems, itemsize(t.dtype), need), t.where, ": sizes ", t.sizes, ", strides ",
           t.strides, ", storage_offset ", t.offset, " of ", t.dtype,
           " address more bytes than int64 can count");
  SP_CHECK(need <= storage.nbytes, t.where, ": sizes ", t.sizes, ", strides ", t.strides,
           ", storage_offset ", t.offset, " of ", t.dtype, " need ", need, " bytes but storage ",
           storage.id, " holds ", storage.nbytes, " bytes");
}

std::vector<TensorEntry> parse_tensors(const json& list,
                                       const std::vector<StorageEntry>& storages) {
  SP_CHECK(list.is_array(), "tensors is ", shown(list), ", expected an array");
  std::unordered_map<int64_t, size_t> storage_index;
  for (size_t i = 0; i < storages.size(); ++i) storage_index.emplace(storages[i].id, i);

  std::vector<TensorEntry> out;
  std::unordered_map<std::string, size_t> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& j = list[i];
    TensorEntry t;
    t.where = "tensors[" + std::to_string(i) + "]";
    SP_CHECK(j.is_object(), t.where, " is ", shown(j), ", expected an object");
    t.name = text(required(j, "name", t.where), t.where, "name");
    SP_CHECK(!t.name.empty(), t.where, ": name is empty, expected a non-empty string");
    t.where += " " + quote_json(t.name);
    check_fields(j, kTensorFields, t.where);
    const auto [it, fresh] = names.emplace(t.name, i);
    SP_CHECK(fresh, t.where, ": duplicate tensor name, already used by tensors[", it->second, "]");

    t.sizes = counts(required(j, "sizes", t.where), t.where, "sizes");
    t.strides = counts(required(j, "strides", t.where), t.where, "strides");
    SP_CHECK(t.strides.size() == t.sizes.size(), t.where, ": strides ", t.strides, " has ",
             t.strides.size(), " entries but sizes ", t.sizes, " has ", t.sizes.size(),
             ", expected one stride per dim");
    t.offset = count(required(j, "storage_offset", t.where), t.where, "storage_offset");
    const std::string& dtype = text(required(j, "dtype", t.where), t.where, "dtype");
    try {
      t.dtype = parse_dtype(dtype);
    } catch (const Error& err) {
      SP_FAIL(t.where, ": dtype: ", err.what());
    }
    const int64_t storage_id = count(required(j, "storage", t.where), t.where, "storage");
    const auto s = storage_index.find(storage_id);
    SP_CHECK(s != storage_index.end(), t.where, ": storage ", storage_id,
             " is not the id of any entry in storages");
    t.storage = s->second;

    if (const auto v = j.find("view_of"); v != j.end() && !v->is_null()) {
      SP_CHECK(v->is_string() && !v->get_ref<const std::string&>().empty(), t.where,
               ": view_of is ", shown(*v), ", expected null or the name of another tensor");
      t.view_of = v->get<std::string>();
    }
    t.requires_grad = optional_flag(j, "requires_grad", false, t.where);
    t.is_leaf = optional_flag(j, "is_leaf", true, t.where);
    t.is_parameter = optional_flag(j, "is_parameter", false, t.where);
    SP_CHECK(!t.requires_grad || is_floating(t.dtype) || is_complex(t.dtype), t.where,
             ": requires_grad is true but dtype ", t.dtype,
             " cannot require gradients (only floating point and complex dtypes can)");
    check_layout(t, storages[t.storage]);
    out.push_back(std::move(t));
  }

  // view_of may name a later entry, so it is resolved once every name is known.
  for (TensorEntry& t : out) {
    if (!t.view_of) continue;
    const auto target = names.find(*t.view_of);
    SP_CHECK(target != names.end(), t.where, ": view_of ", quote_json(*t.view_of),
             " names no tensor in this description");
    const TensorEntry& base = out[target->second];
    SP_CHECK(base.storage == t.storage, t.where, ": view_of ", quote_json(*t.view_of),
             " is on storage ", storages[base.storage].id, " but this tensor is on storage ",
             storages[t.storage].id, "; a view must share its base's storage");
    t.view_target = target->second;
  }
  return out;
}

StoragePtr storage_for(StorageEntry& s, const LoadOptions& options) {
  if (s.made) return s.made;
  const Device device = options.map_location.value_or(s.device);
  try {
    s.made = make_storage(s.nbytes, device);
  } catch (const Error& err) {
    SP_FAIL("storage ", s.id, ": ", err.what());
  }
  return s.made;
}

// Builds entry `i` after the chain of view_of entries it stands on (bases first).
void build(size_t i, std::vector<TensorEntry>& entries, std::vector<StorageEntry>& storages,
           const LoadOptions& options, std::vector<Tensor>& built, std::vector<bool>& on_chain) {
  std::vector<size_t> chain;
  for (size_t j = i; !built[j].defined();) {
    if (on_chain[j]) {
      std::string cycle;
      const auto start = std::find(chain.begin(), chain.end(), j);
      for (auto k = start; k != chain.end(); ++k) cycle += entries[*k].name + " -> ";
      SP_FAIL(entries[j].where, ": view_of forms a cycle: ", cycle, entries[j].name,
              ", expected a chain ending at a tensor that is no view");
    }
    on_chain[j] = true;
    chain.push_back(j);
    if (!entries[j].view_of) break;
    j = entries[j].view_target;
  }
  for (auto k = chain.rbegin(); k != chain.rend(); ++k) {
    const TensorEntry& e = entries[*k];
    Tensor t = e.view_of ? make_view(built[e.view_target], e.sizes, e.strides, e.offset, e.dtype)
                         : make_on_storage(storage_for(storages[e.storage], options), e.sizes,
                                           e.strides, e.offset, e.dtype, e.where.c_str());
    // As written: make_view would copy requires_grad from the base and derive is_leaf from it.
    t.impl()->requires_grad = e.requires_grad;
    t.impl()->is_leaf = e.is_leaf;
    t.impl()->is_parameter = e.is_parameter;
    built[*k] = std::move(t);
    on_chain[*k] = false;
  }
}

ordered_json describe_ordered(const NamedTensors& named) {
  std::unordered_map<const StorageImpl*, int64_t> storage_ids;
  std::unordered_map<const TensorImpl*, const std::string*> first_name;
  std::unordered_set<std::string_view> names;
  ordered_json storages = ordered_json::array();
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, t] = named[i];
    SP_CHECK(!name.empty(), "describe: tensor #", i, " has an empty name");
    SP_CHECK(t.defined(), "describe: tensor ", quote_json(name), " is undefined");
    SP_CHECK(names.insert(name).second, "describe: tensor name ", quote_json(name),
             " is listed twice");
    first_name.emplace(t.impl(), &name);
    const auto [it, fresh] =
        storage_ids.emplace(t.storage().get(), static_cast<int64_t>(storage_ids.size()));
    if (!fresh) continue;
    ordered_json s;
    s["id"] = it->second;
    s["nbytes"] = t.storage()->nbytes();
    s["device"] = to_string(t.device());
    storages.push_back(std::move(s));
  }

  ordered_json tensors = ordered_json::array();
  for (const auto& [name, t] : named) {
    ordered_json e;
    e["name"] = name;
    e["sizes"] = ordered_json::array();
    for (int64_t s : t.sizes()) e["sizes"].push_back(s);
    e["strides"] = ordered_json::array();
    for (int64_t s : t.strides()) e["strides"].push_back(s);
    e["storage_offset"] = t.storage_offset();
    e["dtype"] = std::string(dtype_name(t.dtype()));
    e["storage"] = storage_ids.at(t.storage().get());
    const auto base = t.is_view() ? first_name.find(t.impl()->view_base.get()) : first_name.end();
    e["view_of"] = base != first_name.end() ? ordered_json(*base->second) : ordered_json(nullptr);
    e["requires_grad"] = t.requires_grad();
    e["is_leaf"] = t.is_leaf();
    e["is_parameter"] = t.is_parameter();
    tensors.push_back(std::move(e));
  }

  ordered_json d;
  d["format"] = std::string(kDescriptionFormat);
  d["version"] = kDescriptionVersion;
  d["storages"] = std::move(storages);
  d["tensors"] = std::move(tensors);
  return d;
}

}  // namespace

nlohmann::json describe(const NamedTensors& named) { return json(describe_ordered(named)); }

std::string describe_to_string(const NamedTensors& named) {
  const ordered_json d = describe_ordered(named);
  auto lines = [](const ordered_json& list) {
    std::string out = "[";
    for (size_t i = 0; i < list.size(); ++i) out += (i == 0 ? "\n" : ",\n") + list[i].dump();
    return out + (list.empty() ? "]" : "\n]");
  };
  return "{\"format\":" + d["format"].dump() + ",\"version\":" + d["version"].dump() +
         ",\n\"storages\":" + lines(d["storages"]) + ",\n\"tensors\":" + lines(d["tensors"]) +
         "}\n";
}

NamedTensors load_description(const nlohmann::json& d, const LoadOptions& options) {
  SP_CHECK(d.is_object(), "a tensor description is a JSON object, got ", shown(d));
  check_fields(d, kTopLevelFields, "tensor description");
  const json& format = required(d, "format", "tensor description");
  SP_CHECK(format.is_string() && format.get_ref<const std::string&>() == kDescriptionFormat,
           "format is ", shown(format), ", expected \"", kDescriptionFormat, "\"");
  const json& version = required(d, "version", "tensor description");
  SP_CHECK(version.is_number_integer() && version.get<int64_t>() == kDescriptionVersion,
           "version is ", shown(version), ", this shardplan reads version ", kDescriptionVersion);

  std::vector<StorageEntry> storages =
      parse_storages(required(d, "storages", "tensor description"));
  std::vector<TensorEntry> entries =
      parse_tensors(required(d, "tensors", "tensor description"), storages);

  std::vector<Tensor> built(entries.size());
  std::vector<bool> on_chain(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    build(i, entries, storages, options, built, on_chain);
  }
  NamedTensors out;
  out.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out.emplace_back(std::move(entries[i].name), std::move(built[i]));
  }
  return out;
}

NamedTensors load_description_string(std::string_view text, std::string_view source,
                                     const LoadOptions& options) {
  // Depth bounded while parsing, duplicate keys rejected (base/strict_json.h).
  const json doc = parse_strict_json(text, source, kMaxDescriptionDepth, "a tensor description");
  try {
    return load_description(doc, options);
  } catch (const Error& e) {
    SP_FAIL(source, ": ", e.what());
  }
}

NamedTensors load_description_file(const std::filesystem::path& path, const LoadOptions& options) {
  return load_description_string(read_text_file(path, "tensor description"), path.string(),
                                 options);
}

TensorSetSummary summarize(const NamedTensors& named) {
  TensorSetSummary out;
  out.tensors = static_cast<int64_t>(named.size());
  std::unordered_set<const StorageImpl*> storages;
  // Dense parameters: element ranges per (storage, itemsize), merged below. Others: by layout.
  std::map<std::pair<const StorageImpl*, int64_t>, std::vector<std::pair<int64_t, int64_t>>> ranges;
  std::set<
      std::tuple<const StorageImpl*, int64_t, std::vector<int64_t>, std::vector<int64_t>, DType>>
      strided;
  for (const auto& [name, t] : named) {
    if (storages.insert(t.storage().get()).second) {
      ++out.storages;
      out.bytes = checked_add(out.bytes, t.storage()->nbytes(), "total bytes");
    }
    if (!t.is_parameter() || t.numel() == 0) continue;
    if (compute_non_overlapping_and_dense(t.sizes(), t.strides())) {
      // offset + numel cannot overflow: the storage holds (offset + numel) * itemsize bytes.
      ranges[{t.storage().get(), t.itemsize()}].emplace_back(t.storage_offset(),
                                                             t.storage_offset() + t.numel());
      continue;
    }
    const auto key =
        std::make_tuple(t.storage().get(), t.storage_offset(),
                        std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                        std::vector<int64_t>(t.strides().begin(), t.strides().end()), t.dtype());
    if (strided.insert(key).second)
      out.parameters = checked_add(out.parameters, t.numel(), "parameters");
  }
  for (auto& [key, list] : ranges) {
    std::sort(list.begin(), list.end());
    int64_t covered_to = 0;  // ranges start at >= 0
    for (const auto& [begin, end] : list) {
      const int64_t from = std::max(begin, covered_to);
      if (end > from) out.parameters = checked_add(out.parameters, end - from, "parameters");
      covered_to = std::max(covered_to, end);
    }
  }
  return out;
}

}  // namespace shardplan::tensor
