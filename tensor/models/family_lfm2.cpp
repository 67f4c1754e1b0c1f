// lfm2 (Liquid AI's LFM2: 350M, 700M, 1.2B, 2.6B): transformers' Lfm2Config (vocab 65536, hidden
// 2560, 32 layers, 32 heads and 8 key-value heads, norm_eps 1e-5 under that key, rope_theta 1e6,
// max positions 128000, tied, pad_token_id 0; the short convolution's width conv_L_cache 3 and
// conv_bias false) and modular_lfm2.py: a pre-norm stack of two layer kinds, attention
// ("full_attention": q/k/v projections, per-head q_layernorm and k_layernorm before RoPE, out_proj)
// and the short convolution ("conv", tensor/models/short_conv.h), each followed by a SwiGLU
// feed_forward (w1 gate, w3 up, w2 down); the norms operator_norm (before the mixer) and ffn_norm,
// the final one embedding_norm. Which layers attend: layer_types, else full_attn_idxs, else every
// layer (the class's default). The MLP's width is computed in Lfm2MLP, not the config: from
// block_ff_dim (a legacy key that wins over intermediate_size), with block_auto_adjust_ff_dim
// two thirds of it, times block_ffn_dim_multiplier, rounded up to block_multiple_of (12288 ->
// 8192); it is kept here as that width (written back with the adjustment off). SiLU and no
// attention dropout always (the class has neither field); tie_embedding is a legacy
// tie_word_embeddings.
//
// lfm2_moe (LFM2-8B-A1B), defined here as it shares that stack: Lfm2MoeConfig (vocab 65536,
// hidden 2048, 32 layers, 32 and 8 heads; the dense MLP intermediate_size 7168 as is, no
// adjustment; 32 experts of moe_intermediate_size 1792, top 4; the first num_dense_layers (2)
// dense) and modular_lfm2_moe.py: the feed-forward of the other layers is Lfm2MoeSparseMoeBlock,
// the fused experts then the router `gate` (sigmoid scores, renormalized top k), no shared
// expert; with use_expert_bias the block keeps `expert_bias` [E], a buffer that picks the top k
// (in the checkpoint, not a parameter). Lfm2MoeConfig derives no layer_types, so a file without
// them cannot be built and is refused. The rotary module is named pos_emb there (buffers only).
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kLfm2Family;     // listed in family_registry.cpp
extern const ModelFamily kLfm2MoeFamily;  // listed in family_registry.cpp

