// hy_v3 (Tencent HY 3, "Hy3-preview": 295 B parameters, 21 B active): transformers' HYV3Config
// (vocab 120832, hidden 4096, 80 layers, 64 heads and 8 key-value heads of 128, max positions
// 131072, rms_norm_eps 1e-5, rope_theta 11158840, initializer_range 0.006, untied; 192 experts of
// width 1536, top 8, one shared expert; the first layer dense unless mlp_layer_types says
// otherwise; attention_bias and mlp_bias false) and modular_hy_v3.py: Llama's pre-norm layer with
// Qwen3's per-head q_norm and k_norm before RoPE, full attention everywhere, and a MoE block of
// its own class (HYV3MoE): the router "gate" first (HYV3TopKRouter, a bare weight whose logits
// are a float32 GEMM), then the fused experts, then shared_experts; sigmoid scores with a
// per-expert e_score_correction_bias buffer on the block; the routed and shared outputs summed in
// float32 when enable_moe_fp32_combine (the class's default). The checkpoint's prediction layer
// (model.layers.80: num_nextn_predict_layers) is not built, as transformers skips it.
//
// HY 3's own config.json keys that transformers does not read must hold what it builds:
// first_k_dense_replace (the dense prefix), expert_hidden_dim (the experts' width), qk_norm,
// moe_router_use_sigmoid, moe_router_enable_expert_bias; a file asking otherwise describes a
// model transformers does not build. num_shared_experts 0 is refused: HYV3MLP then falls back to
// intermediate_size wide, a shared expert nobody asked for.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/class_defaults.h"
#include "tensor/models/deepseek_config.h"
#include "tensor/models/named_experts.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kHyV3Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 11158840.0,
                                .head_dim = 128});
  models::key_value_heads_or(f, c, 8);  // HYV3Config's
  c.initializer_range = 0.006;  // the class's; parse_model_config reads a file's
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  // attribute_map: num_local_experts is another name of num_experts.
  const int64_t experts = f.has("num_experts") ? 192 : f.integer("num_local_experts", 192);
  models::parse_named_experts(
      f, c, {.experts = experts, .top_k = 8, .width = 1536, .shared = 1, .shared_required = true});
  c.dense_layers = {0};  // HYV3Config: ["dense"] + ["sparse"] * (layers - 1)
  models::parse_mlp_layer_types(f, c);
  c.moe_float32_combine = f.boolean("enable_moe_fp32_combine", true);
  f.number("router_scaling_factor", 2.826);  // routing weights only
  c.mtp_layers = f.integer("num_nextn_predict_layers", 0);
  if (c.mtp_layers < 0) f.fail("num_nextn_predict_layers", "must be >= 0");
  // Keys of HY 3's own files that transformers never reads: they must describe what it builds.
  int64_t leading_dense = 0;
  while (leading_dense < static_cast<int64_t>(c.dense_layers.size()) &&
         c.dense_layers[static_cast<size_t>(leading_dense)] == leading_dense) {
    ++leading_dense;
  }
  models::require_built_value(f, "first_k_dense_replace", leading_dense, "HY 3",
                              "that many leading dense layers");
  models::require_built_value(f, "expert_hidden_dim", c.intermediate_size, "HY 3",
                              "experts of moe_intermediate_size");
  models::require_built_value(f, "qk_norm", true, "HY 3", "q_norm and k_norm on every layer");
  models::require_built_value(f, "moe_router_use_sigmoid", true, "HY 3", "a sigmoid router");
  models::require_built_value(f, "moe_router_enable_expert_bias", true, "HY 3",
                              "the router's e_score_correction_bias");
  if (f.has("layer_types")) {
    const std::vector<AttentionType> types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
    for (const AttentionType t : types) {
      if (t != AttentionType::kFull) {
        f.fail("layer_types", std::string(to_string(t)) +
                                  ": HY 3 attends in full on every layer (no window); expected "
                                  "\"full_attention\" throughout");
      }
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  models::named_experts_to_hf_json(c, j);
  j["mlp_layer_types"] = models::mlp_layer_types_json(c);
  j["enable_moe_fp32_combine"] = c.moe_float32_combine;
  j["num_nextn_predict_layers"] = c.mtp_layers;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kHyV3Family.hf_class_prefix,
                                       .qk_norm = true,
                                       .moe = {.sigmoid_router = true,
                                               .shared_name = "shared_experts",
                                               .block_class = "HYV3MoE",
                                               .float32_topk_router = true,
                                               .float32_combine = c.moe_float32_combine}});
}

constexpr FieldRename kHyV3Renames[] = {{"norm_eps", "rms_norm_eps"},
                                        {"num_local_experts", "num_experts"},
                                        {"intermediate_size", "moe_intermediate_size"},
                                        {"dense_intermediate_size", "intermediate_size"},
                                        {"dense_layers", "mlp_layer_types"},
                                        {"shared_expert_intermediate_size", "num_shared_experts"},
                                        {"qkv_bias", "attention_bias"},
                                        {"o_bias", "attention_bias"}};

// HYV3PreTrainedModel._init_weights: the router's bare weight and the experts normal(0,
// initializer_range), the rest as the Llama-shaped decoders (the bias buffer, zeros, is not a
// parameter).
constexpr InitRule kRouterInitRules[] = {{"HYV3TopKRouter", "weight", InitFill::kNormal}};
constexpr auto kHyV3InitRules =
    models::concat_init_rules(kRouterInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kHyV3Family{
    .model_type = "hy_v3",
    .hf_class_prefix = "HYV3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kHyV3Renames,
    .moe = true,
    .experts_class = "HYV3Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnBlock,
    .tp_plan = models::kMoeTpPlan,
    .init_rules = kHyV3InitRules,
};

}  // namespace shardplan::tensor
