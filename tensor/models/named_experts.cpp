#include "tensor/models/named_experts.h"

#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor::models {

void parse_named_experts(const ConfigFields& f, ModelConfig& c, const NamedExpertsDefaults& d) {
  c.num_local_experts = f.integer("num_experts", d.experts);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", d.top_k);
  c.dense_intermediate_size = c.intermediate_size;
  c.intermediate_size = f.integer("moe_intermediate_size", d.width);
  const int64_t shared = f.integer("num_shared_experts", d.shared);
  if (d.shared_required && shared <= 0) {
    f.fail("num_shared_experts",
           std::to_string(shared) +
               ": the shared MLP would not vanish but take another width; expected >= 1");
  }
  c.shared_expert_intermediate_size =
      shared_experts_width(f, "num_shared_experts", shared, c.intermediate_size);
}

void named_experts_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["num_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_shared_experts"] =
      c.intermediate_size > 0 ? c.shared_expert_intermediate_size / c.intermediate_size : 0;
}

}  // namespace shardplan::tensor::models
