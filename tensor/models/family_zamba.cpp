// zamba (Zyphra's Zamba-7B-v1). transformers 5's ZambaConfig and modeling_zamba.py
// (ZambaForCausalLM): a stack of Mamba-1 layers, some of them "hybrid" (layers_block_type). A
// hybrid layer first runs the model's ONE shared transformer block on [x; e], its input beside the
// token embeddings e (2h wide), projects the block's output through its own `linear` [h, h] and
// adds it to the input of its Mamba layer (Glorioso et al. 2024, "Zamba: A Compact 7B SSM Hybrid
// Model", eq. 6 and fig. 2):
//   Mamba layer   x + mamba(input_layernorm(x))
//   hybrid layer  t = linear(mlp(pre_ff_layernorm(attn(input_layernorm([x; e])))))   (no
//                 residual inside the block), then x + mamba(input_layernorm(x + t))
// e is a copy of the embeddings (torch.clone) that every hybrid layer reads. The attention has no
// position encoding at all. Names and shapes, h hidden, V vocabulary, n heads and kv key-value
// heads of d = attention_head_dim (2h / n by default), I the MLP width, and the mixer
// (ZambaMambaMixer, Note [Zamba mixer trace]): D = mamba_expand x h channels split into H =
// n_mamba_heads heads of P = D / H, N = mamba_d_state, R = mamba_dt_rank ("auto": ceil(h / 16)),
// K = mamba_d_conv; each list in named_parameters order (a module's own parameters first):
//   model.embed_tokens.weight [V, h]
//   model.layers.N (ZambaMambaDecoderLayer)  mamba.x_proj_weight [H, R + 2N, P],
//     mamba.dt_proj_weight [H, P, R], mamba.dt_proj_bias [H, P], mamba.A_log [H, P, N],
//     mamba.D [H, P], mamba.conv1d.weight [D, 1, K] (+ conv1d.bias [D]: mamba_conv_bias),
//     mamba.in_proj.weight [2D, h], mamba.out_proj.weight [h, D] (+ biases: mamba_proj_bias),
//     input_layernorm.weight [h]
//   model.layers.N (ZambaHybridLayer)  shared_transf (ZambaAttentionDecoderLayer, in the first
//     hybrid layer only: the others' are tied to it): self_attn.q_proj [n d, 2h], k_proj and
//     v_proj [kv d, 2h], o_proj [h, n d]; feed_forward.gate_proj, up_proj [I, h], down_proj
//     [h, I]; input_layernorm [2h], pre_ff_layernorm [h]; then linear.weight [h, h] and
//     mamba_decoder.* (the Mamba layer above)
//   model.final_layernorm.weight [h]; lm_head [V, h], tied to the embedding by default
// ModelConfig keeps the Mamba layers as kLinear in no_ffn_layers, the hybrid layers as kFull
// (their block's MLP is their feed-forward), the block as Zamba2's shared transformer blocks
// reduced to one without adapters (num_mem_blocks 1, adapter_rank 0), and the mixer in linear_*
// as Jamba's Mamba-1 mixer (the D channels as value heads of width 1) with its heads as the key
// heads, each holding its own B and C (linear_num_key_heads H). Refused as transformers fails on
// them or builds something else: a block type other than a Mamba or hybrid layer (ZambaModel
// builds a Mamba layer for it), a list of another length than num_hidden_layers (and so no list
// with fewer than 3 layers: ZambaConfig's default has 3 entries at least), an
// attention_hidden_size other than 2h (the forward's [x; e] is 2h wide), mamba_expand x h not
// split by n_mamba_heads (ZambaConfig.validate_architecture), a hidden_mamba_act other than SiLU
// (causal-conv1d's kernel applies only that), a null num_key_value_heads. num_logits_to_keep,
// use_mamba_kernels and time_step_* (initialization) are read by no module that sizes or runs
// anything priced.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/hybrid_layer_list.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kZambaFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "Zamba";

