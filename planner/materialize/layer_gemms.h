// The GEMMs of one decoder layer of each kind of a plan, at one rank's local shapes, with the
// time the cost model gives each: what `shardplan rehearse --device cuda` times with cuBLAS and
// what `calibrate --rehearsal` fits the GEMM ceiling to (docs/launching.md "Rehearsal").
//   for (const LayerGemm& g : layer_gemms(plan)) time(g.shape);   // g.predicted_s beside it
//
// Note [Layer GEMMs]
// Each kind of layer of the model (layer_stack: dense, MoE, sliding window, ...) is traced once
// at the plan's micro-batch and local sequence (seq / cp), as the planner traces it, and every
// matrix product of the layer's linear modules is taken at the shape the rank runs
// (local_gemm_shape: N / tp for column-parallel, K / tp for row-parallel, the sequence-parallel
// rows, the experts the rank holds as a batch of GEMMs). Each gives three GEMMs: the forward
// (M x N, reducing K), the input gradient (M x K, reducing N) and the weight gradient (N x K,
// reducing M). The attention core is left out: it is one fused kernel (FlashAttention), not
// cuBLAS GEMMs; rehearse lists it as calls for PyTorch to time (Note [Rehearsed attention]).
// Predicted seconds are 2 batch M N K over the GEMM dtype's peak times the model's efficiency for
// that shape (Note [GEMM efficiency]), in bf16 even for an fp8 plan, since cuBLAS runs them in
// bf16 here: the rehearsal checks the ceiling and the shape factor, not the fp8 speedup.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/cost/compute_cost.h"
#include "planner/plan/plan_file.h"

namespace shardplan::planner {

struct LayerGemm {
  std::string layer;  // the kind, as describe(LayerKind) words it ("dense full attention")
  std::string name;   // the modules: "self_attn.q_proj", "mlp.gate_proj, mlp.up_proj"
  std::string pass;   // "fwd", "dgrad" or "wgrad"
  GemmShape shape;
  int64_t count = 1;       // GEMMs of this shape and pass in one layer (of `name`'s modules)
  double flops = 0;        // 2 batch M N K, one of them
  double predicted_s = 0;  // the cost model's for one, in bf16
};

// Note [Layer GEMMs], in the layer's order; GEMMs of one layer with the same shape and pass (q and
// k projections of one width) are one entry with their count. Throws shardplan::Error when the
// plan's model cannot be traced or its cluster states no bf16 or fp32 peak.
std::vector<LayerGemm> layer_gemms(const PlanFile& plan);

// What one GPU measured: each GEMM's median seconds (one of its `count`) and the device.
struct LayerTimings {
  std::vector<double> measured_s;  // per layer_gemms entry
  std::string device;              // "NVIDIA H200"
  int64_t multiprocessors = 0;
  int64_t memory_bytes = 0;
  std::string cuda;             // the runtime's version, "13.0"
  double copy_bytes_per_s = 0;  // a 1 GiB device-to-device copy, read + written
};

// Times every GEMM of `gemms` with cuBLAS on this rank's current GPU (median of `repeats` after
// warm-ups) and a device copy. Throws shardplan::Error naming the GEMM when CUDA or cuBLAS fails,
// or when this shardplan was built without CUDA.
LayerTimings time_layer_gemms(const std::vector<LayerGemm>& gemms, int repeats);

// The rehearsal's "compute" object: the measurement document `calibrate` fits
// (Note [Compute calibration]: device, streaming_multiprocessors, memory_bytes, cuda, hbm,
// bf16_gemm rows with their flops_per_s), each GEMM row also naming its layer, modules and pass,
// with count, predicted_s and measured_s, and "layers": per layer kind, the predicted and
// measured seconds of all its GEMMs (count x each).
nlohmann::ordered_json compute_measurement_json(const std::vector<LayerGemm>& gemms,
                                                const LayerTimings& timings);

}  // namespace shardplan::planner
