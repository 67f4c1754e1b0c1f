#include "planner/cost/tensor_parallel.h"

#include <algorithm>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/checked.h"
#include "base/error.h"
#include "mesh/shard_spec.h"
#include "tensor/models/layer_kinds.h"
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

std::vector<mesh::StyleRule> tensor_parallel_rules(const tensor::ModelFamily& family,
                                                   const tensor::Module& model) {
  std::vector<mesh::StyleRule> rules = tensor_parallel_rules(family);
  const std::vector<tensor::NamedModule> modules = model.named_modules();
  std::erase_if(rules, [&](const mesh::StyleRule& r) {
    return std::none_of(modules.begin(), modules.end(), [&](const tensor::NamedModule& m) {
      return mesh::fqn_matches(r.pattern, m.name);
    });
  });
  return rules;
}

namespace {

// Local element count of every parameter on TP rank `rank`, keyed by its tensor (tied parameters
// share one entry), and the model they belong to.
struct LocalParameters {
  tensor::ModulePtr model;
  std::unordered_map<const void*, int64_t> numel;
};

LocalParameters local_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t rank) {
  SP_CHECK(tp >= 1 && rank >= 0 && rank < tp, "TP rank ", rank, " of ", tp,
           ", expected 0 <= rank < tp and tp >= 1");
  LocalParameters out{tensor::build_model(c), {}};
  std::vector<mesh::StyleRule> rules;
  if (tp > 1) rules = tensor_parallel_rules(tensor::family_of(c), *out.model);
  const mesh::DeviceMesh m({tp}, {"tp"});
  mesh::ParallelizeConfig config;
  if (!rules.empty()) config.tp_dim = "tp";
  const std::vector<mesh::ParameterSharding> shardings =
      mesh::parallelize_module(*out.model, m, rules, config);
  // parallelize_module lists parameters in named_parameters order, tied ones once.
  const std::vector<tensor::NamedTensor> params = out.model->named_parameters();
  SP_ASSERT(params.size() == shardings.size(), "parallelize_module lists every parameter once");
  for (size_t i = 0; i < params.size(); ++i) {
    const DimVector local = mesh::local_shape(shardings[i].spec, std::vector<int64_t>{rank});
    out.numel[params[i].tensor.impl()] = *checked_product(std::span<const int64_t>(local));
  }
  return out;
}

}  // namespace

int64_t tp_rank_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t rank) {
  int64_t n = 0;
  for (const auto& [tensor, numel] : local_parameters(c, tp, rank).numel) n += numel;
  return n;
}

int64_t expert_parameters_per_layer(const tensor::ModelConfig& c, int64_t tp, int64_t rank) {
  const tensor::ModelFamily& family = tensor::family_of(c);
  if (family.experts_class.empty() || c.num_local_experts <= 0) return 0;
  // One MoE layer stands for each (the dense layers of a mixed stack hold no experts): the
  // stack's first MoE kind, which a family of single-part blocks builds without attention.
  const tensor::LayerStack stack = tensor::layer_stack(c);
  tensor::LayerKind moe{.ffn = tensor::FfnKind::kMoe};
  for (const tensor::LayerKind& k : stack.kinds) {
    if (k.ffn == tensor::FfnKind::kMoe) {
      moe = k;
      break;
    }
  }
  const tensor::ModelConfig one = tensor::uniform_config(c, moe);
  const LocalParameters local = local_parameters(one, tp, rank);
  int64_t n = 0;
  std::unordered_set<const void*> seen;
  for (const tensor::NamedModule& m : local.model->named_modules()) {
    if (m.module->type_name() != family.experts_class) continue;
    for (const tensor::NamedTensor& p : m.module->named_parameters()) {
      if (seen.insert(p.tensor.impl()).second) n += local.numel.at(p.tensor.impl());
    }
  }
  return n;
}

std::vector<int64_t> stage_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t pp,
                                      int64_t tp_rank) {
  const int64_t layers = c.num_hidden_layers;
  SP_CHECK(pp >= 1 && pp <= layers, "--pp ", pp, " for ", layers,
           " layers, expected between 1 and the number of layers");
  const LocalParameters local = local_parameters(c, tp, tp_rank);
  std::vector<int64_t> out(static_cast<size_t>(pp), 0);
  std::vector<std::unordered_set<const void*>> seen(static_cast<size_t>(pp));
  ParameterStage stage_of(c, pp);
  for (const tensor::NamedTensor& p : local.model->named_parameters({.remove_duplicate = false})) {
    const int64_t stage = stage_of(p.name);
    if (seen[static_cast<size_t>(stage)].insert(p.tensor.impl()).second) {
      out[static_cast<size_t>(stage)] += local.numel.at(p.tensor.impl());
    }
  }
  return out;
}

ParameterStage::ParameterStage(const tensor::ModelConfig& c, int64_t pp)
    : ParameterStage(c, StagePartition::even(c.num_hidden_layers, pp)) {}

ParameterStage::ParameterStage(const tensor::ModelConfig& c, StagePartition partition)
    : prefix_(std::string(tensor::family_of(c).layers_path) + "."),
      partition_(std::move(partition)) {
  const std::string_view paired = tensor::family_of(c).paired_layers_path;
  if (!paired.empty()) paired_prefix_ = std::string(paired) + ".";
  SP_CHECK(partition_.layers() == c.num_hidden_layers, "a pipeline split of ", partition_.layers(),
           " layers for a model of ", c.num_hidden_layers, ", expected one covering every layer");
}

int64_t ParameterStage::operator()(std::string_view fqn) {
  for (const std::string* prefix : {&prefix_, &paired_prefix_}) {
    if (prefix->empty() || fqn.substr(0, prefix->size()) != *prefix) continue;
    const int64_t layer = std::stoll(std::string(fqn.substr(prefix->size())));
    after_layers_ = true;
    return partition_.stage_of_layer(layer);
  }
  return after_layers_ ? partition_.stages() - 1 : 0;
}

}  // namespace shardplan::planner
