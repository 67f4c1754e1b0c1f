// The one rotary table of a hybrid model whose attention layers all share it (MiniMax's, OLMo
// Hybrid's): where its rope entry and base are in a config.json. Internal to tensor/models/.
//   const SingleRope r = find_single_rope(f, "MiniMaxRotaryEmbedding");
//   ... r.theta: the base (or null, or none) ...
//   read_full_width_scaling(f, c, r, "MiniMax's");
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// As transformers' convert_rope_params_to_dict finds them: a legacy rope_scaling stands in for
// rope_parameters (either must be an object when present, and one keyed by layer type is refused:
// `rotary_class` reads one rope_type and rope_theta); the base is the entry's rope_theta, else the
// file's top-level one, a null included.
struct SingleRope {
  const char* key = "rope_parameters";     // the entry's key: "rope_scaling" or "rope_parameters"
  const nlohmann::json* params = nullptr;  // the entry, when the file has one
  const nlohmann::json* theta = nullptr;   // the base as written (maybe null); none when absent
  const char* theta_key = "rope_parameters";  // where the base was written
};
SingleRope find_single_rope(const ConfigFields& f, std::string_view rotary_class);

// The entry's scaling: c.rope_scaling for a rope_type other than "default", and
// c.partial_rotary_factor 1, since `whose` attention rotates all of head_dim; a scaling with a
// partial_rotary_factor other than 1 (the entry's, else the file's) is refused, as that narrower
// table would not cover the head.
void read_full_width_scaling(const ConfigFields& f, ModelConfig& c, const SingleRope& r,
                             std::string_view whose);

}  // namespace shardplan::tensor::models
