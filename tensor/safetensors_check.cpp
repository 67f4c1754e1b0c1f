// A checkpoint checked against a built model: missing, unexpected and mis-shaped tensors.
// See Note [safetensors format] and Note [Untrusted safetensors headers] in tensor/safetensors.h.

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

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

namespace {

// Note [Experts stored one by one]
// transformers 5 builds a layer's routed experts as two fused tensors, mlp.experts.gate_up_proj
// [E, 2F, H] (each expert's gate rows, then its up rows) and mlp.experts.down_proj [E, H, F], and
// stacks the Hub's per-expert tensors into them when it loads a checkpoint: Qwen-MoE and
// DeepSeek's mlp.experts.<e>.{gate,up,down}_proj.weight, and Mixtral's older
// block_sparse_moe.experts.<e>.{w1,w3,w2}.weight beside block_sparse_moe.gate.weight. A
// checkpoint in either layout fits the model when every expert's slice is there with its shape.
// Nemotron-H's experts have no gate: mixer.experts.<e>.up_proj.weight [F, h] stack into the
// model's non-gated experts.up_proj [E, F, h], one slice per expert as down_proj's.
struct ExpertSlice {
  std::string fused;   // the model's name: "<layer>.mlp.experts.gate_up_proj"
  int64_t expert = 0;  // e
  int part = 0;        // 0: gate (first F rows), 1: up (next F rows), 2: down
  bool alone = false;  // the expert's only slice of `fused` (down_proj; a non-gated up_proj)
  // The fused tensor's slices, expert by expert, and this one's index among them.
  int64_t per_expert() const { return alone ? 1 : 2; }
  int64_t slot() const { return alone ? expert : 2 * expert + part; }
};

// "model.layers.3.block_sparse_moe" -> "model.layers.3.mlp" (Mixtral's transformers-4 names).
std::string fused_module_name(std::string_view module) {
  std::string out(module);
  const std::string old = ".block_sparse_moe";
  if (out.ends_with(old)) out.replace(out.size() - old.size(), old.size(), ".mlp");
  return out;
}

// The name of expert `expert`'s slice `part` (0 gate, 1 up, 2 down) in the naming of `held`,
// another slice's checkpoint name: "<module>.experts.<e>.<proj>.weight", Mixtral's w1/w3/w2 or
// gate_proj/up_proj/down_proj.
std::string slice_name(std::string_view held, int64_t expert, int part) {
  const size_t at = held.rfind(".experts.");
  const bool mixtral =
      held.ends_with(".w1.weight") || held.ends_with(".w2.weight") || held.ends_with(".w3.weight");
  static constexpr std::array<std::string_view, 3> kHf = {"gate_proj", "up_proj", "down_proj"};
  static constexpr std::array<std::string_view, 3> kMixtral = {"w1", "w3", "w2"};
  return std::string(held.substr(0, at + 9)) + std::to_string(expert) + "." +
         std::string((mixtral ? kMixtral : kHf)[static_cast<size_t>(part)]) + ".weight";
}

// Modules a Hub checkpoint names otherwise than transformers 5 builds them, which transformers
// renames as it loads (its conversion_mapping.py): Mixtral's and MiniMax-M2's block_sparse_moe,
// ERNIE 4.5's moe_statics, which the model keeps inside the router, and GraniteMoe's fused
// experts and router (input_linear [E, 2F, h], output_linear [E, h, F], router.layer: the same
// shapes under transformers 5.13's names), Nemotron-H's backbone (model in transformers 5), A.X
// K1's layer-level post_mlp_layernorm, A.X K2's q_b_proj (its q_gate_proj) and gate MLP
// W_down / W_up (fc1 / fc2), and Laguna's score-correction bias kept beside the experts and its
// singular shared_expert (the router's parameter and shared_experts in transformers 5). A rename
// applies only where the model has the result.
constexpr std::pair<std::string_view, std::string_view> kModuleRenames[] = {
    {"backbone.", "model."},
    {".block_sparse_moe.", ".mlp."},
    {".mlp.moe_statics.", ".mlp.gate.moe_statics."},
    {".block_sparse_moe.input_linear.weight", ".block_sparse_moe.experts.gate_up_proj"},
    {".block_sparse_moe.output_linear.weight", ".block_sparse_moe.experts.down_proj"},
    {".block_sparse_moe.router.layer.", ".block_sparse_moe.router."},
    {".post_mlp_layernorm.", ".mlp.post_mlp_layernorm."},
    // A.X K2: the fused query-and-gate projection and the gated norms' low-rank gate.
    {".self_attn.q_b_proj.", ".self_attn.q_gate_proj."},
    {".W_down.", ".mlp.fc1."},
    {".W_up.", ".mlp.fc2."},
    // Laguna (conversion_mapping.py "laguna").
    {".mlp.experts.e_score_correction_bias", ".mlp.gate.e_score_correction_bias"},
    {".mlp.shared_expert.", ".mlp.shared_experts."}};

std::optional<ExpertSlice> expert_slice(std::string_view name) {
  const size_t at = name.rfind(".experts.");
  if (at == std::string_view::npos || !name.ends_with(".weight")) return std::nullopt;
  std::string_view rest = name.substr(at + 9);  // "<e>.<proj>.weight"
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  int64_t e = 0;
  for (const char ch : rest.substr(0, dot)) {
    if (ch < '0' || ch > '9' || e > (int64_t{1} << 40)) return std::nullopt;
    e = e * 10 + (ch - '0');
  }
  const std::string_view proj = rest.substr(dot + 1, rest.size() - dot - 1 - 7);
  int part = -1;
  if (proj == "gate_proj" || proj == "w1") part = 0;
  if (proj == "up_proj" || proj == "w3") part = 1;
  if (proj == "down_proj" || proj == "w2") part = 2;
  if (part < 0) return std::nullopt;
  const std::string module = fused_module_name(name.substr(0, at));
  return ExpertSlice{module + (part == 2 ? ".experts.down_proj" : ".experts.gate_up_proj"), e, part,
                     part == 2};
}

// Note [Multimodal checkpoints]
// A multimodal model's checkpoint (Gemma 3, Llama 4, Mistral 3, LLaVA) holds its language model
// under a prefix, beside its other parts (vision encoder, projector). transformers before 4.52,
// and so most files on the Hub, name it language_model.model.* and language_model.lm_head.*;
// later versions save model.language_model.* and lm_head.* (the *ForConditionalGeneration
// classes' _checkpoint_conversion_mapping reads the older names into the newer). The language
// model shardplan builds (Note [Multimodal configs] in tensor/models/model_config.cpp) is named
// as its own *ForCausalLM: model.*, lm_head.*. A checkpoint is matched under whichever layout
// finds more of the model's names than the plain names do; its tensors outside the language
// model are listed (outside_language_model), neither loaded nor counted against it. A language
// model built under the newer names themselves (muse_glimmer_text, which has no *ForCausalLM in
// transformers: Note [Multimodal configs] in tensor/models/model_config.cpp) is matched by its
// plain names, and the checkpoint's tensors outside those two prefixes are listed the same way.
struct LanguageModelLayout {
  std::string_view root;   // the language model's tensors start with it (or with head)
  std::string_view model;  // what the model's "model." is in the checkpoint
  std::string_view head;   // what the model's "lm_head." is in the checkpoint
};
constexpr std::array<LanguageModelLayout, 2> kLanguageModelLayouts = {{
    {"language_model.", "language_model.model.", "language_model.lm_head."},
    {"model.language_model.", "model.language_model.", "lm_head."},
}};

std::string in_layout(const LanguageModelLayout& l, std::string_view name) {
  if (name.starts_with("model.")) return std::string(l.model).append(name.substr(6));
  if (name.starts_with("lm_head.")) return std::string(l.head).append(name.substr(8));
  return std::string(name);
}

// A base-model checkpoint (GPT-2's "h.0...") for a model with a head ("transformer.h.0..."):
// Hugging Face strips base_model_prefix when the checkpoint has no key under it. We infer the
// prefix: a first path component none of the checkpoint's names start with, whose stripped names
// the checkpoint holds.
std::string stripped_prefix(const Checkpoint& ck, const std::vector<NamedTensor>& expected) {
  std::map<std::string, int64_t> strip_hits;
  for (const NamedTensor& e : expected) {
    const size_t dot = e.name.find('.');
    if (dot == std::string::npos || ck.find(e.name)) continue;
    if (ck.find(std::string_view(e.name).substr(dot + 1))) ++strip_hits[e.name.substr(0, dot + 1)];
  }
  int64_t best = 0;
  std::string out;
  // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz preset).
  for (const auto& hit : strip_hits) {
    const std::string& prefix = hit.first;
    const int64_t hits = hit.second;
    const bool ck_has_prefix =
        std::any_of(ck.tensors.begin(), ck.tensors.end(),
                    [&](const auto& t) { return t.name.starts_with(prefix); });
    if (!ck_has_prefix && hits > best) {
      best = hits;
      out = prefix;
    }
  }
  return out;
}

// The layout of Note [Multimodal checkpoints] that finds more of the model's names than the
// plain names do, or nullptr.
const LanguageModelLayout* language_model_layout(const Checkpoint& ck,
                                                 const std::vector<NamedTensor>& expected) {
  auto hits = [&](auto&& name_of) {
    return std::count_if(expected.begin(), expected.end(),
                         [&](const NamedTensor& e) { return ck.find(name_of(e.name)) != nullptr; });
  };
  auto best = hits([](const std::string& n) { return n; });
  const LanguageModelLayout* out = nullptr;
  for (const LanguageModelLayout& l : kLanguageModelLayouts) {
    const auto h = hits([&](const std::string& n) { return in_layout(l, n); });
    if (h > best) {
      best = h;
      out = &l;
    }
  }
  return out;
}

// Note [Quantized checkpoints]
// The published checkpoints of many 2026 models store weights quantized, and their config.json
// says so (quantization_config.quant_method). With a method named, a checkpoint fits when its
// tensors are the model's in one of the forms the common methods write, checked by name and by
// element count:
// - kept whole in a narrow dtype: fp8 (DeepSeek-V3, Kimi K2, the Qwen3 and GLM-4.5 FP8 files)
//   keeps each matrix's name and shape in float8_e4m3fn: a dtype difference (a warning);
// - stood in for: mxfp4 (GPT-OSS) stores a tensor P as "P_blocks" (uint8, two 4-bit values a
//   byte); compressed-tensors' pack-quantized (Kimi K2 Thinking) as "P_packed" (int32, eight 4-bit
//   or four 8-bit values); AWQ and GPTQ a "<module>.weight" as "<module>.qweight" (int32, the
//   same). P is then present, stored quantized (stored_quantized): the stand-in must hold exactly
//   P's element count, and for an expert stored one by one, the slice's;
// - beside them, the scales and their like: "P_scale_inv" (fp8's block scales), "P_scale",
//   "P_scales", "P_zero_point", "P_shape", "P_global_scale", and a module's "input_scale",
//   "qzeros", "scales", "g_idx" (quantization_tensors).
// bitsandbytes' nested "weight.absmax"-style state is not matched: its tensors are unexpected and
// the error names the method. materialize loads the model's dtype only: a quantized checkpoint is
// matched, not loaded.
constexpr std::array<std::string_view, 7> kScaleSuffixes = {
    "_scale_inv", "_scale", "_scales", "_zero_point", "_shape", "_global_scale", "_g_idx"};
constexpr std::array<std::string_view, 4> kModuleScales = {".input_scale", ".qzeros", ".scales",
                                                           ".g_idx"};

constexpr int64_t kStoredQuantized = -2;

std::optional<std::string> strip_suffix(std::string_view name, std::string_view suffix) {
  if (!name.ends_with(suffix) || name.size() == suffix.size()) return std::nullopt;
  return std::string(name.substr(0, name.size() - suffix.size()));
}

// The tensor a quantized stand-in replaces (Note [Quantized checkpoints]), with how many of its
// elements one stored element holds (one or two choices: 4-bit or 8-bit packing).
struct StandIn {
  std::string base;
  std::array<int64_t, 2> per_element{};
};
std::optional<StandIn> stand_in(const CheckpointTensor& t) {
  if (t.dtype == DType::kUInt8) {
    if (auto b = strip_suffix(t.name, "_blocks")) return StandIn{*b, {2, 2}};
  }
  if (t.dtype == DType::kInt32) {
    if (auto b = strip_suffix(t.name, "_packed")) return StandIn{*b, {8, 4}};
    if (auto m = strip_suffix(t.name, ".qweight")) return StandIn{*m + ".weight", {8, 4}};
  }
  return std::nullopt;
}

// expert_slice(name) as the model names its fused tensor: under the module renames (Nemotron-H's
// backbone), and a non-gated experts.up_proj where the model has no gate_up_proj. Unchanged when
// the model has neither (the callers then find no such tensor).
template <class ByName>
std::optional<ExpertSlice> model_slice(std::string_view name, const ByName& by_name) {
  std::optional<ExpertSlice> x = expert_slice(name);
  if (!x) return x;
  std::vector<std::string> names = {x->fused};
  for (const auto& [stored, built] : kModuleRenames) {
    const size_t at = x->fused.find(stored);
    if (at == std::string::npos) continue;
    names.push_back(x->fused);
    names.back().replace(at, stored.size(), built);
  }
  for (const std::string& n : names) {
    if (by_name.count(n)) {
      x->fused = n;
      return x;
    }
    if (x->part != 1) continue;
    std::string up = n.substr(0, n.size() - std::string_view("gate_up_proj").size()) + "up_proj";
    if (by_name.count(up)) {
      x->fused = std::move(up);
      x->alone = true;
      return x;
    }
  }
  return x;
}

// The names a scale-like tensor may sit beside (none for other names).
std::vector<std::string> scale_bases(std::string_view name) {
  std::vector<std::string> out;
  for (const std::string_view s : kScaleSuffixes) {
    if (auto b = strip_suffix(name, s)) out.push_back(*b);
  }
  for (const std::string_view s : kModuleScales) {
    if (auto m = strip_suffix(name, s)) out.push_back(*m + ".weight");
  }
  return out;
}

}  // namespace

