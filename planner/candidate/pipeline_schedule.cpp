#include "planner/candidate/pipeline_schedule.h"

#include <algorithm>

#include "base/checked.h"
#include "base/enum_names.h"
#include "base/error.h"

namespace shardplan::planner {
namespace {

constexpr EnumName<PipelineSchedule> kScheduleNames[] = {
    {"1f1b", PipelineSchedule::k1F1B},
    {"interleaved", PipelineSchedule::kInterleaved1F1B},
    {"interleaved_1f1b", PipelineSchedule::kInterleaved1F1B},
    {"gpipe", PipelineSchedule::kGPipe}};

}  // namespace

std::string_view to_string(PipelineSchedule s) { return enum_name(s, kScheduleNames); }

PipelineSchedule parse_pipeline_schedule(std::string_view s) {
  return parse_enum_name(s, kScheduleNames, "pipeline schedule", NameCase::kInsensitive);
}

void check_pipeline_shape(const PipelineShape& s) {
  // Bounds far above any real pipeline keep every count below exact in int64.
  constexpr int64_t kMaxCount = int64_t{1} << 31;
  SP_CHECK(s.stages >= 1 && s.stages <= kMaxCount, "--pp ", s.stages,
           ", expected a positive number of pipeline stages (at most 2^31)");
  SP_CHECK(s.virtual_stages <= kMaxCount, "--virtual-stages ", s.virtual_stages,
           ", expected at most 2^31");
  SP_CHECK(s.micro_batches >= 1, s.micro_batches, " micro-batches per step, expected at least one");
  SP_CHECK(s.virtual_stages >= 1, "--virtual-stages ", s.virtual_stages,
           ", expected a positive number of model chunks per pipeline rank");
  const bool interleaved = s.schedule == PipelineSchedule::kInterleaved1F1B;
  SP_CHECK(
      interleaved == (s.virtual_stages > 1), "--virtual-stages ", s.virtual_stages, " with the ",
      to_string(s.schedule), " schedule, expected ",
      interleaved ? "more than 1 (1 is plain 1f1b)" : "1 (more chunks need the interleaved one)");
  SP_CHECK(!interleaved || s.stages > 1, "--virtual-stages ", s.virtual_stages,
           " needs pipelining, expected --pp > 1");
  SP_CHECK(!interleaved || s.micro_batches % s.stages == 0,
           "interleaved schedule: ", s.micro_batches,
           " micro-batches per step is not a multiple of --pp ", s.stages,
           ", expected a multiple (Megatron-LM's interleaved 1F1B runs them in groups of p)");
}

double bubble_fraction(const PipelineShape& s) {
  check_pipeline_shape(s);
  const double idle = static_cast<double>(s.stages - 1);
  return idle / (static_cast<double>(s.virtual_stages) * static_cast<double>(s.micro_batches));
}

int64_t chunks_in_flight(const PipelineShape& s, int64_t stage) {
  check_pipeline_shape(s);
  SP_CHECK(stage >= 0 && stage < s.stages, "pipeline stage ", stage, ", expected one of 0..",
           s.stages - 1);
  const int64_t p = s.stages;
  const int64_t v = s.virtual_stages;
  switch (s.schedule) {
    case PipelineSchedule::kGPipe:
      return s.micro_batches;
    case PipelineSchedule::k1F1B:
      return std::min(s.micro_batches, p - stage);
    case PipelineSchedule::kInterleaved1F1B: {
      // Warm-up forwards 2 (p - stage - 1) + (v - 1) p, plus the one whose backward comes first.
      int64_t rounds = 0;
      int64_t warmup = 0;
      int64_t total = 0;
      SP_CHECK(mul_into(v - 1, p, rounds) && add_into(rounds, 2 * (p - stage - 1) + 1, warmup) &&
                   mul_into(s.micro_batches, v, total),
               "--virtual-stages ", v, " x --pp ", p, " x ", s.micro_batches,
               " micro-batches overflows int64, expected smaller counts");
      return std::min(total, warmup);
    }
  }
  SP_ASSERT(false, "unknown pipeline schedule");
  return 0;
}

double layer_activations_held(const PipelineShape& s, int64_t stage, int64_t layers) {
  SP_CHECK(layers >= 1, layers, " layers, expected at least one");
  const double per_chunk = static_cast<double>(layers) /
                           (static_cast<double>(s.stages) * static_cast<double>(s.virtual_stages));
  return static_cast<double>(chunks_in_flight(s, stage)) * per_chunk;
}

}  // namespace shardplan::planner
