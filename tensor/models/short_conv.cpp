#include "tensor/models/short_conv.h"

#include "tensor/layers.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// Note [Short convolution trace] in short_conv.h.
class ShortConv : public AttentionBlock {
 public:
  ShortConv(const ModelConfig& c, const std::string& type_name, const TensorOptions& o)
      : AttentionBlock(type_name), hidden_(c.hidden_size) {
    const int64_t h = c.hidden_size;
    const bool bias = c.linear_conv_bias;
    conv_ = register_module("conv", make_conv1d_parameters(h, c.linear_conv_kernel_dim, bias, o));
    register_module("in_proj", std::make_shared<Linear>(h, 3 * h, bias, o));
    register_module("out_proj", std::make_shared<Linear>(h, h, bias, o));
  }
  Tensor run(const Tensor& x, const Tensor&, const Tensor&) override {
    CallScope scope(*this);
    const Tensor bcx = transpose(child("in_proj")->call(x), -1, -2);  // [batch, 3 h, tokens]
    const Tensor b = narrow(bcx, 1, 0, hidden_), gate = narrow(bcx, 1, hidden_, hidden_),
                 u = narrow(bcx, 1, 2 * hidden_, hidden_);
    const Tensor conv = causal_conv1d(mul(b, u), conv_->parameter("weight"),
                                      conv_->parameter("bias"), /*silu=*/false);
    const Tensor y = mul(gate, conv);
    return child("out_proj")->call(contiguous(transpose(y, -1, -2)));
  }

 private:
  int64_t hidden_;
  ModulePtr conv_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_short_conv(const ModelConfig& c, const std::string& type_name,
                                                const TensorOptions& o) {
  return std::make_shared<ShortConv>(c, type_name, o);
}

}  // namespace shardplan::tensor::models
