// deepseek_v4 (DeepSeek-V4-Flash, 284B total and 13B active; DeepSeek-V4-Pro, 1.6T and 49B; and
// their -Base siblings): transformers' DeepseekV4Config (Flash's sizes by default) and
// modeling_deepseek_v4.py. Not multi-head latent attention: every layer attends a sliding window
// through one key-value head of head_dim 512 (tensor/models/compressed_attention.h), and
// compressed layers add pooled entries (CSA: every 4 tokens, the top index_topk picked by a
// lightning indexer; HCA: every 128 tokens, all of them). The residual stream is hc_mult (4)
// hyper-connected streams (tensor/models/hyper_connections.h). Every layer is an MoE block
// registered as the router `gate` (a bare weight [E, h]; sqrt(softplus) scores), the experts
// (DeepseekV4Experts, a SwiGLU clamped at swiglu_limit, priced as SwiGLU) and one shared expert
// as wide as a routed one; the first num_hash_layers (3) route by a fixed token-to-expert table
// (DeepseekV4HashRouter, its tid2eid buffer) rather than by top-k (DeepseekV4TopKRouter, with
// the e_score_correction_bias buffer). The multi-token-prediction module is not transformers'
// (its mtp.* keys are skipped on load); num_nextn_predict_layers is kept for the planner.
// Config keys (DeepseekV4Config.__post_init__): the published files use the legacy keys
// compress_ratios (one per layer plus the MTP layer's: 0 sliding, 4 CSA, 128 HCA; any other
// value is refused, a longer list cut), compress_rate_csa/hca, num_hash_layers and
// qk_rope_head_dim (partial_rotary_factor = it / head_dim); the class's own are layer_types,
// compress_rates, mlp_layer_types and partial_rotary_factor. Without either, layers 0-2 are HCA,
// then CSA on odd layers and HCA on even ones. intermediate_size and num_local_experts are
// attribute_map names of moe_intermediate_size and n_routed_experts (a file holding them wins).
// num_key_value_heads, n_shared_experts, norm_topk_prob and attention_bias are read by nothing.
// RoPE: rope_theta for the sliding layers, compress_rope_theta (and the file's scaling, YaRN in
// the releases) for the compressed ones; both tables as wide as qk_rope_head_dim.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tensor/models/blocks.h"
#include "tensor/models/compressed_attention.h"
#include "tensor/models/hyper_connections.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kDeepseekV4Family;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "DeepseekV4";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";
constexpr const char* kSlidingType = "sliding_attention";

AttentionType attention_of(const ConfigFields& f, const char* key, const std::string& name) {
  if (name == kSlidingType) return AttentionType::kSliding;
  if (name == kCsa) return AttentionType::kCompressedSparse;
  if (name == kHca) return AttentionType::kHeavilyCompressed;
  f.fail(key, "\"" + name.substr(0, 40) + "\" is not a DeepSeek-V4 layer type; expected " +
                  kSlidingType + ", " + kCsa + " or " + kHca);
}

// A list of at least `layers` entries, cut to `layers` (DeepseekV4Config keeps list[:L]).
const nlohmann::json& per_layer_list(const ConfigFields& f, const char* key, int64_t layers) {
  const nlohmann::json& v = f.raw(key);
  if (!v.is_array() || static_cast<int64_t>(v.size()) < layers) {
    f.fail(key, "expected a list of at least one entry per layer (" + std::to_string(layers) +
                    "), got " + v.dump().substr(0, 60));
  }
  return v;
}

int64_t positive(const ConfigFields& f, const char* key, int64_t dflt) {
  const int64_t v = f.integer(key, dflt);
  if (v <= 0) f.fail(key, "must be a positive integer, got " + std::to_string(v));
  return v;
}

void parse_compress_rates(const ConfigFields& f, ModelConfig& c) {
  c.compress_rate_csa = 4;
  c.compress_rate_hca = 128;
  if (f.has("compress_rates")) {
    const nlohmann::json& r = f.raw("compress_rates");
    if (!r.is_object())
      f.fail("compress_rates", "expected an object, got " + r.dump().substr(0, 60));
    const ConfigFields rates(r, f.source());
    c.compress_rate_csa = rates.integer(kCsa, c.compress_rate_csa);
    c.compress_rate_hca = rates.integer(kHca, c.compress_rate_hca);
  }
  c.compress_rate_csa = f.integer("compress_rate_csa", c.compress_rate_csa);
  c.compress_rate_hca = f.integer("compress_rate_hca", c.compress_rate_hca);
  for (const int64_t v : {c.compress_rate_csa, c.compress_rate_hca}) {
    if (v <= 0 || v > (1 << 20)) {
      f.fail("compress_rates",
             "a rate of " + std::to_string(v) + " tokens an entry, expected between 1 and 2^20");
    }
  }
}

