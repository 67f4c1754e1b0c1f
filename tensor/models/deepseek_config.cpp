#include "tensor/models/deepseek_config.h"

#include <nlohmann/json.hpp>
#include <string>

namespace shardplan::tensor::models {

void parse_latent_attention(const ConfigFields& f, ModelConfig& c, const LatentDefaults& d) {
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.q_lora_rank = f.is_null("q_lora_rank") ? 0 : f.integer("q_lora_rank", d.q_lora_rank);
  c.kv_lora_rank = f.integer("kv_lora_rank", d.kv_lora_rank);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", d.qk_nope_head_dim);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", d.qk_rope_head_dim);
  c.v_head_dim = f.integer("v_head_dim", d.v_head_dim);
  const std::pair<const char*, int64_t> sizes[] = {{"kv_lora_rank", c.kv_lora_rank},
                                                   {"qk_nope_head_dim", c.qk_nope_head_dim},
                                                   {"qk_rope_head_dim", c.qk_rope_head_dim},
                                                   {"v_head_dim", c.v_head_dim}};
  for (const auto& [key, v] : sizes) {
    if (v <= 0) f.fail(key, "must be a positive integer, got " + std::to_string(v));
  }
  if (c.q_lora_rank < 0) f.fail("q_lora_rank", "must be positive (or null: no query latent)");
  c.head_dim = c.qk_rope_head_dim;  // the rotary tables' width, as DeepseekV3Config sets head_dim
  f.boolean("rope_interleave", true);  // a permutation of the rotated channels: no count changes
}

void parse_deepseek(const ConfigFields& f, ModelConfig& c, const DeepseekDefaults& d) {
  // head_dim is the rotated width (parse_latent_attention), not hidden / heads: GLM-4.7-Flash's
  // 20 heads do not divide its hidden 2048. A file's head_dim is overridden, as the configs do.
  parse_rotary_decoder(f, c,
                       {.max_position_embeddings = d.max_position_embeddings,
                        .rms_norm_eps = d.rms_norm_eps,
                        .head_dim = 64});
  parse_latent_attention(f, c, d.latent);
  parse_deepseek_moe(f, c, d.moe);
  const std::string scoring(d.scoring_func);
  if (f.has("scoring_func") && f.string("scoring_func", scoring) != scoring) {
    f.fail("scoring_func",
           "this model routes by " + scoring + " scores, expected \"" + scoring + "\"");
  }
}

void deepseek_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  rotary_decoder_to_hf_json(c, j);
  deepseek_moe_to_hf_json(c, j);
  j.erase("head_dim");  // derived from qk_rope_head_dim
  j["attention_bias"] = c.qkv_bias;
  j["q_lora_rank"] = c.q_lora_rank > 0 ? nlohmann::json(c.q_lora_rank) : nlohmann::json();
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
}

void parse_mlp_layer_types(const ConfigFields& f, ModelConfig& c) {
  if (!f.has("mlp_layer_types") || f.is_null("mlp_layer_types")) return;
  const nlohmann::json& types = f.raw("mlp_layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_hidden_layers) {
    f.fail("mlp_layer_types",
           "expected a list of num_hidden_layers = " + std::to_string(c.num_hidden_layers) +
               " entries, each \"dense\" or \"sparse\"");
  }
  c.dense_layers.clear();
  for (size_t i = 0; i < types.size(); ++i) {
    const nlohmann::json& t = types[i];
    if (t == "dense") {
      c.dense_layers.push_back(static_cast<int64_t>(i));
    } else if (t != "sparse") {
      f.fail("mlp_layer_types",
             t.dump().substr(0, 40) + " is not a layer type; expected \"dense\" or \"sparse\"");
    }
  }
}

nlohmann::json mlp_layer_types_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool dense = std::binary_search(c.dense_layers.begin(), c.dense_layers.end(), i);
    j.push_back(dense ? "dense" : "sparse");
  }
  return j;
}

void parse_sparse_attention(const ConfigFields& f, ModelConfig& c, int64_t index_heads) {
  c.index_n_heads = f.integer("index_n_heads", index_heads);
  c.index_head_dim = f.integer("index_head_dim", 128);
  c.index_topk = f.integer("index_topk", 2048);
  const std::pair<const char*, int64_t> sizes[] = {{"index_n_heads", c.index_n_heads},
                                                   {"index_head_dim", c.index_head_dim},
                                                   {"index_topk", c.index_topk}};
  for (const auto& [key, v] : sizes) {
    if (v <= 0) f.fail(key, "must be a positive integer, got " + std::to_string(v));
  }
  if (c.q_lora_rank <= 0) {
    f.fail("q_lora_rank",
           "is null, but the lightning indexer reads the query latent: expected "
           "a rank (DeepSeek Sparse Attention has one)");
  }
  if (f.has("layer_types") && !f.is_null("layer_types")) {
    const nlohmann::json& types = f.raw("layer_types");
    const bool all_sparse = types.is_array() &&
                            static_cast<int64_t>(types.size()) == c.num_hidden_layers &&
                            std::all_of(types.begin(), types.end(), [](const nlohmann::json& t) {
                              // transformers 5.x renames it indexed_attention
                              // (remap_legacy_layer_types).
                              return t == "deepseek_sparse_attention" || t == "indexed_attention";
                            });
    if (!all_sparse) {
      f.fail("layer_types", "expected \"deepseek_sparse_attention\" for each of the " +
                                std::to_string(c.num_hidden_layers) +
                                " layers (every layer of this model attends sparsely)");
    }
  }
  c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kSparse);
}

void sparse_attention_to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["mlp_layer_types"] = mlp_layer_types_json(c);
}

}  // namespace shardplan::tensor::models
