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
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "collectives/calibration.h"
#include "collectives/cluster.h"
#include "collectives/collective_benchmark.h"
#include "planner/cli/cli_common.h"
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

void print_text(const CalibrateOptions& o, const collectives::CalibrationResult& r) {
  std::cout << std::fixed << std::setprecision(3);
  for (const collectives::LogFit& f : r.logs) {
    std::cout << "log   " << f.origin << ": " << collectives::to_string(f.kind) << ", " << f.ranks
              << " ranks on " << f.nodes << " node(s), " << f.points << " times: latency "
              << f.latency_us << " us, busbw " << f.busbw_gbps << " GB/s (rms residual "
              << f.rms_relative_residual * 100 << "%)\n";
  }
  for (const collectives::LinkFit& l : r.links) {
    const bool intra = l.link == collectives::CalibratedLink::kIntra;
    std::cout << "link  " << link_name(r.cluster, l.link) << ": per-step latency "
              << l.previous_latency_us << " -> " << l.latency_us << " us, "
              << (intra ? "bus bandwidth " : "bandwidth per NIC ") << l.previous_bandwidth_gbps
              << " -> " << l.bandwidth_gbps << " GB/s (" << l.points << " times, rms residual "
              << l.rms_relative_residual * 100 << "%)\n";
  }
  std::cout << "wrote " << o.out << '\n';
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

}  // namespace

void register_calibrate(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "calibrate",
                           "Fit a cluster file's link latencies and bandwidths to nccl-tests logs "
                           "(recorded with NCCL_ALGO=Ring) and write the updated file");
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
  cmd.callback([&ctx, opts] {
    check_output_path(opts->out, "--out");  // before any work: nothing half-done on a bad path
    const collectives::Cluster base =
        collectives::load_cluster(collectives::resolve_cluster(opts->cluster));
    if (opts->mpi) {
      calibrate_mpi(ctx, *opts, base);
      return;
    }
    SP_CHECK(!opts->logs.empty() && !opts->links.empty(),
             "--log and --link are required (or --mpi, to measure under a launcher)");
    write_and_print(ctx, *opts, collectives::calibrate(base, inputs(*opts)));
  });
}

}  // namespace shardplan::cli