// Note [Zamba shared block]
// transformers 5 builds a ZambaAttentionDecoderLayer in every hybrid layer and ties them all to
// the first hybrid layer's through ZambaModel._tied_weights_keys (every other layer's
// shared_transf to that layer's): PreTrainedModel.tie_weights sets the source's Parameter into
// each target module, so named_parameters lists the block once, under the first hybrid layer.
// The tie is applied only with tie_word_embeddings (get_expanded_tied_weights_keys returns nothing
// without it): an untied model holds a block in every hybrid layer, as transformers allocates
// it. The planner prices each hybrid layer's block as its own work (the traced layer runs it
// whole): the weights are shared, the work is not (Note [Weights shared across layers] in
// planner/cost/training_metrics.cpp). Zamba2 (family_zamba2.cpp) generalizes this to
// num_mem_blocks blocks taken in turn, each layer with its own LoRA adapters.

// ZambaConfig's layers_block_type when the file has none: layers 0 and 1 Mamba, layer 2 hybrid,
// then layer i + 3 hybrid where i % attn_layer_period == attn_layer_offset (Zamba-7B-v1's 76
// layers: hybrid at 2, 7, 13, .., 73). transformers' list has 3 entries even for fewer layers,
// which PreTrainedConfig.validate_layer_type then refuses.
std::vector<bool> default_hybrid_layers(const ConfigFields& f, int64_t layers) {
  const int64_t period = f.integer("attn_layer_period", 6);
  const int64_t offset = f.integer("attn_layer_offset", 4);
  if (layers < 3) {
    f.fail("num_hidden_layers",
           std::to_string(layers) +
               " layers and no layers_block_type: ZambaConfig's default list has 3 entries at "
               "least (transformers refuses the mismatch); expected a layers_block_type of " +
               std::to_string(layers) + " entries, or at least 3 layers");
  }
  // Python's i % 0 raises; a negative period gives Python's sign, which no file has.
  if (period <= 0 && layers > 3) {
    f.fail("attn_layer_period", "must be positive, got " + std::to_string(period));
  }
  std::vector<bool> out = {false, false, true};
  for (int64_t i = 0; i + 3 < layers; ++i) out.push_back(i % period == offset);
  return out;
}

