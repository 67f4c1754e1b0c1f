#include "tensor/models/lightning_attention.h"

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// MiniMaxRMSNorm's default eps: MiniMaxLightningAttention builds its norm without the config's.
constexpr double kLightningNormEps = 1e-6;

// Note [Lightning attention trace] in lightning_attention.h.
class LightningAttention : public AttentionBlock {
 public:
  LightningAttention(const ModelConfig& c, const std::string& prefix, const TensorOptions& o)
      : AttentionBlock(prefix + "LightningAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        act_(c.hidden_act) {
    const int64_t h = c.hidden_size, width = heads_ * head_dim_, block = c.linear_block_size;
    SP_ASSERT(block > 0, "a lightning attention without a block (validate() requires one)");
    // MiniMaxLightningAttention's registration order: norm, qkv_proj, out_proj, output_gate, then
    // the decays.
    norm_ = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{width}, kLightningNormEps, true, o));
    register_module("qkv_proj", std::make_shared<Linear>(h, 3 * width, false, o));
    register_module("out_proj", std::make_shared<Linear>(width, h, false, o));
    register_module("output_gate", std::make_shared<Linear>(h, width, false, o));
    // nn.Buffer's default: persistent, so a state_dict (and a checkpoint saved from one) holds
    // them.
    register_buffer("slope_rate", empty({heads_, 1, 1}, o));
    register_buffer("query_decay", empty({heads_, block, 1}, o));
    register_buffer("key_decay", empty({heads_, block, 1}, o));
    register_buffer("diagonal_decay", empty({1, heads_, block, block}, o));
  }

  Tensor run(const Tensor& x, const Tensor& /*cos_t*/, const Tensor& /*sin_t*/) override {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    // Per head [q | k | v] after the activation (qkv_states.reshape(b, s, H, 3 d) and split).
    const Tensor qkv =
        view(activation(act_, child("qkv_proj")->call(x)), {b, s, heads_, 3 * head_dim_});
    const Tensor out = lightning_attention(narrow(qkv, 3, 0, d), narrow(qkv, 3, d, d),
                                           narrow(qkv, 3, 2 * d, d), buffer("slope_rate"));
    const Tensor normed = norm_->call(view(out, {b, s, heads_ * d}));
    const Tensor gate = sigmoid(child("output_gate")->call(x));
    return child("out_proj")->call(mul(gate, normed));
  }

 private:
  int64_t heads_, head_dim_;
  std::string act_;
  ModulePtr norm_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_lightning_attention(const ModelConfig& c,
                                                         const std::string& prefix,
                                                         const TensorOptions& o) {
  return std::make_shared<LightningAttention>(c, prefix, o);
}

}  // namespace shardplan::tensor::models
