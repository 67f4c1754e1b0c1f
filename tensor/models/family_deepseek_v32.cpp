// DeepSeek Sparse Attention (tensor/models/latent_attention.h, Note [Lightning indexer trace]):
//  * deepseek_v32 (DeepSeek-V3.2, V3.2-Exp): transformers' DeepseekV32Config (DeepSeek-V3's
//    sizes and MoE, max positions 163840, a 64-head indexer of 128 channels, top 2048 keys) and
//    modular_deepseek_v32.py: DeepSeek-V3 with a lightning indexer in every layer's attention;
//  * glm_moe_dsa (GLM-5): GlmMoeDsaConfig (rms_norm_eps 1e-5, max positions 202752, q_lora_rank
//    2048, qk_nope_head_dim 192, v_head_dim 256, a 32-head indexer) and modular_glm_moe_dsa.py:
//    the same, where a layer of indexer_types "shared" reuses the previous full layer's
//    selection and has no indexer of its own.
// Both: mlp_layer_types when listed, else the first first_k_dense_replace (3) layers dense; the
// multi-token-prediction layer (num_nextn_predict_layers) is not the transformers model's.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/models/deepseek_config.h"

namespace shardplan::tensor {

extern const ModelFamily kDeepseekV32Family;  // listed in family_registry.cpp
extern const ModelFamily kGlmMoeDsaFamily;    // listed in family_registry.cpp

namespace {

void parse_v32(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(f, c,
                         {.max_position_embeddings = 163840,
                          .moe = {.first_k_dense_replace = 3, .n_shared_experts = 1}});
  f.string("topk_method", "noaux_tc");
  models::parse_mlp_layer_types(f, c);
  models::parse_sparse_attention(f, c, 64);
}

// GlmMoeDsaConfig.__post_init__: indexer_types ("full" or "shared" per layer) when listed, else
// index_topk_pattern (a string of F and S, or such a list), else layer i runs its indexer when
// max(i - index_skip_topk_offset + 1, 0) is a multiple of index_topk_freq (defaults 2 and 1:
// every layer). Per layer: true when it runs its own indexer.
std::vector<bool> indexer_layers(const ConfigFields& f, int64_t layers) {
  const char* key = f.has("indexer_types") && !f.is_null("indexer_types") ? "indexer_types"
                    : f.has("index_topk_pattern") && !f.is_null("index_topk_pattern")
                        ? "index_topk_pattern"
                        : nullptr;
  std::vector<bool> full;
  if (key == nullptr) {
    const int64_t freq = std::max<int64_t>(f.integer("index_topk_freq", 1), 1);
    const int64_t offset = f.integer("index_skip_topk_offset", 2);
    // Any offset transformers takes; bounded so that i - offset + 1 cannot overflow.
    constexpr int64_t kBound = int64_t{1} << 40;
    if (offset < -kBound || offset > kBound) {
      f.fail("index_skip_topk_offset",
             std::to_string(offset) + ", expected a layer offset within +-2^40");
    }
    for (int64_t i = 0; i < layers; ++i) {
      full.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0);
    }
    if (layers > 0 && !full.front()) {
      f.fail("index_skip_topk_offset", std::to_string(offset) + " with index_topk_freq " +
                                           std::to_string(freq) +
                                           " makes layer 0 reuse an earlier layer's selection, "
                                           "but none is before it: expected layer 0 to run its "
                                           "indexer");
    }
    return full;
  }
  // transformers saves the schedule's keys beside the list it derived (kwargs.get, not pop);
  // the list decides, so they are read and set nothing.
  for (const char* schedule : {"index_topk_freq", "index_skip_topk_offset", "index_topk_pattern"}) {
    if (f.has(schedule) && std::string_view(schedule) != key) (void)f.raw(schedule);
  }
  const nlohmann::json& v = f.raw(key);
  std::vector<std::string> types;
  if (v.is_string() && std::string_view(key) == "index_topk_pattern") {
    for (const char ch : v.get<std::string>()) {
      types.push_back(ch == 'F' ? "full" : ch == 'S' ? "shared" : std::string(1, ch));
    }
  } else if (v.is_array()) {
    for (const nlohmann::json& e : v) types.push_back(e.is_string() ? e.get<std::string>() : "?");
  }
  if (static_cast<int64_t>(types.size()) != layers) {
    f.fail(key, "expected one entry per layer (" + std::to_string(layers) +
                    "), each \"full\" or \"shared\" (F or S in a pattern string)");
  }
  for (const std::string& t : types) {
    if (t != "full" && t != "shared") {
      f.fail(key,
             "\"" + t.substr(0, 40) + "\" is not an indexer type; expected \"full\" or \"shared\"");
    }
    full.push_back(t == "full");
  }
  if (!full.empty() && !full.front()) {
    f.fail(key,
           "layer 0 is \"shared\", but no earlier layer selects keys for it: expected the "
           "first layer to run its indexer (\"full\")");
  }
  return full;
}

void parse_dsa(const ConfigFields& f, ModelConfig& c) {
  models::parse_deepseek(
      f, c,
      {.max_position_embeddings = 202752,
       .rms_norm_eps = 1e-5,
       .moe = {.first_k_dense_replace = 3, .n_shared_experts = 1},
       .latent = {.q_lora_rank = 2048, .qk_nope_head_dim = 192, .v_head_dim = 256}});
  f.string("topk_method", "noaux_tc");
  models::parse_mlp_layer_types(f, c);
  models::parse_sparse_attention(f, c, 32);
  const std::vector<bool> full = indexer_layers(f, c.num_hidden_layers);
  for (size_t i = 0; i < full.size(); ++i) {
    if (!full[i]) c.shared_indexer_layers.push_back(static_cast<int64_t>(i));
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::deepseek_to_hf_json(c, j);
  models::sparse_attention_to_hf_json(c, j);
}

void to_hf_json_dsa(const ModelConfig& c, nlohmann::json& j) {
  to_hf_json(c, j);
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool shared =
        std::binary_search(c.shared_indexer_layers.begin(), c.shared_indexer_layers.end(), i);
    types.push_back(shared ? "shared" : "full");
  }
  j["indexer_types"] = types;
}

ModulePtr build_with_prefix(const ModelConfig& c, const TensorOptions& o, bool training,
                            std::string_view prefix) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = prefix, .latent_attention = true, .moe = models::kDeepseekMoeStyle});
}

ModulePtr build_v32(const ModelConfig& c, const TensorOptions& o, bool training) {
  return build_with_prefix(c, o, training, kDeepseekV32Family.hf_class_prefix);
}

ModulePtr build_dsa(const ModelConfig& c, const TensorOptions& o, bool training) {
  return build_with_prefix(c, o, training, kGlmMoeDsaFamily.hf_class_prefix);
}

}  // namespace

const ModelFamily kDeepseekV32Family{
    .model_type = "deepseek_v32",
    .hf_class_prefix = "DeepseekV32",
    .layers_path = "model.layers",
    .parse = parse_v32,
    .to_hf_json = to_hf_json,
    .build = build_v32,
    .renamed = models::kDeepseekMoeRenames,
    .moe = true,
    .experts_class = "DeepseekV32Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = models::kLatentMoeTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

const ModelFamily kGlmMoeDsaFamily = [] {
  ModelFamily f = kDeepseekV32Family;
  f.model_type = "glm_moe_dsa";
  f.hf_class_prefix = "GlmMoeDsa";
  f.parse = parse_dsa;
  f.to_hf_json = to_hf_json_dsa;
  f.build = build_dsa;
  f.experts_class = "GlmMoeDsaExperts";
  return f;
}();

}  // namespace shardplan::tensor