// Which layers are hybrid (hybrid_layer_list.h); without a list ZambaConfig's default.
std::vector<bool> hybrid_layers(const ConfigFields& f, int64_t layers) {
  // Read whether or not the list is there: they only shape the default list.
  (void)f.has("attn_layer_period");
  (void)f.has("attn_layer_offset");
  return models::read_hybrid_layer_list(f, layers, {"ZambaConfig", "Zamba", "Mamba"},
                                        [&] { return default_hybrid_layers(f, layers); });
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 32000);
  c.hidden_size = f.integer("hidden_size", 3712);
  c.num_hidden_layers = f.integer("num_hidden_layers", 76);
  // Bounded before anything is made per layer (validate() refuses them too, later).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (docs/user-guide.md \"Limits\")");
  }
  if (c.hidden_size <= 0) {
    f.fail("hidden_size", "must be a positive integer, got " + std::to_string(c.hidden_size));
  }
  const std::vector<bool> hybrid = hybrid_layers(f, c.num_hidden_layers);

  // The shared attention reads [x; e]: attention_hidden_size is 2h (ZambaConfig's default, and
  // the only width the forward's concatenation gives). ZambaConfig.__post_init__ takes a 0 (or
  // null) as unset, as it does attention_head_dim's.
  int64_t width = 0;
  if (!mul_into(int64_t{2}, c.hidden_size, width)) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is beyond int64 once doubled");
  }
  const int64_t attention_width = f.integer("attention_hidden_size", 0);
  if (attention_width != 0 && attention_width != width) {
    f.fail("attention_hidden_size",
           std::to_string(attention_width) + " differs from " + std::to_string(width) +
               ", 2 x hidden_size, the width of [x; e] the attention reads (transformers takes "
               "the file's value, and its forward then fails)");
  }
  c.num_attention_heads = f.integer("num_attention_heads", 16);
  if (c.num_attention_heads <= 0) {
    f.fail("num_attention_heads",
           "must be a positive integer, got " + std::to_string(c.num_attention_heads));
  }
  // ZambaConfig's num_key_value_heads is an int (16 by default, not the heads): null is refused
  // by its strict dataclass.
  if (f.is_null("num_key_value_heads")) {
    f.fail("num_key_value_heads", "null; expected an integer (ZambaConfig's default is 16)");
  }
  c.num_key_value_heads = f.integer("num_key_value_heads", 16);
  // attention_head_dim (head_dim, its attribute_map alias): 2h // n unless the file sets it.
  const char* head_key = f.has("attention_head_dim") ? "attention_head_dim" : "head_dim";
  c.head_dim = f.integer(head_key, 0);
  if (c.head_dim == 0) c.head_dim = width / c.num_attention_heads;
  if (f.has("attention_head_dim") && f.has("head_dim") &&
      f.integer("head_dim") != f.integer("attention_head_dim")) {
    f.fail("head_dim", "differs from attention_head_dim, which it aliases; expected one value");
  }
  c.intermediate_size = f.integer("intermediate_size", 14848);
  c.hidden_act = f.string("hidden_act", "gelu");  // the shared MLP's; validate() checks it
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.max_position_embeddings = f.integer("max_position_embeddings", 4096);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  models::pad_token_id_or(f, c, 0);
  // Inference switches: the fused kernels are what training runs (Note [Zamba mixer trace]).
  (void)f.boolean("use_mamba_kernels", true);
  (void)f.has("num_logits_to_keep");

  // The mixer (ZambaMambaMixer): D = mamba_expand x h channels in n_mamba_heads heads.
  const std::string act = f.string("hidden_mamba_act", "silu");
  if (act != "silu" && act != "swish") {
    f.fail("hidden_mamba_act", "'" + act +
                                   "' is not built; expected \"silu\" (causal-conv1d's kernel "
                                   "applies it after the convolution; the gate is SiLU whatever "
                                   "it says)");
  }
  const int64_t expand = f.integer("mamba_expand", 2);
  int64_t inner = 0;
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("mamba_expand",
           std::to_string(expand) + " must be positive, with mamba_expand x hidden_size in int64");
  }
  const int64_t heads = f.integer("n_mamba_heads", 2);
  if (heads <= 0 || inner % heads != 0) {
    f.fail("n_mamba_heads",
           std::to_string(heads) + " does not split mamba_expand x hidden_size = " +
               std::to_string(inner) + " into whole heads (ZambaConfig.validate_architecture)");
  }
  int64_t rank = c.hidden_size / 16 + (c.hidden_size % 16 != 0 ? 1 : 0);  // "auto": ceil(h / 16)
  if (f.has("mamba_dt_rank")) {
    const nlohmann::json& v = f.raw("mamba_dt_rank");
    if (v.is_string() && v.get<std::string>() != "auto") {
      f.fail("mamba_dt_rank", v.dump().substr(0, 40) +
                                  " is not a rank; expected a positive integer or \"auto\" "
                                  "(ceil(hidden_size / 16))");
    }
    if (!v.is_string()) rank = f.integer("mamba_dt_rank");
    if (rank <= 0) f.fail("mamba_dt_rank", "must be positive, got " + std::to_string(rank));
  }
  for (const char* key : {"time_step_min", "time_step_max", "time_step_floor"}) {
    (void)f.has(key);  // the initialization of dt_proj_bias only
  }
  c.linear_num_value_heads = inner;
  c.linear_value_head_dim = 1;
  c.linear_num_key_heads = heads;
  c.linear_key_head_dim = f.integer("mamba_d_state", 16);
  c.linear_conv_kernel_dim = f.integer("mamba_d_conv", 4);
  c.linear_conv_bias = f.boolean("mamba_conv_bias", true);
  c.linear_proj_bias = f.boolean("mamba_proj_bias", false);
  c.linear_dt_rank = rank;

  // The one shared block, without adapters (Note [Zamba shared block]).
  c.num_mem_blocks = 1;
  c.adapter_rank = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (hybrid[static_cast<size_t>(i)]) {
      c.layer_types.push_back(AttentionType::kFull);
    } else {
      c.layer_types.push_back(AttentionType::kLinear);
      c.no_ffn_layers.push_back(i);
    }
  }
}

