#include "mesh/parallel_style.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <string>

#include "base/enum_names.h"
#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/module.h"

namespace shardplan::mesh {

namespace {
// "sequence_parallel" (the class name's spelling) is an alias of "sequence".
constexpr EnumName<ParallelStyle> kStyleNames[] = {
    {"colwise", ParallelStyle::kColwise},
    {"rowwise", ParallelStyle::kRowwise},
    {"sequence", ParallelStyle::kSequence},
    {"prepare_input", ParallelStyle::kPrepareInput},
    {"prepare_output", ParallelStyle::kPrepareOutput},
    {"experts", ParallelStyle::kExperts},
    {"sequence_parallel", ParallelStyle::kSequence}};
}  // namespace

ParallelStyle parse_parallel_style(std::string_view name) {
  return parse_enum_name(name, kStyleNames, "parallel style");
}

std::string_view parallel_style_name(ParallelStyle style) { return enum_name(style, kStyleNames); }

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

bool is_linear(const tensor::Module& m) {
  return dynamic_cast<const tensor::Linear*>(&m) != nullptr;
}
// transformers' Conv1D (GPT-2): a Linear whose weight is stored [in, out], found by type name as
// the family defines its own class (tensor/models/family_gpt2.cpp).
bool is_conv1d(const tensor::Module& m) { return m.type_name() == "Conv1D"; }
bool is_embedding(const tensor::Module& m) {
  return dynamic_cast<const tensor::Embedding*>(&m) != nullptr;
}
// Norms by class or by type name: model families define their own (GemmaRMSNorm, LlamaRMSNorm).
bool is_norm_or_dropout(const tensor::Module& m) {
  const std::string& t = m.type_name();
  return dynamic_cast<const tensor::LayerNorm*>(&m) != nullptr ||
         dynamic_cast<const tensor::RMSNorm*>(&m) != nullptr ||
         t.find("Norm") != std::string::npos || t.find("Dropout") != std::string::npos;
}

// The module types a style applies to; throws naming the module otherwise.
void check_module_type(ParallelStyle style, const tensor::Module& m, const std::string& fqn) {
  if (style == ParallelStyle::kColwise || style == ParallelStyle::kRowwise) {
    SP_CHECK(is_linear(m) || is_conv1d(m) || is_embedding(m), parallel_style_name(style),
             " applies to Linear, Conv1D and Embedding modules, but '", fqn, "' is a ",
             m.type_name());
  } else if (style == ParallelStyle::kExperts) {
    const auto* e = dynamic_cast<const tensor::GroupedExperts*>(&m);
    SP_CHECK(e != nullptr,
             "experts applies to grouped experts modules (gate_up_proj, down_proj), but '", fqn,
             "' is a ", m.type_name());
    // DBRX's [E x F, H] rows: the experts and their features share dim 0, so a feature split's
    // _StridedShard factor would depend on the expert-parallel dims beside it. Not made: such
    // experts split whole (expert parallelism) only.
    SP_CHECK(e->layout() != tensor::GroupedExperts::Layout::kStackedRows, "experts: '", fqn, "' (",
             m.type_name(),
             ") stacks its experts' rows in 2-D tensors [E x F, H], which the experts style does "
             "not split; expected whole experts (expert parallelism) for it");
  } else if (style == ParallelStyle::kSequence) {
    SP_CHECK(is_norm_or_dropout(m), "sequence applies to LayerNorm, RMSNorm and Dropout modules, ",
             "but '", fqn, "' is a ", m.type_name());
  }
}

// The TP placement a style gives parameter `name` ("weight", "bias") of `m`, or nullopt to leave it
// Replicate. The module type was checked by match_style_rules.
std::optional<Placement> style_placement(const StyleRule& rule, const tensor::Module& m,
                                         const std::string& name) {
  const ParallelStyle style = rule.style;
  if (style == ParallelStyle::kExperts) {
    // Every expert's gate and up halves split on their output features (each half over the
    // ranks, like a fused colwise projection), down_proj on its input features; its bias is added
    // after the reduction.
    const auto& e = dynamic_cast<const tensor::GroupedExperts&>(m);
    if (const auto which = e.projection()) {
      // One projection alone (JetMoE's ParallelExperts, weight [E, out, in]; Aria's
      // AriaGroupedExpertsGemm, [E, in, out]): the first on its output features (each of its
      // equal parts over the ranks), the second on its input ones.
      if (name != "weight") return std::nullopt;
      if (*which == tensor::GroupedExperts::Projection::kSecond) {
        return Placement(Shard{e.down_in_dim()});
      }
      const int64_t p = e.projection_parts(), dim = e.gate_up_out_dim();
      return p > 1 ? Placement(StridedShard{dim, p}) : Placement(Shard{dim});
    }
    // Alternating gate/up, no gate, or gate and up in tensors of their own: a plain split.
    const int64_t parts = e.interleaved() || !e.gated() || e.separate_gate_up() ? 1 : 2;
    auto split = [&](int64_t dim) {
      return parts > 1 ? Placement(StridedShard{dim, parts}) : Placement(Shard{dim});
    };
    if (name == "gate_up_proj") return split(e.gate_up_out_dim());
    if (name == "gate_proj") return split(e.gate_up_out_dim());
    if (name == "gate_up_proj_bias") return split(1);
    if (name == "up_proj") return split(e.gate_up_out_dim());
    if (name == "up_proj_bias") return split(1);
    if (name == "down_proj") return Placement(Shard{e.down_in_dim()});
    return std::nullopt;
  }
  if (style != ParallelStyle::kColwise && style != ParallelStyle::kRowwise) return std::nullopt;
  const bool embedding = is_embedding(m);
  // Conv1D stores its weight [in, out]: its output features are dim 1, its input features dim 0.
  const int64_t out_dim = is_conv1d(m) && name == "weight" ? 1 : 0;
  if (style == ParallelStyle::kColwise) {
    // Linear weight (out, in): rows are output features; bias follows them. Embedding: columns.
    if (embedding) return Placement(Shard{1});
    // fused_parts equal projections side by side ([q; k; v]): each is split over the ranks, so a
    // rank holds its piece of every one (docs/semantics.md §2.5, _StridedShard).
    if (rule.fused_parts > 1) return Placement(StridedShard{out_dim, rule.fused_parts});
    return Placement(Shard{out_dim});
  }
  if (embedding) return Placement(Shard{0});
  return name == "weight" ? std::optional<Placement>(Shard{is_conv1d(m) ? 0 : 1}) : std::nullopt;
}

// An activation layout is a plain Shard, Replicate or Partial: a _StridedShard only arises from
// composing FSDP with TP on parameters.
Placement checked_layout(const std::optional<Placement>& p, const Placement& fallback,
                         const StyleRule& rule, const char* what) {
  const Placement out = p.value_or(fallback);
  SP_CHECK(!out.is_strided_shard(), "parallel style rule '", rule.pattern, "': ", what, " ",
           to_string(out), " is not an activation layout (expected S<dim>, R or P...)");
  return out;
}

// The overrides `rule` may set for its style; anything else is refused by name.
void check_overrides(const StyleRule& rule, bool input, bool desired_input, bool output,
                     bool desired_output) {
  auto refuse = [&](bool allowed, const std::optional<Placement>& p, const char* what) {
    SP_CHECK(allowed || !p.has_value(), "parallel style rule '", rule.pattern,
             "': ", parallel_style_name(rule.style), " takes no ", what, " (got ", to_string(*p),
             ")");
  };
  refuse(input, rule.input_layout, "input_layout");
  refuse(desired_input, rule.desired_input_layout, "desired_input_layout");
  refuse(output, rule.output_layout, "output_layout");
  refuse(desired_output, rule.desired_output_layout, "desired_output_layout");
}

// DTensor.redistribute refuses a Partial target unless the source is that same Partial (spec
// §3.1): no collective makes summands. Say so when the rule is read, not when a plan is priced.
void check_layout_change(const StyleRule& rule, const std::string& fqn, const Placement& from,
                         const Placement& to) {
  SP_CHECK(!to.is_partial() || from == to, "parallel style rule '", rule.pattern, "' on '", fqn,
           "': ", to_string(from), " cannot be redistributed to ", to_string(to),
           " (a Partial target needs the same Partial source)");
}

}  // namespace

