// A Llama-shaped model small enough to fill in milliseconds, for the materialize tests: 2 layers,
// hidden 64, 4 heads of which 2 KV, vocabulary 1001 (not a multiple of 4, so vocabulary shards
// are uneven), untied, bfloat16.
#pragma once

#include <nlohmann/json.hpp>

#include "tensor/models/model_config.h"

namespace shardplan::planner::testing {

inline tensor::ModelConfig tiny_llama() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "llama", "vocab_size": 1001, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "hidden_act": "silu", "initializer_range": 0.03,
    "torch_dtype": "bfloat16", "tie_word_embeddings": false})"),
                                    "tiny llama");
}

}  // namespace shardplan::planner::testing
