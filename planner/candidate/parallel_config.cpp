#include "planner/candidate/parallel_config.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/checked.h"
#include "base/enum_names.h"
#include "base/error.h"
#include "base/limits.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {
namespace {

constexpr EnumName<Precision> kPrecisionNames[] = {{"bf16", Precision::kBf16},
                                                   {"fp8", Precision::kFp8}};

}  // namespace

std::string_view to_string(Precision p) { return enum_name(p, kPrecisionNames); }

Precision parse_precision(std::string_view s) {
  return parse_enum_name(s, kPrecisionNames, "precision", NameCase::kInsensitive);
}

int64_t micro_batches_per_step(const TrainingSetup& setup, const ParallelConfig& c) {
  int64_t per_step = 0;
  SP_CHECK(c.dp >= 1 && c.micro_batch >= 1 && mul_into(c.dp, c.micro_batch, per_step) &&
               setup.global_batch % per_step == 0,
           "--global-batch ", setup.global_batch, " is not divisible by --dp ", c.dp,
           " x --micro-batch ", c.micro_batch, ", expected a multiple of their product");
  return setup.global_batch / per_step;
}

PipelineShape pipeline_shape(const TrainingSetup& setup, const ParallelConfig& c) {
  return {.stages = c.pp,
          .micro_batches = micro_batches_per_step(setup, c),
          .virtual_stages = c.virtual_stages,
          .schedule =
              c.virtual_stages > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B};
}

void check_training_setup(const tensor::ModelConfig& model, const TrainingSetup& setup) {
  SP_CHECK(setup.gpus >= 1, "--gpus ", setup.gpus, ", expected a positive number of GPUs");
  SP_CHECK(setup.gpus <= kMaxRanks, "--gpus ", setup.gpus, " is more than shardplan plans for, ",
           "expected at most ", kMaxRanks, " (2^20; docs/user-guide.md \"Limits\")");
  SP_CHECK(setup.seq >= 1, "--seq ", setup.seq, ", expected a positive sequence length");
  SP_CHECK(setup.seq <= model.max_position_embeddings, "--seq ", setup.seq, " is longer than ",
           model.model_type, "'s ", model.max_position_embeddings,
           " positions (max_position_embeddings), expected at most ",
           model.max_position_embeddings);
  SP_CHECK(setup.global_batch >= 1, "--global-batch ", setup.global_batch,
           ", expected a positive number of sequences per step");
  int64_t tokens = 0;
  SP_CHECK(mul_into(setup.global_batch, setup.seq, tokens), "--global-batch ", setup.global_batch,
           " x --seq ", setup.seq,
           " tokens per step overflow a 64-bit count, expected a product of at most ",
           std::numeric_limits<int64_t>::max());
}

void check_parallel_config(const tensor::ModelConfig& model, const TrainingSetup& setup,
                           const ParallelConfig& c) {
  check_training_setup(model, setup);
  std::vector<std::pair<std::string_view, int64_t>> counts;
  for (const ParallelDim& d : parallel_dims()) counts.emplace_back(d.flag, c.*d.degree);
  counts.emplace_back("--micro-batch", c.micro_batch);
  counts.emplace_back("--virtual-stages", c.virtual_stages);
  for (const auto& [flag, value] : counts) {
    SP_CHECK(value >= 1, flag, " ", value, ", expected a positive number");
  }
  // The world is the product of the dimensions not carved out of another (Note [Parallel
  // dimensions]); a carved one divides the dimension it is carved from.
  std::vector<int64_t> degrees;
  for (const ParallelDim& d : parallel_dims()) {
    if (!d.carved_from) degrees.push_back(c.*d.degree);
  }
  const std::optional<int64_t> world = checked_product(degrees);
  SP_CHECK(world && *world == setup.gpus, world_product_text(c),
           world ? " = " + std::to_string(*world) : std::string(" overflows"), ", expected --gpus ",
           setup.gpus);
  // Each degree on its own, then the rules that tie two together.
  for (const ParallelDim& d : parallel_dims()) {
    if (d.mesh_dim == kDpDim) continue;  // dp's batch rule is micro_batches_per_step's, below
    const std::string why = d.refuses(model, setup, c.*d.degree);
    SP_CHECK(why.empty(), why);
  }
  // Expert parallelism is carved out of dp (and tp): Note [Expert fold].
  SP_CHECK(c.etp >= 0, "--etp ", c.etp, ", expected a positive number");
  const std::string fold = expert_fold_refuses(model, c);
  SP_CHECK(fold.empty(), fold);
  int64_t chunks = 0;
  SP_CHECK(mul_into(c.pp, c.virtual_stages, chunks) && chunks <= model.num_hidden_layers, "--pp ",
           c.pp, " x --virtual-stages ", c.virtual_stages, " model chunks for ",
           model.num_hidden_layers, " layers, expected at most one chunk per layer");
  SP_CHECK(c.zero >= 0 && c.zero <= 3, "--zero ", c.zero, ", expected 0, 1, 2 or 3");
  SP_CHECK(c.recompute_layers >= 0 && c.recompute_layers <= model.num_hidden_layers,
           "--recompute-layers ", c.recompute_layers, ", expected between 1 and the model's ",
           model.num_hidden_layers, " layers");
  SP_CHECK(c.recompute_layers == 0 || c.recompute == tensor::RecomputePolicy::kFull,
           "--recompute-layers ", c.recompute_layers, " with --recompute ",
           tensor::to_string(c.recompute), ", expected --recompute full");
  SP_CHECK(!c.sequence_parallel || c.tp > 1,
           "--sequence-parallel on needs tensor parallelism, expected --tp > 1");
  check_pipeline_shape(pipeline_shape(setup, c));
}

}  // namespace shardplan::planner
