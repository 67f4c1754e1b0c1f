// xlstm (NX-AI's xLSTM 7B: Beck et al. 2025, "xLSTM 7B: A Recurrent LLM for Fast and Efficient
// Inference", arXiv 2503.13427; its mLSTM is Beck et al. 2024, "xLSTM: Extended Long Short-Term
// Memory", NeurIPS 2024). transformers 5's xLSTMConfig and modeling_xlstm.py: xLSTMForCausalLM's
// `backbone` (xLSTMModel) holds `embeddings` (no padding_idx), `blocks` and `out_norm`, then
// lm_head, never tied (the class declares no tied weights, whatever tie_word_embeddings says); the
// logits are cast to float32 and soft-capped, cap * tanh(logits / cap) with cap =
// output_logit_soft_cap. Each xLSTMBlock registers norm_mlstm, mlstm_layer, norm_ffn and ffn and
// runs
//   x = x + mlstm_layer(norm_mlstm(x)),   then x + ffn(norm_ffn(x)),
// its norms xLSTMRMSNorm (a weight, and a bias with use_bias). h hidden, H = num_heads heads of K =
// int(h qk_dim_factor) / H query-key and V = int(h v_dim_factor) / H value channels, F the
// feed-forward's width (h ffn_proj_factor rounded up to ffn_round_up_to_multiple_of). With
// weight_mode "single" (xLSTM-7B's), in named_parameters order:
//   backbone.embeddings.weight [vocab, h]
//   backbone.blocks.N.norm_mlstm.weight [h]                                (+ bias: use_bias)
//   backbone.blocks.N.mlstm_layer.q.weight, k.weight [H K, h], v.weight, ogate_preact.weight
//       [H V, h]                                                           (+ biases: use_bias)
//   backbone.blocks.N.mlstm_layer.igate_preact, fgate_preact: weight [H, h], bias [H] (always)
//   backbone.blocks.N.mlstm_layer.multihead_norm.weight [H V]              (+ bias: use_bias)
//   backbone.blocks.N.mlstm_layer.out_proj.weight [h, H V]                 (+ bias: use_bias)
//   backbone.blocks.N.norm_ffn.weight [h]; ffn.proj_up_gate.weight, ffn.proj_up.weight [F, h],
//       ffn.proj_down.weight [h, F]                                        (+ biases: use_bias)
//   backbone.out_norm.weight [h]                                           (never a bias)
//   lm_head.weight [vocab, h]
// With weight_mode "fused" mlstm_layer.qkv_opreact [2 H K + 2 H V, h] ([q | k | v | o]) and
// ifgate_preact [2 H, h] ([i | f], its bias always) stand for the six projections, and
// ffn.proj_up_gate_z [2 F, h] ([gate | up]) for the two.
// ModelConfig keeps the layers kLinear (every block an mLSTM and a feed-forward), H in
// num_attention_heads, num_key_value_heads and linear_num_key_heads / linear_num_value_heads, K in
// head_dim and linear_key_head_dim, V in linear_value_head_dim (no convolution:
// linear_conv_kernel_dim 0, ModelFamily::mlstm_mixer), F in intermediate_size, use_bias in
// qkv_bias, o_bias and mlp_bias, output_logit_soft_cap in final_logit_softcapping and the weight
// mode in fused_projections. Class defaults (xLSTM-7B's sizes): vocabulary 50,304, h 4,096, 32
// blocks, 8 heads, qk_dim_factor 0.5, v_dim_factor 1, ffn_proj_factor 2.667 rounded to 64 (F
// 10,944), norm_eps 1e-6, gate_soft_cap 15, output_logit_soft_cap 30, no biases.
//
// Note [mLSTM layer trace]
// As a trainer runs transformers' xLSTMLayer: with the xlstm package installed transformers'
// xLSTMBlock is that package's mLSTMBlock (the same modules and names), whose backend calls the
// mlstm_kernels kernel that chunkwise_kernel names (the Hub file's chunkwise--triton_xl_chunk,
// Tiled Flash Linear Attention, the xLSTM 7B paper's kernels). Without the package transformers
// runs its own PyTorch fallback, mlstm_chunkwise_native_autograd, whatever chunkwise_kernel says: a
// Python loop over the chunks whose intermediates autograd keeps, not what trains a 7B model. The
// trace: the projections; the gates' soft cap, cap tanh(x / cap), on the [B, T, H]
// preactivations; q, k and v viewed as heads; the chunkwise mLSTM as one fused op
// (mlstm_chunkwise, Note [mLSTM chunkwise work] in tensor/ops.h) in the call of `mlstm_backend`
// (xLSTMBackend, no parameters), which takes the heads token-major: the layer's transposes to [B,
// H, T, *] and the kernel's contiguous copies of them (the inputs' bytes, which it keeps for
// backward) are not traced; the multi-head LayerNorm (each head normed over its V channels without
// affine, then the [H V] weight); sigmoid(o) times it; out_proj. Under tensor parallelism
// (kTpPlan) every projection's rows are in head order (q: head 0's K rows, then head 1's, ...;
// the gates: one row per head), so a contiguous column split hands each rank whole heads when tp
// divides H (the planner's rule): the kernel, the norm and the output gate run on the rank's
// heads and out_proj is row-parallel, one all-reduce a half. The gates read the block's input,
// not q, k and v, for that reason (the xLSTM 7B paper: no extra all-reduce per mLSTM block).
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/mamba_lm.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kXlstmFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "xLSTM";

