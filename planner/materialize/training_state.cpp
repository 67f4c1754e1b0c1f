#include "planner/materialize/training_state.h"

#include <utility>

#include "base/checked.h"
#include "base/error.h"
#include "base/strict_json.h"
#include "collectives/cluster.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {

StateLevel parse_state_level(const std::string& text) {
  if (text == "params") return StateLevel::kParams;
  if (text == "model") return StateLevel::kModel;
  if (text == "peak") return StateLevel::kPeak;
  SP_FAIL("--state '", printable(text, 40), "', expected params, model or peak");
}

const char* state_level_name(StateLevel level) {
  return level == StateLevel::kParams ? "params" : level == StateLevel::kModel ? "model" : "peak";
}

int64_t zero_replicas(const MaterialLayout& layout, const MaterialParameter& m) {
  int64_t replicas = 1;
  const std::vector<int64_t>& shape = layout.mesh().shape();
  for (const int64_t d : {kDpDim, kEpDim, kCpDim}) {
    if (m.plan->placements[static_cast<size_t>(d)].is_replicate()) {
      replicas *= shape[static_cast<size_t>(d)];
    }
  }
  return replicas;
}

StateBytes state_bytes_of(const MaterialLayout& layout, const LocalParameter& part,
                          const MixedPrecision& recipe, int zero) {
  const int64_t replicas = zero_replicas(layout, layout.parameters()[part.index]);
  const int64_t partitioned = (part.numel + replicas - 1) / replicas;
  StateBytes b;
  const std::string& name = layout.parameters()[part.index].plan->name;
  SP_CHECK(
      mul_into(zero >= 2 ? partitioned : part.numel, recipe.grad_bytes, b.gradients) &&
          mul_into(zero >= 1 ? partitioned : part.numel, recipe.optimizer_bytes(), b.optimizer),
      "the training state of '", name, "' (", part.numel,
      " elements) overflows int64 bytes, expected a shard of a real model");
  return b;
}

TrainingState::TrainingState(TrainingState&& other) noexcept { *this = std::move(other); }

TrainingState& TrainingState::operator=(TrainingState&& other) noexcept {
  if (this != &other) {
    this->~TrainingState();
    memory = other.memory;
    buffers = std::move(other.buffers);
    bytes = other.bytes;
    other.buffers.clear();
  }
  return *this;
}

TrainingState::~TrainingState() {
  for (std::byte* p : buffers) memory->release(p);
  buffers.clear();
}

TrainingState allocate_training_state(const MaterialLayout& layout,
                                      const std::vector<LocalParameter>& parts,
                                      ShardMemory& memory) {
  const PlanFile& f = layout.file();
  // What the prediction priced (plans written before it carried none: the cluster's recipe).
  const MixedPrecision recipe =
      f.recipe.value_or(training_recipe(f.cluster.accelerator.arch == collectives::Arch::kCpu));
  TrainingState s;
  s.memory = &memory;
  const auto add = [&](int64_t bytes, const LocalParameter& part, const char* what) {
    if (bytes == 0) return;
    try {
      s.buffers.push_back(memory.allocate(bytes));
    } catch (const RuntimeFailure& e) {
      throw RuntimeFailure(std::string(e.what()) + " for the " + what + " of '" +
                           layout.parameters()[part.index].plan->name + "' on " + memory.device());
    }
    memory.zero(s.buffers.back(), bytes);
  };
  for (const LocalParameter& part : parts) {
    const StateBytes b = state_bytes_of(layout, part, recipe, f.config.zero);
    add(b.gradients, part, "gradients");
    add(b.optimizer, part, "optimizer states");
    add_count(s.bytes.gradients, b.gradients, "gradient bytes of a rank");
    add_count(s.bytes.optimizer, b.optimizer, "optimizer bytes of a rank");
  }
  return s;
}

void allocate_peak_rest(const MaterialLayout& layout, int64_t stage, TrainingState& state) {
  const PlanFile& f = layout.file();
  if (static_cast<size_t>(stage) >= f.stage_states.size()) return;
  const int64_t rest = f.memory_per_gpu_bytes - f.stage_states[static_cast<size_t>(stage)].total();
  if (rest <= 0) return;
  try {
    state.buffers.push_back(state.memory->allocate(rest));
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(std::string(e.what()) + " for the activations and workspace of the " +
                         "plan's peak on " + state.memory->device());
  }
  state.memory->zero(state.buffers.back(), rest);
  state.bytes.peak_rest = rest;
}

}  // namespace shardplan::planner
