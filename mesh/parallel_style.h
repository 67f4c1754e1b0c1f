// Parallel styles applied to a Module tree by fully-qualified-name patterns (PyTorch's
// parallelize_module + fully_shard, docs/semantics.md §5.6 and §2.5): the placements of every
// parameter over a mesh, and through ShardSpec its local shape on any rank.
//   ModulePtr lm = build_model(find_model_config("llama3-8b"));
//   DeviceMesh mesh({2, 4}, {"dp", "tp"});
//   ParallelizeConfig cfg;  cfg.tp_dim = "tp";  cfg.fsdp_dims = {"dp"};
//   auto ps = parallelize_module(*lm, mesh, {{"model.layers.*.self_attn.q_proj", kColwise}}, cfg);
//   // model.layers.0.self_attn.q_proj.weight: [SS0:4, S0] (TP rows first, then FSDP)
// Patterns match module FQNs dot-component by dot-component with shell wildcards per component
// ("model.layers.*.mlp.*_proj"), as PyTorch's parallelize_module does with fnmatch.
// Each rule also carries the activation layouts of its style on the TP mesh dim (PyTorch's
// input_layouts / output_layouts); mesh/module_boundaries.h turns them into the redistributions a
// forward pass performs at module boundaries.
#pragma once

#include <optional>
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
//              Embedding: weight Shard(1), the embedding dim split. Conv1D (weight [in, out]):
//              weight Shard(1), bias Shard(0).
//  kRowwise    Linear: weight Shard(1) (the input features), bias Replicate (added once, after the
//              Partial output is reduced); Conv1D: weight Shard(0), bias Replicate; Embedding:
//              weight Shard(0), vocab rows split (masked partial lookup).
//  kSequence   LayerNorm / RMSNorm / Dropout: parameters Replicate (activations are Shard(seq)).
//  kPrepareInput / kPrepareOutput  any module: parameters untouched; only its input (output) is
//              re-laid out (PyTorch's PrepareModuleInput / PrepareModuleOutput).
//  kExperts    GroupedExperts (tensor/layers.h), Megatron-LM's expert tensor parallelism: every
//              expert's gate_up_proj _StridedShard(feature dim, 2) (gate and up halves each
//              split, as a fused colwise projection) and its bias likewise, down_proj Shard(its
//              input-feature dim), down_proj_bias Replicate (gate and up in tensors of their
//              own, gate_proj and up_proj: Shard(feature dim) each). Activations as a whole MLP:
//              input R, output Partial(sum) reduced to R. Refused on stacked rows (DBRX's w1, v1,
//              w2 [E x F, H]), which split by whole experts only. One projection alone
//              (GroupedExperts::projection, JetMoE's `weight` [E, out, in]) is half an MLP: the
//              first Shard(1) (_StridedShard(1, parts) over equal parts) with input R and output
//              Shard(-1), as colwise; the second Shard(2) with input Shard(-1) and output
//              Partial(sum) reduced to R, as rowwise (Aria's `weight` [E, in, out]: the first
//              on dim 2, the second on dim 1).
// Activation layouts (docs/semantics.md §5.6; one Placement on the TP mesh dim, Shard dims may be
// negative):
//  style           input (default)  desired input     computed output    output (default)
//  colwise         R                R                 Shard(-1)          Shard(-1)
//  rowwise Linear  Shard(-1)        Shard(-1)         Partial(sum)       R
//  rowwise Embed.  Shard(-1) [1]    R (the indices)   Partial(sum) [2]   R
//  sequence        Shard(sd)        Shard(sd)         Shard(sd)          Shard(sd)   sd = seq dim
//  prepare_input   required         required          -                  -
//  prepare_output  -                -                 required (output)  required (desired)
// [1] PyTorch's default; a replicated index tensor needs input_layout = R, as torchtitan passes.
// [2] MaskPartial in PyTorch: rows outside a rank's vocab slice are zero, so it reduces as a sum.
enum class ParallelStyle { kColwise, kRowwise, kSequence, kPrepareInput, kPrepareOutput, kExperts };

// "colwise", "rowwise", "sequence" (also "sequence_parallel"), "prepare_input", "prepare_output",
// "experts";
// throws shardplan::Error ("unknown parallel style 'x', expected one of: ...") otherwise.
ParallelStyle parse_parallel_style(std::string_view name);
std::string_view parallel_style_name(ParallelStyle style);