void parse_layer_types(const ConfigFields& f, ModelConfig& c) {
  const int64_t layers = c.num_hidden_layers;
  c.layer_types.clear();
  if (f.has("layer_types")) {
    const nlohmann::json& v = per_layer_list(f, "layer_types", layers);
    for (int64_t i = 0; i < layers; ++i) {
      const nlohmann::json& e = v[static_cast<size_t>(i)];
      c.layer_types.push_back(
          attention_of(f, "layer_types", e.is_string() ? e.get<std::string>() : e.dump()));
    }
  } else if (f.has("compress_ratios")) {
    // The legacy tags: 0 sliding, 4 CSA, 128 HCA (the rates themselves come from compress_rates).
    const nlohmann::json& v = per_layer_list(f, "compress_ratios", layers);
    for (int64_t i = 0; i < layers; ++i) {
      const nlohmann::json& e = v[static_cast<size_t>(i)];
      const int64_t tag = e.is_number_integer() ? e.get<int64_t>() : -1;
      if (tag != 0 && tag != 4 && tag != 128) {
        f.fail("compress_ratios", e.dump().substr(0, 30) + " at layer " + std::to_string(i) +
                                      ", expected 0 (sliding), 4 (CSA) or 128 (HCA)");
      }
      c.layer_types.push_back(tag == 0   ? AttentionType::kSliding
                              : tag == 4 ? AttentionType::kCompressedSparse
                                         : AttentionType::kHeavilyCompressed);
    }
  } else {
    // DeepseekV4Config's default: HCA for the first min(L, 2) layers, then layer 2 + i is CSA
    // when i is odd.
    for (int64_t i = 0; i < layers; ++i) {
      c.layer_types.push_back(i >= 2 && (i - 2) % 2 == 1 ? AttentionType::kCompressedSparse
                                                         : AttentionType::kHeavilyCompressed);
    }
  }
}

void parse_mlp_layer_types(const ConfigFields& f, ModelConfig& c) {
  const int64_t layers = c.num_hidden_layers;
  c.hash_moe_layers.clear();
  const int64_t hash = f.integer("num_hash_layers", 3);
  if (f.has("mlp_layer_types")) {
    const nlohmann::json& v = per_layer_list(f, "mlp_layer_types", layers);
    for (int64_t i = 0; i < layers; ++i) {
      const nlohmann::json& e = v[static_cast<size_t>(i)];
      const std::string t = e.is_string() ? e.get<std::string>() : e.dump();
      if (t != "hash_moe" && t != "moe") {
        f.fail("mlp_layer_types", "\"" + t.substr(0, 40) +
                                      "\" is not a DeepSeek-V4 MLP type; expected hash_moe or moe");
      }
      if (t == "hash_moe") c.hash_moe_layers.push_back(i);
    }
    return;
  }
  if (hash < 0) f.fail("num_hash_layers", "must be >= 0, got " + std::to_string(hash));
  for (int64_t i = 0; i < std::min(hash, layers); ++i) c.hash_moe_layers.push_back(i);
}

