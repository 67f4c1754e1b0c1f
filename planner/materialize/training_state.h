// What a rank holds for training beside its parameters, allocated as the plan says
// (`materialize --state model`): the gradient buffers and the optimizer states (fp32 master
// weights where the weights are 16-bit, Adam's two moments) of the planner's recipe
// (training_recipe), each partitioned under the plan's ZeRO stage, then zeroed so that the
// memory is really held (docs/launching.md "The whole training state").
//   TrainingState st = allocate_training_state(layout, shards, memory);   // + st.bytes
//
// Note [ZeRO partition of a shard]
// ZeRO partitions a state over the data-parallel replicas of the weight it belongs to (ZeRO,
// Rajbhandari et al. 2020, §5). For a rank's part that is the product of the sizes of the data
// dims (dp, ep, cp of the plan's mesh) on which the parameter is Replicate: a dense weight is
// replicated over all three, a routed expert's is sharded on ep and so partitions over dp alone,
// and a ZeRO-3 weight already sharded on dp has only cp left. Each part keeps ceil(n / replicas)
// elements of a partitioned state, as the planner prices (planner/cost/model_state_memory.h):
// optimizer states from stage 1, gradients from stage 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/model_state_memory.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/shard_memory.h"

namespace shardplan::planner {

// `--state`: the parameters alone, the whole model state (parameters, gradients, optimizer), or
// the model state and one buffer for the rest of the plan's peak (activations, workspace,
// communication buffers, the context allowance: memory_per_gpu_bytes less the stage's model
// state). The peak buffer is sized from the prediction itself, so it checks that the device holds
// the plan's peak, not the activation estimate (only a real step measures that).
enum class StateLevel { kParams, kModel, kPeak };
// "--state 'x', expected params, model or peak" is bad input.
StateLevel parse_state_level(const std::string& text);
const char* state_level_name(StateLevel level);

struct StateBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t peak_rest = 0;  // --state peak's buffer
  int64_t total() const { return parameters + gradients + optimizer + peak_rest; }
};

// The data-parallel replicas part `part` of parameter `m` is partitioned over (Note [ZeRO
// partition of a shard]).
int64_t zero_replicas(const MaterialLayout& layout, const MaterialParameter& m);

// The gradient and optimizer bytes of `part` under `recipe` at ZeRO stage `zero` (parameters 0:
// they are the shards' own).
StateBytes state_bytes_of(const MaterialLayout& layout, const LocalParameter& part,
                          const MixedPrecision& recipe, int zero);

// The gradient and optimizer buffers of a rank's parts, in `memory` (which must outlive it),
// released with it.
struct TrainingState {
  ShardMemory* memory = nullptr;
  std::vector<std::byte*> buffers;
  StateBytes bytes;  // parameters 0

  TrainingState() = default;
  TrainingState(TrainingState&& other) noexcept;
  TrainingState& operator=(TrainingState&& other) noexcept;
  TrainingState(const TrainingState&) = delete;
  TrainingState& operator=(const TrainingState&) = delete;
  ~TrainingState();
};

// Allocates and zeroes the gradient and optimizer state of `parts` (one buffer per part and
// kind, none for an empty one) with the plan's recipe and ZeRO stage. Throws RuntimeFailure when
// memory runs out, naming the parameter.
TrainingState allocate_training_state(const MaterialLayout& layout,
                                      const std::vector<LocalParameter>& parts,
                                      ShardMemory& memory);
// --state peak's buffer for a rank of `stage`: the plan's memory per GPU less the stage's
// predicted model state (0 when the plan has no per-stage prediction). Allocated and zeroed into
// `state`.
void allocate_peak_rest(const MaterialLayout& layout, int64_t stage, TrainingState& state);

}  // namespace shardplan::planner
