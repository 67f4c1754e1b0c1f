// qwen3_5_moe_text (Qwen3.5-35B-A3B, Qwen3.5-397B-A17B; the language model of "qwen3_5_moe"
// files): transformers' Qwen3_5MoeTextConfig and modeling_qwen3_5_moe.py. Qwen3.5's hybrid layers
// (family_qwen3_5_text.cpp) with Qwen2-MoE's sparse block in every layer: the router "gate", the
// fused experts of moe_intermediate_size, a shared expert of shared_expert_intermediate_size scaled
// by sigmoid(shared_expert_gate(x)). The config class has no dense layers (no intermediate_size,
// mlp_only_layers or decoder_sparse_step): a file that asks for dense layers is refused. Defaults
// are the config class's: hidden 2048, 40 layers, 16 heads, 2 kv heads, 256 experts (top 8) of
// 512, a shared expert of 512.
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/linear_attention_config.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen35MoeTextFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Qwen3_5MoeRMSNorm", dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_qwen35_text(f, c,
                            {.vocab_size = 248320,
                             .hidden_size = 2048,
                             .intermediate_size = 512,
                             .num_hidden_layers = 40,
                             .num_attention_heads = 16,
                             .num_key_value_heads = 2});
  c.num_local_experts = f.integer("num_experts", 256);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 8);
  c.intermediate_size = f.integer("moe_intermediate_size", 512);  // the experts' width
  c.shared_expert_intermediate_size = f.integer("shared_expert_intermediate_size", 512);
  f.boolean("norm_topk_prob", true);  // the router always renormalizes: no shape changes
  // Every layer routes: fields of Qwen3-Next that would make dense layers are refused.
  if (f.integer("decoder_sparse_step", 1) != 1) {
    f.fail("decoder_sparse_step",
           f.raw("decoder_sparse_step").dump() +
               ", but Qwen3.5-MoE routes every layer (Qwen3_5MoeTextConfig has no such field); "
               "expected 1 or none");
  }
  if (f.has("mlp_only_layers") &&
      !(f.raw("mlp_only_layers").is_array() && f.raw("mlp_only_layers").empty())) {
    f.fail("mlp_only_layers", f.raw("mlp_only_layers").dump().substr(0, 60) +
                                  ", but Qwen3.5-MoE has no dense layers; expected [] or none");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("intermediate_size");
  j["attention_bias"] = c.qkv_bias;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  models::linear_attention_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kQwen35MoeTextFamily.hf_class_prefix,
       .make_norm = make_norm,
       .qk_norm = true,
       .output_gate = true,
       .linear_projections = models::GatedDeltaProjections::kSeparate,
       .moe = {.shared_gate = true}});
}

}  // namespace

// No init rules, as Qwen3.5's dense family (A_log's log-uniform draw).
const ModelFamily kQwen35MoeTextFamily{
    .model_type = "qwen3_5_moe_text",
    .hf_class_prefix = "Qwen3_5Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kQwenMoeRenames,
    .moe = true,
    .experts_class = "Qwen3_5MoeExperts",
    .linear_attention = true,
    .tp_plan = models::kLinearAttentionTpPlan,
};

}  // namespace shardplan::tensor
