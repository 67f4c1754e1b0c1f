// shardplan materialize: a plan made real, one rank per process under a launcher
// (docs/launching.md):
//   mpirun -np 4 shardplan materialize --plan plan.json --device cpu --verify
//   shardplan materialize --plan plan.json --dry-run        # any world size, no launcher
//
// The ranks run in planner/materialize/rank_driver.h (Note [Materialize failure policy]); this
// file parses, calls and prints.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/communicator.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/placement_args.h"
#include "planner/cli/text_format.h"
#include "planner/materialize/dry_run.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/rank_driver.h"
#include "planner/materialize/training_state.h"
#include "planner/plan/plan_file.h"
#include "tensor/safetensors.h"
#if SHARDPLAN_HAVE_MPI
#include "collectives/mpi/mpi_communicator.h"
#endif
#if SHARDPLAN_HAVE_MPI && SHARDPLAN_HAVE_NCCL
#include "collectives/nccl/nccl_communicator.h"
#include "kernels/device_memory.h"
#endif

namespace shardplan::cli {
namespace {

struct MaterializeArgs : planner::MaterializeRequest {
  bool dry_run = false;
  bool check_memory = false;
  double memory_tolerance = 0.10;
};

// The largest measured state of a class's ranks: the one --check-memory judges.
struct ClassMemory {
  int64_t measured = 0;
  int64_t predicted = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The plan's own cluster facts: a plan is self-contained, so no cluster file named in it is read.
int64_t device_memory_bytes(const planner::PlanFile& f) {
  return static_cast<int64_t>(f.cluster.accelerator.memory_gb.value * 1e9);
}

// ---- --dry-run -------------------------------------------------------------------------------

void run_dry(CliContext& ctx, const MaterializeArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const planner::MaterialLayout layout(planner::read_checked_plan(a));
  // The checks a real run makes of the checkpoint before it reads a byte (its files, headers,
  // and every parameter there with its shape and dtype), so a dry run does not pass a
  // checkpoint the job would refuse.
  if (!a.checkpoint.empty()) {
    (void)planner::CheckpointSource(layout, tensor::read_checkpoint(a.checkpoint));
  }
  const int64_t capacity = device_memory_bytes(layout.file());
  const planner::DryRunReport r = planner::dry_run(layout, capacity);
  const double s = seconds_since(t0);
  if (ctx.json) {
    nlohmann::ordered_json j;
    j["dry_run"] = true;
    j["model"] = layout.file().model_name;
    j["ranks"] = r.ranks;
    j["mesh"] = {{"shape", layout.mesh().shape()}, {"names", layout.mesh().dim_names()}};
    j["parameters"] = r.parameters;
    j["elements"] = r.elements;
    j["shards_checked"] = r.shards_checked;
    j["max_bytes"] = r.max_bytes;
    j["device_memory_bytes"] = r.device_memory_bytes;
    j["predicted_memory_per_gpu_bytes"] = layout.file().memory_per_gpu_bytes;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const planner::MeshGroups& g : r.groups) {
      groups.push_back({{"dim", g.name}, {"size", g.size}, {"groups", g.groups}});
    }
    j["groups"] = groups;
    nlohmann::ordered_json classes = nlohmann::ordered_json::array();
    for (const planner::RankClass& c : r.classes) {
      classes.push_back({{"stage", c.stage},
                         {"bytes", c.bytes},
                         {"tensors", c.parameters},
                         {"count", c.count},
                         {"first_ranks", c.first_ranks}});
    }
    j["classes"] = classes;
    j["seconds"] = s;
    print_json_document(j);
    return;
  }
  std::cout << "dry run of " << a.plan << ": " << layout.file().model_name << " on " << r.ranks
            << " virtual ranks (" << planner::mesh_text(layout) << "): consistent, checked in "
            << std::fixed << std::setprecision(2) << s << " s\n"
            << "  " << with_commas(r.parameters) << " tensors, " << with_commas(r.elements)
            << " elements; " << with_commas(r.shards_checked)
            << " shard ranges checked to tile every tensor once; init streams distinct\n"
            << "  communicator groups:";
  for (const planner::MeshGroups& g : r.groups) {
    std::cout << " " << g.name << " " << with_commas(g.groups) << "x" << g.size;
  }
  std::cout << "\n  parameters per rank (the plan predicts "
            << human_bytes(static_cast<double>(layout.file().memory_per_gpu_bytes))
            << " per GPU for the whole training state; device "
            << human_bytes(static_cast<double>(r.device_memory_bytes)) << "):\n";
  std::vector<std::vector<std::string>> rows;
  for (const planner::RankClass& c : r.classes) {
    rows.push_back({std::to_string(c.stage), with_commas(c.count), with_commas(c.parameters),
                    human_bytes(static_cast<double>(c.bytes)), bracketed(c.first_ranks)});
  }
  print_table({"stage", "ranks", "tensors", "allocates", "first ranks"}, rows,
              {true, true, true, true, false});
}

// ---- the ranks -------------------------------------------------------------------------------

// How --verify's checksums and gathered shards travelled (docs/launching.md "Verification").
const char* verify_transport(const planner::VerifyReport& v, const std::string& device) {
  switch (v.wire) {
    case planner::VerifyWire::kLocal:
      return "one rank, nothing moved";
    case planner::VerifyWire::kShardMemory:
      return device == "cuda" ? "NCCL on device buffers" : "MPI on host buffers";
    case planner::VerifyWire::kHostCopies:
      return "MPI over host copies";
  }
  return "";
}

void print_ranks(CliContext& ctx, const MaterializeArgs& a, const planner::MaterialLayout& layout,
                 const std::vector<planner::RankSummary>& ranks, double seconds,
                 const planner::VerifyReport* v) {
  // Ranks with the same stage, bytes, bytes read and bytes received are one row.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>,
           std::pair<planner::RankSummary, std::vector<int64_t>>>
      classes;
  double slowest = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto& c =
        classes[{ranks[r].stage, -ranks[r].bytes, -ranks[r].read_bytes, -ranks[r].received_bytes}];
    const int64_t worst = c.second.empty()
                              ? ranks[r].measured_bytes
                              : std::max(c.first.measured_bytes, ranks[r].measured_bytes);
    c.first = ranks[r];
    c.first.measured_bytes = worst;
    c.second.push_back(static_cast<int64_t>(r));
    slowest = std::max(slowest, ranks[r].init_s);
  }
  const auto allocated = [](const planner::RankSummary& r) {
    return r.bytes + r.gradient_bytes + r.optimizer_bytes + r.peak_bytes;
  };
  if (ctx.json) {
    nlohmann::ordered_json j;
    j["model"] = layout.file().model_name;
    j["ranks"] = static_cast<int64_t>(ranks.size());
    j["device"] = a.device;
    j["source"] = a.checkpoint.empty() ? "init" : "checkpoint";
    j["mesh"] = {{"shape", layout.mesh().shape()}, {"names", layout.mesh().dim_names()}};
    j["seconds"] = seconds;
    j["init_seconds"] = slowest;
    j["predicted_memory_per_gpu_bytes"] = layout.file().memory_per_gpu_bytes;
    j["state"] = a.state;
    nlohmann::ordered_json cl = nlohmann::ordered_json::array();
    for (const auto& [key, c] : classes) {
      std::vector<int64_t> first(c.second.begin(),
                                 c.second.begin() + std::min<size_t>(3, c.second.size()));
      nlohmann::ordered_json row = {{"stage", c.first.stage},
                                    {"bytes", c.first.bytes},
                                    {"read_bytes", c.first.read_bytes},
                                    {"received_bytes", c.first.received_bytes},
                                    {"tensors", c.first.tensors},
                                    {"count", c.second.size()},
                                    {"first_ranks", first},
                                    {"allocated_bytes",
                                     {{"parameters", c.first.bytes},
                                      {"gradients", c.first.gradient_bytes},
                                      {"optimizer", c.first.optimizer_bytes},
                                      {"peak_rest", c.first.peak_bytes}}},
                                    {"measured_bytes", c.first.measured_bytes}};
      row["predicted_bytes"] = c.first.predicted_bytes > 0
                                   ? nlohmann::ordered_json(c.first.predicted_bytes)
                                   : nlohmann::ordered_json(nullptr);
      cl.push_back(std::move(row));
    }
    j["classes"] = cl;
    if (v != nullptr) {
      nlohmann::ordered_json sums = nlohmann::ordered_json::object();
      for (size_t i = 0; i < v->whole_checksums.size(); ++i) {
        char hex[20];
        std::snprintf(hex, sizeof hex, "%016llx",
                      static_cast<unsigned long long>(v->whole_checksums[i]));
        sums[layout.parameters()[i].plan->name] = hex;
      }
      j["verify"] = {{"ok", v->failures == 0},
                     {"failures", v->failures},
                     {"replica_checks", v->replica_checks},
                     {"covered", v->covered},
                     {"samples_rank0", v->samples},
                     {"gathered", v->gathered},
                     {"transport", verify_transport(*v, a.device)},
                     {"tensor_checksums", sums}};
    }
    print_json_document(j);
    return;
  }
  std::cout << "materialized " << layout.file().model_name << " on " << ranks.size() << " "
            << a.device << " rank" << (ranks.size() == 1 ? "" : "s") << " ("
            << planner::mesh_text(layout) << ") in " << std::fixed << std::setprecision(2)
            << seconds << " s (init " << slowest << " s on the slowest rank)\n"
            << "  "
            << (a.state == "model"  ? "model state (parameters, gradients, optimizer)"
                : a.state == "peak" ? "the plan's peak (model state, activations, workspace)"
                                    : "parameters")
            << " per rank, measured as the " << (a.device == "cpu" ? "resident set's" : "driver's")
            << " growth (the plan predicts "
            << human_bytes(static_cast<double>(layout.file().memory_per_gpu_bytes))
            << " per GPU at the peak, activations included):\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, c] : classes) {
    std::vector<int64_t> first(c.second.begin(),
                               c.second.begin() + std::min<size_t>(3, c.second.size()));
    rows.push_back(
        {std::to_string(c.first.stage), with_commas(static_cast<int64_t>(c.second.size())),
         with_commas(c.first.tensors), human_bytes(static_cast<double>(allocated(c.first))),
         human_bytes(static_cast<double>(c.first.measured_bytes)),
         c.first.predicted_bytes > 0 ? human_bytes(static_cast<double>(c.first.predicted_bytes))
                                     : "-",
         a.checkpoint.empty() ? "-" : with_commas(c.first.read_bytes),
         a.checkpoint.empty() ? "-" : with_commas(c.first.received_bytes), bracketed(first)});
  }
  print_table({"stage", "ranks", "tensors", "allocated", "measured", "predicted", "bytes read",
               "received", "first ranks"},
              rows, {true, true, true, true, true, true, true, true, false});
  if (v != nullptr) {
    std::cout << "verify: " << with_commas(v->replica_checks) << " replica checks (rank 0), "
              << with_commas(v->covered) << "/" << layout.parameters().size()
              << " tensors covered exactly once, " << with_commas(v->samples)
              << " sampled elements recomputed (rank 0), " << with_commas(v->gathered)
              << " tensors gathered whole (" << verify_transport(*v, a.device) << "): "
              << (v->failures == 0 ? "all match" : std::to_string(v->failures) + " mismatches")
              << "\n";
  }
}

