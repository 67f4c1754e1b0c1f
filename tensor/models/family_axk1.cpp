// axk1 (SK Telecom's A.X K1, "519B total, 33B active"): transformers' AXK1Config (DeepseekV3Config
// with A.X K1's defaults: vocab 163840, max positions 32768, rms_norm_eps 1e-6, 64 heads and 64
// key-value heads, q_lora_rank 1536 typed int (a null one is refused), kv_lora_rank 512,
// qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, the first layer dense, 192 routed
// experts of 2048 in 8 groups (top 4 groups), top 8, one shared expert; num_mtp_layers deleted) and
// modular_axk1.py: DeepSeek-V3's latent attention (AXK1Attention is DeepseekV3Attention) and MoE
// block (experts, the sigmoid router "gate" with its score-correction buffer, shared_experts),
// plus one RMSNorm "post_mlp_layernorm" registered last in every MoE block and applied to the
// block's output (routed + shared) before the residual add; the dense layers have none. The Hub
// checkpoints keep that norm at the layer (model.layers.N.post_mlp_layernorm.weight), which
// transformers renames into the block on load (conversion_mapping.py), as the checkpoint check
// does. A file's num_nextn_predict_layers builds nothing (the class has no such field); it is read
// into ModelConfig::mtp_layers for the checkpoint's prediction layers, as DeepSeek-V3's.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kAXK1Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  // AXK1Config redeclares q_lora_rank as `int` (DeepseekV3Config: `int | None`): its strict
  // dataclass refuses a null, so the query is always projected through the latent.
  if (f.is_null("q_lora_rank")) {
    f.fail("q_lora_rank",
           "is null, but AXK1Config types it as an integer (A.X K1 always projects queries "
           "through a latent); expected a rank");
  }
  models::parse_deepseek(f, c,
                         {.max_position_embeddings = 32768,
                          .rms_norm_eps = 1e-6,
                          .moe = {.first_k_dense_replace = 1, .n_shared_experts = 1}});
  // AXK1Config's num_key_value_heads is 64 where the file has none (not the head count). It
  // shapes nothing in latent attention; transformers' forward needs it equal to the heads.
  models::key_value_heads_or(f, c, 64);
  f.string("topk_method", "noaux_tc");  // DeepSeek-V3's files name it; AXK1TopkRouter's only method
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  // DeepSeek-V3's MoE block (kDeepseekMoeStyle) with A.X K1's norm on its output. The block keeps
  // the default class name (AXK1SparseMoeBlock; transformers' is AXK1MoE): models.cpp maps
  // "*SparseMoeBlock" to the router kind.
  static constexpr models::MoeStyle kAxk1MoeStyle{.router_first = false,
                                                  .sigmoid_router = true,
                                                  .shared_name = "shared_experts",
                                                  .output_norm = "post_mlp_layernorm"};
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kAXK1Family.hf_class_prefix, .latent_attention = true, .moe = kAxk1MoeStyle});
}

}  // namespace

const ModelFamily kAXK1Family{
    .model_type = "axk1",
    .hf_class_prefix = "AXK1",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = models::deepseek_to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "AXK1Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kLatentMoeTpPlan,
    // AXK1PreTrainedModel._init_weights: PreTrainedModel's (Linear and Embedding normal, the
    // padding row zero, RMSNorms one, post_mlp_layernorm included), the router's weight normal
    // (its bias buffer zeros) and the experts' projections normal: the Llama-shaped rules.
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
