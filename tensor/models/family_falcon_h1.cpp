// falcon_h1 (TII Falcon-H1: 0.5B, 1.5B, 1.5B-Deep, 3B, 7B, 34B). transformers 5's FalconH1Config
// and modeling_falcon_h1.py (generated from modular_falcon_h1.py: BambaMixer, Mamba-2's gated
// norm, Llama's attention, MLP, RMSNorm and rotary). Every layer is the same "hybrid": a Mamba-2
// mixer (`mamba`, FalconH1Mixer, tensor/models/mamba2_mixer.h) and a GQA attention (`self_attn`,
// FalconH1Attention) run side by side on the same normed input, their outputs summed into the
// residual, then a gated MLP (`feed_forward`, FalconH1MLP):
//   n = input_layernorm(x)
//   x = x + mamba(n) * ssm_out_multiplier + self_attn(n * attention_in_multiplier) *
//       attention_out_multiplier
//   x = x + feed_forward(pre_ff_layernorm(x))
// registered feed_forward, mamba, self_attn, input_layernorm, pre_ff_layernorm; the model
// embed_tokens, layers, final_layernorm (not `norm`), rotary_emb; lm_head untied by default.
// The muP multipliers (ModelConfig's *_multiplier fields) are one elementwise multiply each,
// applied even at 1.0 as transformers does: the embeddings, the logits (lm_head_multiplier, a
// product), k after k_proj and before RoPE (key_multiplier, RotaryDecoderStyle::scale_keys), the
// mixer's input (ssm_in_multiplier) and in_proj output (the non-persistent `mup_vector` buffer
// [1, 1, 2 d_inner + 2 g N + H] from ssm_multipliers, Mamba2MixerStyle::mup_multipliers), the
// MLP's gate projection before SiLU and its output (mlp_multipliers). None changes a shape.
// Sizes the other Mamba-2 families do not have: d_inner is mamba_d_ssm (class default 1024 when
// the key is absent, mamba_expand x hidden_size only when it is null), so nh x P need not be
// expand x h; the gated norm is optional (mamba_rms_norm, default false: nn.Identity); in_proj's
// bias is mamba_proj_bias and out_proj's projectors_bias; head_dim is read (published files have
// heads x head_dim != hidden_size). Every layer attends in full: layer_types stays empty, and
// LayerKind::parallel_mamba (ModelConfig::parallel_mamba) says the mixer is there. FalconH1Config
// class defaults: vocabulary 128,000, hidden 4,096, intermediate 14,336, 32 layers, 32 heads, 8
// kv heads, 8,192 positions, rms_norm_eps 1e-5, rope_theta 1e4, untied, pad_token_id 0, Mamba
// 128 heads in 1 group of state 256, 4 taps, conv bias on. Refused as transformers fails on them
// (at config, build or forward time): a layer_types / layers_block_type key (a read-only
// property), mamba_d_head neither "auto" nor d_inner / mamba_n_heads, a null head_dim, a null
// multiplier, mlp_multipliers not 2 numbers; and, as shardplan's own rules, ssm_multipliers not 5
// numbers (transformers ignores a longer list's tail), hidden_act other than SiLU (mamba_ssm's
// fused path then skips the convolution's activation), and partial_rotary_factor below 1 with a
// scaled RoPE type (the default type ignores it). attn_layer_indices, mamba_use_mlp,
// mlp_expansion_factor, sliding_window and num_logits_to_keep are inert in transformers and
// ignored here.
#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/models/blocks.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kFalconH1Family;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "FalconH1";

// A multiplier of FalconH1Config: 1.0 when absent; a null one builds but fails in forward
// (tensor * None), so it is refused.
double multiplier(const ConfigFields& f, const char* key) {
  if (f.is_null(key)) {
    f.fail(key, "is null; expected a number (FalconH1 multiplies by it in every forward)");
  }
  return f.number(key, 1.0);
}

