#include "planner/materialize/layer_gemms.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/ops.h"
#if SHARDPLAN_HAVE_CUDA
#include "kernels/gemm_timing.h"
#endif

namespace shardplan::planner {
namespace {

// "layers.0.self_attn.q_proj" -> "self_attn.q_proj": the module inside its layer.
std::string module_in_layer(const tensor::TrainingStep& st, const tensor::TrainingOp& op) {
  if (op.call < 0) return op.op;
  const std::string& fqn = st.calls[static_cast<size_t>(op.call)].fqn;
  const size_t layers = fqn.find("layers.");
  if (layers == std::string::npos) return fqn;
  const size_t dot = fqn.find('.', layers + 7);
  return dot == std::string::npos ? fqn : fqn.substr(dot + 1);
}

}  // namespace

std::vector<LayerGemm> layer_gemms(const PlanFile& plan) {
  const ParallelConfig& c = plan.config;
  // cuBLAS runs them in bf16 (Note [Layer GEMMs]): an fp8 plan's GEMMs are priced as 16-bit ones.
  const ComputeModel a = sixteen_bit_compute(compute_model(plan.cluster, c.precision));
  const tensor::LayerStack stack = tensor::layer_stack(plan.model);
  std::vector<LayerGemm> out;
  for (const tensor::LayerKind& kind : stack.kinds) {
    const bool moe = kind.ffn == tensor::FfnKind::kMoe;
    const TracedModel t = trace_one_block(
        plan.model, kind, {.micro_batch = c.micro_batch, .seq = plan.setup.seq / c.cp});
    const RankSplit split{.tp = c.tp,
                          .sequence_parallel = c.sequence_parallel,
                          .cp = c.cp,
                          .whole_experts = moe && expert_tp(c) != c.tp,
                          .ep = moe ? c.ep : 1};
    const std::string layer = tensor::describe(kind);
    const size_t first = out.size();
    for (size_t i = 0; i < t.step.ops.size(); ++i) {
      const tensor::TrainingOp& op = t.step.ops[i];
      // The chunked scans (the gated delta rule, Mamba-2's) run flash-linear-attention's and
      // mamba_ssm's kernels, not one GEMM: priced as their tiles (docs/cost-model.md §8.8,
      // §8.9), not rehearsed.
      if (t.part[i] != Part::kBlock || op.is_view || op.skipped || op.matmul_flops <= 0 ||
          t.score_op[i] || op.op == "scaled_dot_product_attention" ||
          tensor::chunked_scan_chunk(op.op) > 0) {
        continue;
      }
      const GemmShape g = local_gemm_shape(t, i, split);
      const std::string module = module_in_layer(t.step, op);
      const GemmShape passes[3] = {{g.batch, g.m, g.n, g.k},   // forward
                                   {g.batch, g.m, g.k, g.n},   // input gradient
                                   {g.batch, g.n, g.k, g.m}};  // weight gradient
      const char* pass_names[3] = {"fwd", "dgrad", "wgrad"};
      for (int p = 0; p < 3; ++p) {
        LayerGemm x;
        x.layer = layer;
        x.name = module;
        x.pass = pass_names[p];
        x.shape = passes[p];
        x.flops = 2.0 * static_cast<double>(x.shape.batch) * static_cast<double>(x.shape.m) *
                  static_cast<double>(x.shape.n) * static_cast<double>(x.shape.k);
        x.predicted_s = x.flops / (a.peak_flops * gemm_efficiency(a, x.shape));
        // The same shape in the same pass (q and k of one width, gate and up): timed once.
        bool seen = false;
        for (size_t j = first; j < out.size() && !seen; ++j) {
          const GemmShape& s = out[j].shape;
          if (s.batch == x.shape.batch && s.m == x.shape.m && s.n == x.shape.n &&
              s.k == x.shape.k && out[j].pass == x.pass) {
            ++out[j].count;
            out[j].name += ", " + module;
            seen = true;
          }
        }
        if (!seen) out.push_back(x);
      }
    }
  }
  return out;
}

LayerTimings time_layer_gemms(const std::vector<LayerGemm>& gemms, int repeats) {
  LayerTimings t;
#if SHARDPLAN_HAVE_CUDA
  std::string error;
  kernels::CudaDeviceFacts facts;
  SP_CHECK(kernels::cuda_device_facts(&facts, &error), "rehearse: ", error);
  t.device = facts.name;
  t.multiprocessors = facts.multiprocessors;
  t.memory_bytes = facts.memory_bytes;
  t.cuda = facts.runtime;
  SP_CHECK(kernels::time_copy_cuda(int64_t{1} << 30, repeats, &t.copy_bytes_per_s, &error),
           "rehearse: the device copy: ", error);
  for (const LayerGemm& g : gemms) {
    double seconds = 0;
    SP_CHECK(kernels::time_gemm_bf16_cuda({g.shape.batch, g.shape.m, g.shape.n, g.shape.k}, repeats,
                                          &seconds, &error),
             "rehearse: GEMM ", g.name, " ", g.pass, " of the ", g.layer, " layer: ", error);
    t.measured_s.push_back(seconds);
  }
#else
  (void)gemms;
  (void)repeats;
  throw Error(
      "rehearse: this shardplan was built without CUDA, expected a build with it to "
      "time the layers' GEMMs (shardplan env)");
#endif
  return t;
}

nlohmann::ordered_json compute_measurement_json(const std::vector<LayerGemm>& gemms,
                                                const LayerTimings& timings) {
  SP_CHECK(timings.measured_s.size() == gemms.size(),
           "compute_measurement_json: ", timings.measured_s.size(), " timings for ", gemms.size(),
           " GEMMs");
  nlohmann::ordered_json j;
  j["device"] = timings.device;
  j["streaming_multiprocessors"] = timings.multiprocessors;
  j["memory_bytes"] = timings.memory_bytes;
  j["cuda"] = timings.cuda;
  j["source"] =
      "shardplan rehearse: cuBLAS bf16 GEMMs at the plan's local shapes (Note [Layer GEMMs])";
  j["hbm"] = {{"copy_bytes_per_s", timings.copy_bytes_per_s}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t i = 0; i < gemms.size(); ++i) {
    const LayerGemm& g = gemms[i];
    const double measured = timings.measured_s[i];
    rows.push_back({{"name", g.layer + "/" + g.name + "/" + g.pass},
                    {"batch", g.shape.batch},
                    {"m", g.shape.m},
                    {"n", g.shape.n},
                    {"k", g.shape.k},
                    {"count", g.count},
                    {"flops_per_s", measured > 0 ? g.flops / measured : 0.0},
                    {"predicted_s", g.predicted_s},
                    {"measured_s", measured}});
    if (layers.empty() || layers.back()["layer"] != g.layer) {
      layers.push_back({{"layer", g.layer}, {"predicted_s", 0.0}, {"measured_s", 0.0}});
    }
    const auto count = static_cast<double>(g.count);
    layers.back()["predicted_s"] =
        layers.back()["predicted_s"].get<double>() + count * g.predicted_s;
    layers.back()["measured_s"] = layers.back()["measured_s"].get<double>() + count * measured;
  }
  j["bf16_gemm"] = rows;
  j["layers"] = layers;
  return j;
}

}  // namespace shardplan::planner
