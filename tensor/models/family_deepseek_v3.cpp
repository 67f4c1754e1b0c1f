// deepseek_v3 (DeepSeek-V3, DeepSeek-R1, Kimi K2, and the DeepSeek-V2-Lite shape with q_lora_rank
// null): transformers' DeepseekV3Config (vocab 129280, max positions 4096, rms_norm_eps 1e-6,
// q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128,
// the first 3 layers dense, 256 routed experts and one shared expert) and
// modeling_deepseek_v3.py: multi-head latent attention (tensor/models/latent_attention.h) and
// DeepSeek's MoE block: the fused routed experts, the sigmoid router "gate" with grouped top-k (its
// e_score_correction_bias is a buffer in transformers: not counted, see docs/models.md), and the
// shared experts. The multi-token prediction modules (num_nextn_predict_layers) are not part of
// the transformers model; they are read into ModelConfig::mtp_layers.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kDeepseekV3Family;  // listed in family_registry.cpp
extern const ModelFamily kKimiK2Family;      // listed in family_registry.cpp
extern const ModelFamily kDeepseekV2Family;  // listed in family_registry.cpp

namespace {

// The latent-attention fields, as DeepseekV2Config and DeepseekV3Config name and default them.
void parse_latent_attention(const ConfigFields& f, ModelConfig& c) {
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.q_lora_rank = f.is_null("q_lora_rank") ? 0 : f.integer("q_lora_rank", 1536);
  c.kv_lora_rank = f.integer("kv_lora_rank", 512);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", 128);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", 64);
  c.v_head_dim = f.integer("v_head_dim", 128);
  const std::pair<const char*, int64_t> sizes[] = {{"kv_lora_rank", c.kv_lora_rank},
                                                   {"qk_nope_head_dim", c.qk_nope_head_dim},
                                                   {"qk_rope_head_dim", c.qk_rope_head_dim},
                                                   {"v_head_dim", c.v_head_dim}};
  for (const auto& [key, v] : sizes) {
    if (v <= 0) f.fail(key, "must be a positive integer, got " + std::to_string(v));
  }
  if (c.q_lora_rank < 0) f.fail("q_lora_rank", "must be positive (or null: no query latent)");
  c.head_dim = c.qk_rope_head_dim;  // the rotary tables' width, as DeepseekV3Config sets head_dim
  f.boolean("rope_interleave", true);  // a permutation of the rotated channels: no count changes
}

// What DeepseekV2Config and DeepseekV3Config default differently, and the router's scores.
struct DeepseekDefaults {
  int64_t max_position_embeddings = 4096;
  models::DeepseekMoeDefaults moe;
  std::string_view scoring_func = "sigmoid";
};

// The fields both versions read; DeepSeek's own config.json names what transformers infers
// (scoring_func): its value must be the version's.
void parse_deepseek(const ConfigFields& f, ModelConfig& c, const DeepseekDefaults& d) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = d.max_position_embeddings, .rms_norm_eps = 1e-6});
  parse_latent_attention(f, c);
  models::parse_deepseek_moe(f, c, d.moe);
  const std::string scoring(d.scoring_func);
  if (f.has("scoring_func") && f.string("scoring_func", scoring) != scoring) {
    f.fail("scoring_func",
           "this model routes by " + scoring + " scores, expected \"" + scoring + "\"");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  parse_deepseek(f, c, {.moe = {.first_k_dense_replace = 3, .n_shared_experts = 1}});
  f.string("topk_method", "noaux_tc");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  models::deepseek_moe_to_hf_json(c, j);
  j.erase("head_dim");  // derived from qk_rope_head_dim
  j["attention_bias"] = c.qkv_bias;
  j["q_lora_rank"] = c.q_lora_rank > 0 ? nlohmann::json(c.q_lora_rank) : nlohmann::json();
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  // Kimi K2's files name their own model_type, its classes are DeepSeek-V3's.
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = "DeepseekV3",
       .latent_attention = true,
       .moe = {.router_first = false, .sigmoid_router = true, .shared_name = "shared_experts"}});
}

// DeepSeek-V2 (transformers' DeepseekV2Config: max positions 2048, no dense layers and two
// shared experts by default; modeling_deepseek_v2.py): the same latent attention and MoE block
// as DeepSeek-V3's, routed by softmax scores (greedy or group-limited top-k), so the router has
// no score-correction bias.
void parse_v2(const ConfigFields& f, ModelConfig& c) {
  parse_deepseek(f, c,
                 {.max_position_embeddings = 2048,
                  .moe = {.first_k_dense_replace = 0, .n_shared_experts = 2},
                  .scoring_func = "softmax"});
  const std::string method = f.string("topk_method", "greedy");
  if (method != "greedy" && method != "group_limited_greedy") {
    f.fail("topk_method", "\"" + method.substr(0, 40) +
                              "\", expected \"greedy\" or \"group_limited_greedy\" "
                              "(DeepseekV2Moe's top-k methods)");
  }
}

ModulePtr build_v2(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = "DeepseekV2",
       .latent_attention = true,
       .moe = {.router_first = false, .shared_name = "shared_experts"}});
}

// Megatron-LM's split of latent attention: the down projections (q_a_proj, kv_a_proj_with_mqa)
// and their norms replicated, the up projections column-parallel by heads, o_proj row-parallel;
// the MoE block as the other MoE families.
constexpr TensorParallelRule kDeepseekV3TpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.q_b_proj", "colwise"},
    {"model.layers.*.self_attn.kv_b_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kDeepseekV3Family{
    .model_type = "deepseek_v3",
    .hf_class_prefix = "DeepseekV3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "DeepseekV3Experts",
    .router_score_bias = true,
    .tp_plan = kDeepseekV3TpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kDeepseekV2Family = [] {
  ModelFamily f = kDeepseekV3Family;
  f.model_type = "deepseek_v2";
  f.hf_class_prefix = "DeepseekV2";
  f.parse = parse_v2;
  f.build = build_v2;
  f.experts_class = "DeepseekV2Experts";
  f.router_score_bias = false;
  return f;
}();

// Kimi K2 (moonshotai/Kimi-K2-*): its config.json says model_type "kimi_k2" and names
// DeepseekV3ForCausalLM as its architecture; the model is DeepSeek-V3's with its own sizes, so
// the entry is DeepSeek-V3's under the other model_type (defined after it in this file).
const ModelFamily kKimiK2Family = [] {
  ModelFamily f = kDeepseekV3Family;
  f.model_type = "kimi_k2";
  return f;
}();

}  // namespace shardplan::tensor