// mlp_multipliers (2: FalconH1MLP unpacks [gate, down]) and ssm_multipliers (5:
// compute_mup_vector's z, x, B, C and dt segments): all ones when absent or null, as
// FalconH1Config.__post_init__ fills them; otherwise exactly N numbers.
template <size_t N>
std::array<double, N> multiplier_list(const ConfigFields& f, const char* key) {
  std::array<double, N> out;
  out.fill(1.0);
  if (!f.has(key)) return out;
  const nlohmann::json& v = f.raw(key);
  const bool numbers = v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) {
                         return e.is_number();
                       });
  if (!numbers || v.size() != N) {
    f.fail(key,
           "expected a list of " + std::to_string(N) + " numbers, got " + v.dump().substr(0, 60));
  }
  for (size_t i = 0; i < N; ++i) out[i] = v[i].get<double>();
  return out;
}

// d_inner (FalconH1Mixer.intermediate_size): mamba_d_ssm, whose class default 1024 applies when
// the key is absent; a null one means int(mamba_expand x hidden_size). mamba_expand is read
// either way (an architecture key, Note [Architecture fields nobody read]).
int64_t mamba_inner(const ConfigFields& f, const ModelConfig& c) {
  const double expand = f.number("mamba_expand", 2.0);
  if (!f.is_null("mamba_d_ssm")) {
    const int64_t inner = f.integer("mamba_d_ssm", 1024);
    if (inner <= 0) f.fail("mamba_d_ssm", "must be positive, got " + std::to_string(inner));
    return inner;
  }
  const double inner = expand * static_cast<double>(c.hidden_size);  // int() truncates
  if (!(inner >= 1 && inner < 4.0e18)) {
    f.fail("mamba_expand", std::to_string(expand) +
                               " x hidden_size (mamba_d_ssm null) must be a positive width, got " +
                               std::to_string(inner));
  }
  return static_cast<int64_t>(inner);
}

// The Mamba-2 mixer's fields into ModelConfig's linear_* fields (FalconH1Config's names and
// defaults; validate() then checks them positive and mamba_n_groups dividing mamba_n_heads, which
// also makes it divide d_inner as the gated norm's view needs).
void parse_mamba(const ConfigFields& f, ModelConfig& c) {
  const int64_t inner = mamba_inner(f, c);
  const int64_t heads = f.integer("mamba_n_heads", 128);
  if (heads <= 0) f.fail("mamba_n_heads", "must be positive, got " + std::to_string(heads));
  if (inner % heads != 0) {
    f.fail("mamba_n_heads", std::to_string(heads) + " does not divide the Mamba width " +
                                std::to_string(inner) +
                                " (mamba_d_ssm, or mamba_expand x hidden_size when it is null)");
  }
  // "auto" (the default) is d_inner / mamba_n_heads; FalconH1Config.validate_architecture refuses
  // any other value whose product with mamba_n_heads is not d_inner (a string other than "auto"
  // among them; a null one is a TypeError).
  int64_t head_dim = inner / heads;
  const std::string want = "\"auto\" or " + std::to_string(inner / heads);
  if (f.is_null("mamba_d_head")) f.fail("mamba_d_head", "is null; expected " + want);
  if (f.has("mamba_d_head")) {
    const nlohmann::json& v = f.raw("mamba_d_head");
    if (v.is_string() && v.get<std::string>() != "auto") {
      f.fail("mamba_d_head", v.dump().substr(0, 40) + " is not a head width; expected " + want);
    }
    if (!v.is_string()) {
      head_dim = f.integer("mamba_d_head");
      if (head_dim != inner / heads) {
        f.fail("mamba_d_head", std::to_string(head_dim) + " x mamba_n_heads " +
                                   std::to_string(heads) + " is not the Mamba width " +
                                   std::to_string(inner) + "; expected " + want);
      }
    }
  }
  c.linear_num_value_heads = heads;
  c.linear_value_head_dim = head_dim;
  c.linear_num_key_heads = f.integer("mamba_n_groups", 1);
  c.linear_key_head_dim = f.integer("mamba_d_state", 256);
  c.linear_conv_kernel_dim = f.integer("mamba_d_conv", 4);
  c.linear_conv_bias = f.boolean("mamba_conv_bias", true);
  c.linear_proj_bias = f.boolean("mamba_proj_bias", false);  // in_proj's only
  c.linear_out_proj_bias = f.boolean("projectors_bias", false);
  c.linear_gated_norm = f.boolean("mamba_rms_norm", false);
  // The eager path's norm order; the fused path (traced) forces norm_before_gate=False: no shape,
  // no work.
  (void)f.boolean("mamba_norm_before_gate", true);
  // The scan's chunk changes the kernels' tiling, not the model: read, priced at kMambaChunk
  // (Note [Mamba-2 scan work] in tensor/ops.h).
  if (f.integer("mamba_chunk_size", 256) <= 0) {
    f.fail("mamba_chunk_size", "must be positive, got " + f.raw("mamba_chunk_size").dump());
  }
  (void)f.has("time_step_limit");  // clamps dt at run time: no shape, no work
  c.parallel_mamba = true;
}

