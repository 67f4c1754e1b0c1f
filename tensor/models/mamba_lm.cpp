#include "tensor/models/mamba_lm.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/ops.h"

namespace shardplan::tensor::models {
namespace {

// Note [Pure state-space blocks] in mamba_lm.h. Empty until build() (Note [Filling repeated blocks
// after registration] in blocks.h).
class MambaLmBlock : public Module {
 public:
  explicit MambaLmBlock(const std::string& prefix) : Module(prefix + "Block") {}
  void build(const ModelConfig& c, const TensorOptions& o, const MixerFactory& make_mixer) {
    norm_ = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    mixer_ = register_module("mixer", make_mixer(c, o));
    residual_in_fp32_ = c.residual_in_fp32;
  }
  Tensor run(const Tensor& x) {
    CallScope scope(*this);
    const Tensor n = norm_->call(to(x, norm_->parameter("weight").dtype()));
    const Tensor y = mixer_->run(n, Tensor(), Tensor());
    return add(residual_in_fp32_ ? to(x, DType::kFloat32) : x, y);
  }

 private:
  ModulePtr norm_;
  std::shared_ptr<AttentionBlock> mixer_;
  bool residual_in_fp32_ = true;
};

// MambaModel / FalconMambaModel / Mamba2Model: embeddings, layers, norm_f.
class MambaLmBackbone : public Module {
 public:
  MambaLmBackbone(const std::string& prefix, const ModelConfig& c, const TensorOptions& o,
                  const MixerFactory& make_mixer)
      : Module(prefix + "Model") {
    embeddings_ =
        register_module("embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks_.push_back(layers->push_back(std::make_shared<MambaLmBlock>(prefix)));
    }
    norm_f_ = register_module(
        "norm_f", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    for (const auto& block : blocks_) block->build(c, o, make_mixer);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embeddings_->call(ids);
    for (const auto& block : blocks_) h = block->run(h);
    return norm_f_->call(h);  // float32 out of a float32 stream
  }

 private:
  ModulePtr embeddings_, norm_f_;
  std::vector<std::shared_ptr<MambaLmBlock>> blocks_;
};

// <prefix>ForCausalLM: lm_head over the normed stream cast to its dtype.
class MambaLmForCausalLm : public Module {
 public:
  MambaLmForCausalLm(const std::string& prefix, const ModelConfig& c, const TensorOptions& o,
                     const MixerFactory& make_mixer)
      : Module(prefix + "ForCausalLM") {
    backbone_ =
        register_module("backbone", std::make_shared<MambaLmBackbone>(prefix, c, o, make_mixer));
    lm_head_ =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    if (c.tie_word_embeddings)
      tie_parameters(*this, "lm_head.weight", "backbone.embeddings.weight");
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor h = backbone_->call(ids);
    return lm_head_->call(to(h, lm_head_->weight().dtype()));
  }

 private:
  ModulePtr backbone_;
  std::shared_ptr<Linear> lm_head_;
};

}  // namespace

void parse_mamba_lm(const ConfigFields& f, ModelConfig& c, const MambaLmDefaults& d) {
  c.vocab_size = f.integer("vocab_size", d.vocab_size);
  c.hidden_size = f.integer("hidden_size", d.hidden_size);
  c.num_hidden_layers = f.integer("num_hidden_layers", d.num_hidden_layers);
  // Bounded before the per-layer lists are made (validate() would refuse it only afterwards).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", d.tie_word_embeddings);
  c.residual_in_fp32 = f.boolean("residual_in_fp32", true);
  c.max_position_embeddings = kNoPositionLimit;
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kLinear);
  c.no_ffn_layers.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.no_ffn_layers.push_back(i);
}

void mamba_lm_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["residual_in_fp32"] = c.residual_in_fp32;
}

ModulePtr build_mamba_lm(const ModelConfig& c, const TensorOptions& o, const std::string& prefix,
                         const MixerFactory& make_mixer) {
  return std::make_shared<MambaLmForCausalLm>(prefix, c, o, make_mixer);
}

}  // namespace shardplan::tensor::models
