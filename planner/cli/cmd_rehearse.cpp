// shardplan rehearse: a plan's communication run for one step on the real job and timed beside
// the plan's prediction (Note [Rehearsal] in planner/materialize/rehearsal.h; docs/launching.md
// "Rehearsal"):
//   mpirun -np 8 shardplan rehearse --plan plan.json [--device cuda] [--calls 20] [--out r.json]
// With --device cuda, rank 0 also times one layer of each kind's GEMMs with cuBLAS (Note [Layer
// GEMMs] in planner/materialize/layer_gemms.h) and lists its attention calls for
// scripts/time_attention.py (Note [Rehearsed attention]); a one-rank plan rehearses that alone.
// Bad input (the plan, a world size that is not the plan's) is found on every rank before any
// collective runs and agreed with one all-reduce, as materialize does (Note [Materialize failure
// policy] in planner/materialize/rank_driver.h); a failure at run time aborts the job.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "collectives/communicator.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/placement_args.h"
#include "planner/cli/text_format.h"
#include "planner/materialize/layer_attention.h"
#include "planner/materialize/layer_gemms.h"
#include "planner/materialize/link_sweep.h"
#include "planner/materialize/rank_driver.h"
#include "planner/materialize/rehearsal.h"
#include "planner/materialize/shard_memory.h"
#include "planner/plan/plan_file.h"
#if SHARDPLAN_HAVE_MPI
#include "collectives/mpi/mpi_communicator.h"
#endif
#if SHARDPLAN_HAVE_MPI && SHARDPLAN_HAVE_NCCL
#include "collectives/nccl/nccl_communicator.h"
#include "kernels/device_memory.h"
#endif

namespace shardplan::cli {
namespace {

struct RehearseArgs {
  std::string plan;
  std::string device = "cpu";
  std::string out;
  bool links = true;    // Note [Link sweeps]
  bool compute = true;  // Note [Layer GEMMs]: with --device cuda
  planner::RehearsalOptions options;
};

// The job as rehearse sees it: the world, this rank's communicators for the plan's groups, and
// where buffers live.
struct RehearsalJob {
  std::unique_ptr<collectives::Communicator> world;
  std::function<std::vector<std::unique_ptr<collectives::Communicator>>(
      const mesh::DeviceMesh&, const std::vector<std::vector<size_t>>&)>
      groups;
  std::function<void(int)> abort;
  int64_t local_rank = 0;
  int64_t ranks_per_node = 1;  // the launcher's, on this rank's node
  // This rank's node holds world ranks r - r % ranks_per_node onwards (Note [Link sweeps]).
  bool node_by_node = true;
  std::string backend;
  // NCCL's GPUs on this rank's node (-1: not NCCL): NCCL refuses two ranks on one GPU.
  int64_t visible_gpus = -1;
  std::unique_ptr<collectives::Communicator> keep;  // a parent the groups were split from
};

nlohmann::ordered_json dims_json(const std::vector<size_t>& dims) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const size_t d : dims) out.push_back(planner::mesh_names()[d]);
  return out;
}

// Note [Link sweeps]: what `calibrate --rehearsal` reads.
nlohmann::ordered_json links_json(const std::vector<planner::LinkSweep>& sweeps) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const planner::LinkSweep& s : sweeps) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const collectives::NcclTestsRow& row : s.log.rows) {
      rows.push_back({{"bytes", row.bytes}, {"time_s", row.out_of_place_us * 1e-6}});
    }
    out.push_back({{"link", s.intra ? "intra" : "inter"},
                   {"group_dims", dims_json(s.dims)},
                   {"kind", collectives::to_string(s.log.kind)},
                   {"ranks", s.log.ranks},
                   {"nodes", s.log.nodes},
                   {"ranks_per_node", s.log.ranks_per_node},
                   {"rows", rows}});
  }
  return out;
}

// What rank 0 timed of the plan's layers on its GPU (Note [Layer GEMMs]); empty gemms: none.
struct ComputeTimed {
  std::vector<planner::LayerGemm> gemms;
  planner::LayerTimings timings;
  std::string skipped;  // why not, on a GPU rehearsal
  // Note [Rehearsed attention]: timed by scripts/time_attention.py, priced with this stack's
  // kernel.
  std::vector<planner::AttentionCall> attention;
  std::string attention_stack;
};