// RoPE: rope_theta and a legacy rope_scaling from parse_rotary_decoder, rope_parameters read here
// (ModelFamily::rope_parameters_by_layer_type skips the shared reading after parse). With the
// default type FalconH1RotaryEmbedding makes a table of the whole head_dim whatever
// partial_rotary_factor says; another type's narrower table would not broadcast against the whole
// head apply_rotary_pos_emb rotates (a forward error), so a factor other than 1 is refused there.
// A top-level partial_rotary_factor joins rope_parameters (convert_rope_params_to_dict).
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  if (f.has("rope_parameters")) parse_rope_parameters(f, c);
  const char* key = "rope_parameters";
  double factor = c.partial_rotary_factor;
  if (f.has("partial_rotary_factor") && factor == 1) {
    factor = f.number("partial_rotary_factor", 1.0);
    key = "partial_rotary_factor";
  }
  if (c.rope_scaling && factor != 1) {
    f.fail(key, "partial_rotary_factor " + nlohmann::json(factor).dump() + " with rope type '" +
                    c.rope_scaling->rope_type +
                    "': FalconH1's attention rotates all of head_dim, which that narrower table "
                    "does not cover; expected 1");
  }
  c.partial_rotary_factor = 1;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // layers_block_type is a read-only property (["hybrid"] x num_hidden_layers) that attribute_map
  // also names layer_types: PretrainedConfig's setattr of either key raises AttributeError.
  for (const char* key : {"layer_types", "layers_block_type"}) {
    if (f.has(key) || f.is_null(key)) {
      f.fail(key,
             "FalconH1Config's layers_block_type is a read-only property (every layer is "
             "\"hybrid\"): transformers raises AttributeError on a file setting it; "
             "expected no '" +
                 std::string(key) + "'");
    }
  }
  // FalconH1Attention reads getattr(config, "head_dim", h // H): a null one is None ** -0.5.
  if (f.is_null("head_dim")) {
    f.fail("head_dim",
           "is null; expected a width (FalconH1Attention scales by head_dim ** -0.5) "
           "or no key (hidden_size / num_attention_heads)");
  }
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{128000, 4096, 14336, 32, 32, 8},
                                .max_position_embeddings = 8192,
                                .rms_norm_eps = 1e-5});
  if (f.is_null("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  // The MLP's act_fn and the mixer's convolution activation (mamba_ssm's fused path applies SiLU
  // for "silu" or "swish" only, and none otherwise, where the eager path uses ACT2FN).
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    f.fail("hidden_act", "'" + c.hidden_act +
                             "' is not built; expected \"silu\" (the fused scan's convolution "
                             "activation)");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);  // q, k, v and o
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::pad_token_id_or(f, c, 0);
  parse_rope(f, c);
  parse_mamba(f, c);
  c.embedding_multiplier = multiplier(f, "embedding_multiplier");
  c.lm_head_multiplier = multiplier(f, "lm_head_multiplier");
  c.key_multiplier = multiplier(f, "key_multiplier");
  c.attention_in_multiplier = multiplier(f, "attention_in_multiplier");
  c.attention_out_multiplier = multiplier(f, "attention_out_multiplier");
  c.ssm_in_multiplier = multiplier(f, "ssm_in_multiplier");
  c.ssm_out_multiplier = multiplier(f, "ssm_out_multiplier");
  const std::array<double, 2> mlp = multiplier_list<2>(f, "mlp_multipliers");
  c.mlp_gate_multiplier = mlp[0];
  c.mlp_down_multiplier = mlp[1];
  c.ssm_multipliers = multiplier_list<5>(f, "ssm_multipliers");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  // mamba_d_ssm written: without it the class's 1024 would be read back (mamba_expand is then
  // ignored, and expand x hidden_size need not be the width).
  j["mamba_d_ssm"] = c.linear_num_value_heads * c.linear_value_head_dim;
  j["mamba_n_heads"] = c.linear_num_value_heads;
  j["mamba_d_head"] = c.linear_value_head_dim;
  j["mamba_n_groups"] = c.linear_num_key_heads;
  j["mamba_d_state"] = c.linear_key_head_dim;
  j["mamba_d_conv"] = c.linear_conv_kernel_dim;
  j["mamba_conv_bias"] = c.linear_conv_bias;
  j["mamba_proj_bias"] = c.linear_proj_bias;
  j["projectors_bias"] = c.linear_out_proj_bias.value_or(c.linear_proj_bias);
  j["mamba_rms_norm"] = c.linear_gated_norm;
  j["embedding_multiplier"] = c.embedding_multiplier;
  j["lm_head_multiplier"] = c.lm_head_multiplier;
  j["key_multiplier"] = c.key_multiplier;
  j["attention_in_multiplier"] = c.attention_in_multiplier;
  j["attention_out_multiplier"] = c.attention_out_multiplier;
  j["ssm_in_multiplier"] = c.ssm_in_multiplier;
  j["ssm_out_multiplier"] = c.ssm_out_multiplier;
  j["mlp_multipliers"] = nlohmann::json::array({c.mlp_gate_multiplier, c.mlp_down_multiplier});
  j["ssm_multipliers"] = c.ssm_multipliers;
}

