#include "tensor/models/init_rules.h"

#include <cmath>
#include <map>

#include "base/error.h"

namespace shardplan::tensor {
namespace {

bool suffix_matches(std::string_view fqn, std::string_view suffix) {
  if (fqn == suffix) return true;
  return fqn.size() > suffix.size() && fqn.ends_with(suffix) &&
         fqn[fqn.size() - suffix.size() - 1] == '.';
}

ParameterInit resolve(InitFill fill, const ModelConfig& c) {
  switch (fill) {
    case InitFill::kNormal:
      return {ParameterInit::Kind::kNormal, 0.0, c.initializer_range};
    case InitFill::kNormalDepthScaled:
      // GPT2PreTrainedModel._init_weights: std = initializer_range / sqrt(2 * n_layer).
      return {ParameterInit::Kind::kNormal, 0.0,
              c.initializer_range / std::sqrt(2.0 * static_cast<double>(c.num_hidden_layers))};
    case InitFill::kNormalPaddingRowZero: {
      int64_t row = -1;
      if (c.pad_token_id)
        row = *c.pad_token_id < 0 ? c.vocab_size + *c.pad_token_id : *c.pad_token_id;
      return {ParameterInit::Kind::kNormal, 0.0, c.initializer_range, row};
    }
    case InitFill::kZeros:
      return {ParameterInit::Kind::kConstant, 0.0, 0.0};
    case InitFill::kOnes:
      return {ParameterInit::Kind::kConstant, 1.0, 0.0};
    case InitFill::kLogArange:
      return {ParameterInit::Kind::kLogIndex, 1.0, 0.0};
  }
  return {};
}

}  // namespace

ParameterInit parameter_init(const ModelFamily& family, const ModelConfig& c,
                             std::string_view module_type, std::string_view fqn) {
  for (const InitRule& rule : family.init_rules) {
    if ((rule.module_type == "*" || rule.module_type == module_type) &&
        suffix_matches(fqn, rule.suffix)) {
      return resolve(rule.fill, c);
    }
  }
  SP_FAIL("parameter '", fqn, "' (a ", module_type, ") matches no init rule of the ",
          family.model_type, " family (tensor/models/family_", family.model_type,
          ".cpp, init_rules)");
}

std::vector<NamedInit> parameter_inits(const Module& root, const ModelConfig& c) {
  const ModelFamily& family = family_of(c);
  // The owning module of every name a parameter has; tied tensors then take their first name's.
  std::map<std::string, std::string, std::less<>> owner_type;
  for (const NamedModule& m : root.named_modules(/*remove_duplicate=*/false)) {
    ListOptions own;
    own.recurse = false;
    own.remove_duplicate = false;
    for (const NamedTensor& p : m.module->named_parameters(own)) {
      owner_type.emplace(m.name.empty() ? p.name : m.name + "." + p.name, m.module->type_name());
    }
  }
  std::vector<NamedInit> out;
  for (const NamedTensor& p : root.named_parameters()) {
    const auto it = owner_type.find(p.name);
    SP_ASSERT(it != owner_type.end(), "parameter ", p.name, " has no owning module");
    out.push_back({p.name, it->second, parameter_init(family, c, it->second, p.name)});
  }
  return out;
}

}  // namespace shardplan::tensor
