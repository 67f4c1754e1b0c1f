// afmoe (Arcee's Trinity Nano, Mini and Large): transformers' AfmoeConfig (vocab 200192, hidden
// 2048, 32 layers, 16 heads of 128, max positions 16384, rms_norm_eps 1e-5, rope_theta 10000,
// untied; 64 experts of width 1408, top 6, two shared experts; the first num_dense_layers (1)
// layers dense; a window of 1024 on three layers of four: global_attn_every_n_layers 4, the last
// of each four full) and modular_afmoe.py. A layer normed in and out of each half (Gemma 2's
// sandwich under the names input_layernorm, post_attention_layernorm, pre_mlp_layernorm and
// post_mlp_layernorm, registered before the feed-forward); the attention has per-head q_norm and
// k_norm before RoPE and a gate of its own (gate_proj, o_proj(out * sigmoid(gate_proj(x))));
// the sliding layers rotate q and k, the full ones do not (NoPE). The MoE block registers its
// router first (`router`, an AfmoeTokenChoiceRouter holding the Linear `gate`), then
// shared_experts, then the fused experts, and `expert_bias` [E], a frozen parameter of the
// block that transformers counts (listed first: a module's own parameters precede its children's)
// (sigmoid scores; the bias picks the top k). mup_enabled scales the embeddings by
// sqrt(hidden_size). The released files' own routing keys (score_func, route_norm, n_group,
// topk_group, ...) are not read by transformers, which always routes by sigmoid, renormalized,
// without groups: a file asking otherwise is refused.
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/named_experts.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kAfmoeFamily;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 16384, .rms_norm_eps = 1e-5, .head_dim = 128});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_named_experts(
      f, c, {.experts = 64, .top_k = 6, .width = 1408, .shared = 2, .shared_required = true});
  const int64_t dense = f.integer("num_dense_layers", 1);
  if (dense < 0) f.fail("num_dense_layers", std::to_string(dense) + ", expected >= 0");
  for (int64_t i = 0; i < std::min(dense, c.num_hidden_layers); ++i) c.dense_layers.push_back(i);
  f.number("route_scale", 1.0);  // routing weights only
  c.scale_embeddings = f.boolean("mup_enabled", false);
  // The model always builds the sliding mask, which needs a window.
  if (f.is_null("sliding_window")) {
    f.fail("sliding_window", "is null: AFMoE's sliding layers need a window; expected a size");
  }
  c.sliding_window = f.integer("sliding_window", 1024);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
  }
  std::vector<AttentionType> types;
  if (f.has("layer_types") && !f.is_null("layer_types")) {
    types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
    f.integer("global_attn_every_n_layers", 4);  // read: layer_types wins over it
  } else {
    const int64_t n = f.integer("global_attn_every_n_layers", 4);
    if (n <= 0) f.fail("global_attn_every_n_layers", std::to_string(n) + ", expected > 0");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      types.push_back((i + 1) % n != 0 ? AttentionType::kSliding : AttentionType::kFull);
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t = types[static_cast<size_t>(i)];
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types", std::string(to_string(t)) +
                                ": AFMoE masks full_attention and sliding_attention layers only");
    }
    if (t == AttentionType::kFull) c.nope_layers.push_back(i);  // only sliding layers rotate
  }
  c.layer_types = std::move(types);
  models::require_built_value(f, "score_func", "sigmoid", "AFMoE", "a sigmoid router");
  models::require_built_value(f, "route_norm", true, "AFMoE", "top-k weights renormalized");
  for (const char* key : {"n_group", "topk_group", "num_expert_groups", "num_limited_groups"}) {
    if (f.has(key) && !f.is_null(key) && f.integer(key) > 1) {
      f.fail(key, std::to_string(f.integer(key)) +
                      ": transformers' AFMoE routes without expert groups; expected 1 or null");
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["attention_bias"] = c.qkv_bias;
  models::named_experts_to_hf_json(c, j);
  j["num_dense_layers"] = c.dense_layers.size();
  j["mup_enabled"] = c.scale_embeddings;
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kAfmoeFamily.hf_class_prefix,
                                       .scale_embeddings = c.scale_embeddings,
                                       .qk_norm = true,
                                       .norms = models::NormPlacement::kSandwich,
                                       .pre_ffn_norm_name = "pre_mlp_layernorm",
                                       .post_ffn_norm_name = "post_mlp_layernorm",
                                       .separate_output_gate = "gate_proj",
                                       .norms_before_ffn = true,
                                       .moe = {.router = "router",
                                               .sigmoid_router = true,
                                               .shared_name = "shared_experts",
                                               .router_class = "AfmoeTokenChoiceRouter",
                                               .shared_before_experts = true,
                                               .frozen_bias = "expert_bias"}});
}

constexpr FieldRename kAfmoeRenames[] = {{"norm_eps", "rms_norm_eps"},
                                         {"num_local_experts", "num_experts"},
                                         {"intermediate_size", "moe_intermediate_size"},
                                         {"dense_intermediate_size", "intermediate_size"},
                                         {"dense_layers", "num_dense_layers"},
                                         {"shared_expert_intermediate_size", "num_shared_experts"},
                                         {"qkv_bias", "attention_bias"},
                                         {"o_bias", "attention_bias"}};

// The MoE families' plan with AFMoE's output gate split as q_proj is (column-parallel by heads).
constexpr TensorParallelRule kAfmoeTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.gate_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// AfmoePreTrainedModel._init_weights: the router's gate starts at zero (set after the Linear's
// normal draw) and expert_bias at zero; the rest as the Llama-shaped decoders.
constexpr InitRule kAfmoeOwnInitRules[] = {{"Linear", "router.gate.weight", InitFill::kZeros},
                                           {"*", "expert_bias", InitFill::kZeros}};
constexpr auto kAfmoeInitRules =
    models::concat_init_rules(kAfmoeOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kAfmoeFamily{
    .model_type = "afmoe",
    .hf_class_prefix = "Afmoe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kAfmoeRenames,
    .moe = true,
    .experts_class = "AfmoeExperts",
    .tp_plan = kAfmoeTpPlan,
    .init_rules = kAfmoeInitRules,
};

}  // namespace shardplan::tensor
