#include "planner/plan/plan_view.h"

#include <string>

#include "collectives/collective_call.h"

namespace shardplan::planner {

nlohmann::ordered_json plan_view_json(const Planner& p, const PlanResult& r) {
  const ParallelConfig& c = r.config;
  nlohmann::ordered_json j;
  j["family"] = family_of(c);
  for (const ParallelDim& d : parallel_dims()) j[std::string(d.name)] = c.*d.degree;
  j["zero"] = c.zero;
  j["micro_batch"] = c.micro_batch;
  j["recompute"] = tensor::to_string(c.recompute);
  j["recompute_layers"] = c.recompute_layers;
  j["virtual_stages"] = c.virtual_stages;
  j["sequence_parallel"] = c.sequence_parallel;
  j["precision"] = to_string(c.precision);
  j["schedule"] = c.pp == 1 ? "none" : c.virtual_stages > 1 ? "interleaved-1f1b" : "1f1b";
  j["gradient_accumulation"] = micro_batches_per_step(p.setup(), c);
  j["stage_layers"] = partition_from_ends(p.model().num_hidden_layers, c.pp, r.stages).counts();
  j["dim_order"] = to_string(r.order);
  j["mesh"] = {{"shape", mesh_shape_vector(c)}, {"names", mesh_names()}};
  j["step_time_s"] = r.step_time_s;
  j["mfu"] = r.mfu;
  j["mfu_causal"] = r.mfu_causal;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.mfu * p.context().compute.peak_flops / 1e12;
  // What the MFU divides: model FLOPs (attention as the full square, docs/cost-model.md §2.4;
  // mfu_causal counts causal attention as the half it computes) over the dense peak of the dtype
  // the GEMMs run in.
  j["mfu_peak"] = std::string(gemm_dtype(p.cluster(), c.precision));
  j["memory_per_gpu_bytes"] = r.memory_bytes;
  j["memory_capacity_bytes"] = static_cast<int64_t>(p.context().memory_capacity_bytes);
  // What the plan leaves free of the usable memory (at least --memory-headroom when it fits).
  j["memory_headroom_bytes"] =
      static_cast<int64_t>(p.context().memory_capacity_bytes) - r.memory_bytes;
  return j;
}

nlohmann::ordered_json collective_json(const BillCollective& c) {
  return {{"what", c.what},         {"kind", collectives::to_string(c.kind)},
          {"mesh_dim", c.mesh_dim}, {"group_size", c.group_size},
          {"bytes", c.bytes},       {"calls_per_step", c.calls},
          {"time_s", c.seconds},    {"exposed_s", c.exposed_s}};
}

nlohmann::ordered_json bill_json(const Bill& b) {
  nlohmann::ordered_json j;
  j["memory_bytes"] = {{"parameters", b.parameter_bytes}, {"gradients", b.gradient_bytes},
                       {"optimizer", b.optimizer_bytes},  {"activations", b.activation_bytes},
                       {"transient", b.transient_bytes},  {"overhead", b.overhead_bytes}};
  j["peak_stage"] = b.peak_stage;
  nlohmann::ordered_json states = nlohmann::ordered_json::array();
  for (const StageStateBytes& st : b.stage_states) {
    states.push_back(
        {{"parameters", st.parameters}, {"gradients", st.gradients}, {"optimizer", st.optimizer}});
  }
  j["model_state_per_stage_bytes"] = states;
  j["time_s"] = nlohmann::ordered_json::object();
  for (const BillTimePart& t : time_parts(b)) j["time_s"][std::string(t.name)] = t.seconds;
  j["pacing_stage"] = b.pacing_stage;
  nlohmann::ordered_json cs = nlohmann::ordered_json::array();
  for (const BillCollective& c : b.collectives) {
    nlohmann::ordered_json e = collective_json(c);
    e["hidden"] = c.exposed_s < 0.5 * c.seconds;
    cs.push_back(std::move(e));
  }
  j["collectives"] = cs;
  return j;
}

}  // namespace shardplan::planner
