#include "mesh/module_boundaries.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"
#include "tensor/module.h"
#include "tensor/trace.h"

namespace shardplan::mesh {

namespace {
constexpr EnumName<BoundaryRole> kRoleNames[] = {{"input", BoundaryRole::kInput},
                                                 {"output", BoundaryRole::kOutput}};
}  // namespace

std::string_view boundary_role_name(BoundaryRole role) { return enum_name(role, kRoleNames); }

BoundaryRole parse_boundary_role(std::string_view name) {
  return parse_enum_name(name, kRoleNames, "boundary role");
}

std::ostream& operator<<(std::ostream& os, const BoundaryRedistribution& b) {
  return os << b.fqn << ' ' << boundary_role_name(b.role) << ' ' << to_string(b.from) << " -> "
            << to_string(b.to) << ' ' << b.shape << ' ' << tensor::dtype_name(b.dtype);
}

void to_json(nlohmann::json& j, const BoundaryRedistribution& b) {
  j = nlohmann::json::object();
  j["module"] = b.fqn;
  j["role"] = std::string(boundary_role_name(b.role));
  j["from"] = b.from;
  j["to"] = b.to;
  j["shape"] = b.shape.vec();
  j["dtype"] = std::string(tensor::dtype_name(b.dtype));
}

BoundaryRedistribution boundary_redistribution_from_json(const nlohmann::json& j,
                                                         std::string_view origin,
                                                         std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  BoundaryRedistribution out;
  out.fqn = f.str("module");
  out.role = f.parsed("role", parse_boundary_role);
  out.from = placements_from_json(f.get("from"), origin, f.join("from"));
  out.to = placements_from_json(f.get("to"), origin, f.join("to"));
  if (out.to.size() != out.from.size()) {
    f.fail("to", std::to_string(out.to.size()) + " placements, expected " +
                     std::to_string(out.from.size()) + " (one per mesh dim, as 'from' has)");
  }
  out.shape = f.integers("shape", 0);
  out.dtype = f.parsed("dtype", tensor::parse_dtype);
  f.done();
  return out;
}

void from_json(const nlohmann::json& j, BoundaryRedistribution& b) {
  b = boundary_redistribution_from_json(j);
}

namespace {

// One crossing of a styled module's boundary, in forward order; the tensor is filled in by the
// ops that run inside the module.
struct Crossing {
  size_t call;  // index into Recorder::calls
  BoundaryRole role;
};

struct Call {
  std::string fqn;
  size_t styled;  // index into the matched modules
  std::optional<shardplan::DimVector> in_shape, out_shape;
  tensor::DType in_dtype = tensor::DType::kFloat32, out_dtype = tensor::DType::kFloat32;
};

// Records, for each call of a styled module, its input (the first operand of the first op run
// inside it, at any depth, that is not a parameter or buffer: x of linear(x, w), the indices of
// embedding(w, ids)) and its output (the first result of the last op run inside it).
class Recorder final : public tensor::TraceSink {
 public:
  Recorder(const std::map<std::string, size_t, std::less<>>& styled,
           std::unordered_set<const void*> members)
      : styled_(styled), members_(std::move(members)) {}

  void on_module_enter(std::string_view fqn, std::string_view /*type*/) override {
    const auto it = styled_.find(fqn);
    if (it == styled_.end()) {
      open_.push_back(kNone);  // keep enter/exit paired
      return;
    }
    calls.push_back({std::string(fqn), it->second, {}, {}});
    open_.push_back(calls.size() - 1);
    crossings.push_back({calls.size() - 1, BoundaryRole::kInput});
  }

  void on_module_exit(std::string_view /*fqn*/) override {
    SP_ASSERT(!open_.empty());
    const size_t c = open_.back();
    open_.pop_back();
    if (c != kNone) crossings.push_back({c, BoundaryRole::kOutput});
  }

  void on_op(const tensor::OpEvent& e) override {
    for (size_t c : open_) {
      if (c == kNone) continue;
      Call& call = calls[c];
      if (!call.in_shape) {
        for (const tensor::Tensor& t : e.inputs) {
          if (members_.count(t.impl()) != 0) continue;
          call.in_shape = t.sizes();
          call.in_dtype = t.dtype();
          break;
        }
      }
      if (!e.outputs.empty()) {
        call.out_shape = e.outputs[0].sizes();
        call.out_dtype = e.outputs[0].dtype();
      }
    }
  }