// The widest projection a factor may make (2^31 rows): beyond what validate() lets any model
// hold, and small enough that widths times heads stay exact in int64 and in a double.
constexpr double kWidthBound = 2147483648.0;

// Python's float floor division a // b for b > 0 (CPython's float_floor_div: fmod, then the
// quotient rounded to the nearest integer it is within 0.5 of), which floor(a / b) can miss by one
// where a / b rounds up to an integer.
double python_floor_div(double a, double b) {
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (mod < 0) != (b < 0)) div -= 1.0;
  if (div == 0) return 0.0;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

// int(hidden_size * factor), as xLSTMLayer sizes q, k (qk_dim_factor) and v (v_dim_factor): a float
// product, truncated.
int64_t scaled_width(const ConfigFields& f, const char* key, int64_t hidden, double factor) {
  const double x = static_cast<double>(hidden) * factor;
  if (!std::isfinite(factor) || !(x >= 1) || !(x < kWidthBound)) {
    f.fail(key, std::to_string(factor) + " makes int(hidden_size x " + key +
                    ") = " + std::to_string(x) + " channels, expected 1 to 2^31");
  }
  return static_cast<int64_t>(x);
}

// The factor the file writes for a width: width / hidden, nudged up where the product rounds below
// the width (30 / 44 x 44 = 29.999...), so that int(hidden x factor) is the width again.
double factor_of(int64_t width, int64_t hidden) {
  double f = static_cast<double>(width) / static_cast<double>(hidden);
  while (static_cast<int64_t>(static_cast<double>(hidden) * f) < width) {
    f = std::nextafter(f, HUGE_VAL);
  }
  return f;
}

// A soft cap: a positive number (the class types it float, so null is refused), which the layer or
// the head divides by.
double soft_cap_value(const ConfigFields& f, const char* key, double dflt) {
  if (f.is_null(key)) f.fail(key, "null, expected a positive cap (the model always applies it)");
  const double cap = f.number(key, dflt);
  if (!(cap > 0) || !std::isfinite(cap)) {
    f.fail(key, std::to_string(cap) + ", expected a positive cap: cap * tanh(x / cap)");
  }
  return cap;
}