// What parse guarantees, checked again for a config built in code (the planner copies configs and
// cuts their layers): the layers are Mamba or hybrid ones (validate() pairs them with
// no_ffn_layers), one shared block without adapters, and a mixer of heads ZambaConfig can state.
void check_layout(const ModelConfig& c) {
  for (const AttentionType t : c.layer_types) {
    SP_CHECK(t == AttentionType::kFull || t == AttentionType::kLinear, "zamba: a layer attends ",
             to_string(t),
             "; expected a hybrid layer (full_attention) or a Mamba layer "
             "(linear_attention)");
  }
  SP_CHECK(c.num_mem_blocks == 1 && c.adapter_rank == 0 && !c.shared_attention_adapter,
           "zamba: ", c.num_mem_blocks, " shared blocks with adapters of rank ", c.adapter_rank,
           "; expected Zamba's one block without adapters (num_mem_blocks 1, adapter_rank 0)");
  SP_CHECK(c.linear_dt_rank > 0 && c.linear_value_head_dim == 1 && c.linear_num_key_heads > 0 &&
               c.linear_num_value_heads % c.linear_num_key_heads == 0,
           "zamba: a Mamba mixer of ", c.linear_num_value_heads, " channels (value heads of width ",
           c.linear_value_head_dim, ") in ", c.linear_num_key_heads, " heads with time-step rank ",
           c.linear_dt_rank,
           "; expected channels of width 1 split evenly into the heads and a "
           "positive rank");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  check_layout(c);
  const int64_t h = c.hidden_size, inner = c.linear_num_value_heads;
  j["hidden_size"] = h;
  j["num_hidden_layers"] = c.num_hidden_layers;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    types.push_back(layer_kind(c, i).attention == AttentionType::kFull ? "hybrid"
                                                                       : "linear_attention");
  }
  j["layers_block_type"] = types;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["attention_head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["hidden_act"] = c.hidden_act;
  j["hidden_mamba_act"] = "silu";
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  SP_CHECK(h > 0 && inner > 0 && inner % h == 0, "zamba: ", inner,
           " Mamba channels are not mamba_expand x hidden_size ", h,
           ", which ZambaConfig cannot state");
  j["mamba_expand"] = inner / h;
  j["n_mamba_heads"] = c.linear_num_key_heads;
  j["mamba_d_state"] = c.linear_key_head_dim;
  j["mamba_d_conv"] = c.linear_conv_kernel_dim;
  j["mamba_dt_rank"] = c.linear_dt_rank;
  j["mamba_conv_bias"] = c.linear_conv_bias;
  j["mamba_proj_bias"] = c.linear_proj_bias;
}

