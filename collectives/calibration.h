// Calibrating a cluster file from nccl-tests logs: fit the per-step latency and the bandwidth of
// one link class (the node's fabric, or the network's NICs) to the logs' size rows, the way the
// cost model prices a ring (Note [Calibration] in calibration.cpp), and write them back into the
// cluster with their source.
//   std::vector<CalibrationInput> in = {{load_nccl_tests_log("ar8.log"), CalibratedLink::kIntra}};
//   CalibrationResult r = calibrate(load_cluster(resolve_cluster("dgx-h100")), in);
//   r.cluster.intra.bus_bandwidth_gbps.value;   // the fitted bandwidth, source naming ar8.log
// Measurements taken under mpirun through the runtime Communicator (`calibrate --mpi`,
// collectives/collective_benchmark.h) come in as the same NcclTestsLog and are fitted the same way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/cluster.h"
#include "collectives/nccl_tests_log.h"

namespace shardplan::collectives {

// The link class a log measures: the fabric inside a node (nvlink or shared_memory) or the
// network between nodes (ib, also "network").
enum class CalibratedLink { kIntra, kInter };
std::string_view to_string(CalibratedLink l);
// "nvlink", "shared_memory", "intra" -> kIntra; "ib", "network", "inter" -> kInter; throws
// shardplan::Error listing the names otherwise.
CalibratedLink parse_calibrated_link(std::string_view s);

// nccl-tests' view of one log: time = latency + S * busbw_factor / busbw over every time (out-of-
// place and in-place) of every row, fitted by least squares on relative residuals.
struct LogFit {
  std::string origin;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t ranks = 0, nodes = 0, points = 0;
  double latency_us = 0;
  double busbw_gbps = 0;
  double rms_relative_residual = 0;
};
LogFit fit_log(const NcclTestsLog& log);

// What a link's logs say about its cluster-file parameters.
struct LinkFit {
  CalibratedLink link = CalibratedLink::kIntra;
  double latency_us = 0;      // per ring step, Simple protocol (the file's latency_us)
  double bandwidth_gbps = 0;  // intra: per-GPU bus bandwidth; inter: per NIC
  double previous_latency_us = 0, previous_bandwidth_gbps = 0;
  int64_t points = 0;
  double rms_relative_residual = 0;
};

struct CalibrationInput {
  NcclTestsLog log;
  CalibratedLink link = CalibratedLink::kIntra;
};
struct CalibrationResult {
  collectives::Cluster cluster;  // the input cluster with the fitted values and their sources
  std::vector<LogFit> logs;      // one per input, in order
  std::vector<LinkFit> links;    // intra first, then inter; only the links that had logs
};

// Throws shardplan::Error naming the log when it does not fit the link (an intra log over several
// nodes, an inter log on one node or on a cluster without a network, more ranks per node than the
// cluster has, a collective the fit cannot use), or naming the link when the fit is not physical
// (latency or bandwidth <= 0, a bandwidth above the line rate: not a ring, see the note, or an
// inter-node ring that the fabric, not the network, bounds).
CalibrationResult calibrate(const collectives::Cluster& cluster,
                            std::span<const CalibrationInput> inputs);

}  // namespace shardplan::collectives