ActivationLayouts activation_layouts(const StyleRule& rule, const tensor::Module& m,
                                     const std::string& fqn) {
  check_module_type(rule.style, m, fqn);
  const Placement R = Replicate{}, last = Shard{-1};
  ActivationLayouts a;
  switch (rule.style) {
    case ParallelStyle::kColwise:
      check_overrides(rule, true, false, true, false);
      SP_CHECK(rule.fused_parts >= 1 && (rule.fused_parts == 1 || !is_embedding(m)),
               "parallel style rule '", rule.pattern, "': fused_parts ", rule.fused_parts,
               ", expected 1, or more on a fused Linear/Conv1D projection");
      a.input = checked_layout(rule.input_layout, R, rule, "input_layout");
      a.desired_input = R;
      a.computed_output = last;  // output features (Linear) or embedding dim split
      a.output = checked_layout(rule.output_layout, last, rule, "output_layout");
      break;
    case ParallelStyle::kRowwise:
      check_overrides(rule, true, false, true, false);
      SP_CHECK(rule.fused_parts == 1, "parallel style rule '", rule.pattern,
               "': fused_parts applies to colwise only");
      a.input = checked_layout(rule.input_layout, last, rule, "input_layout");
      // A Linear contracts the split input features; an Embedding looks up whole index tensors.
      a.desired_input = is_embedding(m) ? R : last;
      a.computed_output = Partial{ReduceOp::kSum};
      a.output = checked_layout(rule.output_layout, R, rule, "output_layout");
      break;
    case ParallelStyle::kExperts: {
      // A whole MLP per expert: replicated tokens in, partial sums out, reduced. One projection
      // alone is half of it: the first as colwise (its features split out), the second as
      // rowwise (split features in, partial sums out, reduced).
      check_overrides(rule, true, false, true, false);
      SP_CHECK(rule.fused_parts == 1, "parallel style rule '", rule.pattern,
               "': fused_parts applies to colwise only");
      const auto which = dynamic_cast<const tensor::GroupedExperts&>(m).projection();
      const bool first = which == tensor::GroupedExperts::Projection::kFirst;
      const bool second = which == tensor::GroupedExperts::Projection::kSecond;
      a.input = checked_layout(rule.input_layout, second ? last : R, rule, "input_layout");
      a.desired_input = second ? last : R;
      a.computed_output = first ? last : Placement(Partial{ReduceOp::kSum});
      a.output = checked_layout(rule.output_layout, first ? last : R, rule, "output_layout");
      break;
    }
    case ParallelStyle::kSequence: {
      check_overrides(rule, false, false, false, false);
      const Placement seq = Shard{rule.sequence_dim};
      a.input = a.desired_input = a.computed_output = a.output = seq;
      break;
    }
    case ParallelStyle::kPrepareInput:
      check_overrides(rule, true, true, false, false);
      SP_CHECK(rule.input_layout && rule.desired_input_layout, "parallel style rule '",
               rule.pattern, "': prepare_input needs both input_layout and desired_input_layout");
      a.input = checked_layout(rule.input_layout, R, rule, "input_layout");
      a.desired_input = checked_layout(rule.desired_input_layout, R, rule, "desired_input_layout");
      break;
    case ParallelStyle::kPrepareOutput:
      check_overrides(rule, false, false, true, true);
      SP_CHECK(rule.output_layout && rule.desired_output_layout, "parallel style rule '",
               rule.pattern,
               "': prepare_output needs both output_layout and desired_output_layout");
      a.computed_output = checked_layout(rule.output_layout, R, rule, "output_layout");
      a.output = checked_layout(rule.desired_output_layout, R, rule, "desired_output_layout");
      break;
  }
  // The input side is a redistribution too, with the same refusals.
  if (a.input) check_layout_change(rule, fqn, *a.input, *a.desired_input);
  if (a.output) check_layout_change(rule, fqn, *a.computed_output, *a.output);
  return a;
}