// --check-memory: every rank knows every rank's figures; rank 0 names the ranks that exceed the
// prediction by more than the tolerance, and every rank exits 1 so the launcher does.
void check_memory(CliContext& ctx, const MaterializeArgs& a, bool speaker,
                  const std::vector<planner::RankSummary>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    const planner::RankSummary& x = ranks[r];
    if (x.predicted_bytes <= 0) {
      if (speaker) {
        print_error_line(
            "shardplan: materialize: --check-memory: the plan has no per-stage "
            "model-state prediction (written before it), expected a plan from "
            "'shardplan plan --out' of this version");
      }
      ctx.exit_code = ExitCode::kBadInput;
      return;
    }
    const double over =
        static_cast<double>(x.measured_bytes) / static_cast<double>(x.predicted_bytes) - 1;
    if (over > a.memory_tolerance) {
      if (speaker) {
        std::ostringstream os;
        os << "shardplan: materialize: rank " << r << " holds " << x.measured_bytes << " bytes of "
           << a.state << " state, " << std::fixed << std::setprecision(1) << 100 * over
           << " % over the plan's " << x.predicted_bytes << " (tolerance "
           << 100 * a.memory_tolerance << " %)";
        print_error_line(os.str());
      }
      ctx.exit_code = ExitCode::kRuntimeFailure;
    }
  }
}