// Note [Zamba mixer trace]
// ZambaMambaMixer is the Mamba-1 mixer (tensor/models/mamba_mixer.h, Note [Mamba-1 trace]) with
// its channels split into H heads that run independently from the convolution's output to
// out_proj's input (Glorioso et al. 2024, §3): each head has its own x_proj (dt, B and C from its
// P channels), dt_proj, A and D, stored as per-head tensors of the mixer itself. Traced as
// transformers' path with the kernels installed (mamba_ssm's selective_scan_fn, causal-conv1d's
// causal_conv1d_fn), which training runs: in_proj, its [B, 2D, T] view as [B, D, 2, T] (row 2c
// of in_proj is channel c's x and row 2c + 1 its gate z: the two interleave) split into x (made
// contiguous) and z; the causal depthwise convolution with SiLU over x; x as [H, B, P, T] (a
// view); x_proj_weight [H, 1, R + 2N, P] times it, [H, B, R + 2N, T], split into dt, B and C;
// dt_proj_weight [H, 1, P, R] times dt, [H, B, P, T]; A = -exp(A_log) in fp32; then one selective
// scan per head (D and dt_proj_bias in fp32, B, C and the head's gate copied contiguous as
// selective_scan_fn does for a strided last dim); the heads' outputs concatenated, [B, D, T], and
// out_proj on their [B, T, D] view. Under tensor parallelism in_proj is column-parallel as it is
// (a rank's rows are whole channels, x and gate side by side) and out_proj row-parallel; the
// per-head products and scans read the rank's channels (1 / tp of the work by dataflow, Note
// [Tracing one block at full width]); their parameters are held whole, as Jamba's A_log and D.
// tp must divide D (planner/candidate/parallel_dims.cpp); with tp > H a head's channels span
// several ranks, whose x_proj partial sums would need a reduction among them, not priced (dt, B
// and C: (R + 2N) H values a token).
class Mixer : public models::AttentionBlock {
 public:
  Mixer(const ModelConfig& c, const TensorOptions& o)
      : AttentionBlock(std::string(kPrefix) + "MambaMixer"),
        inner_(c.linear_num_value_heads),
        heads_(c.linear_num_key_heads),
        head_dim_(c.linear_num_value_heads / c.linear_num_key_heads),
        state_(c.linear_key_head_dim),
        rank_(c.linear_dt_rank) {
    const int64_t h = c.hidden_size;
    // transformers' registration order: conv1d, in_proj, the per-head tensors, out_proj; the
    // module's own parameters list first.
    conv_ = register_module("conv1d", models::make_conv1d_parameters(
                                          inner_, c.linear_conv_kernel_dim, c.linear_conv_bias, o));
    in_proj_ =
        register_module("in_proj", std::make_shared<Linear>(h, 2 * inner_, c.linear_proj_bias, o));
    register_parameter("x_proj_weight", empty({heads_, rank_ + 2 * state_, head_dim_}, o));
    register_parameter("dt_proj_weight", empty({heads_, head_dim_, rank_}, o));
    register_parameter("dt_proj_bias", empty({heads_, head_dim_}, o));
    register_parameter("A_log", empty({heads_, head_dim_, state_}, o));
    register_parameter("D", empty({heads_, head_dim_}, o));
    out_proj_ =
        register_module("out_proj", std::make_shared<Linear>(inner_, h, c.linear_proj_bias, o));
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), t = x.size(1);
    // [B, T, 2D] -> [B, 2D, T] -> [B, D, 2, T], views: x and the gate interleave by channel.
    const Tensor xz = view(transpose(in_proj_->call(x), 1, 2), {b, inner_, 2, t});
    const std::vector<Tensor> parts = chunk(xz, 2, 2);
    const Tensor gate = transpose(reshape(parts[1], {b, heads_, head_dim_, t}), 0, 1);
    // causal_conv1d_fn with the SiLU (the family refuses another activation), [B, D, T].
    const Tensor conv = causal_conv1d(contiguous(squeeze(parts[0], 2)), conv_->parameter("weight"),
                                      conv_->parameter("bias"), /*silu=*/true);
    const Tensor u = transpose(reshape(conv, {b, heads_, head_dim_, t}), 0, 1);  // [H, B, P, T]
    // Each head's x_proj: [H, 1, R + 2N, P] x [H, B, P, T] -> [H, B, T, R + 2N] (a view).
    const Tensor dtbc = transpose(matmul(unsqueeze(parameter("x_proj_weight"), 1), u), -1, -2);
    const std::vector<Tensor> ssm = split_with_sizes(dtbc, {rank_, state_, state_}, -1);
    // Each head's dt_proj weight: [H, 1, P, R] x [H, B, R, T] -> [H, B, P, T].
    const Tensor delta =
        matmul(unsqueeze(parameter("dt_proj_weight"), 1), transpose(ssm[0], -1, -2));
    const Tensor bias = to(parameter("dt_proj_bias"), DType::kFloat32);
    const Tensor a = neg(exp(to(parameter("A_log"), DType::kFloat32)));
    std::vector<Tensor> outs;
    for (int64_t hd = 0; hd < heads_; ++hd) {
      // selective_scan_fn copies an input whose last dim is strided: B and C transposed, and the
      // gate (every other row of in_proj's transposed output); u and delta are contiguous there.
      outs.push_back(selective_scan(select(u, 0, hd), select(delta, 0, hd), select(a, 0, hd),
                                    contiguous(transpose(select(ssm[1], 0, hd), 1, 2)),
                                    contiguous(transpose(select(ssm[2], 0, hd), 1, 2)),
                                    to(select(parameter("D"), 0, hd), DType::kFloat32),
                                    contiguous(select(gate, 0, hd)), select(bias, 0, hd)));
    }
    return out_proj_->call(transpose(cat(outs, 1), 1, 2));
  }

 private:
  int64_t inner_, heads_, head_dim_, state_, rank_;
  ModulePtr conv_;
  std::shared_ptr<Linear> in_proj_, out_proj_;
};