  std::vector<Call> calls;
  std::vector<Crossing> crossings;

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  const std::map<std::string, size_t, std::less<>>& styled_;
  std::unordered_set<const void*> members_;  // parameters and buffers: never a module's input
  std::vector<size_t> open_;                 // innermost last
};

// `layout` with a negative Shard dim wrapped against an activation of `ndim` dims; errors name
// the module and the side.
Placement normalized(const Placement& layout, int64_t ndim, const std::string& fqn,
                     BoundaryRole role, const shardplan::DimVector& shape) {
  if (!layout.is_shard()) return layout;
  const int64_t d = layout.shard_dim();
  SP_CHECK(d >= -ndim && d < ndim, "module '", fqn, "' ", boundary_role_name(role), " layout ",
           to_string(layout), ": the activation ", shape, " has ", ndim, " dims");
  return Shard{d < 0 ? d + ndim : d};
}

}  // namespace

std::vector<BoundaryRedistribution> module_boundary_redistributions(
    tensor::Module& root, const DeviceMesh& mesh, const std::vector<StyleRule>& rules,
    const ParallelizeConfig& config, const tensor::Tensor& input) {
  // The same rule, mesh-dim and type checks as the parameter placements get.
  (void)parallelize_module(root, mesh, rules, config);
  if (rules.empty()) return {};
  const int64_t tp = mesh.dim_index(config.tp_dim);
  std::vector<int64_t> fsdp;
  for (const std::string& name : config.fsdp_dims) fsdp.push_back(mesh.dim_index(name));

  const std::vector<StyledModule> styled = match_style_rules(root, rules);
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < styled.size(); ++i) index.emplace(styled[i].fqn, i);
  std::unordered_set<const void*> members;
  for (const auto& nt : root.named_parameters({.remove_duplicate = false})) {
    members.insert(nt.tensor.impl());
  }
  for (const auto& nt : root.named_buffers({.remove_duplicate = false})) {
    members.insert(nt.tensor.impl());
  }

  Recorder rec(index, std::move(members));
  root.assign_fqns();  // Note [Module FQNs at call time]: the names the rules matched
  {
    tensor::TraceScope scope(&rec);
    (void)root.call(input);
  }

  std::vector<BoundaryRedistribution> out;
  for (const Crossing& x : rec.crossings) {
    const Call& call = rec.calls[x.call];
    const StyledModule& sm = styled[call.styled];
    const ActivationLayouts a = activation_layouts(rules[sm.rule], *sm.module, sm.fqn);
    const bool in = x.role == BoundaryRole::kInput;
    const std::optional<Placement>& from = in ? a.input : a.computed_output;
    const std::optional<Placement>& to = in ? a.desired_input : a.output;
    if (!from) continue;  // the style leaves this side alone
    const std::optional<shardplan::DimVector>& shape = in ? call.in_shape : call.out_shape;
    // A module that ran no op on a tensor (an identity) has nothing to re-lay out.
    if (!shape) continue;
    const auto ndim = static_cast<int64_t>(shape->size());
    BoundaryRedistribution b{call.fqn, x.role, {}, {}, *shape, in ? call.in_dtype : call.out_dtype};
    // Batch-sharded on the data-parallel dims, the style's layout on the TP dim.
    std::vector<Placement> base(static_cast<size_t>(mesh.ndim()), Replicate{});
    for (int64_t md : fsdp) {
      SP_CHECK(ndim > 0, "module '", call.fqn, "' ", boundary_role_name(x.role),
               ": a 0-d activation cannot be batch-sharded over FSDP mesh dim ", md);
      base[static_cast<size_t>(md)] = Shard{0};
    }
    b.from = b.to = base;
    b.from[static_cast<size_t>(tp)] = normalized(*from, ndim, call.fqn, x.role, *shape);
    b.to[static_cast<size_t>(tp)] = normalized(*to, ndim, call.fqn, x.role, *shape);
    if (b.from != b.to) out.push_back(std::move(b));
  }
  return out;
}

}  // namespace shardplan::mesh