// rope_theta and compress_rope_theta; the scaling (compressed layers only) from rope_scaling
// (parse_rotary_decoder) or from rope_parameters, flat or as {"main": .., "compress": ..}.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.compress_rope_theta = f.number("compress_rope_theta", 160000.0);
  if (!f.has("rope_parameters")) return;
  const nlohmann::json& r = f.raw("rope_parameters");
  if (!r.is_object())
    f.fail("rope_parameters", "expected an object, got " + r.dump().substr(0, 60));
  const bool nested = r.contains("main") || r.contains("compress");
  if (nested && !(r.contains("main") && r.at("main").is_object() && r.contains("compress") &&
                  r.at("compress").is_object())) {
    f.fail("rope_parameters", "keyed by rope type without both 'main' and 'compress' objects");
  }
  const nlohmann::json& main = nested ? r.at("main") : r;
  const nlohmann::json& compress = nested ? r.at("compress") : r;
  const ConfigFields m(main, f.source()), k(compress, f.source());
  c.rope_theta = m.number("rope_theta", c.rope_theta);
  if (nested) c.compress_rope_theta = k.number("rope_theta", c.compress_rope_theta);
  const std::string type =
      k.has("rope_type") ? k.string("rope_type", "") : k.string("type", "default");
  if (!f.has("rope_scaling") && type != "default") {
    c.rope_scaling = parse_rope_scaling(compress, f, "rope_parameters");
  }
  for (const double theta : {c.rope_theta, c.compress_rope_theta}) {
    if (!(theta > 0)) f.fail("rope_parameters", "rope_theta must be positive");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // attribute_map: intermediate_size and num_local_experts write moe_intermediate_size and
  // n_routed_experts, after the fields (a file holding both keeps the mapped one).
  const int64_t width = f.integer("moe_intermediate_size", 2048);
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{129280, 4096, width, 43, 64, 1},
                                .max_position_embeddings = 1048576,
                                .rms_norm_eps = 1e-6,
                                .head_dim = 512});
  c.num_key_value_heads = 1;  // one key-value head always; the field is read by nothing
  const int64_t experts = f.integer("n_routed_experts", 256);
  c.num_local_experts = positive(f, "num_local_experts", experts);
  c.num_experts_per_tok = positive(f, "num_experts_per_tok", 6);
  if (c.num_experts_per_tok > c.num_local_experts) {
    f.fail("num_experts_per_tok", std::to_string(c.num_experts_per_tok) + ", expected at most " +
                                      "n_routed_experts (" + std::to_string(c.num_local_experts) +
                                      ")");
  }
  // One shared expert as wide as a routed one, whatever n_shared_experts says.
  (void)f.integer("n_shared_experts", 1);
  c.shared_expert_intermediate_size = c.intermediate_size;
  c.mlp_bias = f.boolean("mlp_bias", false);
  (void)f.boolean("attention_bias", false);
  (void)f.boolean("norm_topk_prob", true);
  (void)f.number("routed_scaling_factor", 1.5);
  (void)f.number("swiglu_limit", 10.0);
  (void)f.string("topk_method", "noaux_tc");
  const std::string scoring = f.string("scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus" && scoring != "sigmoid") {
    f.fail("scoring_func", "\"" + scoring.substr(0, 30) +
                               "\": DeepseekV4TopKRouter builds its score function from "
                               "ACT2FN; expected sqrtsoftplus or sigmoid");
  }
  c.q_lora_rank = positive(f, "q_lora_rank", 1024);
  if (c.head_dim <= 0)
    f.fail("head_dim", "must be a positive integer, got " + std::to_string(c.head_dim));
  // Bounded before they are summed into a key count or multiplied into shapes (validate bounds
  // the rest once the config is whole).
  for (const auto& [key, v] :
       {std::pair<const char*, int64_t>{"q_lora_rank", c.q_lora_rank}, {"head_dim", c.head_dim}}) {
    if (v > (1 << 20)) f.fail(key, std::to_string(v) + ", expected at most 2^20");
  }
  if (f.has("partial_rotary_factor")) {
    c.partial_rotary_factor = f.number("partial_rotary_factor", 0.125);
  } else {
    c.partial_rotary_factor =
        static_cast<double>(f.integer("qk_rope_head_dim", 64)) / static_cast<double>(c.head_dim);
  }
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
    f.fail(f.has("partial_rotary_factor") ? "partial_rotary_factor" : "qk_rope_head_dim",
           "rotates a share " + std::to_string(c.partial_rotary_factor) +
               " of head_dim, expected one in (0, 1]");
  }
  parse_rope(f, c);
  c.sliding_window = positive(f, "sliding_window", 128);
  c.o_groups = positive(f, "o_groups", 8);
  c.o_lora_rank = positive(f, "o_lora_rank", 1024);
  if (c.o_groups > c.num_attention_heads || c.num_attention_heads % c.o_groups != 0) {
    f.fail("o_groups",
           std::to_string(c.o_groups) + ", expected a divisor of num_attention_heads (" +
               std::to_string(c.num_attention_heads) + "): each group projects whole heads");
  }
  c.index_n_heads = positive(f, "index_n_heads", 64);
  c.index_head_dim = positive(f, "index_head_dim", 128);
  c.index_topk = positive(f, "index_topk", 512);
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"sliding_window", *c.sliding_window},
                               {"index_topk", c.index_topk},
                               {"index_n_heads", c.index_n_heads}}) {
    if (v > (int64_t{1} << 40)) f.fail(key, std::to_string(v) + ", expected at most 2^40");
  }
  c.hc_mult = positive(f, "hc_mult", 4);
  c.hc_sinkhorn_iters = positive(f, "hc_sinkhorn_iters", 20);
  c.hc_eps = f.number("hc_eps", 1e-6);
  c.mtp_layers = f.integer("num_nextn_predict_layers", 1);
  if (c.mtp_layers < 0) {
    f.fail("num_nextn_predict_layers", "must be >= 0, got " + std::to_string(c.mtp_layers));
  }
  parse_compress_rates(f, c);
  parse_layer_types(f, c);
  parse_mlp_layer_types(f, c);
  const int64_t rot = models::rotary_dim(c);
  if (rot <= 0 || rot % 2 != 0 || rot > c.head_dim) {
    f.fail("partial_rotary_factor", "rotates " + std::to_string(rot) + " of head_dim " +
                                        std::to_string(c.head_dim) +
                                        " channels, expected an even number of them, at least 2");
  }
  if (c.index_head_dim < rot || c.index_head_dim > 65536) {
    f.fail("index_head_dim", std::to_string(c.index_head_dim) + ", expected between the " +
                                 "rotated width (" + std::to_string(rot) + ") and 65536");
  }
}