std::vector<StyledModule> match_style_rules(const tensor::Module& root,
                                            const std::vector<StyleRule>& rules) {
  std::vector<StyledModule> out;
  std::map<std::string, std::string> claimed;  // module fqn -> the pattern that matched it
  const auto modules = root.named_modules();
  for (size_t r = 0; r < rules.size(); ++r) {
    const StyleRule& rule = rules[r];
    bool matched = false;
    for (const auto& nm : modules) {
      if (!fqn_matches(rule.pattern, nm.name)) continue;
      matched = true;
      auto [it, fresh] = claimed.emplace(nm.name, rule.pattern);
      SP_CHECK(fresh, "parallelize: module '", nm.name, "' matched by two patterns '", it->second,
               "' and '", rule.pattern, "'");
      activation_layouts(rule, *nm.module, nm.name);  // type and layout checks
      out.push_back({nm.name, nm.module, r});
    }
    SP_CHECK(matched, "parallelize: pattern '", rule.pattern, "' matches no module");
  }
  return out;
}

bool fqn_matches(std::string_view pattern, std::string_view fqn) {
  const std::vector<std::string> p = split_dots(pattern), f = split_dots(fqn);
  if (p.size() != f.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (fnmatch(p[i].c_str(), f[i].c_str(), 0) != 0) return false;
  }
  return true;
}