// This rank's part: the driver runs it, rank 0 prints the job's summary.
void run_ranks(CliContext& ctx, const MaterializeArgs& a, planner::Launch& launch) {
  launch.error_line = [](const std::string& line) { print_error_line(line); };
  const bool tty = launch.world->rank() == 0 && !ctx.json && isatty(STDERR_FILENO) != 0;
  std::optional<std::chrono::steady_clock::time_point> first;
  bool drawn = false;
  const planner::MaterializeReport r =
      planner::run_ranks(a, launch, [&](int64_t done, int64_t total) {
        if (!first) first = std::chrono::steady_clock::now();
        if (!tty || seconds_since(*first) < 1) return;
        std::fprintf(
            stderr, "\rmaterialize: rank 0 %3.0f%% of %s",
            100.0 * static_cast<double>(done) / static_cast<double>(std::max<int64_t>(1, total)),
            human_bytes(static_cast<double>(total)).c_str());
        drawn = true;
      });
  if (drawn) std::fputs("\r\033[K", stderr);
  if (r.bad_input) {
    // Printed here, before MPI_Finalize: once the first rank exits non-zero the launcher stops
    // the others, and a message printed after finalizing could be lost.
    print_error_line("shardplan: error: " + launch.world->who() + ": " + *r.bad_input);
    ctx.exit_code = ExitCode::kBadInput;
    return;
  }
  if (r.verify) {
    for (const std::string& m : r.verify->messages) print_error_line("shardplan: verify: " + m);
  }
  if (launch.world->rank() == 0) {
    print_ranks(ctx, a, *r.layout, r.ranks, r.seconds, r.verify ? &*r.verify : nullptr);
  }
  if (r.verify && r.verify->failures != 0) ctx.exit_code = ExitCode::kRuntimeFailure;
  if (a.check_memory) check_memory(ctx, a, launch.world->rank() == 0, r.ranks);
}

