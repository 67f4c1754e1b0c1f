#include "tensor/models/models.h"

#include <unordered_map>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"

namespace shardplan::tensor {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The kind a module type stands for, "" when it is only a container (a Linear inside attention
// belongs to the attention). See block_kind.
std::string_view kind_of_type(std::string_view type) {
  if (type == "Embedding") return "embedding";
  for (const ModelFamily* f : model_families()) {
    if (!f->experts_class.empty() && f->experts_class == type) return "experts";
  }
  if (ends_with(type, "SparseMoeBlock")) return "router";  // its direct parameters: the gate
  if (type == "HYV3MoE") return "router";                  // HY 3's block (MoeStyle::block_class)
  if (type == "AriaTextMoELayer") return "router";         // Aria's block, holding its `router`
  if (type == "Gemma4TextRouter") return "router";         // Gemma 4's, a child of the layer
  if (type == "DbrxRouter") return "router";               // DBRX's, holding the Linear `layer`
  if (ends_with(type, "TopKGating")) return "router";      // JetMoE's, holding the Linear `layer`
  if (type == "JetMoeMoE") return "mlp";                   // JetMoE's, holding the output bias
  if (ends_with(type, "Attention")) return "attention";
  if (ends_with(type, "GatedDeltaNet")) return "attention";  // linear attention's token mixer
  if (ends_with(type, "ShortConv")) return "attention";      // LFM2's token mixer
  if (ends_with(type, "MambaLayer") || ends_with(type, "Mamba2Mixer") || type == "BambaMixer" ||
      type == "FalconH1Mixer") {
    return "attention";  // Mamba-2's token mixers
  }
  if (ends_with(type, "MambaMixer")) return "attention";  // Mamba-1's (JambaMambaMixer)
  // Griffin's recurrent block (RecurrentGemmaRecurrentBlock: its projections, convolution and
  // RG-LRU), RecurrentGemma's token mixer beside its local attention.
  if (ends_with(type, "RecurrentBlock")) return "attention";
  if (type == "xLSTMLayer") return "attention";  // xLSTM's mLSTM layer, its token mixer
  if (ends_with(type, "TopkRouter")) return "router";
  if (ends_with(type, "TopKRouter") || ends_with(type, "HashRouter")) return "router";  // V4
  if (ends_with(type, "MLP")) return "mlp";
  if (type == "RecurrentGemmaMlp") return "mlp";  // transformers spells it so
  if (type == "RwkvFeedForward") return "mlp";    // RWKV's channel mixing
  if (type == "xLSTMFeedForward") return "mlp";   // xLSTM's gated feed-forward
  // Inkling's shared experts: always active, an MLP beside the routed ones.
  if (ends_with(type, "SharedExperts")) return "mlp";
  // OPT's, XGLM's and BioGPT's fc1 and fc2 sit in the layer itself.
  if (type == "OPTDecoderLayer" || type == "XGLMDecoderLayer" || type == "BioGptDecoderLayer") {
    return "mlp";
  }
  if (type.find("Norm") != std::string_view::npos) return "norm";
  return "";
}

// Module FQN -> kind, inherited from the innermost ancestor that has one; the output layer (a
// Linear directly under the root) is "lm_head".
std::unordered_map<std::string, std::string> module_kinds(const Module& root) {
  std::unordered_map<std::string, std::string> kinds;
  for (const NamedModule& nm : root.named_modules()) {
    std::string_view kind = kind_of_type(nm.module->type_name());
    if (kind.empty() && !nm.name.empty()) {
      const size_t dot = nm.name.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : nm.name.substr(0, dot);
      kind = kinds[parent];
      if (kind.empty() && dot == std::string::npos && nm.module->type_name() == "Linear") {
        kind = "lm_head";
      }
    }
    kinds[nm.name] = std::string(kind);
  }
  return kinds;
}

std::string owner_of(std::string_view fqn) {
  const size_t dot = fqn.rfind('.');
  return dot == std::string_view::npos ? "" : std::string(fqn.substr(0, dot));
}

}  // namespace

ModulePtr build_model(const ModelConfig& cfg, const BuildOptions& opts) {
  const ModelFamily* family = find_family(cfg.model_type);
  if (!family) validate(cfg);  // throws: the unsupported model_type, named as validate does
  return build_model(cfg, *family, opts);
}

ModulePtr build_model(const ModelConfig& cfg, const ModelFamily& family, const BuildOptions& opts) {
  validate(cfg, family);
  const TensorOptions o{.dtype = opts.dtype.value_or(cfg.torch_dtype)};
  SP_CHECK(is_floating(*o.dtype), "build_model: parameters need a floating dtype, got ", *o.dtype);
  return family.build(cfg, o, opts.training);
}

Tensor token_ids(int64_t batch, int64_t seq) {
  SP_CHECK(batch > 0 && seq > 0, "token ids need a positive batch and sequence length, got batch ",
           batch, " and seq ", seq);
  return empty({batch, seq}, {.dtype = DType::kInt64});
}

OpGraph trace_model_forward(Module& model, int64_t batch, int64_t seq) {
  return trace_forward(model, token_ids(batch, seq));
}

std::string block_kind(const Module& root, std::string_view parameter_fqn) {
  const auto kinds = module_kinds(root);
  auto it = kinds.find(owner_of(parameter_fqn));
  SP_CHECK(it != kinds.end(), "block_kind: no module owns '", parameter_fqn, "'");
  return it->second.empty() ? "other" : it->second;
}

std::map<std::string, int64_t> parameters_by_kind(const Module& root) {
  const auto kinds = module_kinds(root);
  std::map<std::string, int64_t> out;
  for (const NamedTensor& p : root.named_parameters()) {
    const std::string& kind = kinds.at(owner_of(p.name));
    out[kind.empty() ? "other" : kind] += p.tensor.numel();
  }
  return out;
}

int64_t active_parameters(const Module& root, const ModelConfig& cfg) {
  const auto kinds = parameters_by_kind(root);
  int64_t total = 0;
  for (const auto& [kind, n] : kinds) total += n;
  const auto it = kinds.find("experts");
  if (it == kinds.end() || cfg.num_local_experts <= 0) return total;
  if (cfg.zero_experts <= 0) {
    // Every MoE layer holds num_local_experts alike experts; a token passes through top-k.
    return total - it->second + it->second / cfg.num_local_experts * cfg.num_experts_per_tok;
  }
  // Note [Zero-computation experts]: the slices of a grouped experts' tensor past the experts it
  // computes with (LongCat-Flash's gate_up_proj) are never active.
  int64_t idle = 0;
  for (const NamedModule& nm : root.named_modules()) {
    const auto* experts = dynamic_cast<const GroupedExperts*>(nm.module);
    if (experts == nullptr) continue;
    for (const NamedTensor& p : experts->named_parameters({.recurse = false})) {
      const int64_t slices = p.tensor.size(0);
      if (slices > experts->experts()) {
        idle += (slices - experts->experts()) * (p.tensor.numel() / slices);
      }
    }
  }
  // The computing experts' parameters times k / (E + Z), i.e. k E / (E + Z) experts of each
  // layer's E, exact to the element without overflowing the product.
  const int64_t working = it->second - idle;
  const int64_t pickable = cfg.num_local_experts + cfg.zero_experts;
  const int64_t active = working / pickable * cfg.num_experts_per_tok +
                         working % pickable * cfg.num_experts_per_tok / pickable;
  return total - it->second + active;
}

double routed_experts_per_token(const ModelConfig& cfg) {
  if (cfg.num_local_experts <= 0) return 0;
  return static_cast<double>(cfg.num_experts_per_tok) * static_cast<double>(cfg.num_local_experts) /
         static_cast<double>(cfg.num_local_experts + cfg.zero_experts);
}

std::string layers_path(const ModelConfig& cfg) { return std::string(family_of(cfg).layers_path); }

ParametersBeyondModel parameters_beyond_model(const ModelConfig& cfg) {
  ParametersBeyondModel out;
  const ModelFamily& family = family_of(cfg);
  const LayerStack stack = layer_stack(cfg);
  int64_t moe_layers = 0;
  for (size_t k = 0; k < stack.kinds.size(); ++k) {
    // DeepSeek-V4's hash-routed layers pick experts by a table and keep no score correction.
    if (stack.kinds[k].ffn == FfnKind::kMoe && !stack.kinds[k].hash_router) {
      moe_layers += stack.count(static_cast<int32_t>(k));
    }
  }
  // One value per expert the router scores, the zero experts' included (LongCat-Flash).
  const int64_t bias_per_layer = family.router_score_bias != ModelFamily::RouterBias::kNone
                                     ? cfg.num_local_experts + cfg.zero_experts
                                     : 0;
  out.router_bias = bias_per_layer * moe_layers;
  if (cfg.mtp_layers > 0 && cfg.num_local_experts > 0) {
    // One MoE layer as the model builds it, attending as its last layer does (a DeepSeek-V3.2
    // prediction layer has its own lightning indexer): its parameters under layers_path + ".0.".
    LayerKind kind = layer_kind(cfg, cfg.num_hidden_layers - 1);
    kind.ffn = FfnKind::kMoe;
    if (kind.attention == AttentionType::kSparse) kind.indexer = true;
    const ModelConfig one = uniform_config(cfg, kind);
    const std::string prefix = std::string(family.layers_path) + ".0.";
    int64_t layer = 0;
    for (const NamedTensor& p : build_model(one)->named_parameters()) {
      if (p.name.starts_with(prefix)) layer += p.tensor.numel();
    }
    const int64_t h = cfg.hidden_size;
    out.mtp = cfg.mtp_layers * (layer + 2 * h * h + 3 * h + bias_per_layer);
  }
  return out;
}

}  // namespace shardplan::tensor
