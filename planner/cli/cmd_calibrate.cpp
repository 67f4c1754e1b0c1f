// `shardplan calibrate`: fit a cluster file's link latencies and bandwidths to nccl-tests logs
// (collectives/calibration.h) and write the updated cluster file atomically.
//   shardplan calibrate --cluster dgx-h100 --log ar_1node.log,ag_1node.log --link nvlink
//       --log ar_2nodes.log --link ib --out my-h100.json [--json]
// Each --log takes one or more comma-separated files and pairs with the --link at the same
// position (a single --link applies to every --log). Record the logs with NCCL_ALGO=Ring: the fit
// is the cost model's ring formula. --json prints {"cluster", "out", "logs": [{"file", "kind",
// "ranks", "nodes", "points", "latency_s", "busbw_gbps", "rms_relative_residual"}], "links":
// [{"link", "latency_s", "bandwidth_gbps", "previous_latency_s", "previous_bandwidth_gbps",
// "points", "rms_relative_residual"}]}.
// Under a launcher, --mpi measures instead of reading logs (docs/launching.md "Calibrating"):
//   mpirun -np 16 shardplan calibrate --cluster dgx-h100 --mpi --out my-h100.json
// times all_reduce inside each node (the fabric) and over the whole job (the network, with two
// nodes or more) through the MPI Communicator, nccl-tests' way
// (collectives/collective_benchmark.h), and fits the same way as logs. Rank 0 writes the file and
// prints.
// With --compute, one GPU's measurements (scripts/gpu_measure.py's output) fit the cluster's
// memory, HBM and GEMM figures, and the measured decoder layers the --stack's efficiency:
//   shardplan calibrate --cluster dgx-h100 --compute h100.json --out my-h100.json
//       [--stack pytorch --stack-out my-pytorch.json] [--json]
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "base/strict_json.h"
#include "collectives/calibration.h"
#include "collectives/cluster.h"
#include "collectives/collective_benchmark.h"
#include "planner/cli/cli_common.h"
#include "planner/cost/compute_calibration.h"
#include "planner/materialize/link_sweep.h"
#if SHARDPLAN_HAVE_MPI
#include "collectives/mpi/mpi_communicator.h"
#endif

