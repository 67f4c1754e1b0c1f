// rwkv: RWKV-4 (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era", arXiv
// 2305.13048; RWKV/rwkv-4-169m-pile to rwkv-4-14b-pile and rwkv-raven-*), transformers 5's
// RwkvConfig and modeling_rwkv.py. No attention and no positions: each block mixes tokens through
// the WKV recurrence (time mixing, RwkvSelfAttention) and channels through a squared-ReLU MLP
// gated by a receptance (channel mixing, RwkvFeedForward), each reading its normed input beside
// the previous token's (the time shift, nn.ZeroPad2d). h hidden, A = attention_hidden_size (null:
// h), F = intermediate_size (null: 4 h), V vocabulary; in named_parameters order:
//   rwkv.embeddings.weight [V, h]
//   rwkv.blocks.0.pre_ln.{weight,bias} [h]                        (block 0 only)
//   rwkv.blocks.N.ln1.{weight,bias}, ln2.{weight,bias} [h]
//   rwkv.blocks.N.attention.time_decay, time_first [A]            (float32 in a float16 model)
//   rwkv.blocks.N.attention.time_mix_{key,value,receptance} [1, 1, h]
//   rwkv.blocks.N.attention.{key,value,receptance}.weight [A, h], output.weight [h, A]
//   rwkv.blocks.N.feed_forward.time_mix_{key,receptance} [1, 1, h]
//   rwkv.blocks.N.feed_forward.key.weight [F, h], receptance.weight [h, h], value.weight [h, F]
//   rwkv.ln_out.{weight,bias} [h], head.weight [V, h]              (untied by default)
// No Linear has a bias. A block is
//   x = pre_ln(x) (block 0),  x = x + attention(ln1(x)),  x = x + feed_forward(ln2(x)),
// attention(y) = output(sigmoid(receptance(r)) * wkv(time_decay, time_first, key(k), value(v)))
// and feed_forward(y) = sigmoid(receptance(r)) * value(relu(key(k))^2), where k, v and r are each
// y mu + shift(y) (1 - mu) with the module's time_mix mu, shift(y) the tokens moved one place
// later (zeros at the first). ModelConfig keeps every layer kLinear with a dense feed-forward; the
// A channels stand for the attention's sizes and the recurrence's (Note [RWKV in ModelConfig]).
// Class defaults: vocabulary 50,277, h 4,096, 32 layers, context_length 1,024,
// layer_norm_epsilon 1e-5, rescale_every 6, untied.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/module.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kRwkvFamily;  // listed in family_registry.cpp

