// The MoE fields as ExaoneMoeConfig, HYV3Config and AfmoeConfig name them: num_experts,
// num_experts_per_tok, moe_intermediate_size (each routed expert's width; intermediate_size is then
// the dense layers') and num_shared_experts shared experts of that width (one MLP of their summed
// width). Internal to tensor/models/: each family's file passes its config class's defaults.
//   models::parse_named_experts(f, c, {.experts = 192, .top_k = 8, .width = 1536, .shared = 1});
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

struct NamedExpertsDefaults {
  int64_t experts;
  int64_t top_k;
  int64_t width;
  int64_t shared;
  // Refuse num_shared_experts 0: the family's shared MLP would not vanish (HYV3MLP falls back to
  // intermediate_size wide; AFMoE registers one of zero width).
  bool shared_required = false;
};

void parse_named_experts(const ConfigFields& f, ModelConfig& c, const NamedExpertsDefaults& d);
// What parse_named_experts reads back (intermediate_size the dense layers' width).
void named_experts_to_hf_json(const ModelConfig& c, nlohmann::json& j);

}  // namespace shardplan::tensor::models
