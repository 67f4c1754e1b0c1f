#include "planner/tensor_parallel.h"

#include <span>
#include <string>
#include <utility>

#include "mesh/shard_spec.h"
#include "tensor/base/checked.h"
#include "tensor/base/error.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::planner {

std::vector<mesh::StyleRule> tensor_parallel_rules(const tensor::ModelFamily& family) {
  SP_CHECK(!family.tp_plan.empty(), "model family ", family.model_type,
           " has no tensor-parallel plan yet, expected --tp 1");
  std::vector<mesh::StyleRule> rules;
  for (const tensor::TensorParallelRule& r : family.tp_plan) {
    mesh::StyleRule rule{.pattern = std::string(r.pattern),
                         .style = mesh::parse_parallel_style(r.style)};
    rule.fused_parts = r.fused_parts;
    rules.push_back(std::move(rule));
  }
  return rules;
}

int64_t tp_rank_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t rank) {
  SP_CHECK(tp >= 1 && rank >= 0 && rank < tp, "TP rank ", rank, " of ", tp,
           ", expected 0 <= rank < tp and tp >= 1");
  const tensor::ModulePtr model = tensor::build_model(c);
  std::vector<mesh::StyleRule> rules;
  if (tp > 1) rules = tensor_parallel_rules(tensor::family_of(c));
  const mesh::DeviceMesh m({tp}, {"tp"});
  mesh::ParallelizeConfig config;
  if (!rules.empty()) config.tp_dim = "tp";
  int64_t n = 0;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*model, m, rules, config)) {
    const DimVector local = mesh::local_shape(p.spec, std::vector<int64_t>{rank});
    n += *checked_product(std::span<const int64_t>(local));  // a parameter's numel fits int64
  }
  return n;
}

}  // namespace shardplan::planner
