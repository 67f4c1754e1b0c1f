#include "planner/cost/training_metrics.h"

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::planner {

int64_t parameter_count(const tensor::ModelConfig& c) {
  const tensor::ModulePtr model = tensor::build_model(c);
  int64_t n = 0;
  for (const tensor::NamedTensor& p : model->named_parameters()) n += p.tensor.numel();
  return n;
}

int64_t active_parameter_count(const tensor::ModelConfig& c) {
  return tensor::active_parameters(*tensor::build_model(c), c);
}

namespace {

// Note [Weights shared across layers]
// Zamba2's hybrid layers take turns at num_mem_blocks shared attention + MLP blocks: the weights
// are tied (named_parameters lists each once), but every layer that runs a block multiplies by
// its weights. 6N prices a multiply-add per parameter per token, so N counts a shared tensor once
// per layer that uses it: the sum of each repeated layer's own parameters (a tie inside one layer
// counted once) beside the rest of the model. A tied embedding and output layer stay one tensor:
// the lookup does no multiply-add. Zero for models without ties across layers.
int64_t repeated_layer_parameters(const tensor::Module& root, const tensor::ModelConfig& c) {
  if (!tensor::family_of(c).shared_transformer_blocks) return 0;
  const tensor::Module& layers = root.get_submodule(std::string(tensor::family_of(c).layers_path));
  int64_t per_use = 0;
  for (const auto& [name, layer] : layers.named_children()) per_use += layer->parameters_numel();
  return per_use - layers.parameters_numel();
}

// Note [Layers run in cycles] (tensor/models/layer_kinds.h): a weight that runs forward f and
// backward b times a step does 2 f + 4 b FLOPs per token, not 6: the factor (f + 2 b) / 3 on the
// attention of layer i (its f calls and b backwards), and that shared among the `layers` decoder
// layers layer i holds for their weights (each passes only its own calls; their shapes are equal).
// 1 for a model without a recurrence.
double passes_factor(const tensor::ModelConfig& c, bool per_weight) {
  const tensor::LayerPasses p = tensor::layer_passes(c);
  const double calls = static_cast<double>(p.forward + 2 * p.backward) / 3.0;
  return per_weight ? calls / static_cast<double>(p.layers) : calls;
}

// The parameters of the stack's layers (under the family's layers_path and paired_layers_path),
// each once.
int64_t layer_parameters(const tensor::Module& root, const tensor::ModelConfig& c) {
  const tensor::ModelFamily& family = tensor::family_of(c);
  int64_t n = 0;
  for (const std::string_view path : {family.layers_path, family.paired_layers_path}) {
    if (!path.empty()) n += root.get_submodule(std::string(path)).parameters_numel();
  }
  return n;
}

}  // namespace

double model_flops_per_token(const tensor::ModelConfig& c, int64_t seq) {
  SP_CHECK(seq >= 1, "sequence of ", seq, " tokens, expected at least one");
  // Gemma 4's per-layer embedding table is a lookup (each token reads one row: no multiply-add
  // per parameter), half of E2B's parameters: left out of N (docs/cost-model.md §2.4).
  const double lookup_only = static_cast<double>(c.per_layer_input_vocab) *
                             static_cast<double>(c.per_layer_input_layers) *
                             static_cast<double>(c.per_layer_input_size);
  const tensor::ModulePtr model = tensor::build_model(c);
  double n = static_cast<double>(tensor::active_parameters(*model, c) +
                                 repeated_layer_parameters(*model, c)) -
             lookup_only;
  if (tensor::layer_passes(c) != tensor::LayerPasses{}) {
    // Note [Layers run in cycles]: a dense family's layers (experts would need their active
    // share here too; validate() keeps a recurrence to hrm_text).
    n += static_cast<double>(layer_parameters(*model, c)) * (passes_factor(c, true) - 1);
  }
  return 6 * n + attention_flops_per_token(c, seq);
}

double attention_flops_per_token(const tensor::ModelConfig& c, int64_t seq) {
  SP_CHECK(seq >= 1, "sequence of ", seq, " tokens, expected at least one");
  double per_position = 0;  // sum over layers of heads x (q/k width + value width)
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const tensor::LayerKind k = tensor::layer_kind(c, layer);
    // Linear attention and Mamba mixers keep a state instead of scores: no product over keys.
    if (k.attention == tensor::AttentionType::kLinear ||
        k.attention == tensor::AttentionType::kNone) {
      continue;
    }
    // Latent attention's heads score over nope + rope channels and return v_head_dim ones.
    const bool latent = c.kv_lora_rank > 0;
    const double qk = latent ? static_cast<double>(c.qk_nope_head_dim + c.qk_rope_head_dim)
                             : static_cast<double>(tensor::head_dim_of(c, k));
    const double v = latent ? static_cast<double>(c.v_head_dim)
                            : static_cast<double>(tensor::value_head_dim(c, k));
    per_position += static_cast<double>(c.num_attention_heads) * (qk + v);
  }
  // LongCat-Flash runs two attention blocks a layer (ModelFamily::attentions_per_layer); HRM-Text
  // runs layer i's attention (its two stacks') once per pass (passes_factor).
  per_position *=
      static_cast<double>(tensor::family_of(c).attentions_per_layer) * passes_factor(c, false);
  // Q K^T and scores x V: 2 FLOPs per multiply-add, forward and twice that in backward.
  return 6.0 * per_position * static_cast<double>(seq);
}

double mfu(double model_flops_per_token, int64_t tokens_per_step, int64_t gpus,
           double peak_flops_per_gpu, double step_time_s) {
  SP_CHECK(model_flops_per_token > 0 && tokens_per_step > 0 && gpus > 0 && peak_flops_per_gpu > 0 &&
               step_time_s > 0,
           "MFU needs positive FLOPs per token, tokens, GPUs, peak and step time, got ",
           model_flops_per_token, ", ", tokens_per_step, ", ", gpus, ", ", peak_flops_per_gpu, ", ",
           step_time_s);
  return model_flops_per_token * static_cast<double>(tokens_per_step) /
         (static_cast<double>(gpus) * peak_flops_per_gpu * step_time_s);
}

}  // namespace shardplan::planner