// One of the spellings a Literal-typed key of xLSTMConfig allows.
std::string one_of(const ConfigFields& f, const char* key, const char* dflt,
                   const std::vector<std::string>& allowed) {
  const std::string v = f.string(key, dflt);
  std::string list;
  for (const std::string& a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "\"" : ", \"") + a + "\"";
  }
  f.fail(key, "\"" + v + "\" is not one of " + list + " (xLSTMConfig's values)");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 50304);
  // __post_init__: a null hidden_size is embedding_dim, a null or absent embedding_dim the hidden
  // size. xLSTMModel embeds at embedding_dim and builds every block at hidden_size (whose class
  // default 4,096 stands where the file has no hidden_size): two widths cannot run.
  const std::optional<int64_t> hidden = f.has("hidden_size")
                                            ? std::optional<int64_t>(f.integer("hidden_size"))
                                        : f.is_null("hidden_size") ? std::nullopt
                                                                   : std::optional<int64_t>(4096);
  const std::optional<int64_t> embedding = f.opt_integer("embedding_dim");
  if (!hidden && !embedding) {
    f.fail("hidden_size", "null and no embedding_dim; expected the model's width");
  }
  c.hidden_size = hidden ? *hidden : *embedding;
  if (embedding && *embedding != c.hidden_size) {
    f.fail("embedding_dim",
           std::to_string(*embedding) + " beside hidden_size " + std::to_string(c.hidden_size) +
               (f.has("hidden_size") ? "" : " (the class default: the file has none)") +
               ": xLSTMModel embeds at embedding_dim and builds the blocks at hidden_size, which "
               "cannot run; expected one width");
  }
  if (c.hidden_size <= 0) {
    f.fail(f.has("hidden_size") ? "hidden_size" : "embedding_dim",
           std::to_string(c.hidden_size) + ", expected a positive width");
  }
  // The same for the depth: xLSTMModel builds num_blocks blocks, while the cache and the output
  // projections' initialization count num_hidden_layers (class default 32).
  const std::optional<int64_t> layers =
      f.has("num_hidden_layers")       ? std::optional<int64_t>(f.integer("num_hidden_layers"))
      : f.is_null("num_hidden_layers") ? std::nullopt
                                       : std::optional<int64_t>(32);
  const std::optional<int64_t> blocks = f.opt_integer("num_blocks");
  if (!layers && !blocks) {
    f.fail("num_hidden_layers", "null and no num_blocks; expected the number of blocks");
  }
  c.num_hidden_layers = blocks ? *blocks : *layers;
  // Bounded before the per-layer lists are made (validate() would refuse it only afterwards).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail(blocks ? "num_blocks" : "num_hidden_layers",
           std::to_string(c.num_hidden_layers) + " blocks, expected 1.." +
               std::to_string(kMaxLayers) +
               " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  if (blocks && layers && *blocks != *layers) {
    f.fail("num_blocks",
           std::to_string(*blocks) + " beside num_hidden_layers " + std::to_string(*layers) +
               (f.has("num_hidden_layers") ? "" : " (the class default: the file has none)") +
               ": xLSTMModel builds num_blocks blocks but sizes its cache (and the output "
               "projections' initialization) by num_hidden_layers; expected one count");
  }

  // The mLSTM's heads and widths: xLSTMLayer's int(h x factor), reshaped into num_heads heads.
  const int64_t heads = f.integer("num_heads", 8);
  if (heads <= 0) f.fail("num_heads", std::to_string(heads) + ", expected a positive count");
  const int64_t qk =
      scaled_width(f, "qk_dim_factor", c.hidden_size, f.number("qk_dim_factor", 0.5));
  const int64_t v = scaled_width(f, "v_dim_factor", c.hidden_size, f.number("v_dim_factor", 1.0));
  for (const auto& [key, width] : {std::pair{"qk_dim_factor", qk}, std::pair{"v_dim_factor", v}}) {
    if (width % heads != 0) {
      f.fail(key, "int(hidden_size x " + std::string(key) + ") = " + std::to_string(width) +
                      " is not a multiple of num_heads " + std::to_string(heads) +
                      " (xLSTMLayer reshapes it into the heads)");
    }
  }
  c.num_attention_heads = c.num_key_value_heads = heads;
  c.linear_num_key_heads = c.linear_num_value_heads = heads;
  c.head_dim = c.linear_key_head_dim = qk / heads;
  c.linear_value_head_dim = v / heads;
  c.linear_conv_kernel_dim = 0;  // the mLSTM has no convolution (ModelFamily::mlstm_mixer)
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kLinear);

  // xLSTMFeedForward: round_up_to_next_multiple_of(h x ffn_proj_factor, multiple), Python's
  // int(((x + m - 1) // m) * m) on the float product.
  const double ffn_factor = f.number("ffn_proj_factor", 2.667);
  const int64_t multiple = f.integer("ffn_round_up_to_multiple_of", 64);
  if (multiple <= 0 || multiple > (int64_t{1} << 30)) {
    f.fail("ffn_round_up_to_multiple_of", std::to_string(multiple) + ", expected 1 to 2^30");
  }
  const double x = static_cast<double>(c.hidden_size) * ffn_factor;
  if (!std::isfinite(ffn_factor) || !(x >= 1) || !(x < kWidthBound)) {
    f.fail("ffn_proj_factor", std::to_string(ffn_factor) +
                                  " makes a feed-forward of hidden_size x ffn_proj_factor = " +
                                  std::to_string(x) + " channels, expected 1 to 2^31");
  }
  const double m = static_cast<double>(multiple);
  const double rounded = python_floor_div(x + m - 1, m) * m;
  if (!(rounded < kWidthBound)) {
    // The bound again after the rounding, so that the width reads back (to_hf_json).
    f.fail("ffn_round_up_to_multiple_of",
           std::to_string(multiple) +
               " rounds hidden_size x ffn_proj_factor = " + std::to_string(x) + " up to " +
               std::to_string(rounded) + " channels, expected fewer than 2^31");
  }
  c.intermediate_size = static_cast<int64_t>(rounded);

  const bool bias = f.boolean("use_bias", false);
  c.qkv_bias = c.o_bias = c.mlp_bias = bias;
  c.norm_eps = f.number("norm_eps", 1e-6);
  // The feed-forward's nn.SiLU, fixed; no position limit (no such key: a recurrence).
  c.hidden_act = "silu";
  c.max_position_embeddings = models::kNoPositionLimit;
  // xLSTMForCausalLM declares no tied weights: lm_head is its own whatever the file says.
  (void)f.boolean("tie_word_embeddings", false);
  c.tie_word_embeddings = false;
  c.final_logit_softcapping = soft_cap_value(f, "output_logit_soft_cap", 30.0);
  (void)soft_cap_value(f, "gate_soft_cap", 15.0);  // the same elementwise work at any cap
  c.fused_projections = one_of(f, "weight_mode", "single", {"single", "fused"}) == "fused";

  // The backend's settings. chunkwise_kernel picks the training kernel: any chunkwise one is the
  // chunkwise form priced here (Note [mLSTM chunkwise work]); a parallel one ("parallel--...") is
  // the quadratic form over the whole sequence, which is not.
  const std::string kernel = f.string("chunkwise_kernel", "chunkwise--native_autograd");
  if (!kernel.starts_with("chunkwise--")) {
    f.fail("chunkwise_kernel",
           "\"" + kernel +
               "\" is not a chunkwise kernel; shardplan prices the chunkwise mLSTM (mlstm_kernels' "
               "chunkwise--triton_xl_chunk), expected a \"chunkwise--...\" kernel");
  }
  (void)f.string("sequence_kernel", "native_sequence__native");  // inference only
  (void)f.string("step_kernel", "native");                       // inference only
  (void)one_of(f, "mode", "inference", {"train", "train_with_padding", "inference"});
  if (f.integer("chunk_size", 64) <= 0) {
    f.fail("chunk_size", "must be positive, got " + f.raw("chunk_size").dump());
  }
  for (const char* key : {"autocast_kernel_dtype", "inference_state_dtype"}) {
    (void)one_of(f, key, key == std::string_view("autocast_kernel_dtype") ? "bfloat16" : "float32",
                 {"float32", "bfloat16", "float16"});
  }
  if (f.integer("max_inference_chunksize", 16384) <= 0) {
    f.fail("max_inference_chunksize",
           "must be positive, got " + f.raw("max_inference_chunksize").dump());
  }
  // Read, changing nothing that is built: xLSTMModel makes out_norm and applies it whatever
  // add_out_norm says; the reductions' precision, the kernel's epsilon, the cache switches.
  for (const char* key :
       {"add_out_norm", "norm_reduction_force_float32", "return_last_states", "use_cache"}) {
    (void)f.boolean(key, true);
  }
  (void)f.number("eps", 1e-6);
  models::pad_token_id_or(f, c, 1);  // not the embedding's padding_idx: xLSTM has none
}

