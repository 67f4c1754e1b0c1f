// mamba2: a pure Mamba-2 language model (Mamba2ForCausalLM; Mistral's Mamba-Codestral-7B,
// state-spaces' mamba2-* checkpoints). transformers 5's Mamba2Config and modeling_mamba2.py: no
// attention and no MLP, each `backbone.layers.N` (Mamba2Block) a pre-norm `norm` and one Mamba-2
// `mixer` (tensor/models/mamba2_mixer.h, Mamba2Mixer: H = num_heads heads of P = head_dim,
// d_inner = expand x hidden_size = H P, n_groups groups of state_size, conv_kernel taps, its gated
// norm MambaRMSNormGated over d_inner), then `backbone.norm_f` and lm_head (untied by default):
//   backbone.embeddings.weight [vocab, h]
//   backbone.layers.N.norm.weight [h]
//   backbone.layers.N.mixer.{dt_bias, A_log, D} [H], conv1d.weight [conv, 1, K], conv1d.bias
//   [conv], in_proj.weight [d_inner + conv + H, h], norm.weight [d_inner], out_proj.weight
//   [h, d_inner]   (conv = d_inner + 2 n_groups state_size; biases of in/out_proj: use_bias)
//   backbone.norm_f.weight [h], lm_head.weight [vocab, h]
// ModelConfig keeps the mixer in its linear_* fields, every layer kLinear and in no_ffn_layers
// (the single-part layers of Nemotron-H). The model has no attention: num_attention_heads,
// num_key_value_heads and head_dim hold the mixer's heads and head width and intermediate_size
// d_inner, so that the sizes ModelConfig requires describe the mixer (nothing builds them).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {

extern const ModelFamily kMamba2Family;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "Mamba2";

// A state-space model has no positions and no limit on its length; Mamba2Config has no
// max_position_embeddings. This stands in for it, so that any --seq up to a million tokens plans
// without a note (beyond, plan says the model has no position encoding and plans it anyway).
constexpr int64_t kNoPositionLimit = int64_t{1} << 20;

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 32768);
  c.hidden_size = f.integer("hidden_size", 4096);
  c.num_hidden_layers = f.integer("num_hidden_layers", 64);
  // Bounded before the per-layer lists are made from it (validate's bound comes after parse).
  if (c.num_hidden_layers < 1 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers));
  }
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.residual_in_fp32 = f.boolean("residual_in_fp32", true);
  c.max_position_embeddings = kNoPositionLimit;
  if (f.string("hidden_act", "silu") != "silu") {
    f.fail("hidden_act", "'" + f.string("hidden_act", "") +
                             "' is not built; expected \"silu\" (the fused scan's SiLU)");
  }
  const int64_t heads = f.integer("num_heads", 128);
  const int64_t head_dim = f.integer("head_dim", 64);
  const int64_t expand = f.integer("expand", 2);
  // Mamba2Config.validate_architecture: expand x hidden_size must be num_heads x head_dim.
  int64_t inner = 0, by_heads = 0;
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("expand",
           std::to_string(expand) + " must be positive, with expand x hidden_size in int64");
  }
  if (heads <= 0 || head_dim <= 0 || !mul_into(heads, head_dim, by_heads) || by_heads != inner) {
    f.fail("num_heads", std::to_string(heads) + " heads of head_dim " + std::to_string(head_dim) +
                            " must be expand x hidden_size = " + std::to_string(inner) +
                            " wide (Mamba2Config's validate_architecture)");
  }
  c.hidden_act = "silu";  // the mixer's gate (no MLP)
  c.linear_num_value_heads = heads;
  c.linear_value_head_dim = head_dim;
  c.linear_num_key_heads = f.integer("n_groups", 8);
  c.linear_key_head_dim = f.integer("state_size", 128);
  c.linear_conv_kernel_dim = f.integer("conv_kernel", 4);
  c.linear_conv_bias = f.boolean("use_conv_bias", true);
  c.linear_proj_bias = f.boolean("use_bias", false);
  // The scan's chunk changes the kernels' tiling, not the model (Note [Mamba-2 scan work] in
  // tensor/ops.h); time_step_* and rescale_prenorm_residual are initialization, time_step_limit
  // a clamp at run time, time_step_rank sizes nothing in Mamba-2.
  if (f.integer("chunk_size", 256) <= 0) {
    f.fail("chunk_size", "must be positive, got " + f.raw("chunk_size").dump());
  }
  c.num_attention_heads = heads;
  c.num_key_value_heads = heads;
  c.head_dim = head_dim;
  c.intermediate_size = inner;
  c.layer_types.assign(static_cast<size_t>(std::max<int64_t>(c.num_hidden_layers, 0)),
                       AttentionType::kLinear);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.no_ffn_layers.push_back(i);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["residual_in_fp32"] = c.residual_in_fp32;
  j["hidden_act"] = "silu";
  j["num_heads"] = c.linear_num_value_heads;
  j["head_dim"] = c.linear_value_head_dim;
  j["expand"] = c.linear_num_value_heads * c.linear_value_head_dim / c.hidden_size;
  j["n_groups"] = c.linear_num_key_heads;
  j["state_size"] = c.linear_key_head_dim;
  j["conv_kernel"] = c.linear_conv_kernel_dim;
  j["use_conv_bias"] = c.linear_conv_bias;
  j["use_bias"] = c.linear_proj_bias;
}