// The attention kernel of the plan's stack (Note [Attention kernels]). A plan names its stack as
// given to --stack; a stack file since moved prices the cluster's fused kernel and says so.
std::pair<planner::AttentionKernel, std::string> plan_attention_kernel(const planner::PlanFile& f) {
  try {
    return {planner::load_stack(planner::resolve_stack(f.stack)).attention_kernel, f.stack};
  } catch (const Error& e) {
    return {planner::AttentionKernel::kFused,
            "the cluster's fused kernel (the plan's stack: " + std::string(e.what()) + ")"};
  }
}

nlohmann::ordered_json rehearsal_json(const RehearseArgs& a, const planner::PlanFile& f,
                                      const planner::Rehearsal& r,
                                      const std::vector<planner::LinkSweep>& sweeps,
                                      const std::string& no_sweep, const RehearsalJob& job,
                                      const ComputeTimed& compute) {
  nlohmann::ordered_json j;
  j["format"] = "shardplan.rehearsal";
  j["model"] = f.model_name;
  j["cluster"] = f.cluster.name;
  j["ranks"] = job.world->size();
  j["device"] = a.device;
  j["backend"] = job.backend;
  j["mesh"] = {{"shape", f.mesh_shape()}, {"names", planner::mesh_names()}};
  nlohmann::ordered_json cs = nlohmann::ordered_json::array();
  for (const planner::RehearsedCollective& x : r.collectives) {
    cs.push_back({{"what", x.planned.what},
                  {"kind", collectives::to_string(x.planned.kind)},
                  {"mesh_dim", x.planned.mesh_dim},
                  {"group_dims", dims_json(x.dims)},
                  {"group_size", x.planned.group_size},
                  {"bytes", x.planned.bytes},
                  {"calls_per_step", x.planned.calls},
                  {"calls_run", x.calls_run},
                  {"predicted_s", x.planned.seconds},
                  {"measured_s", x.measured_s},
                  {"measured_per_call_s", x.per_call_s},
                  {"predicted_exposed_s", x.planned.exposed_s},
                  {"measured_exposed_s", x.measured_exposed_s}});
  }
  j["collectives"] = cs;
  j["total"] = {{"predicted_s", r.predicted_s}, {"measured_s", r.measured_s}};
  j["exposed"] = {{"predicted_s", r.predicted_exposed_s}, {"measured_s", r.measured_exposed_s}};
  j["links"] = links_json(sweeps);
  if (!no_sweep.empty()) j["links_skipped"] = no_sweep;
  if (!compute.gemms.empty()) {
    j["compute"] = planner::compute_measurement_json(compute.gemms, compute.timings);
    j["compute"]["attention_stack"] = compute.attention_stack;
    j["compute"]["attention_calls"] = planner::attention_calls_json(compute.attention);
  } else if (!compute.skipped.empty()) {
    j["compute_skipped"] = compute.skipped;
  }
  return j;
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(s < 0.1 ? 4 : 3) << s << " s";
  return os.str();
}

std::string ratio_text(double measured, double predicted) {
  std::ostringstream ratio;
  ratio << std::fixed << std::setprecision(2) << (predicted > 0 ? measured / predicted : 0.0);
  return ratio.str();
}