nlohmann::json type_names(const ModelConfig& c) {
  nlohmann::json types = nlohmann::json::array();
  for (const AttentionType t : c.layer_types) types.push_back(to_string(t));
  return types;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("intermediate_size");
  j["moe_intermediate_size"] = c.intermediate_size;
  j["n_routed_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["n_shared_experts"] = 1;
  j["mlp_bias"] = c.mlp_bias;
  j["q_lora_rank"] = c.q_lora_rank;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["num_nextn_predict_layers"] = c.mtp_layers;
  j["compress_rates"] = {{kCsa, c.compress_rate_csa}, {kHca, c.compress_rate_hca}};
  j["layer_types"] = type_names(c);
  nlohmann::json mlp = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    mlp.push_back(std::binary_search(c.hash_moe_layers.begin(), c.hash_moe_layers.end(), i)
                      ? "hash_moe"
                      : "moe");
  }
  j["mlp_layer_types"] = mlp;
}

// DeepseekV4TopKRouter or DeepseekV4HashRouter: the scores sqrt(softplus(x W^T)) of every expert,
// in the model's dtype ([T, E]).
class Router : public Module {
 public:
  Router(bool hash, int64_t experts, int64_t hidden, const TensorOptions& o)
      : Module(std::string(kPrefix) + (hash ? "HashRouter" : "TopKRouter")) {
    register_parameter("weight", empty({experts, hidden}, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor logits = matmul(x, transpose(parameter("weight"), 0, 1));
    return sqrt(log(add(exp(logits), 1.0)));
  }
};

// DeepseekV4SparseMoeBlock (Note [Expected-load MoE] in models.h): gate, experts, shared_experts.
class Moe : public Module {
 public:
  Moe(const ModelConfig& c, bool hash, const TensorOptions& o)
      : Module(std::string(kPrefix) + "SparseMoeBlock"),
        experts_(c.num_local_experts),
        top_k_(c.num_experts_per_tok) {
    const std::string act = c.hidden_act;
    register_module("gate", std::make_shared<Router>(hash, experts_, c.hidden_size, o));
    experts = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       std::string(kPrefix) + "Experts", experts_, c.hidden_size,
                       c.intermediate_size, GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
    // DeepseekV4MLP: the shared expert, as wide as a routed one.
    register_module("shared_experts",
                    std::make_shared<models::GatedMlp>(std::string(kPrefix) + "MLP", c.hidden_size,
                                                       c.shared_expert_intermediate_size,
                                                       c.mlp_bias, c.hidden_act, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    // The k picked experts' scores (narrow stands in for the top-k or the table lookup),
    // normalized.
    const Tensor scores = child("gate")->call(flat);
    Tensor weights = narrow(scores, 1, 0, top_k_);
    weights = div(weights, sum(weights, {-1}, /*keepdim=*/true));
    const Tensor routed = models::expected_load_experts(*experts, flat, weights);
    return view(add(routed, child("shared_experts")->call(flat)), {b, s, h});
  }
  std::shared_ptr<GroupedExperts> experts;

 private:
  int64_t experts_, top_k_;
};

// DeepseekV4DecoderLayer: self_attn, mlp, input_layernorm, post_attention_layernorm, attn_hc,
// ffn_hc; each half between a hyper-connection's collapse and expand.
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    compressed_ = kind.compress_rate > 0;
    attn_ = register_module("self_attn", models::make_compressed_attention(c, kind, o, training));
    mlp_ = register_module("mlp", std::make_shared<Moe>(c, kind.hash_router, o));
    const int64_t h = c.hidden_size;
    input_norm_ = register_module("input_layernorm",
                                  std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    post_norm_ = register_module("post_attention_layernorm",
                                 std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    const std::string hc = std::string(kPrefix) + "HyperConnection";
    attn_hc_ = register_module(
        "attn_hc", std::make_shared<models::HyperConnection>(hc, c.hc_mult, h, c.norm_eps, o));
    ffn_hc_ = register_module(
        "ffn_hc", std::make_shared<models::HyperConnection>(hc, c.hc_mult, h, c.norm_eps, o));
  }
  // streams [B, S, n, h]; the tables of the sliding layers (main) and of the compressed ones.
  Tensor run(const Tensor& streams, const std::pair<Tensor, Tensor>& main,
             const std::pair<Tensor, Tensor>& compress) {
    CallScope scope(*this);
    const auto& [cos_t, sin_t] = compressed_ ? compress : main;
    const models::HyperConnection::Mix a = attn_hc_->collapse(streams);
    Tensor x = attn_hc_->expand(attn_->run(input_norm_->call(a.input), cos_t, sin_t), streams, a);
    const models::HyperConnection::Mix f = ffn_hc_->collapse(x);
    return ffn_hc_->expand(mlp_->call(post_norm_->call(f.input)), x, f);
  }

 private:
  bool compressed_ = false;
  std::shared_ptr<models::AttentionBlock> attn_;
  ModulePtr mlp_, input_norm_, post_norm_;
  std::shared_ptr<models::HyperConnection> attn_hc_, ffn_hc_;
};

// DeepseekV4Model: embed_tokens, layers, norm, rotary_emb, hc_head.
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    streams_ = c.hc_mult;
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    rope_ = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                              std::string(kPrefix) + "RotaryEmbedding",
                                              models::rotary_dim(c), c.rope_theta));
    head_ = register_module(
        "hc_head", std::make_shared<models::HyperHead>(std::string(kPrefix) + "HyperHead",
                                                       c.hc_mult, c.hidden_size, c.norm_eps, o));
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    const Tensor e = embed_->call(ids);
    const int64_t b = e.size(0), s = e.size(1), h = e.size(2);
    // The token's hidden state copied into every stream.
    Tensor streams = contiguous(expand(unsqueeze(e, 2), {b, s, streams_, h}));
    // The two tables (main for sliding layers, compress for compressed ones): equal shapes.
    const Tensor pos = models::position_ids(s);
    const auto main = rope_->cos_sin(pos, e.dtype());
    const auto compress = rope_->cos_sin(pos, e.dtype());
    for (const auto& layer : layers_) streams = layer->run(streams, main, compress);
    return norm_->call(head_->call(streams));
  }

