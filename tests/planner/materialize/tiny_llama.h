// A Llama-shaped model small enough to fill in milliseconds, for the materialize tests: 2 layers,
// hidden 64, 4 heads of which 2 KV, vocabulary 1001 (not a multiple of 4, so vocabulary shards
// are uneven), untied, bfloat16; and the planner's best plan of a model with pinned degrees on
// cpu-local, as `plan --out` writes it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/plan/plan_file.h"
#include "planner/search/planner.h"
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

struct PinnedPlan {
  int64_t tp = 1, pp = 1, dp = 1;
  int zero = 0;
  int64_t seq = 64;
  int64_t seed = 99;
};

inline PlanFile pinned_plan(const tensor::ModelConfig& model, const std::string& name,
                            const PinnedPlan& pin) {
  Planner p(model, collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = pin.tp * pin.pp * pin.dp, .seq = pin.seq, .global_batch = 8}, {});
  Pins pins;
  pins.tp = pin.tp;
  pins.pp = pin.pp;
  pins.dp = pin.dp;
  pins.zero = pin.zero;
  const SearchResult r = p.search(pins, 1);
  SP_CHECK(!r.top.empty(), "no plan of ", name, " fits the pins");
  return plan_file(p, r.top.at(0), name, pin.seed);
}

}  // namespace shardplan::planner::testing