// ZambaAttention over the normed [x; e]: q, k and v from 2h channels, no position encoding,
// causal attention with the softmax scaled by (d / 2)^-0.5 (its docstring: as for the h-wide
// half), o_proj back to h. No biases.
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0),
        scale_(std::sqrt(2.0 / static_cast<double>(c.head_dim))) {
    const int64_t in = 2 * c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj_ = register_module("q_proj", std::make_shared<Linear>(in, q, false, o));
    k_proj_ = register_module("k_proj", std::make_shared<Linear>(in, kv, false, o));
    v_proj_ = register_module("v_proj", std::make_shared<Linear>(in, kv, false, o));
    o_proj_ = register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor q = models::split_heads(q_proj_->call(x), heads_, head_dim_);
    const Tensor k = models::split_heads(k_proj_->call(x), kv_heads_, head_dim_);
    const Tensor v = models::split_heads(v_proj_->call(x), kv_heads_, head_dim_);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, scale_,
                                     /*enable_gqa=*/kv_heads_ != heads_);
    return o_proj_->call(models::merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_, scale_;
  ModulePtr q_proj_, k_proj_, v_proj_, o_proj_;
};

// ZambaAttentionDecoderLayer (the shared block as the first hybrid layer holds it): self_attn,
// feed_forward (ZambaMLP: gate, up, down), input_layernorm over [x; e] (2h), pre_ff_layernorm; no
// residual of its own.
class SharedBlock : public Module {
 public:
  SharedBlock(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "AttentionDecoderLayer") {
    const int64_t h = c.hidden_size;
    attn_ = register_module("self_attn", std::make_shared<Attention>(c, o, training));
    mlp_ = register_module("feed_forward", std::make_shared<models::GatedMlp>(
                                               std::string(kPrefix) + "MLP", h, c.intermediate_size,
                                               false, c.hidden_act, o));
    input_norm_ = register_module("input_layernorm",
                                  std::make_shared<RMSNorm>(DimVector{2 * h}, c.norm_eps, true, o));
    pre_ff_norm_ = register_module("pre_ff_layernorm",
                                   std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& e) {
    CallScope scope(*this);
    const Tensor a = attn_->call(input_norm_->call(cat({x, e}, -1)));
    return mlp_->call(pre_ff_norm_->call(a));
  }

 private:
  ModulePtr attn_, mlp_, input_norm_, pre_ff_norm_;
};

// A decoder layer, made empty and filled by build() once it sits in its ModuleList (Note
// [Filling repeated blocks after registration], blocks.h); run reads the embeddings e too.
class Layer : public Module {
 public:
  using Module::Module;
  virtual void build(const ModelConfig& c, const TensorOptions& o, bool training) = 0;
  virtual Tensor run(const Tensor& x, const Tensor& e) = 0;
};

// ZambaMambaDecoderLayer: mamba, input_layernorm; x + mamba(input_layernorm(x + t)), t the
// hybrid layer's projected block output (none in a Mamba layer).
class MambaLayer : public Layer {
 public:
  MambaLayer() : Layer(std::string(kPrefix) + "MambaDecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool /*training*/) override {
    mamba_ = register_module("mamba", std::make_shared<Mixer>(c, o));
    norm_ = register_module("input_layernorm", std::make_shared<RMSNorm>(DimVector{c.hidden_size},
                                                                         c.norm_eps, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& /*e*/) override { return run_after(x, Tensor()); }
  Tensor run_after(const Tensor& x, const Tensor& t) {
    CallScope scope(*this);
    const Tensor n = norm_->call(t.defined() ? add(x, t) : x);
    return add(x, mamba_->run(n, Tensor(), Tensor()));
  }

 private:
  std::shared_ptr<models::AttentionBlock> mamba_;
  ModulePtr norm_;
};

// ZambaHybridLayer: shared_transf, linear, mamba_decoder (registered in that order); the block
// runs first, its output projected by `linear` into the Mamba layer's input.
class HybridLayer : public Layer {
 public:
  HybridLayer() : Layer(std::string(kPrefix) + "HybridLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) override {
    const int64_t h = c.hidden_size;
    block_ = register_module("shared_transf", std::make_shared<SharedBlock>(c, o, training));
    linear_ = register_module("linear", std::make_shared<Linear>(h, h, false, o));
    mamba_ = register_module("mamba_decoder", std::make_shared<MambaLayer>());
    mamba_->build(c, o, training);
  }
  Tensor run(const Tensor& x, const Tensor& e) override {
    CallScope scope(*this);
    const Tensor t = linear_->call(block_->run(x, e));
    return mamba_->run_after(x, t);
  }

 private:
  std::shared_ptr<SharedBlock> block_;
  ModulePtr linear_;
  std::shared_ptr<MambaLayer> mamba_;
};

// ZambaModel: embed_tokens (padding_idx pad_token_id), layers, final_layernorm.
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<int64_t> hybrid;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (layer_kind(c, i).attention == AttentionType::kFull) {
        hybrid.push_back(i);
        layers_.push_back(layers->push_back(std::make_shared<HybridLayer>()));
      } else {
        layers_.push_back(layers->push_back(std::make_shared<MambaLayer>()));
      }
    }
    norm_ = register_module("final_layernorm", std::make_shared<RMSNorm>(DimVector{c.hidden_size},
                                                                         c.norm_eps, true, o));
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (const auto& layer : layers_) layer->build(c, o, training);
    // Note [Zamba shared block]: every hybrid layer's block tied to the first one's.
    if (!c.tie_word_embeddings || hybrid.empty()) return;
    const std::string source = "layers." + std::to_string(hybrid.front()) + ".shared_transf";
    const std::vector<NamedTensor> params = get_submodule(source).named_parameters();
    for (size_t j = 1; j < hybrid.size(); ++j) {
      const std::string target = "layers." + std::to_string(hybrid[j]) + ".shared_transf.";
      for (const NamedTensor& p : params) {
        tie_parameters(*this, target + p.name, source + "." + p.name);
      }
    }
  }
  // The embeddings' copy e (torch.clone) beside the stream.
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_->call(ids);
    const Tensor e = to(h, h.dtype(), /*copy=*/true);
    for (const auto& layer : layers_) h = layer->run(h, e);
    return norm_->call(h);
  }

 private:
  ModulePtr embed_, norm_;
  std::vector<std::shared_ptr<Layer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"head_dim", "attention_head_dim"},
                                    {"layer_types", "layers_block_type"},
                                    {"no_ffn_layers", "layers_block_type"},
                                    {"linear_num_key_heads", "n_mamba_heads"},
                                    {"linear_num_value_heads", "mamba_expand"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"},
                                    {"linear_conv_bias", "mamba_conv_bias"},
                                    {"linear_proj_bias", "mamba_proj_bias"},
                                    {"linear_dt_rank", "mamba_dt_rank"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3), on every layer that holds the module: the
// mixers' in_proj column-parallel (its rows interleave x and the gate channel by channel, so a
// plain split keeps each rank's x and gate channels together: no fused parts) and out_proj
// row-parallel (Note [Zamba mixer trace]); the shared block's q, k, v, gate_proj and up_proj
// column-parallel (by heads, and by the MLP's columns) and o_proj and down_proj row-parallel. The
// hybrid layer's `linear` [h, h] reads the reduced block output and feeds the residual: it stays
// replicated. The embedding by vocabulary rows and lm_head by vocabulary, as every family.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.mamba.in_proj", "colwise"},
    {"model.layers.*.mamba.out_proj", "rowwise"},
    {"model.layers.*.mamba_decoder.mamba.in_proj", "colwise"},
    {"model.layers.*.mamba_decoder.mamba.out_proj", "rowwise"},
    {"model.layers.*.shared_transf.self_attn.q_proj", "colwise"},
    {"model.layers.*.shared_transf.self_attn.k_proj", "colwise"},
    {"model.layers.*.shared_transf.self_attn.v_proj", "colwise"},
    {"model.layers.*.shared_transf.self_attn.o_proj", "rowwise"},
    {"model.layers.*.shared_transf.feed_forward.gate_proj", "colwise"},
    {"model.layers.*.shared_transf.feed_forward.up_proj", "colwise"},
    {"model.layers.*.shared_transf.feed_forward.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

// No init rules: ZambaPreTrainedModel._init_weights draws dt_proj_weight uniform in
// +-mamba_dt_rank^-0.5 and dt_proj_bias as the inverse softplus of a log-uniform draw, fills
// shardplan's kernels do not have, so materialize refuses the family by name (docs/models.md).
const ModelFamily kZambaFamily{
    .model_type = "zamba",
    .hf_class_prefix = "Zamba",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,  // no position encoding: the attention sees positions only through the mask
    .linear_attention = true,
    .shared_transformer_blocks = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
