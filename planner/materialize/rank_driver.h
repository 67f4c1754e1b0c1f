// The ranks of `materialize`: each process reads and checks the plan, the ranks agree on it,
// allocate their shards, fill them (init or checkpoint), optionally verify them, and rank 0 gets
// every rank's summary (docs/launching.md). The CLI parses, calls run_ranks and prints.
//   Launch launch = ...;                         // MPI world and per-dim communicators, or one
//   rank MaterializeReport r = run_ranks({.plan = "plan.json", .device = "cpu"}, launch, {}); if
//   (r.bad_input) ...;                        // every rank: one line, exit 2 if
//   (launch.world->rank() == 0) print(r.ranks, r.verify);
//
// Note [Materialize failure policy]
// Bad input (an unreadable or inconsistent plan, a world size that is not the plan's, a device
// that does not exist) is found before anything is allocated. The ranks then agree on it with
// one all-reduce, so every rank stops with one line naming itself and exit 2, and none waits in a
// collective for a rank that has already left. A failure at run time (out of memory, a backend
// error) ends the whole job at once: the failing rank prints what and where, then aborts the
// world (MPI_Abort), which makes the launcher stop every rank and exit non-zero.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/verify.h"
#include "planner/plan/plan_file.h"

namespace shardplan::planner {

// What the user asked for (materialize's options).
struct MaterializeRequest {
  std::string plan;     // plan.json
  std::string model;    // optional: must be the plan's model
  std::string cluster;  // optional: must be the plan's cluster
  std::string device = "cpu";
  std::string checkpoint;  // read shards from it instead of initializing them
  bool verify = false;
  std::string state = "model";  // params, model or peak (training_state.h)
};

// The world and per-dim communicators of this process: MPI under a launcher, else one rank.
struct Launch {
  std::unique_ptr<collectives::Communicator> world;
  std::function<collectives::MeshCommunicators(const mesh::DeviceMesh&)> split;
  std::function<void(int)> abort;  // Note [Materialize failure policy]
  // Prints one error line whole (the CLI's print_error_line): the runtime-failure path says what
  // failed before it aborts.
  std::function<void(const std::string&)> error_line;
  int64_t local_rank = 0;  // among the ranks of this host (picks the GPU)
  // Communicators whose collectives take buffers in the shards' memory: for --device cuda the
  // NCCL ones where this shardplan has NCCL and every rank has its own GPU; unset when the backend
  // cannot move device buffers (each rank then reads its whole part of a checkpoint itself, and
  // verification runs over host copies). For --device cpu, `split`.
  std::function<collectives::MeshCommunicators(const mesh::DeviceMesh&)> device_split;
};

// What a rank reports to rank 0.
struct RankSummary {
  int64_t stage = 0;
  int64_t tensors = 0;
  int64_t bytes = 0;
  int64_t read_bytes = 0;      // from a checkpoint's storage (0 when initialized)
  int64_t received_bytes = 0;  // of the checkpoint, from replicas over the network
  double init_s = 0;
  // The state asked for (--state): what was allocated by category, the device's memory in use
  // that grew while it was allocated and written (ShardMemory::used_bytes), and the plan's
  // prediction for the rank's stage (0 when the plan has none).
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t peak_bytes = 0;  // --state peak's activation and workspace buffer
  int64_t measured_bytes = 0;
  int64_t predicted_bytes = 0;
};

struct MaterializeReport {
  // Bad input on some rank: this rank's line (its own error, or that another rank found one).
  std::optional<std::string> bad_input;
  std::shared_ptr<const MaterialLayout> layout;
  std::vector<RankSummary> ranks;  // every rank's, on every rank
  double seconds = 0;              // the whole run on this rank
  std::optional<VerifyReport> verify;
};

// Note [Materialize failure policy]: the ranks agree on bad input with one all-reduce. `error` is
// this rank's ("" when it found none); returns the line this rank stops with, or nothing when no
// rank found any. With one rank its own error is thrown as shardplan::Error instead.
std::optional<std::string> agree_on_input(collectives::Communicator& world,
                                          const std::string& error);

// "--device 'gpu'" is bad input: cpu or cuda.
void check_device(const std::string& device);
// The plan, checked against the request's --model and --cluster (if named): a plan for another
// model or cluster is refused naming both.
PlanFile read_checked_plan(const MaterializeRequest& request);
// "pp 2 x dp 2 x ep 1 x cp 1 x tp 1": the layout's mesh for messages.
std::string mesh_text(const MaterialLayout& layout);

// Runs this rank under Note [Materialize failure policy]. A run-time failure with more than one
// rank prints its line, aborts the world and does not return; with one rank it throws.
// `progress(done, total)` is called on rank 0 as its shards fill.
MaterializeReport run_ranks(const MaterializeRequest& request, Launch& launch,
                            const std::function<void(int64_t done, int64_t total)>& progress);

}  // namespace shardplan::planner