namespace {

// Lfm2MLP's width from the config's fields.
int64_t mlp_width(const ConfigFields& f, int64_t width) {
  if (f.has("block_ff_dim")) width = f.integer("block_ff_dim");
  const char* width_key = f.has("block_ff_dim") ? "block_ff_dim" : "intermediate_size";
  if (width <= 0) f.fail(width_key, std::to_string(width) + ", expected > 0");
  if (!f.boolean("block_auto_adjust_ff_dim", true)) return width;
  if (f.is_null("block_ffn_dim_multiplier")) {
    f.fail("block_ffn_dim_multiplier", "is null; Lfm2Config types it a number (default 1.0)");
  }
  const double multiplier = f.number("block_ffn_dim_multiplier", 1.0);
  const int64_t multiple = f.integer("block_multiple_of", 256);
  if (!(multiplier > 0)) {
    f.fail("block_ffn_dim_multiplier", std::to_string(multiplier) + ", expected > 0");
  }
  if (multiple <= 0) f.fail("block_multiple_of", std::to_string(multiple) + ", expected > 0");
  // Python's int(2 * f / 3), int(multiplier * f), then multiple * ceil(f / multiple); a width
  // beyond 2^53 is no model's (validate() bounds the sizes after parsing) and is refused here,
  // before the conversions could overflow.
  const double two_thirds = std::trunc(2.0 * static_cast<double>(width) / 3);
  const double scaled = std::trunc(multiplier * two_thirds);
  constexpr double kLimit = 9007199254740992.0;  // 2^53
  if (multiple > (int64_t{1} << 30)) {
    f.fail("block_multiple_of", std::to_string(multiple) + ", expected at most 2^30");
  }
  if (!(scaled < kLimit)) {
    f.fail(width_key,
           "times block_ffn_dim_multiplier gives an MLP width beyond 2^53; expected a model's "
           "width");
  }
  const auto adjusted = static_cast<int64_t>(scaled);
  return multiple * ((adjusted + multiple - 1) / multiple);
}

std::vector<AttentionType> layer_types(const ConfigFields& f, int64_t layers) {
  std::vector<AttentionType> out;
  if (f.has("layer_types")) {
    const nlohmann::json& t = f.raw("layer_types");
    if (!t.is_array() || static_cast<int64_t>(t.size()) != layers) {
      f.fail("layer_types", "expected num_hidden_layers = " + std::to_string(layers) +
                                " entries, each \"full_attention\" or \"conv\"");
    }
    for (const nlohmann::json& e : t) {
      if (e == "full_attention") {
        out.push_back(AttentionType::kFull);
      } else if (e == "conv") {
        out.push_back(AttentionType::kLinear);
      } else {
        f.fail("layer_types", e.dump().substr(0, 40) +
                                  " is not an LFM2 layer; expected \"full_attention\" or \"conv\"");
      }
    }
    f.has("full_attn_idxs");  // read: layer_types wins over it
    return out;
  }
  out.assign(static_cast<size_t>(layers), AttentionType::kLinear);
  if (!f.has("full_attn_idxs")) {  // Lfm2Config: every layer attends
    out.assign(static_cast<size_t>(layers), AttentionType::kFull);
    return out;
  }
  const nlohmann::json& idx = f.raw("full_attn_idxs");
  if (!idx.is_array()) f.fail("full_attn_idxs", "expected a list of layer indices");
  for (const nlohmann::json& i : idx) {
    if (!i.is_number_integer()) {
      f.fail("full_attn_idxs", i.dump().substr(0, 40) + " is not a layer index");
    }
    const int64_t layer = i.get<int64_t>();
    if (layer >= 0 && layer < layers) out[static_cast<size_t>(layer)] = AttentionType::kFull;
  }
  return out;
}

// What both classes read alike, with the class's sizes.
void parse_backbone(const ConfigFields& f, ModelConfig& c,
                    const models::RotaryDecoderSizes& sizes) {
  models::parse_rotary_decoder(f, c,
                               {.sizes = sizes,
                                .max_position_embeddings = 128000,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 1e6,
                                .tie_word_embeddings = true});
  c.norm_eps = f.number("norm_eps", 1e-5);  // LFM2's key; rms_norm_eps is not read
  if (f.has("tie_embedding")) c.tie_word_embeddings = f.boolean("tie_embedding", true);
  c.hidden_act = "silu";  // the MLPs' and experts', whatever the file says
  c.attention_dropout = 0;
  c.linear_conv_kernel_dim = f.integer("conv_L_cache", 3);
  c.linear_conv_bias = c.linear_proj_bias = f.boolean("conv_bias", false);
  models::pad_token_id_or(f, c, 0);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  parse_backbone(f, c,
                 {.vocab_size = 65536,
                  .hidden_size = 2560,
                  .intermediate_size = 12288,
                  .num_hidden_layers = 32,
                  .num_attention_heads = 32,
                  .num_key_value_heads = 8});
  c.intermediate_size = mlp_width(f, c.intermediate_size);
  c.layer_types = layer_types(f, c.num_hidden_layers);
}

void parse_moe(const ConfigFields& f, ModelConfig& c) {
  parse_backbone(f, c,
                 {.vocab_size = 65536,
                  .hidden_size = 2048,
                  .intermediate_size = 7168,
                  .num_hidden_layers = 32,
                  .num_attention_heads = 32,
                  .num_key_value_heads = 8});
  if (!f.has("layer_types")) {
    f.fail("layer_types",
           "is missing: Lfm2MoeConfig derives none and its model cannot be built "
           "without them; expected \"full_attention\" or \"conv\" per layer");
  }
  c.layer_types = layer_types(f, c.num_hidden_layers);
  c.num_local_experts = f.integer("num_experts", 32);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 4);
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size", 1792);
  const int64_t dense = f.integer("num_dense_layers", 2);
  if (dense < 0) f.fail("num_dense_layers", std::to_string(dense) + ", expected >= 0");
  for (int64_t i = 0; i < std::min(dense, c.num_hidden_layers); ++i) c.dense_layers.push_back(i);
  // Routing values only; use_expert_bias keeps the expert_bias buffer (counted beside the model
  // as in the published checkpoint, which has it).
  f.boolean("use_expert_bias", true);
  f.boolean("norm_topk_prob", true);
  f.number("routed_scaling_factor", 1.0);
}

void backbone_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");
  j.erase("attention_dropout");
  j["norm_eps"] = c.norm_eps;
  j["conv_L_cache"] = c.linear_conv_kernel_dim;
  j["conv_bias"] = c.linear_conv_bias;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool conv =
        !c.layer_types.empty() && c.layer_types[static_cast<size_t>(i)] == AttentionType::kLinear;
    types.push_back(conv ? "conv" : "full_attention");
  }
  j["layer_types"] = types;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  backbone_to_hf_json(c, j);
  j["block_auto_adjust_ff_dim"] = false;  // intermediate_size is the MLP's width already
}