// What parse guarantees, checked again for a config built in code (the planner copies configs and
// cuts their layers; a field set by hand could ask for what xLSTM does not build).
void check_layout(const ModelConfig& c) {
  SP_CHECK(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
           "xlstm: ", c.layer_types.size(), " layer types for ", c.num_hidden_layers,
           " blocks; expected one per block");
  for (const AttentionType t : c.layer_types) {
    SP_CHECK(t == AttentionType::kLinear, "xlstm: a block attends ", to_string(t),
             "; expected the mLSTM (linear_attention) in every block");
  }
  const int64_t heads = c.num_attention_heads;
  SP_CHECK(heads > 0 && c.num_key_value_heads == heads && c.linear_num_key_heads == heads &&
               c.linear_num_value_heads == heads && c.linear_key_head_dim == c.head_dim &&
               c.head_dim > 0 && c.linear_value_head_dim > 0,
           "xlstm: an mLSTM of ", heads, " heads (key-value ", c.num_key_value_heads, ", linear ",
           c.linear_num_key_heads, " and ", c.linear_num_value_heads, ") of ", c.head_dim,
           " query-key (linear ", c.linear_key_head_dim, ") and ", c.linear_value_head_dim,
           " value channels; expected num_heads everywhere and head_dim as linear_key_head_dim");
  SP_CHECK(c.qkv_bias == c.o_bias && c.qkv_bias == c.mlp_bias,
           "xlstm: biases on some projections only; use_bias sets them all");
  SP_CHECK(c.final_logit_softcapping > 0, "xlstm: output_logit_soft_cap ",
           c.final_logit_softcapping, "; expected a positive cap (the logits are always capped)");
  SP_CHECK(!c.tie_word_embeddings,
           "xlstm: tied embeddings; xLSTMForCausalLM declares no tied weights");
  SP_CHECK(c.num_local_experts == 0 && !c.rope_scaling && c.nope_layers.empty(),
           "xlstm: experts, a scaled RoPE or NoPE layers; xLSTM has none");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  check_layout(c);
  const int64_t h = c.hidden_size, heads = c.num_attention_heads;
  j["hidden_size"] = h;
  j["embedding_dim"] = h;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_blocks"] = c.num_hidden_layers;
  j["num_heads"] = heads;
  j["qk_dim_factor"] = factor_of(heads * c.head_dim, h);
  j["v_dim_factor"] = factor_of(heads * c.linear_value_head_dim, h);
  // A multiple of 1 rounds nothing: int(h x factor) is the width again.
  j["ffn_proj_factor"] = factor_of(c.intermediate_size, h);
  j["ffn_round_up_to_multiple_of"] = 1;
  j["use_bias"] = c.qkv_bias;
  j["norm_eps"] = c.norm_eps;
  j["output_logit_soft_cap"] = c.final_logit_softcapping;
  j["weight_mode"] = c.fused_projections ? "fused" : "single";
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

// xLSTMRMSNorm: x / rms(x) (reduced in float32) times the weight, plus the bias with use_bias.
class RmsNorm : public Module {
 public:
  RmsNorm(int64_t dim, double eps, bool bias, const TensorOptions& o)
      : Module(std::string(kPrefix) + "RMSNorm"), dim_(dim), eps_(eps) {
    register_parameter("weight", empty({dim}, o));
    register_parameter("bias", bias ? empty({dim}, o) : Tensor());
  }
  Tensor forward(const Tensor& x) override {
    const Tensor y = rms_norm(x, {dim_}, parameter("weight"), eps_);
    return parameter("bias").defined() ? add(y, parameter("bias")) : y;
  }
  void reset_parameters(uint64_t /*seed*/) override {
    init_member_constant("weight", 1.0);
    if (parameter("bias").defined()) init_member_constant("bias", 0.0);
  }

 private:
  int64_t dim_;
  double eps_;
};

// xLSTMMultiHeadLayerNorm: [B, T, H, V] normed per head over its V channels (mean-subtracted, no
// affine), merged to [B, T, H V], then the [H V] weight (and bias).
class MultiHeadLayerNorm : public Module {
 public:
  MultiHeadLayerNorm(int64_t heads, int64_t head_dim, double eps, bool bias, const TensorOptions& o)
      : Module(std::string(kPrefix) + "MultiHeadLayerNorm"),
        heads_(heads),
        head_dim_(head_dim),
        eps_(eps) {
    register_parameter("weight", empty({heads * head_dim}, o));
    register_parameter("bias", bias ? empty({heads * head_dim}, o) : Tensor());
  }
  Tensor forward(const Tensor& x) override {
    const Tensor normed = layer_norm(x, {head_dim_}, Tensor(), Tensor(), eps_);
    const Tensor y =
        mul(reshape(normed, {x.size(0), x.size(1), heads_ * head_dim_}), parameter("weight"));
    return parameter("bias").defined() ? add(y, parameter("bias")) : y;
  }
  void reset_parameters(uint64_t /*seed*/) override {
    init_member_constant("weight", 1.0);
    if (parameter("bias").defined()) init_member_constant("bias", 0.0);
  }

 private:
  int64_t heads_, head_dim_;
  double eps_;
};

// xLSTMBackend: no parameters; the call in which the chunkwise kernel runs.
class Backend : public Module {
 public:
  Backend() : Module(std::string(kPrefix) + "Backend") {}
  Tensor run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& i, const Tensor& f) {
    CallScope scope(*this);
    return mlstm_chunkwise(q, k, v, i, f);
  }
};

