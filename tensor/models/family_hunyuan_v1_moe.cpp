// hunyuan_v1_moe (Tencent Hunyuan-A13B): transformers' HunYuanMoEV1Config (Hunyuan dense's fields
// and defaults, num_experts and moe_topk required: a per-layer moe_topk list must say one top-k,
// the only kind built) and modeling_hunyuan_v1_moe.py: Hunyuan's attention and an MoE block in
// every layer: the router "gate" holding a float32 linear "wg" [E, h] (a softmax over all
// experts, the top k renormalized), the fused experts gate_up_proj [E, 2F, h] and down_proj
// [E, h, F], and one shared MLP "shared_mlp", all of width intermediate_size (the files'
// moe_intermediate_size and num_shared_expert are attributes nothing reads).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kHunYuanMoeV1Family;  // listed in family_registry.cpp

namespace {

// moe_topk: an integer, or one per layer (HunYuanMoEV1Gate indexes it by layer).
int64_t top_k(const ConfigFields& f, int64_t layers) {
  const char* key = "moe_topk";
  if (!f.has(key) || !f.raw(key).is_array()) return f.integer(key);
  const nlohmann::json& v = f.raw(key);
  if (static_cast<int64_t>(v.size()) != layers || v.empty()) {
    f.fail(key, "expected an integer or a list of num_hidden_layers = " + std::to_string(layers) +
                    " integers, got " + std::to_string(v.size()) + " entries");
  }
  auto entry = [&](const nlohmann::json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() <= 0) {
      f.fail(key, "expected positive integers, got " + e.dump().substr(0, 40));
    }
    return e.get<int64_t>();
  };
  const int64_t k = entry(v[0]);
  for (const nlohmann::json& e : v) {
    if (entry(e) != k) {
      f.fail(key, "different top-k per layer (" + v.dump().substr(0, 60) +
                      ") is not built; expected one value");
    }
  }
  return k;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  if (!f.has("head_dim")) {
    f.fail("head_dim",
           "missing; HunYuanMoEV1Config leaves it None, which its attention cannot "
           "run with: expected the width of one head");
  }
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-5});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  f.has("use_qk_norm");  // an attribute: transformers' HunYuan norms q and k always
  models::pad_token_id_or(f, c, 0);
  c.num_local_experts = f.integer("num_experts");
  c.num_experts_per_tok = top_k(f, c.num_hidden_layers);
  c.shared_expert_intermediate_size = c.intermediate_size;
  // Read and unused by transformers' HunYuan MoE (it fixes one shared MLP of intermediate_size).
  for (const char* k : {"moe_intermediate_size", "num_shared_expert", "use_mixed_mlp_moe",
                        "moe_layer_num_skipped"}) {
    f.has(k);
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["num_experts"] = c.num_local_experts;
  j["moe_topk"] = c.num_experts_per_tok;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kHunYuanMoeV1Family.hf_class_prefix,
       .qk_norm = true,
       .qk_norm_names = models::kHunYuanQkNormNames,
       .qk_norm_after_rope = true,
       .moe = {.shared_name = "shared_mlp", .float32_wg_router = true}});
}

constexpr FieldRename kHunYuanMoeRenames[] = {{"norm_eps", "rms_norm_eps"},
                                              {"qkv_bias", "attention_bias"},
                                              {"o_bias", "attention_bias"},
                                              {"num_local_experts", "num_experts"},
                                              {"num_experts_per_tok", "moe_topk"}};

// HunYuan MoE's tensor-parallel plan: the MoE plan with the shared MLP under its name.
constexpr TensorParallelRule kHunYuanMoeTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kHunYuanMoeV1Family{
    .model_type = "hunyuan_v1_moe",
    .hf_class_prefix = "HunYuanMoEV1",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kHunYuanMoeRenames,
    .moe = true,
    .experts_class = "HunYuanMoEV1Experts",
    .tp_plan = kHunYuanMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