// FalconH1MLP: down_proj(up_proj(x) * act(gate_proj(x) * gate_multiplier)) * down_multiplier, in
// that op order (up_proj first, as Python evaluates the product).
class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "MLP"),
        act_(c.hidden_act),
        gate_multiplier_(c.mlp_gate_multiplier),
        down_multiplier_(c.mlp_down_multiplier) {
    const int64_t h = c.hidden_size, width = c.intermediate_size;
    register_module("gate_proj", std::make_shared<Linear>(h, width, c.mlp_bias, o));
    register_module("up_proj", std::make_shared<Linear>(h, width, c.mlp_bias, o));
    register_module("down_proj", std::make_shared<Linear>(width, h, c.mlp_bias, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor up = child("up_proj")->call(x);
    const Tensor gate =
        models::activation(act_, mul(child("gate_proj")->call(x), gate_multiplier_));
    return mul(child("down_proj")->call(mul(up, gate)), down_multiplier_);
  }

 private:
  std::string act_;
  double gate_multiplier_, down_multiplier_;
};

// FalconH1DecoderLayer: feed_forward, mamba, self_attn, input_layernorm, pre_ff_layernorm. Made
// empty and filled by build() once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    const int64_t h = c.hidden_size;
    ffn_ = register_module("feed_forward", std::make_shared<Mlp>(c, o));
    mamba_ =
        register_module("mamba", models::make_mamba2_mixer(c, std::string(kPrefix) + "Mixer",
                                                           std::string(kPrefix) + "RMSNormGated", o,
                                                           {.mup_multipliers = true}));
    attn_ = register_module(
        "self_attn", models::make_rotary_attention(c, kind, {.prefix = kPrefix, .scale_keys = true},
                                                   kPrefix, o, training));
    input_norm_ = register_module("input_layernorm",
                                  std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    pre_ff_norm_ = register_module("pre_ff_layernorm",
                                   std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    ssm_out_ = c.ssm_out_multiplier;
    attention_in_ = c.attention_in_multiplier;
    attention_out_ = c.attention_out_multiplier;
  }
  // The op order of FalconH1DecoderLayer.forward: the mixer, then the attention, both on `n`.
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor n = input_norm_->call(x);
    const Tensor m = mul(mamba_->run(n, Tensor(), Tensor()), ssm_out_);
    const Tensor a = mul(attn_->run(mul(n, attention_in_), cos_t, sin_t), attention_out_);
    const Tensor h = add(x, add(m, a));
    return add(h, ffn_->call(pre_ff_norm_->call(h)));
  }

 private:
  std::shared_ptr<models::AttentionBlock> mamba_, attn_;
  ModulePtr ffn_, input_norm_, pre_ff_norm_;
  double ssm_out_ = 1, attention_in_ = 1, attention_out_ = 1;
};