#if SHARDPLAN_HAVE_MPI && SHARDPLAN_HAVE_NCCL
// Whether every host has a GPU for each of its ranks, as NCCL requires (it refuses two ranks on
// one GPU). Collective over the world; every rank gets the same answer.
bool one_gpu_per_rank(const collectives::MpiSession& session, collectives::Communicator& world) {
  int64_t enough = session.local_size() <= kernels::cuda_device_count() ? 1 : 0;
  world.all_reduce(&enough, 1, collectives::ReduceElement::kInt64, collectives::ReduceOp::kMin);
  return enough == 1;
}
#endif

void run_materialize(CliContext& ctx, const MaterializeArgs& a) {
  if (a.dry_run) {
    planner::check_device(a.device);
    (void)planner::parse_state_level(a.state);
    run_dry(ctx, a);
    return;
  }
#if SHARDPLAN_HAVE_MPI
  if (collectives::launched_by_mpi_launcher()) {
    collectives::MpiSession session;
    planner::Launch launch;
    launch.world = collectives::mpi_world(session);
    launch.split = [&session](const mesh::DeviceMesh& m) {
      return collectives::mpi_mesh_communicators(session, m);
    };
    launch.abort = [&session](int code) { session.abort(code); };
    launch.local_rank = session.local_rank();
    if (a.device == "cpu") launch.device_split = launch.split;
#if SHARDPLAN_HAVE_NCCL
    // The GPU data path: NCCL communicators over device buffers, bootstrapped over MPI. NCCL
    // takes one rank per GPU; where a host runs more ranks than it has GPUs, every rank keeps the
    // host path (decided together, so that all take the same one).
    if (a.device == "cuda" && one_gpu_per_rank(session, *launch.world)) {
      launch.device_split = [&session](const mesh::DeviceMesh& m) {
        const collectives::NcclDevice gpu(session);
        return collectives::nccl_mesh_communicators(session, gpu, m);
      };
    }
#endif
    run_ranks(ctx, a, launch);
    return;
  }
#endif
  // One process without a launcher: a one-rank plan runs here, any other is refused by the
  // world-size check.
  planner::Launch launch;
  launch.world = std::make_unique<collectives::SelfCommunicator>();
  launch.split = [](const mesh::DeviceMesh& m) {
    collectives::MeshCommunicators c;
    c.world = std::make_unique<collectives::SelfCommunicator>();
    for (size_t d = 0; d < m.shape().size(); ++d) {
      c.dims.push_back(std::make_unique<collectives::SelfCommunicator>());
    }
    return c;
  };
  launch.abort = [](int code) { std::exit(code); };
  run_ranks(ctx, a, launch);
}

}  // namespace