// cap * tanh(x / cap), transformers' soft_cap.
Tensor soft_cap(const Tensor& x, double cap) { return mul(tanh(div(x, cap)), cap); }

// xLSTMLayer (Note [mLSTM layer trace]).
class MlstmLayer : public Module {
 public:
  MlstmLayer(const ModelConfig& c, double gate_cap, const TensorOptions& o)
      : Module(std::string(kPrefix) + "Layer"),
        heads_(c.num_attention_heads),
        qk_head_(c.head_dim),
        v_head_(c.linear_value_head_dim),
        gate_cap_(gate_cap),
        fused_(c.fused_projections) {
    const int64_t h = c.hidden_size, qk = heads_ * qk_head_, v = heads_ * v_head_;
    const bool bias = c.qkv_bias;
    if (fused_) {
      register_module("qkv_opreact", std::make_shared<Linear>(h, 2 * qk + 2 * v, bias, o));
      register_module("ifgate_preact", std::make_shared<Linear>(h, 2 * heads_, true, o));
    } else {
      register_module("q", std::make_shared<Linear>(h, qk, bias, o));
      register_module("k", std::make_shared<Linear>(h, qk, bias, o));
      register_module("v", std::make_shared<Linear>(h, v, bias, o));
      register_module("ogate_preact", std::make_shared<Linear>(h, v, bias, o));
      register_module("igate_preact", std::make_shared<Linear>(h, heads_, true, o));
      register_module("fgate_preact", std::make_shared<Linear>(h, heads_, true, o));
    }
    backend_ = register_module("mlstm_backend", std::make_shared<Backend>());
    register_module("multihead_norm",
                    std::make_shared<MultiHeadLayerNorm>(heads_, v_head_, c.norm_eps, bias, o));
    register_module("out_proj", std::make_shared<Linear>(v, h, c.o_bias, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), t = x.size(1), qk = heads_ * qk_head_, v = heads_ * v_head_;
    Tensor q, k, val, o_preact, i_preact, f_preact;
    if (fused_) {
      // tensor_split at qk, 2 qk and 2 qk + v: views of the one product.
      const Tensor all = child("qkv_opreact")->call(x);
      q = narrow(all, -1, 0, qk);
      k = narrow(all, -1, qk, qk);
      val = narrow(all, -1, 2 * qk, v);
      o_preact = narrow(all, -1, 2 * qk + v, v);
      const Tensor gates = soft_cap(child("ifgate_preact")->call(x), gate_cap_);
      i_preact = narrow(gates, -1, 0, heads_);
      f_preact = narrow(gates, -1, heads_, heads_);
    } else {
      q = child("q")->call(x);
      k = child("k")->call(x);
      val = child("v")->call(x);
      o_preact = child("ogate_preact")->call(x);
      i_preact = soft_cap(child("igate_preact")->call(x), gate_cap_);
      f_preact = soft_cap(child("fgate_preact")->call(x), gate_cap_);
    }
    const Tensor h =
        backend_->run(reshape(q, {b, t, heads_, qk_head_}), reshape(k, {b, t, heads_, qk_head_}),
                      reshape(val, {b, t, heads_, v_head_}), i_preact, f_preact);
    const Tensor h_norm = child("multihead_norm")->call(h);
    return child("out_proj")->call(mul(sigmoid(o_preact), h_norm));
  }

 private:
  int64_t heads_, qk_head_, v_head_;
  double gate_cap_;
  bool fused_;
  std::shared_ptr<Backend> backend_;
};

// xLSTMFeedForward: proj_down(silu(gate) * up).
class FeedForward : public Module {
 public:
  FeedForward(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "FeedForward"),
        width_(c.intermediate_size),
        fused_(c.fused_projections) {
    const int64_t h = c.hidden_size;
    if (fused_) {
      register_module("proj_up_gate_z", std::make_shared<Linear>(h, 2 * width_, c.mlp_bias, o));
    } else {
      register_module("proj_up_gate", std::make_shared<Linear>(h, width_, c.mlp_bias, o));
      register_module("proj_up", std::make_shared<Linear>(h, width_, c.mlp_bias, o));
    }
    register_module("proj_down", std::make_shared<Linear>(width_, h, c.mlp_bias, o));
  }
  Tensor forward(const Tensor& x) override {
    Tensor gated;
    if (fused_) {
      const Tensor gz = child("proj_up_gate_z")->call(x);
      gated = mul(silu(narrow(gz, -1, 0, width_)), narrow(gz, -1, width_, width_));
    } else {
      gated = mul(silu(child("proj_up_gate")->call(x)), child("proj_up")->call(x));
    }
    return child("proj_down")->call(gated);
  }