namespace {

// Note [RWKV in ModelConfig]
// RWKV has no heads: its recurrence keeps one state per channel (a numerator, a denominator and
// their running maximum, RwkvLinearAttention's three state slices). ModelConfig keeps the A
// channels as Mamba-1's d_inner (family_mamba.cpp) are kept: heads of width 1, both as the
// attention's (num_attention_heads = num_key_value_heads = A, head_dim 1, which nothing builds as
// attention) and as the linear layer's (linear_num_key_heads = linear_num_value_heads = A, head
// widths 1), so that a tensor-parallel degree must divide A (planner/candidate/parallel_dims.cpp),
// the split the column-parallel key, value and receptance make. The time shift reads the token
// before, a causal mix of width 2: linear_conv_kernel_dim, no key of its own. The feed-forward's
// activation is ReLU squared ("relu2"), fixed: RwkvConfig has no hidden_act.
constexpr int64_t kTokenShift = 2;
constexpr const char* kActivation = "relu2";
// RwkvModel's ln_out is nn.LayerNorm(hidden_size): PyTorch's eps, whatever layer_norm_epsilon.
constexpr double kLnOutEps = 1e-5;

// nn.ZeroPad2d((0, 0, 1, -1)) on [B, T, h]: one row of zeros before the tokens, the last token
// cut. Traced as the copy it is, a cat of a zero row and the first T - 1 tokens (F.pad's
// constant_pad_nd reads and writes the same bytes).
class TimeShift : public Module {
 public:
  TimeShift() : Module("ZeroPad2d") {}
  Tensor forward(const Tensor& x) override {
    const Tensor zero_row =
        zeros({x.size(0), 1, x.size(2)}, {.dtype = x.dtype(), .device = x.device()});
    return cat({zero_row, narrow(x, 1, 0, x.size(1) - 1)}, 1);
  }
};

// x mu + shifted (1 - mu), as extract_key_value and RwkvFeedForward write it: two products by
// the [1, 1, h] mix, its complement and a sum.
Tensor time_mix(const Tensor& x, const Tensor& shifted, const Tensor& mu) {
  return add(mul(x, mu), mul(shifted, sub(1, mu)));
}

Tensor mix_parameter(const ModelConfig& c, const TensorOptions& o) {
  return empty({1, 1, c.hidden_size}, o);
}

// RwkvSelfAttention: time_decay, time_first, the three mixes, then time_shift, key, value,
// receptance, output (its __init__'s order). The recurrence is the CUDA kernel transformers loads
// for training (Note [WKV work] in tensor/ops.h), not its per-token Python fallback.
class SelfAttention : public Module {
 public:
  SelfAttention(const ModelConfig& c, const TensorOptions& o) : Module("RwkvSelfAttention") {
    const int64_t h = c.hidden_size, a = c.num_attention_heads;
    // _keep_in_fp32_modules: transformers loads these two in float32 when the model is float16
    // (not bfloat16, which the kernel takes as it is).
    TensorOptions f32 = o;
    if (o.dtype == DType::kFloat16) f32.dtype = DType::kFloat32;
    register_parameter("time_decay", empty({a}, f32));
    register_parameter("time_first", empty({a}, f32));
    register_parameter("time_mix_key", mix_parameter(c, o));
    register_parameter("time_mix_value", mix_parameter(c, o));
    register_parameter("time_mix_receptance", mix_parameter(c, o));
    time_shift_ = register_module("time_shift", std::make_shared<TimeShift>());
    key_ = register_module("key", std::make_shared<Linear>(h, a, false, o));
    value_ = register_module("value", std::make_shared<Linear>(h, a, false, o));
    receptance_ = register_module("receptance", std::make_shared<Linear>(h, a, false, o));
    output_ = register_module("output", std::make_shared<Linear>(a, h, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor shifted = time_shift_->call(x);
    const Tensor k_in = time_mix(x, shifted, parameter("time_mix_key"));
    const Tensor v_in = time_mix(x, shifted, parameter("time_mix_value"));
    const Tensor r_in = time_mix(x, shifted, parameter("time_mix_receptance"));
    const Tensor key = key_->call(k_in);
    const Tensor value = value_->call(v_in);
    const Tensor receptance = sigmoid(receptance_->call(r_in));
    // RwkvLinearAttention.forward: the decay -exp(time_decay) in float32; a float16 model's
    // time_first, key and value cast to float32 for the float32 kernel, its output cast back.
    const Tensor w = neg(exp(to(parameter("time_decay"), DType::kFloat32)));
    Tensor u = parameter("time_first"), k = key, v = value;
    if (key.dtype() == DType::kFloat16) {
      u = to(u, DType::kFloat32);
      k = to(k, DType::kFloat32);
      v = to(v, DType::kFloat32);
    }
    const Tensor rwkv = to(wkv(w, u, k, v), key.dtype());
    return output_->call(mul(receptance, rwkv));
  }

 private:
  std::shared_ptr<Module> time_shift_, key_, value_, receptance_, output_;
};

// RwkvFeedForward: time_shift, the two mixes, then key [F, h], receptance [h, h], value [h, F].
class FeedForward : public Module {
 public:
  FeedForward(const ModelConfig& c, const TensorOptions& o) : Module("RwkvFeedForward") {
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    time_shift_ = register_module("time_shift", std::make_shared<TimeShift>());
    register_parameter("time_mix_key", mix_parameter(c, o));
    register_parameter("time_mix_receptance", mix_parameter(c, o));
    key_ = register_module("key", std::make_shared<Linear>(h, f, false, o));
    receptance_ = register_module("receptance", std::make_shared<Linear>(h, h, false, o));
    value_ = register_module("value", std::make_shared<Linear>(f, h, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor shifted = time_shift_->call(x);
    const Tensor k_in = time_mix(x, shifted, parameter("time_mix_key"));
    const Tensor r_in = time_mix(x, shifted, parameter("time_mix_receptance"));
    const Tensor value = value_->call(square(relu(key_->call(k_in))));
    return mul(sigmoid(receptance_->call(r_in)), value);
  }

 private:
  std::shared_ptr<Module> time_shift_, key_, receptance_, value_;
};

ModulePtr layer_norm(const ModelConfig& c, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{c.hidden_size}, eps, true, true, o);
}

// RwkvBlock, empty until build() (Note [Filling repeated blocks after registration] in
// tensor/models/blocks.h): pre_ln on block 0, ln1, ln2, attention, feed_forward.
class Block : public Module {
 public:
  Block() : Module("RwkvBlock") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o) {
    if (index == 0) pre_ln_ = register_module("pre_ln", layer_norm(c, c.norm_eps, o));
    ln1_ = register_module("ln1", layer_norm(c, c.norm_eps, o));
    ln2_ = register_module("ln2", layer_norm(c, c.norm_eps, o));
    attention_ = register_module("attention", std::make_shared<SelfAttention>(c, o));
    feed_forward_ = register_module("feed_forward", std::make_shared<FeedForward>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = pre_ln_ ? pre_ln_->call(x) : x;
    const Tensor a = add(h, attention_->call(ln1_->call(h)));
    return add(a, feed_forward_->call(ln2_->call(a)));
  }

 private:
  ModulePtr pre_ln_, ln1_, ln2_, attention_, feed_forward_;
};

// RwkvModel: embeddings, blocks, ln_out. The inference-only rescaling (rescale_every: hidden
// states halved every few blocks, output and value weights divided to match) is off in training,
// as RwkvModel._rescale_layers leaves a training model.
class Backbone : public Module {
 public:
  Backbone(const ModelConfig& c, const TensorOptions& o) : Module("RwkvModel") {
    register_module("embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto list = register_module("blocks", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks_.push_back(list->push_back(std::make_shared<Block>()));
    }
    register_module("ln_out", layer_norm(c, kLnOutEps, o));
    for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->build(c, static_cast<int64_t>(i), o);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embeddings")->call(ids);
    for (const auto& block : blocks_) h = block->call(h);
    return child("ln_out")->call(h);
  }

 private:
  std::vector<std::shared_ptr<Block>> blocks_;
};

// RwkvForCausalLM: `rwkv` and `head`, tied to the embeddings only with tie_word_embeddings.
class ForCausalLm : public Module {
 public:
  ForCausalLm(const ModelConfig& c, const TensorOptions& o) : Module("RwkvForCausalLM") {
    register_module("rwkv", std::make_shared<Backbone>(c, o));
    register_module("head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    if (c.tie_word_embeddings) tie_parameters(*this, "head.weight", "rwkv.embeddings.weight");
  }
  Tensor forward(const Tensor& ids) override {
    return child("head")->call(child("rwkv")->call(ids));
  }
};

// What parse guarantees (Note [RWKV in ModelConfig]), checked again for a config built in code.
void check_layout(const ModelConfig& c) {
  const int64_t a = c.num_attention_heads;
  SP_CHECK(c.num_key_value_heads == a && c.head_dim == 1 && c.linear_num_key_heads == a &&
               c.linear_num_value_heads == a && c.linear_key_head_dim == 1 &&
               c.linear_value_head_dim == 1 && c.linear_conv_kernel_dim == kTokenShift &&
               c.linear_dt_rank == 0,
           "rwkv: the ", a, " channels of attention_hidden_size are written as heads of width 1 ",
           "(attention and linear layer alike) and a token shift of 2; got num_key_value_heads ",
           c.num_key_value_heads, ", head_dim ", c.head_dim, ", linear heads ",
           c.linear_num_key_heads, " and ", c.linear_num_value_heads, " of ", c.linear_key_head_dim,
           " and ", c.linear_value_head_dim, ", linear_conv_kernel_dim ", c.linear_conv_kernel_dim,
           ", linear_dt_rank ", c.linear_dt_rank);
  SP_CHECK(static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
           "rwkv: ", c.layer_types.size(), " layer types for ", c.num_hidden_layers,
           " layers; expected one per layer, each linear_attention");
  for (const AttentionType t : c.layer_types) {
    SP_CHECK(t == AttentionType::kLinear, "rwkv: a layer attends ", to_string(t),
             "; every RWKV block mixes tokens by its recurrence (linear_attention)");
  }
  SP_CHECK(c.hidden_act == kActivation, "rwkv: hidden_act '", c.hidden_act,
           "'; RwkvFeedForward squares a ReLU (relu2) whatever a file says");
  SP_CHECK(!c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.linear_conv_bias && !c.linear_proj_bias &&
               !c.lm_head_bias,
           "rwkv: a bias on a projection; none of RWKV's Linears has one");
  SP_CHECK(c.num_local_experts == 0 && c.no_ffn_layers.empty(),
           "rwkv: experts or blocks without a feed-forward; every RWKV block has both mixes");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 50277);
  c.hidden_size = f.integer("hidden_size", 4096);
  c.num_hidden_layers = f.integer("num_hidden_layers", 32);
  // Bounded before the per-layer list is made (validate() would refuse it only afterwards).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  // RwkvConfig.__post_init__: a null or absent attention_hidden_size is hidden_size, a null or
  // absent intermediate_size 4 x hidden_size.
  const int64_t channels =
      f.has("attention_hidden_size") ? f.integer("attention_hidden_size") : c.hidden_size;
  if (f.has("intermediate_size")) {
    c.intermediate_size = f.integer("intermediate_size");
  } else if (!mul_into(int64_t{4}, c.hidden_size, c.intermediate_size)) {
    f.fail("hidden_size", std::to_string(c.hidden_size) +
                              ": 4 x hidden_size (the default intermediate_size) overflows int64");
  }
  // context_length, which RwkvConfig's attribute_map also reads as max_position_embeddings: the
  // longest sequence its CUDA kernel takes (transformers raises beyond it).
  const bool has_context = f.has("context_length");
  const char* context_key = has_context || !f.has("max_position_embeddings")
                                ? "context_length"
                                : "max_position_embeddings";
  c.max_position_embeddings = f.integer(context_key, 1024);
  if (has_context && f.has("max_position_embeddings") &&
      f.integer("max_position_embeddings") != c.max_position_embeddings) {
    f.fail("max_position_embeddings",
           std::to_string(f.integer("max_position_embeddings")) + " beside context_length " +
               std::to_string(c.max_position_embeddings) +
               ": RwkvConfig maps one onto the other; expected one length");
  }
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.hidden_act = kActivation;
  // Note [RWKV in ModelConfig].
  c.num_attention_heads = c.num_key_value_heads = channels;
  c.head_dim = 1;
  c.linear_num_key_heads = c.linear_num_value_heads = channels;
  c.linear_key_head_dim = c.linear_value_head_dim = 1;
  c.linear_conv_kernel_dim = kTokenShift;
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kLinear);
  // Read, changing nothing that is built or trained: the inference-only rescaling (off in
  // training, RwkvModel._rescale_layers) and the cache switch.
  (void)f.integer("rescale_every", 6);
  (void)f.boolean("use_cache", true);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  check_layout(c);
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["attention_hidden_size"] = c.num_attention_heads;
  j["intermediate_size"] = c.intermediate_size;
  j["context_length"] = c.max_position_embeddings;
  j["layer_norm_epsilon"] = c.norm_eps;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/) {
  check_layout(c);
  return std::make_shared<ForCausalLm>(c, o);
}

// The channels stand for the attention's and the linear layer's sizes (Note [RWKV in
// ModelConfig]): an error about them names the file's key.
constexpr FieldRename kRenames[] = {{"norm_eps", "layer_norm_epsilon"},
                                    {"max_position_embeddings", "context_length"},
                                    {"num_attention_heads", "attention_hidden_size"},
                                    {"num_key_value_heads", "attention_hidden_size"},
                                    {"linear_num_key_heads", "attention_hidden_size"},
                                    {"linear_num_value_heads", "attention_hidden_size"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3) applied to RWKV's two halves. Time mixing: key,
// value and receptance column-parallel (each rank A / tp channels of all three), so the kernel's
// recurrence, which never mixes channels, runs on the rank's channels, as does receptance x wkv;
// output row-parallel. Channel mixing: key column-parallel and value row-parallel (the MLP's
// pair); its receptance [h, h] replicated: its sigmoid multiplies value's output, which is whole
// only after the row-parallel reduction (under sequence parallelism it runs on the rank's tokens,
// as the norms do). The embedding by vocabulary rows, head by vocabulary; the norms and the
// [1, 1, h] mixes, which act on the whole hidden state, replicated.
constexpr TensorParallelRule kTpPlan[] = {{"rwkv.embeddings", "rowwise"},
                                          {"rwkv.blocks.*.attention.key", "colwise"},
                                          {"rwkv.blocks.*.attention.value", "colwise"},
                                          {"rwkv.blocks.*.attention.receptance", "colwise"},
                                          {"rwkv.blocks.*.attention.output", "rowwise"},
                                          {"rwkv.blocks.*.feed_forward.key", "colwise"},
                                          {"rwkv.blocks.*.feed_forward.value", "rowwise"},
                                          {"head", "colwise"}};

}  // namespace

// No init rules: RwkvPreTrainedModel._init_weights fills every Linear and the embedding by an
// orthogonal draw (gains from their shapes; the embedding's 1e-4 sqrt(max(V, h))), time_decay and
// the mixes by per-layer powers of the channel index and time_first by a constant: fills kernels/
// does not make, so materialize refuses the family (plan, estimate, compare and inspect work).
const ModelFamily kRwkvFamily{
    .model_type = "rwkv",
    .hf_class_prefix = "Rwkv",
    .layers_path = "rwkv.blocks",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .linear_attention = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
