// ernie4_5_moe (ERNIE-4.5-21B-A3B, -300B-A47B): transformers' Ernie4_5_MoeConfig (64 experts of
// moe_intermediate_size 1536, top moe_k 6, 2 shared experts, max positions 131072, rms_norm_eps
// 1e-5, rope_theta 500000, tied embeddings) and modeling_ernie4_5_moe.py: ERNIE 4.5's attention
// (biases when use_bias, no dropout, interleaved RoPE) and, in layers moe_layer_start_index ..
// moe_layer_end_index whose (i + 1) is a multiple of moe_layer_interval, a sparse block: the
// router "gate" (its own float32 weight [E, h] and moe_statics.e_score_correction_bias [1, E], a
// frozen parameter), the fused experts, then the shared experts as one MLP of their summed width.
// The other layers run a dense MLP of intermediate_size.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kErnie45MoeFamily;  // listed in family_registry.cpp

namespace {

// A field Ernie4_5_MoeConfig also takes under its attribute_map alias ("num_experts" for
// moe_num_experts, "num_experts_per_tok" for moe_k); a file giving both must agree.
int64_t aliased(const ConfigFields& f, const char* key, const char* alias, int64_t dflt) {
  if (!f.has(alias)) return f.integer(key, dflt);
  const int64_t v = f.integer(alias);
  if (f.has(key) && f.integer(key) != v) {
    f.fail(key, std::to_string(f.integer(key)) + " while its alias '" + alias + "' says " +
                    std::to_string(v) + "; expected one value");
  }
  return v;
}

constexpr FieldRename kRenamed[] = {{"norm_eps", "rms_norm_eps"},
                                    {"num_local_experts", "moe_num_experts"},
                                    {"num_experts_per_tok", "moe_k"},
                                    {"intermediate_size", "moe_intermediate_size"},
                                    {"dense_intermediate_size", "intermediate_size"},
                                    {"shared_expert_intermediate_size", "moe_num_shared_experts"}};

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 500000,
                                .tie_word_embeddings = true});
  c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("use_bias", false);
  if (c.qkv_bias) {
    f.fail("use_bias",
           "true gives Ernie4_5_MoeForCausalLM's output layer a bias, which shardplan "
           "does not build; expected false (as every released ERNIE 4.5 MoE file)");
  }
  c.attention_dropout = 0;  // Ernie4_5_MoeAttention sets 0.0 over the config's value
  c.num_local_experts = aliased(f, "moe_num_experts", "num_experts", 64);
  c.num_experts_per_tok = aliased(f, "moe_k", "num_experts_per_tok", 6);
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size", 1536);
  c.shared_expert_intermediate_size = models::shared_experts_width(
      f, "moe_num_shared_experts", f.integer("moe_num_shared_experts", 2), c.intermediate_size);
  const int64_t start = f.integer("moe_layer_start_index", 1);
  int64_t end = f.integer("moe_layer_end_index", -1);
  if (end < -1) f.fail("moe_layer_end_index", "must be >= -1, got " + std::to_string(end));
  if (end == -1) end = c.num_hidden_layers - 1;  // Ernie4_5_MoeConfig: -1 means the last layer
  const int64_t interval = f.integer("moe_layer_interval", 1);
  if (start < 0) f.fail("moe_layer_start_index", "must be >= 0, got " + std::to_string(start));
  if (interval <= 0) {
    f.fail("moe_layer_interval", "must be positive, got " + std::to_string(interval));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if ((i + 1) % interval != 0 || i < start || i > end) c.dense_layers.push_back(i);
  }
  f.number("moe_norm_min", 1e-12);  // the clamp of the top-k sum: no shape changes
  // The larger files' multi-token prediction layers: transformers builds none and skips their
  // tensors (ModelFamily::unloaded_key); they are not priced.
  const int64_t mtp = f.integer("num_nextn_predict_layers", 0);
  if (mtp < 0) f.fail("num_nextn_predict_layers", "must be >= 0, got " + std::to_string(mtp));
}

bool is_dense(const ModelConfig& c, int64_t layer) {
  return std::find(c.dense_layers.begin(), c.dense_layers.end(), layer) != c.dense_layers.end();
}

// The sparse layers as the first and last sparse layer and the smallest interval that gives
// them (all dense: a start past the last layer). Every stack parse makes, and every cut of one
// (first_layers, uniform_config), is so spaced.
void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["use_bias"] = c.qkv_bias;
  j["moe_num_experts"] = c.num_local_experts;
  j["moe_k"] = c.num_experts_per_tok;
  j["intermediate_size"] = c.dense_intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["moe_num_shared_experts"] =
      c.intermediate_size > 0 ? c.shared_expert_intermediate_size / c.intermediate_size : 0;
  const int64_t layers = c.num_hidden_layers;
  int64_t start = 0;
  while (start < layers && is_dense(c, start)) ++start;
  int64_t end = layers - 1;
  while (end > start && is_dense(c, end)) --end;
  for (int64_t interval = 1; interval <= std::max<int64_t>(layers, 1); ++interval) {
    bool fits = true;
    for (int64_t i = 0; i < layers && fits; ++i) {
      fits = is_dense(c, i) == ((i + 1) % interval != 0 || i < start || i > end);
    }
    if (fits) {
      j["moe_layer_start_index"] = start;
      j["moe_layer_end_index"] = end;
      j["moe_layer_interval"] = interval;
      return;
    }
  }
  SP_FAIL(
      "ernie4_5_moe: the dense layers are not one start, end and interval apart, which "
      "Ernie4_5_MoeConfig cannot state");
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kErnie45MoeFamily.hf_class_prefix,
       .moe = {.shared_name = "shared_experts", .router_with_statics = true}});
}

// The router's weight is made as zeros and Ernie4_5_MoePreTrainedModel._init_weights leaves it
// (it is not a Linear); the statics' bias is zeroed; the rest is LlamaPreTrainedModel's.
constexpr InitRule kInitRules[] = {
    {"Ernie4_5_MoeTopKRouter", "weight", InitFill::kZeros},
    {"Ernie4_5_MoeStatics", "e_score_correction_bias", InitFill::kZeros},
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"*", "gate_up_proj", InitFill::kNormal},
    {"*", "down_proj", InitFill::kNormal},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"RMSNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kErnie45MoeFamily{
    .model_type = "ernie4_5_moe",
    .hf_class_prefix = "Ernie4_5_Moe",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenamed,
    .moe = true,
    .experts_class = "Ernie4_5_MoeExperts",
    .unloaded_key = "mtp",
    .tp_plan = models::kMoeTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
