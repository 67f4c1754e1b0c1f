#include "planner/cost/training_metrics.h"

#include "base/error.h"
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

double model_flops_per_token(const tensor::ModelConfig& c, int64_t seq) {
  SP_CHECK(seq >= 1, "sequence of ", seq, " tokens, expected at least one");
  // Gemma 4's per-layer embedding table is a lookup (each token reads one row: no multiply-add
  // per parameter), half of E2B's parameters: left out of N (docs/cost-model.md §2.4).
  const double lookup_only = static_cast<double>(c.per_layer_input_vocab) *
                             static_cast<double>(c.per_layer_input_layers) *
                             static_cast<double>(c.per_layer_input_size);
  const double n = static_cast<double>(active_parameter_count(c)) - lookup_only;
  return 6 * n + 12.0 * static_cast<double>(c.num_hidden_layers) *
                     static_cast<double>(c.hidden_size) * static_cast<double>(seq);
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
