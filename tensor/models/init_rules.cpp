#include "tensor/models/init_rules.h"

#include <cmath>
#include <map>

#include "base/error.h"
#include "kernels/convert.h"

namespace shardplan::tensor {
namespace {

bool suffix_matches(std::string_view fqn, std::string_view suffix) {
  if (fqn == suffix) return true;
  return fqn.size() > suffix.size() && fqn.ends_with(suffix) &&
         fqn[fqn.size() - suffix.size() - 1] == '.';
}

// log(expm1(x)) as PyTorch computes it on a 0-d tensor of `dtype`: the argument rounded to the
// dtype, then each op in float (double for float64) rounded back to it, as CPU kernels of the
// half-width types compute in float.
double softplus_inverse_in(DType dtype, double x) {
  float (*round)(float) = nullptr;
  switch (dtype) {
    case DType::kFloat64:
      return std::log(std::expm1(x));
    case DType::kFloat32:
      round = [](float v) { return v; };
      break;
    case DType::kBFloat16:
      round = [](float v) { return kernels::bf16_bits_to_float(kernels::float_to_bf16_bits(v)); };
      break;
    case DType::kFloat16:
      round = [](float v) { return kernels::fp16_bits_to_float(kernels::float_to_fp16_bits(v)); };
      break;
    default:
      SP_FAIL("log(expm1(x)) asked in ", dtype_name(dtype), ", which is not a floating dtype");
  }
  const float arg = round(static_cast<float>(x));
  return round(std::log(round(std::expm1(arg))));
}

ParameterInit resolve(const InitRule& rule, const ModelConfig& c, DType dtype) {
  switch (rule.fill) {
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
      const double std =
          c.embedding_initializer_range > 0 ? c.embedding_initializer_range : c.initializer_range;
      return {ParameterInit::Kind::kNormal, 0.0, std, row};
    }
    case InitFill::kZeros:
      return {ParameterInit::Kind::kConstant, 0.0, 0.0};
    case InitFill::kOnes:
      return {ParameterInit::Kind::kConstant, 1.0, 0.0};
    case InitFill::kLogArange:
      return {ParameterInit::Kind::kLogIndex, 1.0, 0.0};
    case InitFill::kLogArangePerRow:
      // Each row of the state width starts again at log(1).
      return {ParameterInit::Kind::kLogIndex, 1.0, static_cast<double>(c.linear_key_head_dim)};
    case InitFill::kSoftplusInverse:
      return {ParameterInit::Kind::kConstant, softplus_inverse_in(dtype, rule.x), 0.0};
    case InitFill::kNormalLambdaStd:
      return {ParameterInit::Kind::kNormal, 0.0, c.lambda_std_dev};
  }
  return {};
}

}  // namespace

ParameterInit parameter_init(const ModelFamily& family, const ModelConfig& c,
                             std::string_view module_type, std::string_view fqn, DType dtype) {
  for (const InitRule& rule : family.init_rules) {
    if ((rule.module_type == "*" || rule.module_type == module_type) &&
        suffix_matches(fqn, rule.suffix)) {
      return resolve(rule, c, dtype);
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
    ParameterInit init = parameter_init(family, c, it->second, p.name, p.tensor.dtype());
    // A negative padding_idx counts from the end of its own table (nn.Embedding normalizes it):
    // Gemma 4's per-layer table has its own row count beside the vocabulary's.
    if (init.zero_row >= 0 && c.pad_token_id && *c.pad_token_id < 0 && p.tensor.dim() > 0) {
      init.zero_row = p.tensor.size(0) + *c.pad_token_id;
    }
    out.push_back({p.name, it->second, init});
  }
  return out;
}

}  // namespace shardplan::tensor