namespace {

// The dim FSDP shards: dim 0, as fully_shard does; for a routed expert whose expert dim the ep
// dims already split too finely for the FSDP ranks to share evenly (8 experts over ep 8 leave
// each rank one, which 2 FSDP ranks cannot split), the first dim no mesh dim splits, as
// torchtitan shards such experts on dim 1 (docs/semantics.md §5.6).
template <typename Over>
int64_t fsdp_dim(const ShardSpec& spec, bool expert, const std::vector<int64_t>& ep,
                 const std::vector<int64_t>& fsdp, Over&& over) {
  if (!expert) return 0;
  int64_t local = spec.shape[0], ranks = 1;
  for (int64_t md : ep) local /= std::max<int64_t>(1, spec.mesh.size(md));
  for (int64_t md : fsdp) {
    if (over(md)) ranks *= spec.mesh.size(md);
  }
  if (ranks <= 1 || local % ranks == 0) return 0;
  for (int64_t d = 1; d < spec.ndim(); ++d) {
    const bool split =
        std::any_of(spec.placements.begin(), spec.placements.end(),
                    [&](const Placement& p) { return p.is_any_shard() && p.shard_dim() == d; });
    if (!split) return d;
  }
  return 0;
}

}  // namespace

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
  // Expert dims may repeat the TP or FSDP dims (their tensors differ), not one another.
  std::vector<int64_t> ep;
  for (const std::string& name : config.ep_dims) {
    SP_CHECK(mesh.has_dim_names(), "parallelize: the mesh has no dim names, so the ",
             "expert-parallel dim '", name, "' cannot be found (give --mesh-names)");
    const int64_t md = mesh.dim_index(name);
    SP_CHECK(std::find(ep.begin(), ep.end(), md) == ep.end(), "parallelize: mesh dim '", name,
             "' is given twice as an expert-parallel dim");
    ep.push_back(md);
  }
  std::vector<bool> expert;  // per parameter: a routed expert's (set below)

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
  for (const StyledModule& sm : match_style_rules(root, rules)) {
    const ParallelStyle style = rules[sm.rule].style;
    // PrepareModuleInput/Output only re-lay activations; parameters keep their placements.
    if (style == ParallelStyle::kPrepareInput || style == ParallelStyle::kPrepareOutput) continue;
    for (const auto& nt : sm.module->named_parameters({.recurse = false})) {
      auto p = style_placement(rules[sm.rule], *sm.module, nt.name);
      ParameterSharding& ps = out[index_of.at(nt.tensor.impl())];
      Placement& current = ps.spec.placements[static_cast<size_t>(tp)];
      const Placement next = p.value_or(Placement(Replicate{}));
      // A tied weight reached through two modules is one tensor: two styles are fine when they
      // lay it out alike (a vocab-parallel embedding's rows are a column-parallel output layer's
      // rows, Shard(0) both ways), and a conflict when they do not.
      if (!ps.style.empty()) {
        SP_CHECK(current == next, "parallelize: parameter '", ps.fqn, "' (tied) gets both ",
                 ps.style, " (", to_string(current), ") and ", parallel_style_name(style), " (",
                 to_string(next), ")");
        continue;
      }
      ps.style = std::string(parallel_style_name(style));
      current = next;
    }
  }

  // Expert parallelism: the routed experts (dim 0 of every grouped-experts parameter) split.
  expert.assign(out.size(), false);
  if (!ep.empty()) {
    for (const auto& nm : root.named_modules()) {
      // Shared experts (always active, every token through each) are not split by expert.
      const auto* e = dynamic_cast<const tensor::GroupedExperts*>(nm.module);
      if (e == nullptr || e->shared()) continue;
      for (const auto& nt : nm.module->named_parameters({.recurse = false})) {
        const size_t i = index_of.at(nt.tensor.impl());
        expert[i] = true;
        for (int64_t md : ep) {
          Placement& pl = out[i].spec.placements[static_cast<size_t>(md)];
          SP_CHECK(pl.is_replicate(), "parallelize: parameter '", out[i].fqn,
                   "' is split by its style (", to_string(pl), ") on mesh dim '",
                   mesh.dim_names()[static_cast<size_t>(md)],
                   "', which also splits the experts; expected no experts style there");
          pl = Shard{0};
        }
      }
    }
  }

  // FSDP: Shard(0) over each data-parallel dim. If a mesh dim to the right already shards dim 0,
  // left-to-right nesting would split FSDP first; _StridedShard keeps TP's split outermost.
  for (size_t i = 0; i < out.size(); ++i) {
    ParameterSharding& ps = out[i];
    if (ps.spec.ndim() == 0) continue;  // a scalar parameter stays replicated
    // An expert's replicas are the data-parallel ranks outside its expert dims.
    auto fsdp_over = [&](int64_t md) {
      return !expert[i] || std::find(ep.begin(), ep.end(), md) == ep.end();
    };
    const int64_t dim = fsdp_dim(ps.spec, expert[i], ep, fsdp, fsdp_over);
    for (int64_t md : fsdp) {
      if (!fsdp_over(md)) continue;
      int64_t later = 1;
      for (int64_t k = md + 1; k < mesh.ndim(); ++k) {
        if (ps.spec.placements[static_cast<size_t>(k)].is_shard(dim)) later *= mesh.size(k);
      }
      ps.spec.placements[static_cast<size_t>(md)] =
          later > 1 ? Placement(StridedShard{dim, later}) : Placement(Shard{dim});
    }
    // Re-validate through make_shard_spec (normalisation and dims the tensor lacks).
    ps.spec = make_shard_spec(ps.spec.shape, ps.spec.strides, ps.spec.dtype, ps.spec.mesh,
                              ps.spec.placements);
  }
  return out;
}

}  // namespace shardplan::mesh