namespace shardplan::cli {
namespace {

struct CalibrateOptions {
  std::string cluster;             // --cluster NAME_OR_PATH
  std::vector<std::string> logs;   // --log a.log,b.log (repeatable)
  std::vector<std::string> links;  // --link nvlink|ib (repeatable)
  std::string out;                 // --out new.json
  bool mpi = false;                // --mpi: measure under the launcher instead of --log
  std::string compute;             // --compute measured.json (scripts/gpu_measure.py)
  std::string rehearsal;           // --rehearsal r.json (shardplan rehearse --out)
  std::string stack = "pytorch";   // --stack the measured layers ran in
  std::string stack_out;           // --stack-out fitted-stack.json
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(',', start);
    out.push_back(text.substr(start, at == std::string::npos ? at : at - start));
    SP_CHECK(!out.back().empty(), "--log '", text, "': empty file name, expected FILE[,FILE...]");
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::vector<collectives::CalibrationInput> inputs(const CalibrateOptions& o) {
  SP_CHECK(o.links.size() == 1 || o.links.size() == o.logs.size(), o.logs.size(),
           " --log option(s) and ", o.links.size(),
           " --link option(s), expected one --link for all or one per --log");
  std::vector<collectives::CalibrationInput> in;
  for (size_t i = 0; i < o.logs.size(); ++i) {
    const collectives::CalibratedLink link =
        collectives::parse_calibrated_link(o.links[o.links.size() == 1 ? 0 : i]);
    for (const std::string& file : split_commas(o.logs[i])) {
      in.push_back({collectives::load_nccl_tests_log(file), link});
    }
  }
  return in;
}

std::string link_name(const collectives::Cluster& c, collectives::CalibratedLink l) {
  return l == collectives::CalibratedLink::kIntra
             ? std::string(collectives::to_string(c.intra.fabric))
             : "ib";
}

void print_text(const CalibrateOptions& o, const collectives::CalibrationResult& r,
                bool announce_write = true, std::ostream& out = std::cout) {
  out << std::fixed << std::setprecision(3);
  for (const collectives::LogFit& f : r.logs) {
    out << "log   " << f.origin << ": " << collectives::to_string(f.kind) << ", " << f.ranks
        << " ranks on " << f.nodes << " node(s), " << f.points << " times: latency " << f.latency_us
        << " us, busbw " << f.busbw_gbps << " GB/s (rms residual " << f.rms_relative_residual * 100
        << "%)\n";
  }
  for (const collectives::LinkFit& l : r.links) {
    const bool intra = l.link == collectives::CalibratedLink::kIntra;
    out << "link  " << link_name(r.cluster, l.link) << ": per-step latency "
        << l.previous_latency_us << " -> " << l.latency_us << " us, "
        << (intra ? "bus bandwidth " : "bandwidth per NIC ") << l.previous_bandwidth_gbps << " -> "
        << l.bandwidth_gbps << " GB/s (" << l.points << " times, rms residual "
        << l.rms_relative_residual * 100 << "%)\n";
  }
  if (announce_write) out << "wrote " << o.out << '\n';
}

void print_json(const CalibrateOptions& o, const collectives::CalibrationResult& r) {
  nlohmann::ordered_json j;
  j["cluster"] = o.cluster;
  j["out"] = o.out;
  j["logs"] = nlohmann::ordered_json::array();
  for (const collectives::LogFit& f : r.logs) {
    j["logs"].push_back({{"file", f.origin},
                         {"kind", collectives::to_string(f.kind)},
                         {"ranks", f.ranks},
                         {"nodes", f.nodes},
                         {"points", f.points},
                         {"latency_s", f.latency_us * 1e-6},
                         {"busbw_gbps", f.busbw_gbps},
                         {"rms_relative_residual", f.rms_relative_residual}});
  }
  j["links"] = nlohmann::ordered_json::array();
  for (const collectives::LinkFit& l : r.links) {
    j["links"].push_back({{"link", link_name(r.cluster, l.link)},
                          {"latency_s", l.latency_us * 1e-6},
                          {"bandwidth_gbps", l.bandwidth_gbps},
                          {"previous_latency_s", l.previous_latency_us * 1e-6},
                          {"previous_bandwidth_gbps", l.previous_bandwidth_gbps},
                          {"points", l.points},
                          {"rms_relative_residual", l.rms_relative_residual}});
  }
  print_json_document(j);
}

void write_and_print(CliContext& ctx, const CalibrateOptions& opts,
                     const collectives::CalibrationResult& r) {
  // Re-read what is written with the strict loader: a file this verb writes always loads.
  const nlohmann::ordered_json j = collectives::cluster_to_json(r.cluster);
  collectives::cluster_from_json(j, opts.out);
  write_file_atomically(opts.out, j.dump(2) + "\n", "--out");
  ctx.json ? print_json(opts, r) : print_text(opts, r);
}

#if SHARDPLAN_HAVE_MPI
void calibrate_ranks(CliContext& ctx, const CalibrateOptions& opts,
                     const collectives::Cluster& base, const collectives::MpiSession& mpi);
#endif

// --mpi: the links of this job measured through the MPI Communicator.
void calibrate_mpi(CliContext& ctx, const CalibrateOptions& opts,
                   const collectives::Cluster& base) {
  SP_CHECK(opts.logs.empty() && opts.links.empty(),
           "--mpi measures the links itself, expected no --log or --link with it");
#if SHARDPLAN_HAVE_MPI
  SP_CHECK(collectives::launched_by_mpi_launcher(),
           "--mpi: run under a launcher, one process per GPU (mpirun -np N shardplan calibrate "
           "--mpi ...)");
  collectives::MpiSession mpi;
  try {
    calibrate_ranks(ctx, opts, base, mpi);
  } catch (const Error& e) {
    // Printed before MPI_Finalize (Note [Materialize failure policy] in cmd_materialize.cpp):
    // every rank reaches the same error, and a line printed after finalizing may be lost.
    print_error_line("shardplan: error: " + mpi.who() + ": " + e.what());
    ctx.exit_code = ExitCode::kBadInput;
  }
#else
  (void)ctx;
  (void)base;
  SP_FAIL(
      "--mpi: this shardplan was built without MPI (apt-get install libopenmpi-dev, then "
      "rebuild)");
#endif
}

#if SHARDPLAN_HAVE_MPI
void calibrate_ranks(CliContext& ctx, const CalibrateOptions& opts,
                     const collectives::Cluster& base, const collectives::MpiSession& mpi) {
  const std::unique_ptr<collectives::Communicator> world = collectives::mpi_world(mpi);
  const std::unique_ptr<collectives::Communicator> node = collectives::mpi_node_communicator(mpi);
  int64_t per_node[2] = {mpi.local_size(), -mpi.local_size()};  // max, -min
  world->all_reduce(per_node, 2, collectives::ReduceElement::kInt64, collectives::ReduceOp::kMax);
  SP_CHECK(per_node[0] == -per_node[1], "--mpi: nodes run between ", -per_node[1], " and ",
           per_node[0], " ranks, expected the same number on every node");
  std::vector<collectives::CalibrationInput> in;
  const collectives::BenchmarkOptions bench;
  if (mpi.local_size() > 1) {
    collectives::NcclTestsLog log = collectives::benchmark_all_reduce(
        *node, bench, 1, mpi.local_size(),
        "mpi all_reduce, " + std::to_string(mpi.local_size()) + " ranks in a node");
    // Every node measured its own fabric: keep the slowest node's time per size.
    for (collectives::NcclTestsRow& row : log.rows) {
      world->all_reduce(&row.out_of_place_us, 1, collectives::ReduceElement::kFloat64,
                        collectives::ReduceOp::kMax);
    }
    in.push_back({std::move(log), collectives::CalibratedLink::kIntra});
  }
  if (mpi.nodes() > 1) {
    in.push_back({collectives::benchmark_all_reduce(
                      *world, bench, mpi.nodes(), mpi.local_size(),
                      "mpi all_reduce, " + std::to_string(mpi.world_size()) + " ranks on " +
                          std::to_string(mpi.nodes()) + " nodes"),
                  collectives::CalibratedLink::kInter});
  }
  SP_CHECK(!in.empty(), "--mpi: one rank measures no link, expected two ranks or more");
  const collectives::CalibrationResult r = collectives::calibrate(base, in);
  if (mpi.world_rank() == 0) write_and_print(ctx, opts, r);
}
#endif

void fit_compute(CliContext& ctx, const CalibrateOptions& o, const collectives::Cluster& base,
                 const nlohmann::json& measured, const std::string& origin,
                 const std::string& preamble = "");

// --rehearsal: the links fitted to a rehearsal's sweeps (Note [Link sweeps] in
// planner/materialize/link_sweep.h), the same fit as nccl-tests logs, and, when it timed its
// layers' GEMMs on a GPU (Note [Layer GEMMs] in planner/materialize/layer_gemms.h), the compute
// figures on top of them, as --compute fits a measurement file.
void calibrate_rehearsal(CliContext& ctx, const CalibrateOptions& o,
                         const collectives::Cluster& base) {
  SP_CHECK(o.logs.empty() && o.links.empty() && !o.mpi && o.compute.empty(), "--rehearsal ",
           o.rehearsal,
           " brings its own link measurements, expected no --log, --link, --mpi or "
           "--compute with it");
  constexpr int kMaxDepth = 8;
  const nlohmann::json doc =
      parse_strict_json(read_text_file(o.rehearsal, "rehearsal file"), o.rehearsal, kMaxDepth,
                        "a rehearsal file ('shardplan rehearse --out')");
  const bool compute = doc.is_object() && doc.contains("compute");
  const bool links =
      !compute || (doc.contains("links") && doc["links"].is_array() && !doc["links"].empty());
  if (!compute) {
    write_and_print(ctx, o,
                    collectives::calibrate(
                        base, planner::rehearsal_link_inputs(doc, o.rehearsal, base.library)));
    return;
  }
  SP_CHECK(doc.value("format", std::string()) == "shardplan.rehearsal", "--rehearsal ", o.rehearsal,
           ": field 'format': expected 'shardplan.rehearsal' (a file written by 'shardplan "
           "rehearse --out')");
  collectives::Cluster start = base;
  std::ostringstream link_text;  // printed by fit_compute once the compute fit has succeeded
  if (links) {
    const collectives::CalibrationResult r = collectives::calibrate(
        base, planner::rehearsal_link_inputs(doc, o.rehearsal, base.library));
    if (!ctx.json) print_text(o, r, /*announce_write=*/false, link_text);
    start = r.cluster;
  }
  fit_compute(ctx, o, start, doc["compute"], o.rehearsal + ": compute", link_text.str());
}

// --compute: the cluster's compute figures and the stack's efficiency fitted to one GPU's
// measurements (Note [Compute calibration] in planner/cost/compute_calibration.h).
void calibrate_compute(CliContext& ctx, const CalibrateOptions& o,
                       const collectives::Cluster& base) {
  SP_CHECK(o.logs.empty() && o.links.empty() && !o.mpi && o.rehearsal.empty(),
           "--compute fits compute figures, expected no --log, --link, --mpi or --rehearsal with "
           "it");
  constexpr int kMaxDepth = 8;
  const nlohmann::json measured =
      parse_strict_json(read_text_file(o.compute, "measurement file"), o.compute, kMaxDepth,
                        "a measurement file (scripts/gpu_measure.py's output)");
  fit_compute(ctx, o, base, measured, o.compute);
}

// The compute figures of `base` (and the stack's efficiency, with --stack-out) fitted to one
// GPU's measurements (Note [Compute calibration]), written to --out. `preamble` is text printed
// before the fits, once everything has succeeded: nothing reaches stdout from a run that fails.
void fit_compute(CliContext& ctx, const CalibrateOptions& o, const collectives::Cluster& base,
                 const nlohmann::json& measured, const std::string& origin,
                 const std::string& preamble) {
  const std::filesystem::path stack_path = planner::resolve_stack(o.stack);
  const planner::StackProfile stack = planner::load_stack(stack_path);
  const planner::ComputeCalibration r = planner::calibrate_compute(base, stack, measured, origin);
  SP_CHECK(o.stack_out.empty() || r.stack_fitted, "--stack-out ", o.stack_out, ": ", origin,
           " has no llama_layers to fit the stack on, expected measured layers");
  // Both files are built and re-read with the strict loaders before either is written.
  const nlohmann::ordered_json cluster_json = collectives::cluster_to_json(r.cluster);
  collectives::cluster_from_json(cluster_json, o.out);
  nlohmann::ordered_json stack_json;
  if (!o.stack_out.empty()) {
    stack_json = nlohmann::ordered_json::parse(read_text_file(stack_path, "stack file"));
    stack_json["name"] = std::filesystem::path(o.stack_out).stem().string();
    const planner::ComputeFit& f = r.fits.back();  // compute_efficiency comes last
    stack_json["compute_efficiency"] = {
        {"value", f.fitted},
        {"source", "measured: " + origin + ", " + std::to_string(f.points) +
                       " decoder layers in this stack against the fitted cluster (shardplan "
                       "calibrate --compute, Note [Compute calibration])"}};
    planner::stack_from_json(nlohmann::json::parse(stack_json.dump()), o.stack_out);
  }
  write_file_atomically(o.out, cluster_json.dump(2) + "\n", "--out");
  if (!o.stack_out.empty()) {
    write_file_atomically(o.stack_out, stack_json.dump(2) + "\n", "--stack-out");
  }
  if (ctx.json) {
    nlohmann::ordered_json j;
    j["cluster"] = o.cluster;
    j["measured"] = origin;
    j["stack"] = stack.name;
    j["out"] = o.out;
    j["stack_out"] =
        o.stack_out.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.stack_out);
    j["fits"] = nlohmann::ordered_json::array();
    for (const planner::ComputeFit& f : r.fits) {
      j["fits"].push_back({{"what", f.what},
                           {"previous", f.previous},
                           {"fitted", f.fitted},
                           {"points", f.points},
                           {"low", f.low},
                           {"high", f.high}});
    }
    j["attention_measured_over_predicted"] = r.attention_ratio;
    print_json_document(j);
    return;
  }
  std::cout << preamble << std::fixed << std::setprecision(3);
  for (const planner::ComputeFit& f : r.fits) {
    std::cout << std::left << std::setw(24) << f.what << std::right << " " << f.previous << " -> "
              << f.fitted;
    if (f.points > 1) {
      std::cout << "  (median of " << f.points << ", " << f.low << "-" << f.high << ")";
    }
    std::cout << (f.what == "compute_efficiency" ? "  [stack " + stack.name + "]" : "") << "\n";
  }
  if (!r.attention_ratio.empty()) {
    const auto [lo, hi] = std::minmax_element(r.attention_ratio.begin(), r.attention_ratio.end());
    std::cout << "attention: measured rate " << *lo << "-" << *hi << " of the predicted ("
              << r.attention_ratio.size() << " rows; not fitted: Note [Compute calibration])\n";
  }
  std::cout << "wrote " << o.out << "\n";
  if (!o.stack_out.empty()) std::cout << "wrote " << o.stack_out << "\n";
}

}  // namespace

void register_calibrate(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "calibrate",
                           "Fit a cluster file's link latencies and bandwidths to nccl-tests logs "
                           "(recorded with NCCL_ALGO=Ring), or its compute figures to one GPU's "
                           "measurements (--compute), and write the updated file");
  auto opts = std::make_shared<CalibrateOptions>();
  cmd.add_option("--cluster", opts->cluster,
                 "Cluster to start from (configs/clusters name or path)")
      ->required()
      ->type_name("NAME");
  cmd.add_option("--log", opts->logs,
                 "nccl-tests output (all_reduce_perf etc.), comma-separated; repeatable")
      ->allow_extra_args(false)  // one value per occurrence: --link pairs with it by position
      ->type_name("FILE[,FILE]");
  cmd.add_option("--link", opts->links,
                 "What the logs measure: nvlink (inside a node) or ib (between nodes); one per "
                 "--log, or one for all")
      ->allow_extra_args(false)
      ->type_name("LINK");
  cmd.add_option("--out", opts->out, "Where to write the calibrated cluster file (atomically)")
      ->required()
      ->type_name("FILE");
  cmd.add_flag("--mpi", opts->mpi,
               "Measure the links under mpirun/srun through the MPI communicator instead of "
               "reading --log files");
  cmd.add_option("--compute", opts->compute,
                 "Fit the GPU's memory, HBM and GEMM figures (and --stack's efficiency) to "
                 "scripts/gpu_measure.py's output instead of the links")
      ->check(non_empty("a measurement file"))
      ->type_name("FILE");
  cmd.add_option("--rehearsal", opts->rehearsal,
                 "Fit the links to the size sweeps of 'shardplan rehearse --out' (the job's own "
                 "backend: NCCL on GPUs, MPI on CPUs) instead of --log files")
      ->check(non_empty("a file written by 'shardplan rehearse --out'"))
      ->type_name("FILE");
  cmd.add_option("--stack", opts->stack,
                 "With --compute: the stack the measured layers ran in (default pytorch, as "
                 "gpu_measure.py runs them)")
      ->check(non_empty("a configs/stacks name or a stack file"))
      ->type_name("NAME");
  cmd.add_option("--stack-out", opts->stack_out,
                 "With --compute: where to write the stack file with the fitted efficiency")
      ->check(non_empty("a file path"))
      ->type_name("FILE");
  cmd.callback([&ctx, opts] {
    check_output_path(opts->out, "--out");  // before any work: nothing half-done on a bad path
    if (!opts->stack_out.empty()) {
      SP_CHECK(!opts->compute.empty(), "--stack-out ", opts->stack_out,
               ": only --compute fits a stack, expected --compute FILE with it");
      check_output_path(opts->stack_out, "--stack-out");
      SP_CHECK(std::filesystem::absolute(opts->stack_out).lexically_normal() !=
                   std::filesystem::absolute(opts->out).lexically_normal(),
               "--stack-out ", opts->stack_out, " is also --out, expected two files");
    }
    const collectives::Cluster base =
        collectives::load_cluster(collectives::resolve_cluster(opts->cluster));
    if (!opts->compute.empty()) {
      calibrate_compute(ctx, *opts, base);
      return;
    }
    if (!opts->rehearsal.empty()) {
      calibrate_rehearsal(ctx, *opts, base);
      return;
    }
    if (opts->mpi) {
      calibrate_mpi(ctx, *opts, base);
      return;
    }
    SP_CHECK(!opts->logs.empty() && !opts->links.empty(),
             "--log and --link are required (or --mpi, to measure under a launcher, or --rehearsal "
             "FILE)");
    write_and_print(ctx, *opts, collectives::calibrate(base, inputs(*opts)));
  });
}

}  // namespace shardplan::cli