 private:
  int64_t width_;
  bool fused_;
};

// xLSTMBlock, empty until build() (Note [Filling repeated blocks after registration] in
// blocks.h).
class Block : public Module {
 public:
  Block() : Module(std::string(kPrefix) + "Block") {}
  void build(const ModelConfig& c, double gate_cap, const TensorOptions& o) {
    const int64_t h = c.hidden_size;
    const bool bias = c.qkv_bias;
    norm_mlstm_ = register_module("norm_mlstm", std::make_shared<RmsNorm>(h, c.norm_eps, bias, o));
    mlstm_layer_ = register_module("mlstm_layer", std::make_shared<MlstmLayer>(c, gate_cap, o));
    norm_ffn_ = register_module("norm_ffn", std::make_shared<RmsNorm>(h, c.norm_eps, bias, o));
    ffn_ = register_module("ffn", std::make_shared<FeedForward>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor r = add(x, mlstm_layer_->call(norm_mlstm_->call(x)));
    return add(r, ffn_->call(norm_ffn_->call(r)));
  }

 private:
  ModulePtr norm_mlstm_, mlstm_layer_, norm_ffn_, ffn_;
};

// xLSTMModel: embeddings, blocks, out_norm (applied always, a weight only).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, double gate_cap, const TensorOptions& o) {
    embeddings_ =
        register_module("embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto blocks = register_module("blocks", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks_.push_back(blocks->push_back(std::make_shared<Block>()));
    }
    out_norm_ =
        register_module("out_norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, false, o));
    for (const auto& block : blocks_) block->build(c, gate_cap, o);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embeddings_->call(ids);
    for (const auto& block : blocks_) h = block->call(h);
    return out_norm_->call(h);
  }

