// A DeepSpeed JSON config for a plan (Note [Export is exact or refused] in plan_export.h; keys
// are those of tests/data/frameworks/deepspeed_config_keys.json). DeepSpeed's config holds data
// parallelism and ZeRO; tensor, pipeline, context and expert parallelism live in the model code
// (Megatron-DeepSpeed), so such plans are refused.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "planner/plan/plan_export.h"

namespace shardplan::planner {

FrameworkExport export_deepspeed(const PlanFile& p, const ExportOptions& o) {
  const ParallelConfig& c = p.config;
  for (const auto& [name, degree] :
       {std::pair<const char*, int64_t>{"tp", c.tp}, {"pp", c.pp}, {"cp", c.cp}, {"ep", c.ep}}) {
    SP_CHECK(degree == 1, "DeepSpeed's config holds data parallelism and ZeRO only: the plan has ",
             name, " ", degree,
             ", which lives in the model code (Megatron-DeepSpeed); expected "
             "a plan made with --tp 1 --pp 1 --cp 1, or export --to megatron");
  }
  SP_CHECK(c.precision != Precision::kFp8,
           "DeepSpeed's config has no fp8 recipe (fp8 comes from TransformerEngine in the model "
           "code): the plan is fp8, expected --precision bf16 or export --to megatron");
  FrameworkExport e;
  e.launch = launch_line(p, o.launcher,
                         "<your training script> --deepspeed --deepspeed_config " + o.config_path);
  nlohmann::ordered_json j;
  j["train_batch_size"] = p.setup.global_batch;
  j["train_micro_batch_size_per_gpu"] = c.micro_batch;
  j["gradient_accumulation_steps"] = p.setup.global_batch / (c.micro_batch * c.dp);
  j["bf16"] = {{"enabled", true}};
  j["zero_optimization"] = {{"stage", c.zero}};
  if (c.recompute != tensor::RecomputePolicy::kNone) {
    e.notes.push_back(
        "the plan recomputes activations: wrap the model's layers in "
        "deepspeed.checkpointing.checkpoint (DeepSpeed's config does not switch it on)");
  }
  e.config = j.dump(2) + "\n";
  return e;
}

}  // namespace shardplan::planner
