#include "planner/materialize/rank_driver.h"

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>

#include "base/error.h"
#include "base/strict_json.h"
#include "collectives/cluster.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/replica_load.h"
#include "planner/materialize/shard_memory.h"
#include "planner/materialize/shards.h"
#include "planner/materialize/training_state.h"
#include "tensor/models/model_config.h"
#include "tensor/safetensors.h"

namespace shardplan::planner {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Fault injection for the tests of Note [Materialize failure policy] (docs/launching.md
// "Faults"): SHARDPLAN_TEST_FAIL_RANK=r makes rank r fail at run time after allocating, and
// SHARDPLAN_TEST_KILL_RANK=r makes it die by SIGKILL, as a crashed or OOM-killed rank does. A value
// that is not a rank of the job is bad input (a typo must not make a fault test pass silently).
struct Faults {
  std::optional<int64_t> fail, kill;
};

std::optional<int64_t> fault_rank(const char* var, int64_t world) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string_view text(v);
  int64_t r = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), r);
  SP_CHECK(ec == std::errc() && end == text.data() + text.size() && r >= 0 && r < world, var, "='",
           printable(text, 40), "', expected a rank of this job, 0 to ", world - 1);
  return r;
}

Faults faults_from_environment(int64_t world) {
  return {fault_rank("SHARDPLAN_TEST_FAIL_RANK", world),
          fault_rank("SHARDPLAN_TEST_KILL_RANK", world)};
}

void inject_fault(const Faults& f, int64_t rank) {
  if (f.kill == rank) std::raise(SIGKILL);
  if (f.fail == rank) throw RuntimeFailure("injected failure (SHARDPLAN_TEST_FAIL_RANK)");
}

}  // namespace

void check_device(const std::string& device) {
  SP_CHECK(device == "cpu" || device == "cuda", "--device '", device, "', expected cpu or cuda");
}

PlanFile read_checked_plan(const MaterializeRequest& a) {
  PlanFile f = read_plan_file(a.plan);
  if (!a.model.empty()) {
    check_same_model(f, tensor::find_model_config(a.model), "--model " + a.model);
  }
  if (!a.cluster.empty()) {
    check_same_cluster(f, collectives::load_cluster(collectives::resolve_cluster(a.cluster)),
                       "--cluster " + a.cluster);
  }
  return f;
}

std::string mesh_text(const MaterialLayout& l) {
  std::ostringstream os;
  const std::vector<int64_t>& shape = l.mesh().shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    os << (d ? " x " : "") << l.mesh().dim_names()[d] << " " << shape[d];
  }
  return os.str();
}

std::optional<std::string> agree_on_input(collectives::Communicator& world,
                                          const std::string& error) {
  int64_t failed = error.empty() ? 0 : 1;
  world.all_reduce(&failed, 1, collectives::ReduceElement::kInt64, collectives::ReduceOp::kMax);
  if (failed == 0) return std::nullopt;
  if (world.size() == 1) throw Error(error);
  return error.empty() ? std::string("stopping: another rank found bad input") : error;
}