 private:
  int64_t streams_ = 0;
  ModulePtr embed_, norm_, head_;
  std::shared_ptr<models::RotaryEmbedding> rope_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"num_local_experts", "n_routed_experts"},
                                    {"intermediate_size", "moe_intermediate_size"},
                                    {"shared_expert_intermediate_size", "moe_intermediate_size"},
                                    {"hash_moe_layers", "mlp_layer_types"},
                                    {"compress_rate_csa", "compress_rates"},
                                    {"compress_rate_hca", "compress_rates"},
                                    {"mtp_layers", "num_nextn_predict_layers"}};

// Megatron-LM's split as far as it goes here (transformers ships an expert-parallel plan only):
// the query up-projection column-parallel by heads, the grouped output projection by groups
// (column-parallel: whole groups of heads per rank when tp divides o_groups) and o_b_proj
// row-parallel; the single key-value head, the compressors and the indexer replicated (the
// indexer sums its heads per query); the experts split within or placed whole, the shared expert
// as a dense MLP.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_b_proj", "colwise"},
    {"model.layers.*.self_attn.o_a_proj", "colwise"},
    {"model.layers.*.self_attn.o_b_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// DeepseekV4PreTrainedModel._init_weights: the sinks and position biases zero, the
// hyper-connections' projections normal with their biases zero and scales one, the routers'
// weights normal; the rest as the Llama-shaped decoders (Linear, the grouped o_a_proj among them,
// experts and Embedding normal, RMSNorm weights one).
constexpr InitRule kOwnInitRules[] = {
    {"*", "sinks", InitFill::kZeros},       {"*", "position_bias", InitFill::kZeros},
    {"*", "fn", InitFill::kNormal},         {"*", "base", InitFill::kZeros},
    {"*", "scale", InitFill::kOnes},        {"*", "hc_fn", InitFill::kNormal},
    {"*", "hc_base", InitFill::kZeros},     {"*", "hc_scale", InitFill::kOnes},
    {"*", "gate.weight", InitFill::kNormal}};
constexpr auto kInitRules =
    models::concat_init_rules(kOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kDeepseekV4Family{
    .model_type = "deepseek_v4",
    .hf_class_prefix = "DeepseekV4",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rope_parameters_by_layer_type = true,
    .moe = true,
    .experts_class = "DeepseekV4Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .unloaded_key = "mtp.",
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
