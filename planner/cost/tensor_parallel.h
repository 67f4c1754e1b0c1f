// A model family's tensor-parallel plan as parallel-style rules (tensor/models/family.h
// ModelFamily::tp_plan, mesh/parallel_style.h), and what one rank then holds of the parameters.
//   std::vector<mesh::StyleRule> rules = tensor_parallel_rules(family_of(cfg));
//   int64_t n = tp_rank_parameters(cfg, 8);   // parameters on TP rank 0 of 8 (all layers)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/parallel_style.h"
#include "planner/cost/stage_partition.h"
#include "tensor/models/family.h"

namespace shardplan::planner {

// The family's rules with their styles parsed. Throws shardplan::Error naming the family when it
// has no plan ("model family gpt2 has no tensor-parallel plan yet, expected --tp 1").
std::vector<mesh::StyleRule> tensor_parallel_rules(const tensor::ModelFamily& family);
// The rules of the family's plan that match some module of `model`: a plan covers every layer
// kind the family builds (dense MLPs and routed experts, tensor/models/layer_kinds.h), and a model
// whose layers are of fewer kinds, or one layer of one kind as the planner traces, uses those
// that apply (mesh's parallelize_module refuses a pattern matching nothing, to catch typos).
std::vector<mesh::StyleRule> tensor_parallel_rules(const tensor::ModelFamily& family,
                                                   const tensor::Module& model);

// Parameters (tied ones once) that TP rank `rank` of `tp` holds: the model built from `c` on meta,
// laid out by parallelize_module on a one-dim mesh named "tp", each parameter's local shape from
// its ShardSpec. tp = 1 is the whole model.
int64_t tp_rank_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t rank = 0);

// Parameters of one layer's routed experts on TP rank `rank` of `tp`: the parameters of every
// module of the family's experts class (ModelFamily::experts_class) in one MoE layer of the model
// built from `c`, each at its local shape. 0 for a dense model. Counted from the built model, not
// from a formula, so an expert of any shape (a separate moe_intermediate_size, fused gate and up,
// biases) is priced as the model defines it.
int64_t expert_parameters_per_layer(const tensor::ModelConfig& c, int64_t tp, int64_t rank = 0);

// Parameters each pipeline stage's TP rank `tp_rank` holds, stage by stage. Stage s holds the
// layers [floor(s L / pp), floor((s + 1) L / pp)): Megatron-LM's even split when pp divides L,
// and otherwise stages differing by at most one layer; what comes
// before the layers in the model (embeddings) sits on the first stage, what comes after (final
// norm, output layer) on the last. A weight tied across both ends (GPT-2's wte and lm_head) is
// held by both stages when pp > 1, as Megatron-LM keeps a copy of the word embedding on the last
// stage and all-reduces its gradient between the two.
std::vector<int64_t> stage_parameters(const tensor::ModelConfig& c, int64_t tp, int64_t pp,
                                      int64_t tp_rank = 0);

// The pipeline stage of each parameter, asked in the model's named_parameters order: a layer's
// parameters by its index (the even split of stage_parameters, or a plan's own split, interleaved
// with its model chunks: Note [Interleaved layer order] in stage_partition.h), those before the
// layers on stage 0, those after them on the last stage. Layer i of a family's paired stack
// (ModelFamily::paired_layers_path, HRM-Text's high-level layers) goes with layer i.
class ParameterStage {
 public:
  ParameterStage(const tensor::ModelConfig& c, int64_t pp);
  // The layers split as `partition` gives them (its layer count must be the model's).
  ParameterStage(const tensor::ModelConfig& c, StagePartition partition);
  int64_t operator()(std::string_view fqn);

 private:
  std::string prefix_;         // "model.layers."
  std::string paired_prefix_;  // "model.H_module.layers.", or empty
  StagePartition partition_;
  bool after_layers_ = false;
};

}  // namespace shardplan::planner
