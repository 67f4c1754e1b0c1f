// Defaults of a family's config class that parse_rotary_decoder cannot know (internal to
// tensor/models/): transformers' config classes give num_key_value_heads a number of their own
// (MistralConfig 8, Gemma2Config 4, HYV3Config 8, ...) where a file leaves the key out, while a
// null one becomes the head count in their __post_init__.
//   models::key_value_heads_or(f, c, 8);  // after parse_rotary_decoder
#pragma once

#include <cstdint>

#include "tensor/models/config_fields.h"
#include "tensor/models/model_config.h"

namespace shardplan::tensor::models {

// c.num_key_value_heads = `absent` when the file has no num_key_value_heads key; a present or null
// one keeps what parse_rotary_decoder read (null: the head count).
void key_value_heads_or(const ConfigFields& f, ModelConfig& c, int64_t absent);

}  // namespace shardplan::tensor::models