// Note [Layer GEMMs]: each GEMM predicted against measured, then each layer kind's sum.
void print_compute(const ComputeTimed& c) {
  if (c.gemms.empty()) {
    if (!c.skipped.empty()) std::cout << "no layer GEMMs timed: " << c.skipped << "\n";
    return;
  }
  const planner::LayerTimings& t = c.timings;
  std::cout << "layer GEMMs on " << t.device << " (cuBLAS bf16, CUDA " << t.cuda
            << "), one rank's shapes, predicted against measured; device copy " << std::fixed
            << std::setprecision(0) << t.copy_bytes_per_s / 1e9 << " GB/s\n";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < c.gemms.size(); ++i) {
    const planner::LayerGemm& g = c.gemms[i];
    const double measured = t.measured_s[i];
    std::ostringstream shape, rate;
    shape << (g.shape.batch > 1 ? std::to_string(g.shape.batch) + " x " : "") << g.shape.m << "x"
          << g.shape.n << "x" << g.shape.k;
    rate << std::fixed << std::setprecision(0) << (measured > 0 ? g.flops / measured / 1e12 : 0.0);
    rows.push_back({g.name + " " + g.pass, shape.str(), std::to_string(g.count),
                    seconds_text(g.predicted_s), seconds_text(measured), rate.str(),
                    ratio_text(measured, g.predicted_s)});
  }
  print_table({"GEMM", "M x N x K", "count", "predicted", "measured", "TFLOP/s", "ratio"}, rows,
              {false, true, true, true, true, true, true});
  const nlohmann::ordered_json doc = planner::compute_measurement_json(c.gemms, t);
  for (const auto& layer : doc["layers"]) {
    const double p = layer["predicted_s"].get<double>(), m = layer["measured_s"].get<double>();
    std::cout << "layer " << layer["layer"].get<std::string>() << ": GEMMs predicted "
              << seconds_text(p) << ", measured " << seconds_text(m) << " (ratio "
              << ratio_text(m, p) << ")\n";
  }
  if (c.attention.empty()) return;
  std::cout << "attention calls (Note [Rehearsed attention]; priced with " << c.attention_stack
            << "): shardplan does not time them, 'python3 scripts/time_attention.py' does on this "
               "GPU from the --out file\n";
  rows.clear();
  for (const planner::AttentionCall& x : c.attention) {
    std::ostringstream shape;
    shape << x.batch << " x " << x.heads << "/" << x.kv_heads << " heads x " << x.queries << " x "
          << x.keys << " x " << x.head_dim;
    if (x.value_dim != x.head_dim) shape << "/" << x.value_dim;
    shape << (x.causal ? " causal" : "");
    rows.push_back({x.layer, shape.str(), seconds_text(x.predicted_forward_s),
                    seconds_text(x.predicted_backward_s), x.stands_for});
  }
  print_table({"layer", "batch x heads x queries x keys x dim", "forward", "backward", "for"}, rows,
              {false, false, true, true, false});
}

void print_rehearsal(const RehearseArgs& a, const planner::PlanFile& f, const planner::Rehearsal& r,
                     const std::vector<planner::LinkSweep>& sweeps, const std::string& no_sweep,
                     const RehearsalJob& job, const ComputeTimed& compute) {
  std::cout << "rehearsed " << a.plan << " (" << f.model_name << ") on " << job.world->size() << " "
            << a.device << " rank" << (job.world->size() == 1 ? "" : "s") << " through "
            << job.backend << ": one step's collectives, predicted against measured\n";
  print_compute(compute);
  if (r.collectives.empty()) {
    std::cout << "no collectives: the plan's bill has none on one rank\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const planner::RehearsedCollective& x : r.collectives) {
    std::string group;
    for (const size_t d : x.dims) group += (group.empty() ? "" : "x") + planner::mesh_names()[d];
    rows.push_back(
        {x.planned.what, group + "[" + std::to_string(x.planned.group_size) + "]",
         human_bytes(static_cast<double>(x.planned.bytes)),
         with_commas(x.planned.calls) +
             (x.calls_run < x.planned.calls ? " (" + with_commas(x.calls_run) + " run)" : ""),
         seconds_text(x.planned.seconds), seconds_text(x.measured_s),
         ratio_text(x.measured_s, x.planned.seconds)});
  }
  print_table({"collective", "group", "bytes", "calls", "predicted", "measured", "ratio"}, rows,
              {false, false, true, true, true, true, true});
  std::cout << "all calls: predicted " << seconds_text(r.predicted_s) << ", measured "
            << seconds_text(r.measured_s) << "; exposed (the plan's hiding applied): predicted "
            << seconds_text(r.predicted_exposed_s) << ", measured "
            << seconds_text(r.measured_exposed_s) << "\n";
  if (!no_sweep.empty() && no_sweep != "--no-links") {
    std::cout << "no link sweeps: " << no_sweep << "\n";
  }
  for (const planner::LinkSweep& s : sweeps) {
    if (s.log.rows.empty()) continue;
    std::cout << "link sweep (" << (s.intra ? "inside a node" : "across nodes")
              << "): " << s.log.origin << ", " << s.log.rows.size() << " sizes, "
              << human_bytes(static_cast<double>(s.log.rows.front().bytes)) << " to "
              << human_bytes(static_cast<double>(s.log.rows.back().bytes)) << ": "
              << seconds_text(s.log.rows.back().out_of_place_us * 1e-6) << " at the largest\n";
  }
}