 private:
  ModulePtr embeddings_, out_norm_;
  std::vector<std::shared_ptr<Block>> blocks_;
};

// xLSTMForCausalLM: lm_head over the stream cast to its dtype, the logits cast to float32 and
// soft-capped (three float32 passes over [B, T, vocab], as transformers runs them).
class ForCausalLm : public Module {
 public:
  ForCausalLm(const ModelConfig& c, double gate_cap, const TensorOptions& o)
      : Module(std::string(kPrefix) + "ForCausalLM"), cap_(c.final_logit_softcapping) {
    auto backbone = register_module("backbone", std::make_shared<Backbone>());
    lm_head_ =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    backbone_ = backbone;
    backbone->build(c, gate_cap, o);
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor h = backbone_->call(ids);
    const Tensor logits = lm_head_->call(to(h, lm_head_->weight().dtype()));
    return soft_cap(to(logits, DType::kFloat32), cap_);
  }

 private:
  double cap_;
  ModulePtr backbone_;
  std::shared_ptr<Linear> lm_head_;
};

// gate_soft_cap is not kept (ModelConfig has no field for it and its value changes no work): the
// model is built at the class's 15.
constexpr double kGateSoftCap = 15.0;

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/) {
  check_layout(c);
  return std::make_shared<ForCausalLm>(c, kGateSoftCap, o);
}