void moe_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  backbone_to_hf_json(c, j);
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_dense_layers"] = c.dense_layers.size();
}

models::RotaryDecoderStyle lfm2_style(std::string_view prefix) {
  return {.prefix = prefix,
          .qk_norm = true,
          .qk_norm_names = {"q_layernorm", "k_layernorm"},
          .input_norm_name = "operator_norm",
          .post_attention_norm_name = "ffn_norm",
          .o_proj_name = "out_proj",
          .mlp_names = {"w1", "w3", "w2"},
          .linear_mixer = models::LinearMixer::kShortConv,
          .linear_mixer_name = "ShortConv",
          .ffn_name = "feed_forward",
          .final_norm_name = "embedding_norm"};
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, lfm2_style(kLfm2Family.hf_class_prefix));
}

ModulePtr build_moe(const ModelConfig& c, const TensorOptions& o, bool training) {
  models::RotaryDecoderStyle s = lfm2_style(kLfm2MoeFamily.hf_class_prefix);
  s.moe = {.router_first = false, .sigmoid_router = true};  // experts, then the router "gate"
  return models::build_rotary_decoder(c, o, training, s);
}

constexpr FieldRename kLfm2Renames[] = {{"intermediate_size", "block_ff_dim"},
                                        {"linear_conv_kernel_dim", "conv_L_cache"},
                                        {"linear_conv_bias", "conv_bias"},
                                        {"linear_proj_bias", "conv_bias"}};
constexpr FieldRename kLfm2MoeRenames[] = {{"num_local_experts", "num_experts"},
                                           {"intermediate_size", "moe_intermediate_size"},
                                           {"dense_intermediate_size", "intermediate_size"},
                                           {"dense_layers", "num_dense_layers"},
                                           {"linear_conv_kernel_dim", "conv_L_cache"},
                                           {"linear_conv_bias", "conv_bias"},
                                           {"linear_proj_bias", "conv_bias"}};

// Megatron-LM's split of the attention and the MLP; the short convolution's in_proj column-parallel
// in its three parts (B, C and x each split alike, so a rank gates its own channels), its
// depthwise taps read on those channels, out_proj row-parallel.
constexpr TensorParallelRule kLfm2TpPlan[] = {{"model.embed_tokens", "rowwise"},
                                              {"model.layers.*.self_attn.q_proj", "colwise"},
                                              {"model.layers.*.self_attn.k_proj", "colwise"},
                                              {"model.layers.*.self_attn.v_proj", "colwise"},
                                              {"model.layers.*.self_attn.out_proj", "rowwise"},
                                              {"model.layers.*.conv.in_proj", "colwise", 3},
                                              {"model.layers.*.conv.out_proj", "rowwise"},
                                              {"model.layers.*.feed_forward.w1", "colwise"},
                                              {"model.layers.*.feed_forward.w3", "colwise"},
                                              {"model.layers.*.feed_forward.w2", "rowwise"},
                                              {"model.layers.*.feed_forward.experts", "experts"},
                                              {"lm_head", "colwise"}};

// Lfm2PreTrainedModel keeps PreTrainedModel._init_weights (Lfm2MoePreTrainedModel adds the
// experts and the router normal, which the Llama-shaped rules give): nn.Conv1d as nn.Linear (weight
// normal(0, initializer_range), bias zero), the rest as the Llama-shaped decoders.
constexpr InitRule kConvInitRules[] = {{"Conv1d", "weight", InitFill::kNormal},
                                       {"Conv1d", "bias", InitFill::kZeros}};
constexpr auto kLfm2InitRules =
    models::concat_init_rules(kConvInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kLfm2Family{
    .model_type = "lfm2",
    .hf_class_prefix = "Lfm2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kLfm2Renames,
    .linear_attention = true,
    .short_conv_mixer = true,
    .tp_plan = kLfm2TpPlan,
    .init_rules = kLfm2InitRules,
};

const ModelFamily kLfm2MoeFamily{
    .model_type = "lfm2_moe",
    .hf_class_prefix = "Lfm2Moe",
    .layers_path = "model.layers",
    .parse = parse_moe,
    .to_hf_json = moe_to_hf_json,
    .build = build_moe,
    .renamed = kLfm2MoeRenames,
    .moe = true,
    .experts_class = "Lfm2MoeExperts",
    .router_score_bias = ModelFamily::RouterBias::kExpertBiasOnFeedForward,
    .linear_attention = true,
    .short_conv_mixer = true,
    .tp_plan = kLfm2TpPlan,
    .init_rules = kLfm2InitRules,
};

}  // namespace shardplan::tensor