struct StyleRule {
  std::string pattern;  // module FQN pattern, e.g. "model.layers.*.self_attn.q_proj"
  ParallelStyle style;
  // Optional overrides, as PyTorch's constructor arguments; unset takes the table's default.
  // colwise/rowwise: input_layout, output_layout.  sequence: none (sequence_dim instead).
  // prepare_input: input_layout + desired_input_layout.  prepare_output: output_layout +
  // desired_output_layout. Any other combination is an error naming the rule.
  std::optional<Placement> input_layout = std::nullopt;
  std::optional<Placement> desired_input_layout = std::nullopt;
  std::optional<Placement> output_layout = std::nullopt;
  std::optional<Placement> desired_output_layout = std::nullopt;
  int64_t sequence_dim = 1;  // SequenceParallel's sequence_dim
  // colwise only: the output features are this many equal projections concatenated (GPT-2's
  // c_attn is [q; k; v]: 3). Each is split over the ranks, so the weight and bias get
  // _StridedShard(out dim, fused_parts) instead of Shard(out dim). 1: a plain projection. The
  // activation layouts stay colwise's (output Shard(-1)): the module splits its output into the
  // parts locally, so no redistribution ever sees the interleaving.
  int64_t fused_parts = 1;
};

// The activation layouts one styled module has on the TP mesh dim (the table above, with the
// rule's overrides). An unset pair means the style leaves that side alone.
struct ActivationLayouts {
  std::optional<Placement> input;            // how the caller's tensor is laid out (annotation)
  std::optional<Placement> desired_input;    // what the module computes on
  std::optional<Placement> computed_output;  // what its sharded computation yields
  std::optional<Placement> output;           // what it hands back
};

// Layouts of `rule` applied to module `m` named `fqn`. Errors (shardplan::Error) name the rule's
// pattern and the module: a style on a module type it does not apply to (colwise/rowwise: Linear
// or Embedding; sequence: a norm or dropout), an override the style does not take, a missing
// required one, a _StridedShard layout (activations are Shard, Replicate or Partial), and an
// input or output change DTensor refuses (a Partial target from anything but that Partial).
ActivationLayouts activation_layouts(const StyleRule& rule, const tensor::Module& m,
                                     const std::string& fqn);

// A module a rule matched, in named_modules order.
struct StyledModule {
  std::string fqn;
  const tensor::Module* module;  // non-owning
  size_t rule;                   // index into the rules
};

// Every module each rule matches, after the checks of parallelize_module (a pattern that matches
// no module, a module matched twice) and of activation_layouts.
std::vector<StyledModule> match_style_rules(const tensor::Module& root,
                                            const std::vector<StyleRule>& rules);

struct ParallelizeConfig {
  // Mesh dim (by name) the styles shard over; needed when there are rules.
  std::string tp_dim;
  // Mesh dims FSDP shards every parameter's dim 0 over (fully_shard). A dp mesh dim LEFT of a mesh
  // dim that already shards dim 0 (colwise TP) gets _StridedShard(0, product of those later dims'
  // sizes): TP's split happens first, FSDP's second (Note in placement.h, docs/semantics.md §2.5).
  std::vector<std::string> fsdp_dims;
  // Mesh dims (by name, outermost split first) expert parallelism splits the routed experts over:
  // Shard(0) on each for every parameter of a GroupedExperts module (its expert dim; not shared
  // experts, GroupedExperts::shared, which every token passes through), before FSDP
  // nests inside them. They may also be FSDP dims (dense weights shard over them, experts do not)
  // or the TP dim (whole experts over the TP ranks, with no experts style on that module).
  // Empty: none.
  std::vector<std::string> ep_dims;
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
// pattern that matches no module, a module matched by two patterns, what activation_layouts
// refuses (a style on the wrong module type, bad layout overrides), an unknown or repeated mesh
// dim name, a TP dim that is also an FSDP dim, rules without a tp_dim. prepare_input/output rules
// leave parameters alone.
std::vector<ParameterSharding> parallelize_module(const tensor::Module& root,
                                                  const DeviceMesh& mesh,
                                                  const std::vector<StyleRule>& rules,
                                                  const ParallelizeConfig& config);

}  // namespace shardplan::mesh
