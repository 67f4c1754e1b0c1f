// A checkpoint checked against a built model: missing, unexpected and mis-shaped tensors.
// See Note [safetensors format] and Note [Untrusted safetensors headers] in tensor/safetensors.h.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/strict_json.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
using json = nlohmann::json;

// ---- Checkpoint vs model ----

CheckpointReport check_checkpoint(const Checkpoint& ck, const Module& model) {
  // state_dict's names: every name of a tied tensor, persistent buffers only.
  std::vector<NamedTensor> expected = model.named_parameters({.remove_duplicate = false});
  for (NamedTensor& b : model.named_buffers({.remove_duplicate = false, .persistent_only = true})) {
    expected.push_back(std::move(b));
  }

  CheckpointReport r;
  // A base-model checkpoint (GPT-2's "h.0...") for a model with a head ("transformer.h.0..."):
  // Hugging Face strips base_model_prefix when the checkpoint has no key under it. We infer the
  // prefix: a first path component none of the checkpoint's names start with, whose stripped
  // names the checkpoint holds.
  std::map<std::string, int64_t> strip_hits;
  for (const NamedTensor& e : expected) {
    const size_t dot = e.name.find('.');
    if (dot == std::string::npos || ck.find(e.name)) continue;
    if (ck.find(std::string_view(e.name).substr(dot + 1))) ++strip_hits[e.name.substr(0, dot + 1)];
  }
  int64_t best = 0;
  // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz preset).
  for (const auto& hit : strip_hits) {
    const std::string& prefix = hit.first;
    const int64_t hits = hit.second;
    const bool ck_has_prefix =
        std::any_of(ck.tensors.begin(), ck.tensors.end(),
                    [&](const auto& t) { return t.name.starts_with(prefix); });
    if (!ck_has_prefix && hits > best) {
      best = hits;
      r.stripped_prefix = prefix;
    }
  }
  auto ck_name = [&](const std::string& name) {
    return !r.stripped_prefix.empty() && name.starts_with(r.stripped_prefix)
               ? name.substr(r.stripped_prefix.size())
               : name;
  };

  // Model tensors by checkpoint name; ties grouped by TensorImpl.
  std::unordered_map<std::string, const NamedTensor*> by_name;
  std::unordered_map<const TensorImpl*, std::vector<const NamedTensor*>> ties;
  for (const NamedTensor& e : expected) {
    by_name.emplace(ck_name(e.name), &e);
    ties[e.tensor.impl()].push_back(&e);
  }
  for (const auto& [impl, names] : ties) {
    const bool any_present = std::any_of(names.begin(), names.end(), [&](const NamedTensor* e) {
      return ck.find(ck_name(e->name)) != nullptr;
    });
    for (const NamedTensor* e : names) {
      if (ck.find(ck_name(e->name))) continue;
      (any_present ? r.tied_omitted : r.missing).push_back(e->name);
    }
  }

  for (const CheckpointTensor& t : ck.tensors) {
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      r.unexpected.push_back(t.name);
      continue;
    }
    const Tensor& want = it->second->tensor;
    CheckpointReport::Mismatch m{t.name, want.sizes(), t.shape, want.dtype(), t.dtype};
    if (want.sizes() != t.shape) {
      r.shape_mismatches.push_back(std::move(m));
      continue;
    }
    ++r.matched;
    if (want.dtype() != t.dtype) r.dtype_mismatches.push_back(std::move(m));
  }
  std::sort(r.missing.begin(), r.missing.end());
  std::sort(r.tied_omitted.begin(), r.tied_omitted.end());
  return r;  // unexpected and mismatches follow ck.tensors: sorted already
}

void to_json(json& j, const CheckpointReport& r) {
  auto mismatches = [](const std::vector<CheckpointReport::Mismatch>& list) {
    json out = json::array();
    for (const auto& m : list) {
      out.push_back(
          {{"name", m.name},
           {"expected_shape",
            std::vector<int64_t>(m.expected_shape.begin(), m.expected_shape.end())},
           {"actual_shape", std::vector<int64_t>(m.actual_shape.begin(), m.actual_shape.end())},
           {"expected_dtype", dtype_name(m.expected_dtype)},
           {"actual_dtype", dtype_name(m.actual_dtype)}});
    }
    return out;
  };
  j = json{{"loadable", r.loadable()},
           {"matched", r.matched},
           {"missing", r.missing},
           {"unexpected", r.unexpected},
           {"shape_mismatches", mismatches(r.shape_mismatches)},
           {"dtype_mismatches", mismatches(r.dtype_mismatches)},
           {"tied_omitted", r.tied_omitted},
           {"stripped_prefix", r.stripped_prefix}};
}

void from_json(const json& j, CheckpointReport& r) {
  const std::string origin = "checkpoint report";
  JsonFields f(j, origin);
  auto mismatches = [&](std::string_view key) {
    const json& list = f.array(key);
    std::vector<CheckpointReport::Mismatch> out;
    for (size_t i = 0; i < list.size(); ++i) {
      JsonFields m(list[i], origin, f.join(key) + "[" + std::to_string(i) + "]");
      CheckpointReport::Mismatch x;
      x.name = m.str("name");
      x.expected_shape = m.integers("expected_shape", 0);
      x.actual_shape = m.integers("actual_shape", 0);
      x.expected_dtype = m.parsed("expected_dtype", parse_dtype);
      x.actual_dtype = m.parsed("actual_dtype", parse_dtype);
      m.done();
      out.push_back(std::move(x));
    }
    return out;
  };
  CheckpointReport out;
  out.matched = f.integer("matched", 0);
  out.missing = f.strings("missing");
  out.unexpected = f.strings("unexpected");
  out.shape_mismatches = mismatches("shape_mismatches");
  out.dtype_mismatches = mismatches("dtype_mismatches");
  out.tied_omitted = f.strings("tied_omitted");
  out.stripped_prefix = f.str("stripped_prefix");
  // Derived from the lists: checked, not stored.
  const bool loadable = f.boolean("loadable");
  if (loadable != out.loadable()) {
    f.fail("loadable", std::string(loadable ? "true" : "false") +
                           ", expected what missing, unexpected and shape_mismatches say: " +
                           (out.loadable() ? "true" : "false"));
  }
  f.done();
  r = std::move(out);
}

}  // namespace shardplan::tensor
