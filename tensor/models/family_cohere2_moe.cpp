// cohere2_moe (Cohere's MoE Command models): transformers' Cohere2MoeConfig (vocab 256000, head_dim
// 128, max positions 8192, 8 experts of intermediate_size with top 2, no shared expert, a window
// of 4096, tied embeddings, logit_scale 0.0625, pad_token_id 0) and modeling_cohere2_moe.py:
// Cohere's parallel layer, x + attn(n) + mlp(n) with n = input_layernorm(x), whose feed-forward is
// a sparse block (the router "gate" [E, h] before the fused experts, each intermediate_size wide,
// then shared_experts of num_shared_experts x intermediate_size), or, on the dense prefix
// (first_k_dense_replace, or mlp_layer_types), an MLP of prefix_dense_intermediate_size (default
// intermediate_size). The norms are RMSNorm when the file gives rms_norm_eps, else Cohere's
// LayerNorm with a weight only (layer_norm_eps). Which layers slide: layer_types, else the dense
// prefix by prefix_dense_sliding_window_pattern (1) and the rest by sliding_window_pattern (4),
// layer i full when (i + 1) % pattern == 0. q and k rotate where a layer has a window, and on the
// dense prefix when its pattern is 1 (Cohere2MoeAttention's force_rope); elsewhere NoPE. The
// router's scores (softmax or sigmoid over the top k logits) and the shared expert's
// combination (sum or average) change no shape and no GEMM: read and checked, not traced apart.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/blocks.h"
#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kCohere2MoeFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_layer_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::WeightOnlyLayerNorm>("Cohere2MoeLayerNorm", 0, dim, eps, o);
}

int64_t positive(const ConfigFields& f, const char* key, int64_t absent) {
  const int64_t v = f.integer(key, absent);
  if (v <= 0) f.fail(key, "expected a positive integer, got " + std::to_string(v));
  return v;
}

void require_one_of(const ConfigFields& f, const char* key, const char* absent, const char* a,
                    const char* b) {
  const std::string v = f.string(key, absent);
  if (v != a && v != b) {
    f.fail(key, "\"" + v.substr(0, 40) + "\", expected \"" + a + "\" or \"" + b + "\"");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(
      f, c, {.max_position_embeddings = 8192, .tie_word_embeddings = true, .head_dim = 128});
  c.mean_subtracting_norms = !f.has("rms_norm_eps");  // the class's None: LayerNorm
  c.norm_eps = c.mean_subtracting_norms ? f.number("layer_norm_eps", 1e-5) : c.norm_eps;
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::parse_logit_scale(f, c);
  models::pad_token_id_or(f, c, 0);
  c.num_local_experts = f.integer("num_experts", 8);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 2);
  c.shared_expert_intermediate_size = models::shared_experts_width(
      f, "num_shared_experts", f.integer("num_shared_experts", 0), c.intermediate_size);
  if (f.has("prefix_dense_intermediate_size")) {
    c.dense_intermediate_size = f.integer("prefix_dense_intermediate_size");
  }
  require_one_of(f, "expert_selection_fn", "softmax", "softmax", "sigmoid");
  require_one_of(f, "shared_expert_combination_strategy", "average", "sum", "average");
  f.boolean("norm_topk_prob", true);
  // The dense prefix: mlp_layer_types when listed, else the first first_k_dense_replace layers.
  const int64_t first_k = f.integer("first_k_dense_replace", 0);
  if (first_k < 0) f.fail("first_k_dense_replace", std::to_string(first_k) + ", expected >= 0");
  const int64_t prefix = std::min(first_k, c.num_hidden_layers);
  for (int64_t i = 0; i < prefix; ++i) c.dense_layers.push_back(i);
  models::parse_mlp_layer_types(f, c);
  const int64_t prefix_pattern = positive(f, "prefix_dense_sliding_window_pattern", 1);
  const int64_t pattern = positive(f, "sliding_window_pattern", 4);
  c.sliding_window = models::sliding_window_or(f, 4096);
  std::vector<AttentionType> types;
  if (f.has("layer_types")) {
    types = models::parse_layer_types(
        f, c.num_hidden_layers, [](const ModelConfig&, int64_t) { return AttentionType::kFull; },
        c);
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const int64_t p = i < prefix ? prefix_pattern : pattern;
      const int64_t k = i < prefix ? i : i - prefix;
      types.push_back((k + 1) % p != 0 ? AttentionType::kSliding : AttentionType::kFull);
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t = types[static_cast<size_t>(i)];
    if (t == AttentionType::kChunked) {
      f.fail("layer_types",
             "has chunked_attention, which Cohere2-MoE does not run; expected "
             "\"full_attention\" or \"sliding_attention\"");
    }
    const bool dense = std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), i);
    const bool rotates =
        (t == AttentionType::kSliding && c.sliding_window) || (dense && prefix_pattern == 1);
    if (!rotates) c.nope_layers.push_back(i);
  }
  if (c.sliding_window) c.layer_types = std::move(types);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  if (c.mean_subtracting_norms) {
    j.erase("rms_norm_eps");
    j["layer_norm_eps"] = c.norm_eps;
  }
  j["attention_bias"] = c.qkv_bias;
  j["logit_scale"] = c.logit_scale;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_shared_experts"] =
      c.intermediate_size > 0 ? c.shared_expert_intermediate_size / c.intermediate_size : 0;
  if (c.dense_intermediate_size > 0)
    j["prefix_dense_intermediate_size"] = c.dense_intermediate_size;
  j["mlp_layer_types"] = models::mlp_layer_types_json(c);
  // Pattern 1 makes every dense layer rotate (force_rope); with an explicit layer_types any other
  // pattern leaves them to their window, as a dense NoPE layer needs.
  const bool dense_nope = std::any_of(c.dense_layers.begin(), c.dense_layers.end(), [&](int64_t i) {
    return std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i);
  });
  j["prefix_dense_sliding_window_pattern"] = dense_nope ? 2 : 1;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  if (!c.sliding_window) {
    j["sliding_window"] = nullptr;
    return;
  }
  j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kCohere2MoeFamily.hf_class_prefix,
       .make_norm = c.mean_subtracting_norms ? make_layer_norm : nullptr,
       .rope_in_float32 = true,
       .norms = models::NormPlacement::kParallel,
       .logit_scale = true,
       .moe = {.shared_name = "shared_experts", .softmax_after_top_k = true}});
}

constexpr FieldRename kCohere2MoeRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"num_local_experts", "num_experts"},
    {"dense_intermediate_size", "prefix_dense_intermediate_size"},
    {"dense_layers", "mlp_layer_types"},
    {"shared_expert_intermediate_size", "num_shared_experts"}};

// PreTrainedModel's _init_weights with Cohere2MoePreTrainedModel's experts and router: the
// Llama-shaped decoders' rules (Linear and the fused experts normal, biases zero, the padding row
// zero, RMSNorm one), and Cohere's LayerNorm weight one when the file gives no rms_norm_eps.
constexpr InitRule kCohere2MoeLayerNormRule[] = {
    {"Cohere2MoeLayerNorm", "weight", InitFill::kOnes}};
constexpr auto kCohere2MoeInitRules =
    models::concat_init_rules(kCohere2MoeLayerNormRule, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kCohere2MoeFamily{
    .model_type = "cohere2_moe",
    .hf_class_prefix = "Cohere2Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kCohere2MoeRenames,
    .moe = true,
    .experts_class = "Cohere2MoeExperts",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = kCohere2MoeInitRules,
};

}  // namespace shardplan::tensor
