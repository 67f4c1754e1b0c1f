// Pipeline schedules as counts: the bubble each leaves and the micro-batches whose activations a
// stage holds at once (docs/cost-model.md §1.3 "Pipeline schedules").
//   PipelineShape s{.stages = 4, .micro_batches = 16, .virtual_stages = 2,
//                   .schedule = PipelineSchedule::kInterleaved1F1B};
//   bubble_fraction(s);            // (p - 1) / (v m) = 3 / 32
//   layer_activations_held(s, 0, 32);  // first stage: L (1 + (p - 1) / (p v)) = 32 * 1.375 = 44
//   layers
//
// Note [In-flight micro-batches]: under 1F1B stage r runs p - r - 1 warm-up forwards before its
// first backward, so it holds min(m, p - r) micro-batches of its L / p layers; stage 0 holds p of
// them, L layers' worth, whatever p is (Narayanan et al. 2021 §2.2.1, Korthikanti et al. 2022
// §4.2.3). Interleaved 1F1B with v chunks per stage warms up 2 (p - r - 1) + (v - 1) p chunk
// forwards (Megatron-LM's schedules.py, get_num_warmup_microbatches), so stage 0 holds
// v p + p - 1 chunks of L / (p v) layers = L (1 + (p - 1) / (p v)) layers: exactly Korthikanti's
// interleaving factor. GPipe runs every forward first: m micro-batches of L / p layers.
#pragma once

#include <cstdint>
#include <string_view>

namespace shardplan::planner {

enum class PipelineSchedule : uint8_t { k1F1B, kInterleaved1F1B, kGPipe };
std::string_view to_string(PipelineSchedule s);
// "1f1b", "interleaved", "gpipe" (any case); throws shardplan::Error naming the accepted names.
PipelineSchedule parse_pipeline_schedule(std::string_view s);

struct PipelineShape {
  int64_t stages = 1;          // p, the pipeline-parallel degree
  int64_t micro_batches = 1;   // m, per pipeline per step (global batch / (micro-batch * dp))
  int64_t virtual_stages = 1;  // v, model chunks per stage (> 1 only for the interleaved schedule)
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
};

// Checks the shape: positive counts, v > 1 exactly for the interleaved schedule, and m a multiple
// of p there (Megatron-LM's interleaved schedule requires it). Throws shardplan::Error naming the
// flag (--pp, --virtual-stages, the micro-batch count) and what was expected.
void check_pipeline_shape(const PipelineShape& s);

// Idle fraction of the ideal step: (p - 1) / m for 1F1B and GPipe, (p - 1) / (v m) interleaved
// (Narayanan et al. 2021 §2.2.1-2.2.2). 0 without pipelining.
double bubble_fraction(const PipelineShape& s);

// Model chunks (of layers / (p v) layers each) whose activations stage `stage` (0-based) holds at
// its peak: Note [In-flight micro-batches]. Never more than the chunks it runs per step (m v).
int64_t chunks_in_flight(const PipelineShape& s, int64_t stage);

// chunks_in_flight times the layers of one chunk, `layers` / (p v), as a real number of layers (a
// stage with an uneven share holds its own count; this is the average stage's).
double layer_activations_held(const PipelineShape& s, int64_t stage, int64_t layers);

}  // namespace shardplan::planner