// Mamba2Block: residual + mixer(norm(x)), the norm's input cast to the norm's dtype and, with
// residual_in_fp32, the residual (and so the block's output, the next block's input) in float32.
class Block : public Module {
 public:
  Block() : Module(std::string(kPrefix) + "Block") {}
  void build(const ModelConfig& c, const TensorOptions& o) {
    norm_ = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    mixer_ = register_module("mixer",
                             models::make_mamba2_mixer(c, "Mamba2Mixer", "MambaRMSNormGated", o));
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
  std::shared_ptr<models::AttentionBlock> mixer_;
  bool residual_in_fp32_ = true;
};

class Backbone : public Module {
 public:
  Backbone(const ModelConfig& c, const TensorOptions& o, bool /*training: no dropout*/)
      : Module(std::string(kPrefix) + "Model") {
    embeddings_ =
        register_module("embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks_.push_back(layers->push_back(std::make_shared<Block>()));
    }
    norm_f_ = register_module(
        "norm_f", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (const auto& block : blocks_) block->build(c, o);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embeddings_->call(ids);
    for (const auto& block : blocks_) h = block->run(h);
    return norm_f_->call(to(h, norm_f_->parameter("weight").dtype()));
  }

 private:
  ModulePtr embeddings_, norm_f_;
  std::vector<std::shared_ptr<Block>> blocks_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::LmHeadModel<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                         training, "backbone",
                                                         "backbone.embeddings.weight");
}

constexpr FieldRename kRenames[] = {
    {"norm_eps", "layer_norm_epsilon"},        {"num_attention_heads", "num_heads"},
    {"linear_num_key_heads", "n_groups"},      {"linear_num_value_heads", "num_heads"},
    {"linear_key_head_dim", "state_size"},     {"linear_value_head_dim", "head_dim"},
    {"linear_conv_kernel_dim", "conv_kernel"}, {"linear_conv_bias", "use_conv_bias"},
    {"linear_proj_bias", "use_bias"}};

// Megatron-LM's split of a Mamba-2 mixer (its MambaMixer): in_proj column-parallel and out_proj
// row-parallel, the heads and groups over the ranks (the planner requires tp to divide both);
// the embedding by vocabulary rows and lm_head by vocabulary, as every family.
constexpr TensorParallelRule kTpPlan[] = {{"backbone.embeddings", "rowwise"},
                                          {"backbone.layers.*.mixer.in_proj", "colwise"},
                                          {"backbone.layers.*.mixer.out_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

// No init rules: dt_bias is the inverse softplus of a log-uniform draw and conv1d / out_proj are
// kaiming_uniform_ (Mamba2PreTrainedModel._init_weights), fills shardplan's kernels do not have,
// so materialize refuses the family by name (docs/models.md).
const ModelFamily kMamba2Family{
    .model_type = "mamba2",
    .hf_class_prefix = "Mamba2",
    .layers_path = "backbone.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .linear_attention = true,
    .single_part_layers = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