MaterializeReport run_ranks(const MaterializeRequest& a, Launch& launch,
                            const std::function<void(int64_t done, int64_t total)>& progress) {
  collectives::Communicator& world = *launch.world;
  const auto t0 = std::chrono::steady_clock::now();
  MaterializeReport report;
  // Input, checked on every rank, then agreed (Note [Materialize failure policy]).
  std::shared_ptr<MaterialLayout> layout;
  std::unique_ptr<ParameterSource> source;
  std::unique_ptr<ShardMemory> memory;
  Faults faults;
  StateLevel level = StateLevel::kModel;
  std::string error;
  try {
    check_device(a.device);
    level = parse_state_level(a.state);
    faults = faults_from_environment(world.size());
    memory = a.device == "cpu" ? host_shard_memory() : cuda_shard_memory(launch.local_rank);
    layout = std::make_shared<MaterialLayout>(read_checked_plan(a));
    if (a.checkpoint.empty()) {
      source = std::make_unique<InitSource>(*layout);
    } else {
      source = std::make_unique<CheckpointSource>(*layout, tensor::read_checkpoint(a.checkpoint));
    }
    SP_CHECK(layout->world_size() == world.size(), "the plan is for ", layout->world_size(),
             " ranks (", mesh_text(*layout), ") but this job has ", world.size(),
             ", expected a launch with -np ", layout->world_size());
  } catch (const Error& e) {
    error = e.what();
  }
  report.bad_input = agree_on_input(world, error);
  if (report.bad_input) return report;
  report.layout = layout;

  // Run time: any failure ends the job.
  try {
    collectives::MeshCommunicators comms = launch.split(layout->mesh());
    // The communicators that move the shards' memory: the host ones when the shards are on the
    // host, NCCL's when they are on GPUs (where the job has NCCL). Checkpoint loading (Note [Each
    // byte read once per replica group]) and verification run their data over them.
    std::optional<collectives::MeshCommunicators> device_comms;
    if (a.device == "cuda" && launch.device_split && (!a.checkpoint.empty() || a.verify)) {
      device_comms = launch.device_split(layout->mesh());
    }
    collectives::MeshCommunicators* data_comms =
        a.device == "cpu" ? &comms : (device_comms ? &*device_comms : nullptr);
    const int64_t rank = world.rank();
    // What the device holds from here on is the state's (Note [Measured state memory] in
    // docs/launching.md): nothing else is allocated until it is measured.
    const int64_t used_before = memory->used_bytes();
    RankShards shards = allocate_shards(*layout, rank, *memory);
    inject_fault(faults, rank);
    const auto t_init = std::chrono::steady_clock::now();
    const auto shown = [&](int64_t done, int64_t total) {
      if (rank == 0 && progress) progress(done, total);
    };
    int64_t received = 0;
    if (!a.checkpoint.empty() && data_comms != nullptr) {
      received = load_across_replicas(*layout, shards, *source, *data_comms, shown);
    } else {
      init_shards(*layout, shards, *source, shown);
    }
    const double init_s = seconds_since(t_init);
    TrainingState state;
    if (level != StateLevel::kParams) {
      state = allocate_training_state(*layout, shards.parts, *memory);
    }
    if (level == StateLevel::kPeak) allocate_peak_rest(*layout, shards.coord[kPpDim], state);
    RankSummary mine{shards.coord[kPpDim],
                     static_cast<int64_t>(shards.parts.size()),
                     shards.bytes,
                     source->bytes_read(),
                     received,
                     init_s};
    mine.gradient_bytes = state.bytes.gradients;
    mine.optimizer_bytes = state.bytes.optimizer;
    mine.measured_bytes = memory->used_bytes() - used_before;
    const std::vector<StageStateBytes>& predicted = layout->file().stage_states;
    if (static_cast<size_t>(mine.stage) < predicted.size()) {
      const StageStateBytes& p = predicted[static_cast<size_t>(mine.stage)];
      mine.predicted_bytes = level == StateLevel::kParams  ? p.parameters
                             : level == StateLevel::kModel ? p.total()
                                                           : layout->file().memory_per_gpu_bytes;
    }
    mine.peak_bytes = state.bytes.peak_rest;
    if (a.verify) report.verify = verify_shards(*layout, shards, *source, comms, data_comms);
    report.ranks.resize(static_cast<size_t>(world.size()));
    world.all_gather(&mine, report.ranks.data(), sizeof mine);
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    launch.error_line("shardplan: error: " + world.who() + ": " + e.what());
    // A moment for the launcher to forward that line: the abort stops its output forwarding too.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    launch.abort(1);
  }
  report.seconds = seconds_since(t0);
  return report;
}

}  // namespace shardplan::planner
