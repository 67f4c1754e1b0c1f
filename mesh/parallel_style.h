// Parallel styles applied to a Module tree by fully-qualified-name patterns (PyTorch's
// parallelize_module + fully_shard, spec §5.6 and §2.5): the placements of every parameter over a
// mesh, and through ShardSpec its local shape on any rank.
//   ModulePtr lm = build_model(find_model_config("llama3-8b"));
//   DeviceMesh mesh({2, 4}, {"dp", "tp"});
//   ParallelizeConfig cfg;  cfg.tp_dim = "tp";  cfg.fsdp_dims = {"dp"};
//   auto ps = parallelize_module(*lm, mesh, {{"model.layers.*.self_attn.q_proj", kColwise}}, cfg);
//   // model.layers.0.self_attn.q_proj.weight: [SS0:4, S0] (TP rows first, then FSDP)
// Patterns match module FQNs dot-component by dot-component with shell wildcards per component
// ("model.layers.*.mlp.*_proj"), as PyTorch's parallelize_module does with fnmatch.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/placement.h"
#include "mesh/shard_spec.h"

namespace shardplan::tensor {
class Module;
}

namespace shardplan::mesh {

// Parameter layouts of the tensor-parallel styles on the TP mesh dim:
//  kColwise    Linear: weight (out, in) and bias Shard(0), the output features split;
//              Embedding: weight Shard(1), the embedding dim split.
//  kRowwise    Linear: weight Shard(1) (the input features), bias Replicate (added once, after the
//              Partial output is reduced); Embedding: weight Shard(0), vocab rows split (masked
//              partial lookup).
//  kSequence   LayerNorm / RMSNorm / Dropout: parameters Replicate (activations are Shard(seq)).
enum class ParallelStyle { kColwise, kRowwise, kSequence };

// "colwise", "rowwise", "sequence" (also "sequence_parallel").
ParallelStyle parse_parallel_style(std::string_view name);
std::string_view parallel_style_name(ParallelStyle style);

struct StyleRule {
  std::string pattern;  // module FQN pattern, e.g. "model.layers.*.self_attn.q_proj"
  ParallelStyle style;
};

struct ParallelizeConfig {
  // Mesh dim (by name) the styles shard over; needed when there are rules.
  std::string tp_dim;
  // Mesh dims FSDP shards every parameter's dim 0 over (fully_shard). A dp mesh dim LEFT of a mesh
  // dim that already shards dim 0 (colwise TP) gets _StridedShard(0, product of those later dims'
  // sizes): TP's split happens first, FSDP's second (Note in placement.h, spec §2.5).
  std::vector<std::string> fsdp_dims;
};

struct ParameterSharding {
  std::string fqn;    // "model.layers.0.self_attn.q_proj.weight"
  ShardSpec spec;     // global shape and dtype of the parameter, the mesh, its placements
  std::string style;  // the style that set its TP placement ("colwise"...), "" if none
};

// True when `fqn` matches `pattern`: same number of dot components, each matched by fnmatch.
bool fqn_matches(std::string_view pattern, std::string_view fqn);

// Placements of every parameter of `root` (named_parameters order, tied parameters once), with
// unmatched parameters Replicate on the TP dim. Errors (shardplan::Error), each naming the value: a
// pattern that matches no module, a module matched by two patterns, colwise/rowwise on a module
// that is neither Linear nor Embedding, an unknown or repeated mesh dim name, a TP dim that is also
// an FSDP dim, rules without a tp_dim.
std::vector<ParameterSharding> parallelize_module(const tensor::Module& root,
                                                  const DeviceMesh& mesh,
                                                  const std::vector<StyleRule>& rules,
                                                  const ParallelizeConfig& config);

}  // namespace shardplan::mesh