void run_job(CliContext& ctx, const RehearseArgs& a, RehearsalJob& job) {
  collectives::Communicator& world = *job.world;
  std::string error;
  planner::PlanFile f;
  std::unique_ptr<planner::ShardMemory> memory;
  std::vector<std::vector<size_t>> group_dims;
  try {
    planner::check_device(a.device);
    f = planner::read_plan_file(a.plan);
    group_dims = planner::rehearsal_groups(f);
    // A GPU rehearsal of a one-rank plan still times the layers' GEMMs.
    SP_CHECK(!f.collectives.empty() || (a.device == "cuda" && a.compute), "plan ", a.plan,
             " has no collectives to rehearse (prediction.collectives): written before rehearse "
             "or for one rank, expected a plan from 'shardplan plan --out' of this version (or "
             "--device cuda, which times the layers' GEMMs)");
    // The calls one step makes, all of which the rehearsal runs without --calls: a plan the tool
    // writes has thousands at most (layers x micro-batches); a count beyond kMaxStepCalls is an
    // edited plan or a step nobody rehearses whole in a minute.
    constexpr int64_t kMaxStepCalls = 1'000'000;
    int64_t timed = 0;
    for (const planner::BillCollective& c : f.collectives) {
      const int64_t n = a.options.max_calls > 0 ? std::min(c.calls, a.options.max_calls) : c.calls;
      timed = n > kMaxStepCalls - timed ? kMaxStepCalls + 1 : timed + n;
    }
    SP_CHECK(timed <= kMaxStepCalls, "plan ", a.plan, "'s collectives make more than ",
             kMaxStepCalls,
             " calls in one step, expected at most that many to run (or --calls K "
             "to time K calls of each and scale them to the step)");
    SP_CHECK(f.setup.gpus == world.size(), "the plan is for ", f.setup.gpus,
             " ranks but this job has ", world.size(), ", expected a launch with -np ",
             f.setup.gpus);
    if (!a.out.empty()) check_output_path(a.out, "--out");
    memory = a.device == "cpu" ? planner::host_shard_memory()
                               : planner::cuda_shard_memory(job.local_rank);
    SP_CHECK(job.visible_gpus < 0 || job.ranks_per_node <= job.visible_gpus,
             "--device cuda: this node runs ", job.ranks_per_node, " ranks on ", job.visible_gpus,
             " GPU(s) and NCCL takes one rank per GPU, expected at most ", job.visible_gpus,
             " ranks per node (or --device cpu)");
  } catch (const Error& e) {
    error = e.what();
  }
  if (const std::optional<std::string> bad = planner::agree_on_input(world, error)) {
    print_error_line("shardplan: error: " + world.who() + ": " + *bad);
    ctx.exit_code = ExitCode::kBadInput;
    return;
  }
  // Note [Link sweeps] assumes the same ranks on every node, placed node by node.
  int64_t placement[3] = {job.ranks_per_node, -job.ranks_per_node, job.node_by_node ? 0 : 1};
  world.all_reduce(placement, 3, collectives::ReduceElement::kInt64, collectives::ReduceOp::kMax);
  std::string no_sweep;
  if (!a.links) {
    no_sweep = "--no-links";
  } else if (placement[0] != -placement[1]) {
    no_sweep = "nodes run " + std::to_string(-placement[1]) + " to " +
               std::to_string(placement[0]) + " ranks; the sweeps need the same on every node";
  } else if (placement[2] != 0) {
    no_sweep =
        "ranks are not placed node by node (mpirun --map-by node?); the sweeps need ranks "
        "0..n-1 on the first node, n..2n-1 on the next";
  }
  planner::Rehearsal r;
  std::vector<planner::LinkSweep> sweeps;
  ComputeTimed compute;
  if (a.device == "cuda" && !a.compute) compute.skipped = "--no-compute";
  try {
    if (!f.collectives.empty()) {
      const mesh::DeviceMesh m(f.mesh_shape(), planner::mesh_names());
      const std::vector<std::unique_ptr<collectives::Communicator>> groups =
          job.groups(m, group_dims);
      r = planner::rehearse(f, world, groups, *memory, a.options);
      if (no_sweep.empty()) {
        sweeps = planner::sweep_links(f, world, groups, *memory, job.ranks_per_node);
      }
    } else if (no_sweep.empty()) {
      no_sweep = "the plan has no collectives (one rank)";
    }
    // Note [Layer GEMMs]: rank 0's GPU times one layer of each kind at the plan's local shapes.
    if (a.device == "cuda" && a.compute && world.rank() == 0) {
      compute.gemms = planner::layer_gemms(f);
      compute.timings = planner::time_layer_gemms(compute.gemms, 10);
      const auto [kernel, stack] = plan_attention_kernel(f);
      compute.attention = planner::layer_attention(f, kernel);
      compute.attention_stack = stack;
    }
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    print_error_line("shardplan: error: " + world.who() + ": " + e.what());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    job.abort(1);
  }
  if (world.rank() != 0) return;
  const nlohmann::ordered_json doc = rehearsal_json(a, f, r, sweeps, no_sweep, job, compute);
  if (!a.out.empty()) write_file_atomically(a.out, doc.dump(2) + "\n", "--out");
  if (ctx.json) {
    print_json_document(doc);
  } else {
    print_rehearsal(a, f, r, sweeps, no_sweep, job, compute);
    if (!a.out.empty()) std::cout << "wrote " << a.out << "\n";
  }
}

