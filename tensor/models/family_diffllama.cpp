// diffllama (DiffLlama: Llama's decoder with the differential attention of Ye et al. 2024,
// "Differential Transformer", arXiv:2410.05258): transformers 5's DiffLlamaConfig and
// modeling_diffllama.py. h hidden_size, V vocab_size, F intermediate_size, H num_attention_heads
// and K num_key_value_heads (even) of d head_dim; in named_parameters order:
//   model.embed_tokens.weight                          [V, h]     (padding_idx pad_token_id)
//   model.layers.N.self_attn.lambda_q1, lambda_k1,     [d] each   parameters of the attention
//                           lambda_q2, lambda_k2                  itself: before its children
//   model.layers.N.self_attn.q_proj.weight             [H d, h]   (bias [H d]: attention_bias)
//   model.layers.N.self_attn.{k,v}_proj.weight         [K d, h]   (bias [K d]: attention_bias)
//   model.layers.N.self_attn.o_proj.weight             [h, H d]   (bias [h]: attention_bias)
//   model.layers.N.mlp.{gate,up}_proj.weight           [F, h]     never a bias (Mistral's MLP)
//   model.layers.N.mlp.down_proj.weight                [h, F]
//   model.layers.N.{input,post_attention}_layernorm.weight  [h]
//   model.norm.weight [h]; lm_head.weight [V, h], untied by default
// The attention's `groupnorm` is nn.RMSNorm over 2 d without a weight: a module, no parameter.
// DiffLlamaConfig's defaults fill every key a file omits (vocabulary 32,000, 2,048 wide, MLP
// 8,192, 16 layers of 32 heads, key-value heads as many as the heads, rms_norm_eps 1e-5, 2,048
// positions, lambda_std_dev 0.1).
//
// Note [Differential attention trace]
// DiffLlamaAttention pairs query head i with query head i + H / 2 (i < H / 2): one differential
// head, whose output is (A_i - lambda A_{i + H/2}) [v_a; v_{a + K/2}], 2 d wide, A_j the softmax
// map of query head j and a = i / (H / K) its key-value group, then RMS-normed over the 2 d and
// scaled by 1 - lambda_init. transformers computes it with two attention calls (whatever
// attn_implementation: eager, SDPA and FlashAttention-2 run the same forward): v is cut into its
// halves of K / 2 heads along the heads, each half tiled back to K heads (Tensor.repeat), and
// each call attends all H query heads to all K key heads at head width d, once with the first
// half's values and once with the second's. The two outputs, [B, S, H, d] each, are concatenated
// along the channels ([B, S, H, 2 d]), cut into the two halves of the heads, and the second
// half, times the scalar lambda, is subtracted from the first: [B, S, H / 2, 2 d], which merges
// to H d channels for o_proj. So a layer runs twice the attention core of a Llama layer of the
// same heads (each call's Q K^T is the same product: transformers does not share it), and the
// traced layer holds both calls (ModelFamily::attentions_per_layer 2). lambda is
// exp(sum(lambda_q1 lambda_k1)) - exp(sum(lambda_q2 lambda_k2)) + lambda_init, the sums in
// float32, lambda_init = 0.8 - 0.6 exp(-0.3 layer) by depth: work on [d] vectors, traced.
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kDiffLlamaFamily;  // listed in family_registry.cpp

namespace {

// ---- config ----------------------------------------------------------------------------------

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{.vocab_size = 32000,
                                                                    .hidden_size = 2048,
                                                                    .intermediate_size = 8192,
                                                                    .num_hidden_layers = 16,
                                                                    .num_attention_heads = 32,
                                                                    .num_key_value_heads = 32},
                                .max_position_embeddings = 2048,
                                .rms_norm_eps = 1e-5,
                                .tie_word_embeddings = false});
  // DiffLlamaConfig.__post_init__: no key-value heads means as many as the heads the file gives,
  // not the class's 32.
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  // DiffLlamaAttention raises on both: v is cut into two halves along its key-value heads, and
  // the paper defines no dropout of the differential map (the two calls share no softmax mask).
  if (c.num_key_value_heads > 0 && c.num_key_value_heads % 2 != 0) {
    f.fail("num_key_value_heads",
           std::to_string(c.num_key_value_heads) +
               " is odd; DiffLlamaAttention cuts the values into two halves along the key-value "
               "heads, expected an even count");
  }
  if (f.is_null("attention_dropout")) {
    f.fail("attention_dropout",
           "is null, which DiffLlamaAttention cannot compare with 0; expected 0 (or no key)");
  }
  if (c.attention_dropout > 0) {
    f.fail("attention_dropout", std::to_string(c.attention_dropout) +
                                    ": DiffLlama has no dropout of its differential attention "
                                    "(transformers raises); expected 0");
  }
  // xIELU's learned parameters would sit in DiffLlamaMLP's act_fn, which is not built.
  if (c.hidden_act == "xielu") {
    f.fail("hidden_act",
           "\"xielu\": its learned parameters inside DiffLlamaMLP are not built; expected an "
           "activation without parameters (silu)");
  }
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  // torch.normal(0, lambda_std_dev) in DiffLlamaAttention.__init__: a number >= 0, never None.
  if (f.is_null("lambda_std_dev")) {
    f.fail("lambda_std_dev", "is null; expected the lambdas' init standard deviation (0.1)");
  }
  c.lambda_std_dev = f.number("lambda_std_dev", 0.1);
  if (!std::isfinite(c.lambda_std_dev) || c.lambda_std_dev < 0) {
    f.fail("lambda_std_dev",
           std::to_string(c.lambda_std_dev) + ", expected a finite standard deviation >= 0");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["lambda_std_dev"] = c.lambda_std_dev;
}

