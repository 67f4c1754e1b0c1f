// The redistributions a forward pass performs at the boundaries of parallel-styled modules: where
// a style's input annotation differs from the layout its module computes on, and where its
// computed output differs from the layout it hands back (Megatron's f/g operators, Korthikanti et
// al. 2022's g and g-bar under sequence parallelism). Each is a value the planner prices with
// collectives/ (mesh/ names no collective: from, to and the global shape say it all).
//   auto b = module_boundary_redistributions(*lm, DeviceMesh({4}, {"tp"}), rules, cfg,
//                                             token_ids(1, 4096));
//   // {"model.layers.0.self_attn.o_proj", kOutput, [P], [R], [1, 4096, 4096], bf16}: all_reduce
//
// Note [Boundary layouts follow the annotations]
// As in PyTorch with use_local_output=True, what crosses a boundary between styled modules is a
// plain local tensor that the next style annotates with its input_layout (DTensor.from_local, no
// check). So an input boundary goes from the rule's input_layout to the layout its module
// computes on, and an output boundary from the computed layout to the rule's output layout; the
// ops between modules (residual adds, rotary, activation) are assumed to keep the layout, which
// holds for the Megatron and sequence-parallel plans (pointwise on equal layouts). Whether
// use_local_output is set changes no communication and is not modelled.
//
// Activations on the other mesh dims: Shard(0) (the batch) on every FSDP dim of the config, which
// is data parallel, Replicate on the rest; only the TP entry differs between from and to.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/dim_vector.h"
#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/placement.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {
class Module;
}

namespace shardplan::mesh {

// Which side of the module the tensor crosses.
enum class BoundaryRole { kInput, kOutput };
std::string_view boundary_role_name(BoundaryRole role);  // "input", "output"
// The names boundary_role_name gives; throws shardplan::Error naming the text otherwise.
BoundaryRole parse_boundary_role(std::string_view name);

struct BoundaryRedistribution {
  std::string fqn;  // the styled module, "model.layers.0.mlp.down_proj"
  BoundaryRole role;
  std::vector<Placement> from;  // one per mesh dim; Shard dims normalised (never negative)
  std::vector<Placement> to;
  shardplan::DimVector shape;  // the activation's global shape
  tensor::DType dtype = tensor::DType::kFloat32;
  friend bool operator==(const BoundaryRedistribution&, const BoundaryRedistribution&) = default;
};

// "model.layers.0.mlp.down_proj output S0,P -> S0,S1 [2, 16, 4096] bfloat16"
std::ostream& operator<<(std::ostream& os, const BoundaryRedistribution& b);
// {"module":"...","role":"output","from":["S0","P"],"to":["S0","S1"],"shape":[2,16,4096],
//  "dtype":"bfloat16"}
void to_json(nlohmann::json& j, const BoundaryRedistribution& b);
// Reads what to_json writes, checking every key and value; unknown keys are refused. `j` is the
// value at `path` ("" for the document) of `origin`; bad input is a shardplan::Error naming the
// field ("boundary redistribution: field 'from[1]': placement 'X' is not valid: ...").
BoundaryRedistribution boundary_redistribution_from_json(
    const nlohmann::json& j, std::string_view origin = "boundary redistribution",
    std::string_view path = "");
// boundary_redistribution_from_json with its default origin (j.get<BoundaryRedistribution>()).
void from_json(const nlohmann::json& j, BoundaryRedistribution& b);

// Runs `root`'s forward on `input` (meta) under a trace and lists, in the order the forward crosses
// them, every boundary of a module matched by `rules` whose layout changes (from != to). A module
// called twice appears twice. Rules and config are checked as parallelize_module checks them;
// further errors (shardplan::Error) name the module and the layout: a Shard dim the activation
// lacks, or FSDP batch sharding of a 0-d activation.
std::vector<BoundaryRedistribution> module_boundary_redistributions(
    tensor::Module& root, const DeviceMesh& mesh, const std::vector<StyleRule>& rules,
    const ParallelizeConfig& config, const tensor::Tensor& input);

}  // namespace shardplan::mesh
