// llama4_text (the text stack of Llama 4 Scout and Maverick): transformers' Llama4TextConfig
// (vocab 202048, head_dim 128, max positions 131072, rms_norm_eps 1e-5, rope_theta 500000, top-1
// of 16 experts, attention chunks of 8192, every no_rope_layer_interval-th (4th) layer without
// RoPE) and modeling_llama4.py. Its layer names its feed-forward "feed_forward": a dense MLP of
// intermediate_size_mlp, or (on the layers interleave_moe_layer_step or moe_layers picks) the
// fused experts ([E, H, 2F], [E, F, H]) of intermediate_size, the router and a shared expert of
// the experts' width. RoPE layers attend within their chunk and L2-normalize q and k (use_qk_norm,
// no weight); the NoPE layers attend to everything. The NoPE layers' attention temperature is an
// elementwise scale of q and is not traced.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kLlama4TextFamily;  // listed in family_registry.cpp

namespace {

// A list of layer indices (moe_layers).
std::vector<int64_t> int_list(const ConfigFields& f, const char* key) {
  const nlohmann::json& v = f.raw(key);
  if (!v.is_array()) f.fail(key, "expected a list of integers");
  std::vector<int64_t> out;
  for (const nlohmann::json& e : v) {
    if (!e.is_number_integer()) f.fail(key, e.dump().substr(0, 40) + " is not an integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 131072, .rms_norm_eps = 1e-5, .rope_theta = 500000});
  c.qk_norm_per_head = f.boolean("use_qk_norm", true);
  c.num_local_experts = f.integer("num_local_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.dense_intermediate_size = f.integer("intermediate_size_mlp");
  c.shared_expert_intermediate_size = c.intermediate_size;
  const int64_t n = c.num_hidden_layers;
  // Which layers route to experts: moe_layers, else every interleave_moe_layer_step-th.
  std::vector<int64_t> moe;
  if (f.has("moe_layers")) {
    // Llama4TextConfig keeps moe_layers when given and ignores interleave_moe_layer_step, which
    // transformers' save_pretrained writes beside it.
    moe = int_list(f, "moe_layers");
    f.integer("interleave_moe_layer_step", 1);
  } else {
    const int64_t step = f.integer("interleave_moe_layer_step", 1);
    if (step <= 0) f.fail("interleave_moe_layer_step", "must be positive");
    for (int64_t i = step - 1; i < n; i += step) moe.push_back(i);
  }
  for (const int64_t i : moe) {
    if (i < 0 || i >= n) f.fail("moe_layers", std::to_string(i) + " is not a layer");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (std::find(moe.begin(), moe.end(), i) == moe.end()) c.dense_layers.push_back(i);
  }
  // Which layers use RoPE (1) or none (0): no_rope_layers, else all but every interval-th.
  c.nope_layers = models::parse_no_rope_layers(f, n, /*longer_ok=*/false);
  // Layer types: chunked where RoPE is used, full elsewhere (a file's own list must agree: the
  // model ties the two, as Llama4TextConfig derives them).
  c.attention_chunk_size = f.integer("attention_chunk_size", 8192);
  for (int64_t i = 0; i < n; ++i) {
    const bool nope = std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i);
    c.layer_types.push_back(nope ? AttentionType::kFull : AttentionType::kChunked);
  }
  if (f.has("layer_types")) {
    const auto given = models::parse_layer_types(
        f, n, [](const ModelConfig&, int64_t) { return AttentionType::kFull; }, c);
    if (given != c.layer_types) {
      f.fail("layer_types",
             "differs from no_rope_layers; expected chunked_attention on the RoPE "
             "layers and full_attention on the others");
    }
  }
  // An attention temperature on the NoPE layers (an elementwise scale, not traced). transformers
  // tested it for truthiness and defaulted it to the integer 4 before it became a boolean, and
  // files saved then say 4: a boolean or a number.
  if (f.has("attn_temperature_tuning") && !f.raw("attn_temperature_tuning").is_number()) {
    f.boolean("attn_temperature_tuning", true);
  }
  f.number("floor_scale", 8192);
  f.number("attn_scale", 0.1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["intermediate_size_mlp"] = c.dense_intermediate_size;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["use_qk_norm"] = c.qk_norm_per_head;
  j["attention_chunk_size"] = c.attention_chunk_size;
  nlohmann::json moe = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (!std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), i)) moe.push_back(i);
  }
  j["moe_layers"] = moe;
  j["no_rope_layers"] = models::no_rope_layers_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kLlama4TextFamily.hf_class_prefix,
                                       .l2_qk_norm_on_rope_layers = true,
                                       .ffn_name = "feed_forward",
                                       .moe = {.router = "router",
                                               .router_first = false,
                                               .layout = GroupedExperts::Layout::kInOut,
                                               .sigmoid_router = true}});
}

// The rotary decoder's split, the feed-forward under its own name.
constexpr TensorParallelRule kLlama4TpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.feed_forward.gate_proj", "colwise"},
    {"model.layers.*.feed_forward.up_proj", "colwise"},
    {"model.layers.*.feed_forward.down_proj", "rowwise"},
    {"model.layers.*.feed_forward.experts", "experts"},
    {"model.layers.*.feed_forward.shared_expert.gate_proj", "colwise"},
    {"model.layers.*.feed_forward.shared_expert.up_proj", "colwise"},
    {"model.layers.*.feed_forward.shared_expert.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kLlama4TextFamily{
    .model_type = "llama4_text",
    .hf_class_prefix = "Llama4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .moe = true,
    .experts_class = "Llama4Experts",
    .tp_plan = kLlama4TpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