// ---- modules ---------------------------------------------------------------------------------

// lambda_init_fn: 0.8 - 0.6 exp(-0.3 layer) (Ye et al. 2024, §2.1).
double lambda_init(int64_t layer) {
  return 0.8 - 0.6 * std::exp(-0.3 * static_cast<double>(layer));
}

// Note [Differential attention trace].
class Attention : public models::AttentionBlock {
 public:
  Attention(const ModelConfig& c, int64_t layer, const TensorOptions& o)
      : AttentionBlock("DiffLlamaAttention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        lambda_init_(lambda_init(layer)),
        lambda_std_(c.lambda_std_dev) {
    // A config built in code skips parse's check; transformers' constructor raises the same.
    SP_CHECK(kv_heads_ % 2 == 0, "DiffLlama needs an even num_key_value_heads (its values are cut ",
             "into two halves along the key-value heads), got ", kv_heads_);
    SP_CHECK(!(c.attention_dropout > 0), "DiffLlama has no attention dropout, got ",
             c.attention_dropout);
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    // DiffLlamaAttention's order: the projections, the four lambdas, the weightless groupnorm.
    q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    for (const char* name : kLambdas) register_parameter(name, empty({head_dim_}, o));
    groupnorm = register_module(
        "groupnorm", std::make_shared<RMSNorm>(DimVector{2 * head_dim_}, c.norm_eps, false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    // The three projections, then RoPE on q and k: DiffLlamaAttention's op order.
    Tensor q = models::split_heads(q_proj->call(x), heads_, head_dim_);
    Tensor k = models::split_heads(k_proj->call(x), kv_heads_, head_dim_);
    const Tensor v = models::split_heads(v_proj->call(x), kv_heads_, head_dim_);
    q = models::apply_rotary(q, cos_t, sin_t);
    k = models::apply_rotary(k, cos_t, sin_t);
    // Each half of the key-value heads tiled back to K heads (repeat(1, 2, 1, 1): one copy).
    const std::vector<Tensor> halves = chunk(v, 2, 1);
    const bool gqa = kv_heads_ != heads_;
    std::vector<Tensor> outs;
    for (const Tensor& half : halves) {
      const Tensor vh = cat({half, half}, 1);
      // The attention interface hands back [B, S, H, d] (FlashAttention's layout; SDPA's path
      // transposes and copies, which the concatenation below stands for).
      outs.push_back(transpose(scaled_dot_product_attention(q, k, vh, Tensor(), 0.0,
                                                            /*is_causal=*/true, std::nullopt, gqa),
                               1, 2));
    }
    const std::vector<Tensor> pair = chunk(cat(outs, -1), 2, 2);  // [B, S, H / 2, 2 d] each
    const Tensor lambda = add(sub(lambda_term("lambda_q1", "lambda_k1", x.dtype()),
                                  lambda_term("lambda_q2", "lambda_k2", x.dtype())),
                              lambda_init_);
    const Tensor diff = sub(pair[0], mul(lambda, pair[1]));
    const Tensor normed = mul(groupnorm->call(diff), 1.0 - lambda_init_);
    return o_proj->call(reshape(normed, {b, s, heads_ * head_dim_}));
  }
  void reset_parameters(uint64_t seed) override {
    for (const char* name : kLambdas) init_member_normal(name, seed, 0.0, lambda_std_);
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  ModulePtr groupnorm;

 private:
  static constexpr const char* kLambdas[] = {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"};
  // exp(sum(lambda_q lambda_k)), the sum in float32, cast to the activations' dtype: a scalar.
  Tensor lambda_term(const char* q, const char* k, DType dtype) const {
    return to(exp(sum(mul(parameter(q), parameter(k)), {-1}, false, DType::kFloat32)), dtype);
  }
  int64_t heads_, kv_heads_, head_dim_;
  double lambda_init_, lambda_std_;
};

// Made empty and filled once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("DiffLlamaDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o) {
    const int64_t h = c.hidden_size;
    self_attn = register_module("self_attn", std::make_shared<Attention>(c, index, o));
    mlp =
        register_module("mlp", std::make_shared<models::GatedMlp>(
                                   "DiffLlamaMLP", h, c.intermediate_size, false, c.hidden_act, o));
    input_layernorm = register_module("input_layernorm",
                                      std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    post_attention_layernorm = register_module(
        "post_attention_layernorm", std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
  }
  // Llama's pre-norm layer: each half reads its norm of the stream and adds back to it.
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor r = add(x, self_attn->run(input_layernorm->call(x), cos_t, sin_t));
    return add(r, mlp->call(post_attention_layernorm->call(r)));
  }
  std::shared_ptr<Attention> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm;
};

// DiffLlamaModel, empty until build(), like DecoderLayer (models::CausalLm fills it).
class Model : public Module {
 public:
  Model() : Module("DiffLlamaModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool /*training*/) {
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    rotary_emb = register_module(
        "rotary_emb", std::make_shared<models::RotaryEmbedding>(
                          "DiffLlamaRotaryEmbedding", models::rotary_dim(c), c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens;
  ModulePtr norm;
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Model>>("DiffLlamaForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

// Note [DiffLlama tensor parallelism]
// Megatron-LM's split (Shoeybi et al. 2019, §3) by differential heads. Differential head i
// (Note [Differential attention trace]) reads query heads i and i + H / 2, key heads a and
// a + K / 2 and value heads a and a + K / 2 (a = i / (H / K)): one head from each half of every
// projection's output. So q_proj, k_proj and v_proj are each split as two equal projections
// side by side (fused_parts 2, _StridedShard(0, 2)): rank r of t holds the r-th t-th of each
// half, hence whole differential heads with their keys and values, and runs the cut, the tiling,
// both calls and the subtraction on its own heads; its differential heads are the r-th t-th of
// o_proj's input (H / 2 heads of 2 d in order), which the row-parallel o_proj's plain split
// hands it. That holds when t divides K / 2 (and so H / 2); the planner accepts any t dividing
// H and K, so a t past K / 2 prices the split by the same FLOPs without such a layout (NOTES).
// The gated MLP as Llama's; the embedding split by vocabulary rows, lm_head by vocabulary; the
// lambdas and the norms replicated (no rule).
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.q_proj", "colwise", 2},
                                          {"model.layers.*.self_attn.k_proj", "colwise", 2},
                                          {"model.layers.*.self_attn.v_proj", "colwise", 2},
                                          {"model.layers.*.self_attn.o_proj", "rowwise"},
                                          {"model.layers.*.mlp.gate_proj", "colwise"},
                                          {"model.layers.*.mlp.up_proj", "colwise"},
                                          {"model.layers.*.mlp.down_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

// DiffLlamaPreTrainedModel._init_weights: PreTrainedModel's (Linear weights normal(0,
// initializer_range) and biases zero, the embedding's rows normal with the padding_idx row zero,
// RMSNorm weights one), then each attention's four lambdas normal(0, lambda_std_dev).
constexpr InitRule kLambdaInitRules[] = {
    {"DiffLlamaAttention", "lambda_q1", InitFill::kNormalLambdaStd},
    {"DiffLlamaAttention", "lambda_k1", InitFill::kNormalLambdaStd},
    {"DiffLlamaAttention", "lambda_q2", InitFill::kNormalLambdaStd},
    {"DiffLlamaAttention", "lambda_k2", InitFill::kNormalLambdaStd}};
constexpr auto kInitRules =
    models::concat_init_rules(kLambdaInitRules, models::kRotaryDecoderInitRules);

// Errors name the file's keys.
constexpr FieldRename kRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

}  // namespace

const ModelFamily kDiffLlamaFamily{
    .model_type = "diffllama",
    .hf_class_prefix = "DiffLlama",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .attentions_per_layer = 2,  // Note [Differential attention trace]: two calls a layer
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
