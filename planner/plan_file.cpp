#include "planner/plan_file.h"

#include "mesh/parallel_style.h"
#include "planner/candidate_mesh.h"
#include "planner/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::planner {

nlohmann::ordered_json plan_document(Planner& p, const PlanResult& r, std::string_view model_name,
                                     int64_t seed) {
  const ParallelConfig& c = r.config;
  nlohmann::ordered_json j;
  j["format"] = kPlanFormat;
  j["version"] = kPlanVersion;
  j["model"] = {{"name", model_name}, {"config", tensor::to_hf_json(p.model())}};
  j["cluster"] = p.cluster().name;
  j["setup"] = {
      {"gpus", p.setup().gpus}, {"seq", p.setup().seq}, {"global_batch", p.setup().global_batch}};
  j["mesh"] = {{"shape", {c.pp, c.dp / c.ep, c.ep, c.cp, c.tp}},
               {"names", {"pp", "dp", "ep", "cp", "tp"}}};
  j["dim_order"] = to_string(r.order);
  j["config"] = {{"tp", c.tp},
                 {"pp", c.pp},
                 {"dp", c.dp},
                 {"cp", c.cp},
                 {"ep", c.ep},
                 {"zero", c.zero},
                 {"micro_batch", c.micro_batch},
                 {"recompute", tensor::to_string(c.recompute)},
                 {"virtual_stages", c.virtual_stages},
                 {"sequence_parallel", c.sequence_parallel},
                 {"precision", to_string(c.precision)}};
  j["seed"] = seed;
  // Placements on the candidate mesh: TP styles on "tp", FSDP's dim-0 shard on "dp" at ZeRO-3;
  // the other dims replicate (pipeline stages own whole layers, named by "stage").
  const tensor::ModulePtr model = tensor::build_model(p.model());
  const mesh::DeviceMesh m({c.pp, c.dp / c.ep, c.ep, c.cp, c.tp}, {"pp", "dp", "ep", "cp", "tp"});
  mesh::ParallelizeConfig pc;
  std::vector<mesh::StyleRule> rules;
  if (c.tp > 1) {
    rules = tensor_parallel_rules(tensor::family_of(p.model()));
    pc.tp_dim = "tp";
  }
  if (c.zero == 3 && c.dp / c.ep > 1) pc.fsdp_dims = {"dp"};
  const std::vector<mesh::ParameterSharding> shardings =
      mesh::parallelize_module(*model, m, rules, pc);
  const std::string layers = std::string(tensor::family_of(p.model()).layers_path) + ".";
  const int64_t L = p.model().num_hidden_layers;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  bool after_layers = false;
  for (const mesh::ParameterSharding& s : shardings) {
    int64_t stage = 0;
    if (s.fqn.rfind(layers, 0) == 0) {
      const int64_t layer = std::stoll(s.fqn.substr(layers.size()));
      stage = ((layer + 1) * c.pp - 1) / L;
      after_layers = true;
    } else if (after_layers) {
      stage = c.pp - 1;
    }
    nlohmann::ordered_json e;
    e["name"] = s.fqn;
    e["shape"] = std::vector<int64_t>(s.spec.shape.begin(), s.spec.shape.end());
    e["dtype"] = tensor::dtype_name(s.spec.dtype);
    nlohmann::ordered_json pl = nlohmann::ordered_json::array();
    for (const mesh::Placement& x : s.spec.placements) pl.push_back(mesh::to_string(x));
    e["placements"] = pl;
    e["style"] = s.style;
    e["stage"] = stage;
    params.push_back(e);
  }
  j["parameters"] = params;
  j["prediction"] = {{"step_time_s", r.step_time_s},
                     {"mfu", r.mfu},
                     {"tokens_per_s", r.tokens_per_s},
                     {"memory_per_gpu_bytes", r.memory_bytes}};
  return j;
}

}  // namespace shardplan::planner
