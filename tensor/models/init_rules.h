// The value every parameter of a built model starts from, as its family's Hugging Face
// `_init_weights` sets it (ModelFamily::init_rules): what `materialize` fills each shard with.
//   ModulePtr m = build_model(cfg);
//   for (const NamedInit& p : parameter_inits(*m, cfg)) ...   // "model.norm.weight": constant 1
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensor/models/family.h"
#include "tensor/module.h"

namespace shardplan::tensor {

struct ParameterInit {
  // kLogIndex: element i is log(a + i), i the flat index (Mamba-2's A_log, kernels' log-index
  // fill), or log(a + i mod b) with a period b > 0 (Mamba-1's A_log, a row per channel).
  enum class Kind { kNormal, kConstant, kLogIndex };
  Kind kind = Kind::kConstant;
  double a = 0;  // normal: mean; constant: the value; log index: the first argument
  double b = 0;  // normal: standard deviation; log index: the period (0: none)
  int64_t zero_row = -1;  // >= 0: this index of dim 0 is all zeros (an embedding's padding row)
  bool operator==(const ParameterInit&) const = default;
};

struct NamedInit {
  std::string name;  // fully qualified; a tied tensor once, under its first name
  std::string module_type;
  ParameterInit init;
};

// The rule of `family` for a parameter named `fqn` owned by a `module_type` module, resolved with
// c's initializer_range and depth (and the parameter's dtype, for values PyTorch computes in it).
// Throws shardplan::Error when no rule matches (naming the
// parameter, its module type and the family).
ParameterInit parameter_init(const ModelFamily& family, const ModelConfig& c,
                             std::string_view module_type, std::string_view fqn,
                             DType dtype = DType::kFloat32);

// Every parameter of `root` (a model built from `c`), in named_parameters order.
std::vector<NamedInit> parameter_inits(const Module& root, const ModelConfig& c);

}  // namespace shardplan::tensor