CheckpointMatch match_checkpoint(const Checkpoint& ck, const Module& model,
                                 const CheckpointExpectations& expect) {
  // state_dict's names: every name of a tied tensor, persistent buffers only.
  std::vector<NamedTensor> expected = model.named_parameters({.remove_duplicate = false});
  for (NamedTensor& b : model.named_buffers({.remove_duplicate = false, .persistent_only = true})) {
    expected.push_back(std::move(b));
  }

  CheckpointMatch out;
  CheckpointReport& r = out.report;
  r.quant_method = expect.quant_method;
  r.stripped_prefix = stripped_prefix(ck, expected);
  const LanguageModelLayout* layout =
      r.stripped_prefix.empty() ? language_model_layout(ck, expected) : nullptr;
  // Note [Multimodal checkpoints]: a model named as its multimodal model's language model.
  const LanguageModelLayout& inside = kLanguageModelLayouts[1];
  const bool named_inside =
      !layout && r.stripped_prefix.empty() && !expected.empty() &&
      std::all_of(expected.begin(), expected.end(), [&](const NamedTensor& e) {
        return e.name.starts_with(inside.root) || e.name.starts_with(inside.head);
      });
  const LanguageModelLayout* around = layout ? layout : named_inside ? &inside : nullptr;
  if (around) r.language_model_prefix = around->root;
  auto ck_name = [&](const std::string& name) {
    if (layout) return in_layout(*layout, name);
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
  // Note [Experts stored one by one]: the slices each fused expert tensor receives, and the
  // Mixtral router renamed; a fused tensor is present once every slice is.
  std::unordered_map<std::string, std::string> renamed;  // checkpoint name -> model name
  for (const CheckpointTensor& t : ck.tensors) {
    if (by_name.count(t.name)) continue;
    // A slice of a fused tensor the checkpoint also holds whole is not the model's: unexpected.
    if (const std::optional<ExpertSlice> x = model_slice(t.name, by_name);
        x && by_name.count(x->fused) && !ck.find(x->fused)) {
      renamed.emplace(t.name, x->fused);
      continue;
    }
    for (const auto& [stored, built] : kModuleRenames) {
      const size_t at = t.name.find(stored);
      if (at == std::string::npos) continue;
      std::string name = t.name;
      name.replace(at, stored.size(), built);
      if (by_name.count(name)) renamed.emplace(t.name, name);
    }
  }
  std::unordered_set<std::string> present;  // model names a renamed or stacked tensor covers
  for (const auto& [impl, names] : ties) {
    const bool any_present = std::any_of(names.begin(), names.end(), [&](const NamedTensor* e) {
      return ck.find(ck_name(e->name)) != nullptr;
    });
    for (const NamedTensor* e : names) {
      if (ck.find(ck_name(e->name))) continue;
      (any_present ? r.tied_omitted : r.missing).push_back(e->name);
    }
  }

  // Fused expert tensor (by checkpoint name) -> the checkpoint tensor of each slice, in the fused
  // tensor's order: expert by expert, gate before up (-1 while not seen, kStoredQuantized for a
  // slice a quantized tensor stands in for).
  std::unordered_map<std::string, std::vector<int64_t>> slots;
  std::vector<size_t> leftover;  // neither the model's nor outside its language model
  for (size_t i = 0; i < ck.tensors.size(); ++i) {
    const CheckpointTensor& t = ck.tensors[i];
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      const auto rn = renamed.find(t.name);
      if (rn == renamed.end()) {
        const bool outside =
            around && !t.name.starts_with(around->root) && !t.name.starts_with(around->head);
        if (outside) {
          r.outside_language_model.push_back(t.name);
        } else {
          leftover.push_back(i);
        }
        continue;
      }
      const NamedTensor& target = *by_name.at(rn->second);
      const Tensor& fused = target.tensor;
      const std::optional<ExpertSlice> x = model_slice(t.name, by_name);
      if (!x) {  // a renamed whole tensor (Mixtral's router)
        CheckpointReport::Mismatch m{t.name, fused.sizes(), t.shape, fused.dtype(), t.dtype};
        if (fused.sizes() != t.shape) {
          out.mis_shaped.emplace(target.name, m);
          r.shape_mismatches.push_back(std::move(m));
          continue;
        }
        present.insert(rn->second);
        out.parts[target.name] = {i};
        ++r.matched;
        if (fused.dtype() != t.dtype) r.dtype_mismatches.push_back(std::move(m));
        continue;
      }
      // An expert the model does not have (experts.7 of 4) is not the model's tensor.
      if (fused.dim() != 3 || x->expert >= fused.size(0)) {
        r.unexpected.push_back(t.name);
        continue;
      }
      // One expert's slice: [F, H] of gate_up_proj [E, 2F, H], [H, F] of down_proj [E, H, F],
      // [F, H] of a non-gated up_proj [E, F, H].
      const DimVector want = DimVector{fused.size(1) / x->per_expert(), fused.size(2)};
      CheckpointReport::Mismatch m{t.name, want, t.shape, fused.dtype(), t.dtype};
      if (want != t.shape) {
        out.mis_shaped.emplace(target.name, m);
        r.shape_mismatches.push_back(std::move(m));
        continue;
      }
      std::vector<int64_t>& s = slots[rn->second];
      s.resize(static_cast<size_t>(fused.size(0) * x->per_expert()), -1);
      int64_t& slot = s[static_cast<size_t>(x->slot())];
      if (slot >= 0) {  // the same slice under a second name (w1 beside gate_proj)
        r.unexpected.push_back(t.name);
        continue;
      }
      slot = static_cast<int64_t>(i);
      ++r.matched;
      if (fused.dtype() != t.dtype) r.dtype_mismatches.push_back(std::move(m));
      continue;
    }
    const Tensor& want = it->second->tensor;
    CheckpointReport::Mismatch m{t.name, want.sizes(), t.shape, want.dtype(), t.dtype};
    if (want.sizes() != t.shape) {
      out.mis_shaped.emplace(it->second->name, m);
      r.shape_mismatches.push_back(std::move(m));
      continue;
    }
    out.parts[it->second->name] = {i};
    ++r.matched;
    if (want.dtype() != t.dtype) r.dtype_mismatches.push_back(std::move(m));
  }
  // What the leftovers are: modules beside the model, quantization tensors (Note [Quantized
  // checkpoints]), or unexpected.
  std::vector<std::string> beyond;
  for (const std::string& p : expect.beyond_model_prefixes) beyond.push_back(ck_name(p));
  // A name of the model's (or of one expert's slice of it) that a quantized tensor can stand in
  // for or sit beside; the slice's element count, or 0 for a whole tensor.
  auto slice_of = [&](const std::string& base) -> std::optional<ExpertSlice> {
    std::optional<ExpertSlice> x = model_slice(base, by_name);
    // As for slices stored as they are: none of a fused tensor the checkpoint holds whole.
    if (!x || !by_name.count(x->fused) || ck.find(x->fused)) return std::nullopt;
    const Tensor& fused = by_name.at(x->fused)->tensor;
    if (fused.dim() != 3 || x->expert >= fused.size(0)) return std::nullopt;
    return x;
  };
  const bool quantized = expect.quantized_forms || !expect.quant_method.empty();
  for (const size_t i : leftover) {
    const CheckpointTensor& t = ck.tensors[i];
    if (std::any_of(beyond.begin(), beyond.end(),
                    [&](const std::string& p) { return t.name.starts_with(p); }) ||
        std::any_of(expect.beyond_model_substrings.begin(), expect.beyond_model_substrings.end(),
                    [&](const std::string& s) { return t.name.find(s) != std::string::npos; })) {
      r.beyond_model.push_back(t.name);
      continue;
    }
    if (std::any_of(expect.buffer_suffixes.begin(), expect.buffer_suffixes.end(),
                    [&](const std::string& s) { return t.name.ends_with(s); })) {
      r.buffers.push_back(t.name);
      continue;
    }
    if (!quantized) {
      r.unexpected.push_back(t.name);
      continue;
    }
    if (const std::optional<StandIn> q = stand_in(t)) {
      const int64_t n = checked_numel(t.shape, "safetensors check");
      auto holds = [&](int64_t want) {  // n * per_element == want, without overflowing
        return std::any_of(q->per_element.begin(), q->per_element.end(),
                           [&](int64_t p) { return want % p == 0 && want / p == n; });
      };
      if (const auto it = by_name.find(q->base); it != by_name.end()) {
        // One stand-in per tensor, and none beside the tensor itself.
        if (holds(it->second->tensor.numel()) && !ck.find(q->base) && !present.count(q->base)) {
          present.insert(q->base);
          r.stored_quantized.push_back(it->second->name);
          r.quantization_tensors.push_back(t.name);
          continue;
        }
      } else if (const std::optional<ExpertSlice> x = slice_of(q->base)) {
        const Tensor& fused = by_name.at(x->fused)->tensor;
        if (holds(fused.numel() / fused.size(0) / x->per_expert())) {
          std::vector<int64_t>& s = slots[x->fused];
          s.resize(static_cast<size_t>(fused.size(0) * x->per_expert()), -1);
          int64_t& slot = s[static_cast<size_t>(x->slot())];
          if (slot == -1) {
            slot = kStoredQuantized;
            r.quantization_tensors.push_back(t.name);
            continue;
          }
        }
      }
    }
    const std::vector<std::string> bases = scale_bases(t.name);
    if (std::any_of(bases.begin(), bases.end(), [&](const std::string& b) {
          return by_name.count(b) || renamed.count(b) || slice_of(b);
        })) {
      r.quantization_tensors.push_back(t.name);
      continue;
    }
    r.unexpected.push_back(t.name);
  }
  for (const auto& [name, s] : slots) {
    if (std::find(s.begin(), s.end(), -1) != s.end()) {
      const auto held = std::find_if(s.begin(), s.end(), [](int64_t i) { return i >= 0; });
      if (held == s.end()) continue;
      // down_proj and a non-gated up_proj hold one slice per expert, gate_up_proj two.
      const bool down = name.ends_with("down_proj");
      const bool alone = down || !name.ends_with("gate_up_proj");
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] != -1) continue;
        r.missing_slices.push_back(slice_name(ck.tensors[static_cast<size_t>(*held)].name,
                                              static_cast<int64_t>(alone ? k : k / 2),
                                              down ? 2 : (alone ? 1 : static_cast<int>(k % 2))));
      }
      continue;
    }
    present.insert(name);
    r.stacked_experts.push_back(name);
    if (std::find(s.begin(), s.end(), kStoredQuantized) != s.end()) {
      r.stored_quantized.push_back(by_name.at(name)->name);  // no bytes to read as they are
      continue;
    }
    std::vector<size_t> parts;
    for (const int64_t i : s) parts.push_back(static_cast<size_t>(i));
    out.parts[by_name.at(name)->name] = std::move(parts);
    out.sliced.insert(by_name.at(name)->name);
  }
  // A tied name the checkpoint omits reads the bytes of the name it holds.
  for (const auto& [impl, names] : ties) {
    const auto held = std::find_if(names.begin(), names.end(),
                                   [&](const NamedTensor* e) { return out.parts.count(e->name); });
    if (held == names.end()) continue;
    const std::vector<size_t> parts = out.parts.at((*held)->name);
    for (const NamedTensor* e : names) out.parts.emplace(e->name, parts);
  }
  std::erase_if(r.missing, [&](const std::string& m) { return present.count(ck_name(m)) > 0; });
  std::sort(r.missing.begin(), r.missing.end());
  std::sort(r.tied_omitted.begin(), r.tied_omitted.end());
  std::sort(r.stacked_experts.begin(), r.stacked_experts.end());
  std::sort(r.unexpected.begin(), r.unexpected.end());
  std::sort(r.stored_quantized.begin(), r.stored_quantized.end());
  std::sort(r.missing_slices.begin(), r.missing_slices.end());
  return out;  // the other lists follow ck.tensors: sorted already
}