constexpr FieldRename kRenames[] = {{"num_hidden_layers", "num_blocks"},
                                    {"num_attention_heads", "num_heads"},
                                    {"num_key_value_heads", "num_heads"},
                                    {"head_dim", "qk_dim_factor"},
                                    {"intermediate_size", "ffn_proj_factor"},
                                    {"linear_num_key_heads", "num_heads"},
                                    {"linear_num_value_heads", "num_heads"},
                                    {"linear_key_head_dim", "qk_dim_factor"},
                                    {"linear_value_head_dim", "v_dim_factor"},
                                    {"qkv_bias", "use_bias"},
                                    {"o_bias", "use_bias"},
                                    {"mlp_bias", "use_bias"},
                                    {"final_logit_softcapping", "output_logit_soft_cap"},
                                    {"fused_projections", "weight_mode"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3) by heads (Note [mLSTM layer trace]): q, k, v, the
// output gate and the input and forget gates column-parallel, each rank whole heads of each;
// out_proj row-parallel; the feed-forward's gate and up column-parallel, proj_down row-parallel;
// the embedding by vocabulary rows, lm_head by vocabulary; the norms (the multi-head norm's [H V]
// weight too) replicated. weight_mode "fused": ifgate_preact's two equal halves [i | f] and
// proj_up_gate_z's [gate | up] are split each (fused_parts 2); qkv_opreact's parts [q | k | v |
// o] are H K, H K, H V and H V rows, unequal unless K = V, so no placement splits each by head
// (fused_parts takes equal parts) and it is split evenly by rows, as gpt_bigcode's multi-query
// c_attn: every rank the same rows and work, though not the heads Megatron-LM would give it.
constexpr TensorParallelRule kTpPlan[] = {
    {"backbone.embeddings", "rowwise"},
    {"backbone.blocks.*.mlstm_layer.q", "colwise"},
    {"backbone.blocks.*.mlstm_layer.k", "colwise"},
    {"backbone.blocks.*.mlstm_layer.v", "colwise"},
    {"backbone.blocks.*.mlstm_layer.ogate_preact", "colwise"},
    {"backbone.blocks.*.mlstm_layer.igate_preact", "colwise"},
    {"backbone.blocks.*.mlstm_layer.fgate_preact", "colwise"},
    {"backbone.blocks.*.mlstm_layer.qkv_opreact", "colwise"},
    {"backbone.blocks.*.mlstm_layer.ifgate_preact", "colwise", 2},
    {"backbone.blocks.*.mlstm_layer.out_proj", "rowwise"},
    {"backbone.blocks.*.ffn.proj_up_gate", "colwise"},
    {"backbone.blocks.*.ffn.proj_up", "colwise"},
    {"backbone.blocks.*.ffn.proj_up_gate_z", "colwise", 2},
    {"backbone.blocks.*.ffn.proj_down", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

// No init rules: xLSTMPreTrainedModel._init_weights draws the embedding and most projections from
// normal(0, sqrt(2 / (5 h))) (small_init), proj_down and out_proj from normal(0, 2 / (L sqrt(d)))
// (wang_init), zeroes every weight whose name holds "gate" (the gate preactivations, and with them
// ffn.proj_up_gate), and sets the input gates' bias to -10 and the forget gates' to linspace(3, 6,
// H): fills kernels/ does not make, so materialize refuses the family (plan, estimate, compare and
// inspect work).
const ModelFamily kXlstmFamily{
    .model_type = "xlstm",
    .hf_class_prefix = "xLSTM",
    .layers_path = "backbone.blocks",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .linear_attention = true,
    .mlstm_mixer = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
