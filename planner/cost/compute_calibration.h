// Fitting a cluster file's compute figures and a stack's efficiency to measurements of one GPU
// (`shardplan calibrate --compute FILE`), so that a user with one GPU of the kind they will rent
// can calibrate before buying. FILE is scripts/gpu_measure.py's output:
//   {"device", "streaming_multiprocessors", "memory_bytes", "torch", "cuda",
//    "hbm": {"copy_bytes_per_s", ...}, "bf16_gemm": [{"m", "n", "k", "flops_per_s"}, ...],
//    (each GEMM may state "batch"; "torch" is optional: `rehearse --device cuda` writes the same
//    document without it, under "compute", from cuBLAS at the plan's local shapes),
//    "fp8_gemm": [...], "attention": [...], "llama_layers": [{"model", "tp", "seq",
//    "micro_batch", "forward_s", "backward_s"}, ...]}
//   ComputeCalibration r = calibrate_compute(cluster, stack, measured, "h100.json");
//   r.cluster;   // memory_gb, memory_efficiency, matmul_efficiency per measured dtype
//   r.stack;     // compute_efficiency, when layers were measured
//
// Note [Compute calibration]
// Each figure is fitted where the cost model reads it alone:
//   memory: the bytes the device offers (torch's total_memory), as the cluster files state them;
//   HBM: memory_efficiency is the copy's rate over the datasheet bandwidth (an elementwise op
//       reads and writes, as a copy does: Note [HBM efficiency]);
//   GEMM ceiling per dtype: each measured GEMM's rate over the peak times its shape factor
//       (Note [GEMM efficiency] at a ceiling of 1), the median over the GEMMs whose shape factor
//       is 0.9 or more (where the ceiling, not tiles or waves, sets the rate; all of them when
//       none is that large). The median, not the maximum: a sustained load runs at the clock the
//       power limit leaves, which is what a training step sees;
//   the stack's compute_efficiency: a measured decoder layer (forward + backward, one rank's
//       shard, no communication) priced with the fitted cluster; its attention is the kernel's
//       (Note [Attention kernels]) and the rest scales as 1 / efficiency, so each layer gives
//       efficiency = rest / (measured - attention); the median over the layers, at most 1.
// The attention rows are compared, not fitted: the cluster file has no attention figure of its
// own (the fused kernel runs at the bf16 ceiling), so their measured-over-predicted rate is
// reported for the user to read.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/cluster.h"
#include "planner/candidate/stack_profile.h"

namespace shardplan::planner {

struct ComputeFit {
  std::string what;     // "memory_gb", "memory_efficiency", "matmul_efficiency.bf16", ...
  double previous = 0;  // the base file's value (0 where it stated none)
  double fitted = 0;
  int64_t points = 0;        // measurements it was fitted on
  double low = 0, high = 0;  // their spread (each measurement's own estimate)
};

struct ComputeCalibration {
  collectives::Cluster cluster;
  StackProfile stack;
  bool stack_fitted = false;  // the measurement had decoder layers
  std::vector<ComputeFit> fits;
  // Measured over predicted rate of each attention row (forward + backward); empty without rows.
  std::vector<double> attention_ratio;
};

// Throws shardplan::Error naming `origin`, the field and what was expected for a malformed
// measurement, one measured on a GPU other than the cluster's (a different SM count), or a
// ceiling or efficiency outside (0, 1].
ComputeCalibration calibrate_compute(const collectives::Cluster& base, const StackProfile& stack,
                                     const nlohmann::json& measured, const std::string& origin);

}  // namespace shardplan::planner
