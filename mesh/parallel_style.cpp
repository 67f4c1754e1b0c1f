#include "mesh/parallel_style.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <string>

#include "tensor/error.h"
#include "tensor/module.h"

namespace shardplan::mesh {

ParallelStyle parse_parallel_style(std::string_view name) {
  if (name == "colwise") return ParallelStyle::kColwise;
  if (name == "rowwise") return ParallelStyle::kRowwise;
  if (name == "sequence" || name == "sequence_parallel") return ParallelStyle::kSequence;
  SP_FAIL("unknown parallel style '", name, "' (expected colwise, rowwise or sequence)");
}

std::string_view parallel_style_name(ParallelStyle style) {
  switch (style) {
    case ParallelStyle::kColwise:
      return "colwise";
    case ParallelStyle::kRowwise:
      return "rowwise";
    case ParallelStyle::kSequence:
      return "sequence";
  }
  SP_ASSERT(false);
}

namespace {

std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.emplace_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// The TP placement a style gives parameter `name` ("weight", "bias") of `m`, or nullopt to leave it
// Replicate. Throws for a module type the style does not apply to.
std::optional<Placement> style_placement(ParallelStyle style, const tensor::Module& m,
                                         const std::string& fqn, const std::string& name) {
  const bool linear = dynamic_cast<const tensor::Linear*>(&m) != nullptr;
  const bool embedding = dynamic_cast<const tensor::Embedding*>(&m) != nullptr;
  if (style == ParallelStyle::kSequence) return std::nullopt;
  SP_CHECK(linear || embedding, parallel_style_name(style), " applies to Linear and Embedding ",
           "modules, but '", fqn, "' is a ", m.type_name());
  if (style == ParallelStyle::kColwise) {
    // Linear weight (out, in): rows are output features; bias follows them. Embedding: columns.
    if (embedding) return Placement(Shard{1});
    return Placement(Shard{0});
  }
  if (embedding) return Placement(Shard{0});
  return name == "weight" ? std::optional<Placement>(Shard{1}) : std::nullopt;
}

}  // namespace

bool fqn_matches(std::string_view pattern, std::string_view fqn) {
  const std::vector<std::string> p = split_dots(pattern), f = split_dots(fqn);
  if (p.size() != f.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (fnmatch(p[i].c_str(), f[i].c_str(), 0) != 0) return false;
  }
  return true;
}

std::vector<ParameterSharding> parallelize_module(const tensor::Module& root,
                                                  const DeviceMesh& mesh,
                                                  const std::vector<StyleRule>& rules,
                                                  const ParallelizeConfig& config) {
  // Mesh dims by name; each used at most once.
  std::vector<bool> used(static_cast<size_t>(mesh.ndim()), false);
  auto take_dim = [&](const std::string& name, const char* what) {
    SP_CHECK(mesh.has_dim_names(), "parallelize: the mesh has no dim names, so the ", what,
             " dim '", name, "' cannot be found (give --mesh-names)");
    const int64_t md = mesh.dim_index(name);
    SP_CHECK(!used[static_cast<size_t>(md)], "parallelize: mesh dim '", name,
             "' is used twice (as the TP dim and an FSDP dim, or repeated)");
    used[static_cast<size_t>(md)] = true;
    return md;
  };
  int64_t tp = -1;
  if (!config.tp_dim.empty()) tp = take_dim(config.tp_dim, "TP");
  SP_CHECK(rules.empty() || tp >= 0, "parallelize: ", rules.size(),
           " style rules but no TP mesh dim (set tp_dim)");
  std::vector<int64_t> fsdp;
  for (const std::string& name : config.fsdp_dims) fsdp.push_back(take_dim(name, "FSDP"));

  // Parameters once each (tied ones under their first name), keyed by tensor identity so a style
  // on a module reaching a tied parameter through another name still lands on it.
  std::vector<ParameterSharding> out;
  std::map<const void*, size_t> index_of;
  for (const auto& nt : root.named_parameters()) {
    index_of[nt.tensor.impl()] = out.size();
    out.push_back(
        {nt.name,
         make_shard_spec(nt.tensor, mesh, std::vector<Placement>(static_cast<size_t>(mesh.ndim()))),
         ""});
  }

  // Tensor-parallel styles.
  std::map<std::string, std::string> claimed;  // module fqn -> the pattern that matched it
  const auto modules = root.named_modules();
  for (const StyleRule& rule : rules) {
    bool matched = false;
    for (const auto& nm : modules) {
      if (!fqn_matches(rule.pattern, nm.name)) continue;
      matched = true;
      auto [it, fresh] = claimed.emplace(nm.name, rule.pattern);
      SP_CHECK(fresh, "parallelize: module '", nm.name, "' matched by two patterns '", it->second,
               "' and '", rule.pattern, "'");
      for (const auto& nt : nm.module->named_parameters({.recurse = false})) {
        auto p = style_placement(rule.style, *nm.module, nm.name, nt.name);
        ParameterSharding& ps = out[index_of.at(nt.tensor.impl())];
        if (!ps.style.empty() && ps.style != parallel_style_name(rule.style)) {
          SP_FAIL("parallelize: parameter '", ps.fqn, "' (tied) gets both ", ps.style, " and ",
                  parallel_style_name(rule.style));
        }
        ps.style = std::string(parallel_style_name(rule.style));
        if (p) ps.spec.placements[static_cast<size_t>(tp)] = *p;
      }
    }
    SP_CHECK(matched, "parallelize: pattern '", rule.pattern, "' matches no module");
  }

  // FSDP: Shard(0) over each data-parallel dim. If a mesh dim to the right already shards dim 0,
  // left-to-right nesting would split FSDP first; _StridedShard keeps TP's split outermost.
  for (ParameterSharding& ps : out) {
    if (ps.spec.ndim() == 0) continue;  // a scalar parameter stays replicated
    for (int64_t md : fsdp) {
      int64_t later = 1;
      for (int64_t k = md + 1; k < mesh.ndim(); ++k) {
        if (ps.spec.placements[static_cast<size_t>(k)].is_shard(0)) later *= mesh.size(k);
      }
      ps.spec.placements[static_cast<size_t>(md)] =
          later > 1 ? Placement(StridedShard{0, later}) : Placement(Shard{0});
    }
    // Re-validate through make_shard_spec (normalisation and dims the tensor lacks).
    ps.spec = make_shard_spec(ps.spec.shape, ps.spec.strides, ps.spec.dtype, ps.spec.mesh,
                              ps.spec.placements);
  }
  return out;
}

}  // namespace shardplan::mesh