void register_materialize(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "materialize",
                           "Allocate and initialize each rank's shards of a plan (one process per "
                           "rank, under mpirun or srun), or check it on virtual ranks (--dry-run)");
  auto a = std::make_shared<MaterializeArgs>();
  cmd.add_option("--plan", a->plan, "plan.json written by 'shardplan plan --out'")->required();
  cmd.add_option("--device", a->device, "Where shards live: cpu or cuda (default cpu)");
  cmd.add_option("--model", a->model,
                 "Check that the plan is for this model (configs/models name or config.json); "
                 "refused, naming both, when it is not")
      ->check(non_empty("a configs/models name or a config.json"))
      ->type_name("NAME|PATH");
  cmd.add_option("--cluster", a->cluster,
                 "Check that the plan is for this cluster (configs/clusters name or path); "
                 "refused, naming both, when it is not")
      ->check(non_empty("a configs/clusters name or a cluster file"))
      ->type_name("NAME|PATH");
  cmd.add_flag("--verify", a->verify,
               "Prove sharded == unsharded: replica checksums, coverage, sampled elements, and "
               "a whole-tensor gather for models up to 1 GiB");
  cmd.add_option("--checkpoint", a->checkpoint,
                 "Read each rank's shards from a safetensors file, index or folder instead of "
                 "initializing them (each rank reads only its own bytes)")
      ->check(non_empty("a safetensors file, index or folder"));
  cmd.add_option("--state", a->state,
                 "What each rank allocates: params (its parameter shards) or model (with the "
                 "gradients and optimizer states of the plan's recipe and ZeRO stage; default) "
                 "or peak (and one buffer for the rest of the plan's peak memory), measured "
                 "against the plan's prediction")
      ->type_name("params|model|peak");
  cmd.add_flag("--check-memory", a->check_memory,
               "Exit 1 when a rank's measured state exceeds the plan's prediction by more than "
               "--memory-tolerance");
  cmd.add_option("--memory-tolerance", a->memory_tolerance,
                 "Fraction over the prediction --check-memory allows (default 0.10)")
      ->check(number_in(0.0, 10.0, "a fraction over the prediction"));
  cmd.add_flag("--dry-run", a->dry_run,
               "Check the plan on virtual ranks without allocating or a launcher");
  cmd.callback([&ctx, a] { run_materialize(ctx, *a); });
}

}  // namespace shardplan::cli