void run_rehearse(CliContext& ctx, const RehearseArgs& a) {
#if SHARDPLAN_HAVE_MPI
  if (collectives::launched_by_mpi_launcher()) {
    collectives::MpiSession session;
    RehearsalJob job;
    job.world = collectives::mpi_world(session);
    job.backend = "mpi";
    job.groups = [&session](const mesh::DeviceMesh& m, const std::vector<std::vector<size_t>>& g) {
      return collectives::mpi_group_communicators(session, m, g);
    };
#if SHARDPLAN_HAVE_NCCL
    if (a.device == "cuda") {
      job.backend = "nccl";
      job.visible_gpus = kernels::cuda_device_count();
      // The NCCL world the groups are split from lives as long as the job.
      job.groups = [&session, &job](const mesh::DeviceMesh& m,
                                    const std::vector<std::vector<size_t>>& g) {
        const collectives::NcclDevice gpu(session);
        collectives::MeshCommunicators c =
            collectives::nccl_group_communicators(session, gpu, m, g);
        job.keep = std::move(c.world);
        return std::move(c.dims);
      };
    }
#endif
    job.abort = [&session](int code) { session.abort(code); };
    job.local_rank = session.local_rank();
    job.ranks_per_node = session.local_size();
    {
      // The lowest world rank on this node is where node-by-node placement starts it.
      const std::unique_ptr<collectives::Communicator> node =
          collectives::mpi_node_communicator(session);
      int64_t first = session.world_rank();
      node->all_reduce(&first, 1, collectives::ReduceElement::kInt64, collectives::ReduceOp::kMin);
      job.node_by_node =
          first == session.world_rank() - session.world_rank() % session.local_size();
    }
    run_job(ctx, a, job);
    return;
  }
#endif
  RehearsalJob job;
  job.world = std::make_unique<collectives::SelfCommunicator>();
  job.backend = "self";
  job.groups = [](const mesh::DeviceMesh&, const std::vector<std::vector<size_t>>& g) {
    std::vector<std::unique_ptr<collectives::Communicator>> out;
    for (size_t i = 0; i < g.size(); ++i) {
      out.push_back(std::make_unique<collectives::SelfCommunicator>());
    }
    return out;
  };
  job.abort = [](int code) { std::exit(code); };
  run_job(ctx, a, job);
}

}  // namespace

void register_rehearse(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "rehearse",
                           "Run one step's worth of a plan's collectives on the real job (one "
                           "process per rank, under mpirun or srun) and time them against the "
                           "plan's prediction");
  auto a = std::make_shared<RehearseArgs>();
  cmd.add_option("--plan", a->plan, "plan.json written by 'shardplan plan --out'")->required();
  cmd.add_option("--device", a->device,
                 "Where buffers live: cpu (MPI) or cuda (NCCL where built with it; default cpu)");
  cmd.add_option("--calls", a->options.max_calls,
                 "Timed calls per collective, the step's time scaled from them (default: all "
                 "calls of one step)")
      ->check(count_in(1, int64_t{1} << 40, "timed calls per collective"));
  cmd.add_option("--out", a->out,
                 "Also write the measurements (the --json document) to this file; "
                 "'shardplan calibrate --rehearsal' fits a cluster file to it")
      ->check(non_empty("a file path"));
  cmd.add_flag("!--no-compute", a->compute,
               "With --device cuda: skip timing one layer of each kind's GEMMs with cuBLAS at the "
               "plan's local shapes on rank 0's GPU");
  cmd.add_flag("!--no-links", a->links,
               "Skip the all-reduce size sweeps on one group inside a node and one across nodes "
               "that 'calibrate --rehearsal' fits the links to");
  cmd.callback([&ctx, a] { run_rehearse(ctx, *a); });
}

}  // namespace shardplan::cli
