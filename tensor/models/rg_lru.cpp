#include "tensor/models/rg_lru.h"

#include <utility>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// Griffin's c: the decay a_t = a^(c r_t), here exp(-c r_t softplus(recurrent_param)) (De et al.
// 2024, §2.4, "we set c to 8"; RecurrentGemmaRglru's -8.0).
constexpr double kRgLruDecayScale = 8.0;

// RecurrentGemmaRglru: its own five parameters (rg_lru.h), the gates and the scan (Note [RG-LRU
// trace] in rg_lru.h).
class RgLruUnit : public Module {
 public:
  RgLruUnit(std::string type_name, int64_t heads, int64_t width, const TensorOptions& o)
      : Module(std::move(type_name)), heads_(heads), width_(width) {
    const int64_t w = width / heads;
    register_parameter("recurrent_param", empty({width}, o));
    register_parameter("input_gate_weight", empty({heads, w, w}, o));
    register_parameter("input_gate_bias", empty({heads, w}, o));
    register_parameter("recurrent_gate_weight", empty({heads, w, w}, o));
    register_parameter("recurrent_gate_bias", empty({heads, w}, o));
  }
  // x [B, T, W] (the convolution's output), position ids [1, T] -> the states h [B, T, W].
  Tensor run(const Tensor& x, const Tensor& position_ids) {
    CallScope scope(*this);
    const int64_t b = x.size(0), t = x.size(1);
    // A position 0 starts a new sequence: [1, T, 1], broadcast over the batch and the channels.
    const Tensor reset = eq(unsqueeze(position_ids, -1), 0);
    // Each head's channels one batch of the gates' products: [B T, H, w] -> [H, B T, w].
    const Tensor per_head = permute(reshape(x, {b * t, heads_, width_ / heads_}), {1, 0, 2});
    const Tensor input_gate = gate(per_head, "input_gate_weight", "input_gate_bias", b, t);
    const Tensor recurrent_gate =
        gate(per_head, "recurrent_gate_weight", "recurrent_gate_bias", b, t);
    // log a = -c r softplus(recurrent_param); softplus as log(1 + exp) on the [W] parameter.
    const Tensor rate = log(add(exp(parameter("recurrent_param")), 1.0));
    const Tensor log_a = mul(mul(recurrent_gate, -kRgLruDecayScale), rate);
    const Tensor a = exp(log_a);
    const Tensor a_square = exp(mul(log_a, 2.0));
    const Tensor gated = mul(x, input_gate);
    // sqrt(1 - a^2) keeps the state's scale (Griffin §2.4); 1 where a sequence starts.
    const Tensor keep = unary(UnaryOp::kBitwiseNot, reset);
    const Tensor multiplier = add(reset, mul(keep, sqrt(sub(1.0, a_square))));
    const Tensor normalized = mul(gated, multiplier);
    // The state before a sequence's first token is forgotten (a times ~reset), then the scan.
    return linear_scan(mul(a, unary(UnaryOp::kBitwiseNot, reset)), normalized);
  }

 private:
  // sigmoid(x_head W_head + b_head) per head, back in [B, T, W] (a copy: the transposed heads).
  Tensor gate(const Tensor& per_head, const char* weight, const char* bias, int64_t b, int64_t t) {
    const Tensor res = baddbmm(unsqueeze(parameter(bias), 1), per_head, parameter(weight));
    return sigmoid(reshape(transpose(res, 0, 1), {b, t, width_}));
  }

  int64_t heads_, width_;
};

// RecurrentGemmaRecurrentBlock (rg_lru.h): linear_y, linear_x, linear_out, conv_1d, rg_lru.
class RgLruBlock : public TemporalBlock {
 public:
  RgLruBlock(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : TemporalBlock(prefix + "RecurrentBlock"), act_(c.hidden_act) {
    const int64_t h = c.hidden_size, heads = c.linear_num_value_heads;
    const int64_t width = heads * c.linear_value_head_dim;
    SP_ASSERT(heads > 0 && c.linear_value_head_dim > 0, "an RG-LRU of ", heads, " heads of ",
              c.linear_value_head_dim, " channels");
    linear_y_ =
        register_module("linear_y", std::make_shared<Linear>(h, width, c.linear_proj_bias, o));
    linear_x_ =
        register_module("linear_x", std::make_shared<Linear>(h, width, c.linear_proj_bias, o));
    linear_out_ =
        register_module("linear_out", std::make_shared<Linear>(width, h, c.linear_proj_bias, o));
    conv_ = register_module(
        "conv_1d", make_conv1d_parameters(width, c.linear_conv_kernel_dim, c.linear_conv_bias, o));
    rg_lru_ =
        register_module("rg_lru", std::make_shared<RgLruUnit>(prefix + "Rglru", heads, width, o));
  }
  Tensor run(const Tensor& x, const Tensor& position_ids) override {
    CallScope scope(*this);
    const Tensor y = activation(act_, linear_y_->call(x));
    // [B, W, T] through the causal depthwise convolution (its bias, no activation), read back as
    // [B, T, W] (a view, which the RG-LRU's reshape copies).
    const Tensor conv =
        causal_conv1d(transpose(linear_x_->call(x), 1, 2), conv_->parameter("weight"),
                      conv_->parameter("bias"), /*silu=*/false);
    const Tensor h = rg_lru_->run(transpose(conv, 1, 2), position_ids);
    return linear_out_->call(mul(h, y));
  }

 private:
  std::string act_;
  std::shared_ptr<Linear> linear_y_, linear_x_, linear_out_;
  ModulePtr conv_;
  std::shared_ptr<RgLruUnit> rg_lru_;
};

}  // namespace

std::shared_ptr<TemporalBlock> make_rg_lru_block(const ModelConfig& c, const std::string& prefix,
                                                 const TensorOptions& o) {
  return std::make_shared<RgLruBlock>(c, prefix, o);
}

}  // namespace shardplan::tensor::models