CheckpointReport check_checkpoint(const Checkpoint& ck, const Module& model,
                                  const CheckpointExpectations& expect) {
  return match_checkpoint(ck, model, expect).report;
}

const std::vector<size_t>* CheckpointMatch::parts_of(const std::string& name) const {
  const auto it = parts.find(name);
  return it == parts.end() ? nullptr : &it->second;
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
           {"stripped_prefix", r.stripped_prefix},
           {"stacked_experts", r.stacked_experts},
           {"missing_slices", r.missing_slices},
           {"language_model_prefix", r.language_model_prefix},
           {"outside_language_model", r.outside_language_model},
           {"beyond_model", r.beyond_model},
           {"buffers", r.buffers},
           {"quant_method", r.quant_method},
           {"quantization_tensors", r.quantization_tensors},
           {"stored_quantized", r.stored_quantized}};
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
  if (f.has("stacked_experts")) out.stacked_experts = f.strings("stacked_experts");
  if (f.has("missing_slices")) out.missing_slices = f.strings("missing_slices");
  if (f.has("language_model_prefix")) out.language_model_prefix = f.str("language_model_prefix");
  if (f.has("outside_language_model")) {
    out.outside_language_model = f.strings("outside_language_model");
  }
  if (f.has("beyond_model")) out.beyond_model = f.strings("beyond_model");
  if (f.has("buffers")) out.buffers = f.strings("buffers");
  if (f.has("quant_method")) out.quant_method = f.str("quant_method");
  if (f.has("quantization_tensors")) out.quantization_tensors = f.strings("quantization_tensors");
  if (f.has("stored_quantized")) out.stored_quantized = f.strings("stored_quantized");
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