// FalconH1Model: embed_tokens (padding_idx pad_token_id), layers, final_layernorm, rotary_emb
// (FalconH1RotaryEmbedding, the whole head_dim).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embedding_multiplier_ = c.embedding_multiplier;
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module("final_layernorm", std::make_shared<RMSNorm>(DimVector{c.hidden_size},
                                                                         c.norm_eps, true, o));
    rope_ = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                              std::string(kPrefix) + "RotaryEmbedding",
                                              models::rotary_dim(c), c.rope_theta));
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = mul(embed_->call(ids), embedding_multiplier_);
    const auto [cos_t, sin_t] = rope_->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm_->call(h);
  }

 private:
  double embedding_multiplier_ = 1;
  ModulePtr embed_, norm_;
  std::shared_ptr<models::RotaryEmbedding> rope_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

// FalconH1ForCausalLM: model, lm_head; the logits times lm_head_multiplier (FalconH1Model holds
// it, the causal LM applies it), always.
class ForCausalLM : public models::CausalLm<Backbone> {
  using Shell = models::CausalLm<Backbone>;

 public:
  ForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training)
      : Shell(std::string(kPrefix) + "ForCausalLM", c, o, training, "model.embed_tokens.weight"),
        lm_head_multiplier_(c.lm_head_multiplier) {}
  Tensor forward(const Tensor& ids) override {
    return mul(Shell::forward(ids), lm_head_multiplier_);
  }

 private:
  double lm_head_multiplier_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<ForCausalLM>(c, o, training);
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"qkv_bias", "attention_bias"},
                                    {"o_bias", "attention_bias"},
                                    {"linear_num_key_heads", "mamba_n_groups"},
                                    {"linear_num_value_heads", "mamba_n_heads"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_value_head_dim", "mamba_d_head"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"},
                                    {"linear_conv_bias", "mamba_conv_bias"},
                                    {"linear_proj_bias", "mamba_proj_bias"},
                                    {"linear_out_proj_bias", "projectors_bias"},
                                    {"linear_gated_norm", "mamba_rms_norm"},
                                    {"mlp_gate_multiplier", "mlp_multipliers"},
                                    {"mlp_down_multiplier", "mlp_multipliers"}};

}  // namespace

// Tensor parallelism: Bamba's plan (the same module names), three row-parallel outputs a layer
// (o_proj, out_proj, down_proj); tp must divide mamba_n_groups (planner/candidate/
// parallel_dims.cpp), so the one-group releases plan at tp 1 and the 34B (two groups) at 1 or 2.
// Init: FalconH1PreTrainedModel._init_weights is Bamba's (dt_bias and D one, A_log log(1..H), the
// gated norm one, Conv1d and Linear normal with zero biases, the embedding's padding row zero);
// mup_vector is a buffer, which no init rule fills.
const ModelFamily kFalconH1Family{
    .model_type = "falcon_h1",
    .hf_class_prefix = "FalconH1",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rope_parameters_by_layer_type = true,  // parse_rope reads it, then checks the factor
    .parallel_mamba = true,
    .tp_plan = models::kMamba2HybridTpPlan,
    .init_rules = models::kMamba2DecoderInitRules,
};

}  // namespace shardplan::tensor
