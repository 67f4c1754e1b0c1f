// minimax_m3_vl_text (the language model of MiniMax-M3, whose published file is the multimodal
// minimax_m3_vl wrapper: Note [Multimodal configs] in model_config.cpp): transformers'
// MiniMaxM3VLTextConfig (vocab 200064, hidden 6144, 60 layers, 64 heads and 4 key-value heads of
// 128, 128 experts of 3072, top 4, one shared expert of 3072, dense MLPs of 12288, max positions
// 524288, rms_norm_eps 1e-6, rope_theta 5e6, untied; an indexer of 4 heads of 128 picking 16
// blocks of 128 keys) and modeling_minimax_m3_vl.py, MiniMaxM3VLForCausalLM. Names and shapes, h
// hidden, H heads, K key-value heads, d head_dim, m index_n_heads, e index_head_dim, E experts, F
// intermediate_size, S shared_intermediate_size, D dense_intermediate_size:
//   model.embed_tokens.weight                            [V, h]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight       q [H d, h], k/v [K d, h], o [h, H d]
//   model.layers.N.self_attn.{q,k}_norm.weight           [d]  (per head, (1 + w), before RoPE)
//   model.layers.N.self_attn.indexer.q_proj.weight       [m e, h]   (the layers layer_types marks
//   model.layers.N.self_attn.indexer.k_proj.weight       [e, h]      "minimax_m3_sparse" only)
//   model.layers.N.self_attn.indexer.{q,k}_norm.weight   [e]
//   model.layers.N.mlp.gate_up_proj.weight               [2 D, h]   (dense layers: [gate; up])
//   model.layers.N.mlp.down_proj.weight                  [h, D]
//   model.layers.N.mlp.gate.weight                       [E, h]     (sparse layers: the router,
//   model.layers.N.mlp.experts.gate_up_proj              [E, 2F, h]  then the experts, then the
//   model.layers.N.mlp.experts.down_proj                 [E, h, F]   shared expert)
//   model.layers.N.mlp.shared_experts.gate_up_proj.weight [2 S, h], down_proj [h, S]
//   model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight [h], lm_head [V, h]
// Every norm is Gemma's RMSNorm (x / rms(x) times 1 + w, w started at zero). Every MLP (dense,
// shared, each expert) is SwiGLU-OAI, GPT-OSS's clamped GLU on [gate; up] halves: (clamp(up, -7,
// 7) + 1) * g * sigmoid(1.702 g), g = clamp(gate, max 7). The router's sigmoid scores pick the
// top k (its e_score_correction_bias, a buffer, counted aside), renormalized; the routed output
// times routed_scaling_factor, plus the shared expert's. The sparse layers' lightning indexer
// (MiniMax Sparse Attention) scores every earlier key, max-pools the scores per block of
// index_block_size keys and keeps, per query and indexer head, the top index_topk_blocks blocks
// (the index_local_blocks blocks ending at the query forced among them): the attention then reads
// index_topk_blocks x index_block_size keys a query. It is priced as DeepSeek Sparse Attention is
// (Note [Lightning indexer trace] in latent_attention.h): the scoring one fused call reading every
// key, the attention a band of those keys (LayerKind::window). The checkpoints' multi-token
// prediction modules (mtp.*) are skipped, as transformers skips them.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kMinimaxM3VlTextFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "MiniMaxM3VL";
constexpr const char* kSparseType = "minimax_m3_sparse";  // transformers' layer type

// SwiGLU-OAI's gain and clamp (MiniMaxM3VLTextConfig's swiglu_alpha, swiglu_limit). The trace
// multiplies and clamps by these; a file's own values are read and not kept: they change no
// shape, count or op.
constexpr double kSwigluAlpha = 1.702;
constexpr double kSwigluLimit = 7.0;
// A block of keys or a count of blocks beyond 2^20 is no model's; bounded so that their product
// (index_topk) cannot overflow.
constexpr int64_t kMaxIndexBlocks = int64_t{1} << 20;

// ---- config.json -----------------------------------------------------------------------------

// MiniMaxM3VLTextConfig's attribute_map: num_experts is num_local_experts. A file giving both
// with different values is refused (which one transformers keeps depends on their order).
int64_t experts_of(const ConfigFields& f) {
  if (!f.has("num_experts")) return f.integer("num_local_experts", 128);
  const int64_t v = f.integer("num_experts");
  if (f.has("num_local_experts") && f.integer("num_local_experts") != v) {
    f.fail("num_experts",
           std::to_string(v) + " differs from num_local_experts " +
               std::to_string(f.integer("num_local_experts")) +
               " (MiniMaxM3VLTextConfig maps one onto the other); expected one value");
  }
  return v;
}

// A per-layer list of strings, each `yes` or `no` (transformers' validate_layer_type wants one
// per layer): true where `yes`.
std::vector<bool> layer_strings(const ConfigFields& f, const char* key, int64_t layers,
                                const char* yes, const char* no) {
  const nlohmann::json& v = f.raw(key);
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail(key, "expected a list of num_hidden_layers = " + std::to_string(layers) +
                    " entries, \"" + yes + "\" or \"" + no + "\"");
  }
  std::vector<bool> out;
  for (const nlohmann::json& e : v) {
    if (!e.is_string() || (e != yes && e != no)) {
      f.fail(key, e.dump().substr(0, 60) +
                      " is not built by transformers' MiniMax-M3; expected \"" + yes + "\" or \"" +
                      no + "\"");
    }
    out.push_back(e == yes);
  }
  return out;
}

// A legacy per-layer list of flags (moe_layer_freq, sparse_attention_freq), read as the config
// class reads it: an entry that is true or nonzero marks the layer. Errors name `field`, after
// `inner` (the nested key's name and ": ", or nothing).
std::vector<bool> layer_flags(const ConfigFields& f, const char* field, const std::string& inner,
                              const nlohmann::json& v, int64_t layers) {
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail(field, inner + "expected a list of num_hidden_layers = " + std::to_string(layers) +
                      " flags, 0 or 1 (true or false) each");
  }
  std::vector<bool> out;
  for (const nlohmann::json& e : v) {
    if (!e.is_boolean() && !e.is_number_integer()) {
      f.fail(field,
             inner + e.dump().substr(0, 40) + " is not a flag, expected 0, 1, true or false");
    }
    out.push_back(e.is_boolean() ? e.get<bool>() : e.get<int64_t>() != 0);
  }
  return out;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // MiniMaxM3VLTextConfig's defaults are MiniMax-M3's sizes: a file may leave any of them out.
  models::parse_rotary_decoder(f, c,
                               {.sizes = models::RotaryDecoderSizes{200064, 6144, 3072, 60, 64, 4},
                                .max_position_embeddings = 524288,
                                .rms_norm_eps = 1e-6,
                                .rope_theta = 5e6,  // default_theta
                                .head_dim = 128});
  // __post_init__ sets hidden_act to silu whatever the file says (the checkpoints declare
  // "swigluoai"): every MLP computes SwiGLU-OAI inline.
  c.hidden_act = "silu";
  // The rotated width: partial_rotary_factor (here or in rope_parameters, which parse_model_config
  // reads after this and which wins), else MiniMax's rotary_dim, as MiniMax's code and vLLM read
  // the file. transformers' rotary embedding reads the factor only (1: the whole head), so a file
  // with rotary_dim and no factor rotates all of each head there; it changes no shape, only RoPE's
  // elementwise work (docs/models.md).
  if (f.has("partial_rotary_factor")) {
    c.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  } else if (f.has("rotary_dim") && c.head_dim > 0) {  // head_dim <= 0: validate() refuses
    const int64_t rotary = f.integer("rotary_dim");
    if (rotary <= 0 || rotary > c.head_dim || rotary % 2 != 0) {
      f.fail("rotary_dim", "must be even and in (0, head_dim = " + std::to_string(c.head_dim) +
                               "], got " + std::to_string(rotary));
    }
    c.partial_rotary_factor = models::rotary_fraction(rotary, c.head_dim);
  }

  // The MoE block: the router, the experts (intermediate_size wide) and always one shared expert.
  c.num_local_experts = experts_of(f);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 4);
  c.shared_expert_intermediate_size = f.integer("shared_intermediate_size", 3072);
  if (c.shared_expert_intermediate_size <= 0) {
    f.fail("shared_intermediate_size",
           std::to_string(c.shared_expert_intermediate_size) +
               ", expected a positive width (MiniMaxM3VLSparseMoeBlock always builds its shared "
               "expert)");
  }
  models::require_built_value(f, "n_shared_experts", 1, "MiniMax-M3",
                              "one shared expert of shared_intermediate_size");
  models::require_built_value(f, "use_routing_bias", true, "MiniMax-M3",
                              "the router's e_score_correction_bias");
  models::require_built_value(f, "scoring_func", "sigmoid", "MiniMax-M3", "a sigmoid router");
  models::require_built_value(f, "use_qk_norm", true, "MiniMax-M3",
                              "q_norm and k_norm on every layer");
  // Values that change no shape or count of the expected-load trace: read, not kept.
  f.number("routed_scaling_factor", 2.0);
  f.number("swiglu_alpha", kSwigluAlpha);
  f.number("swiglu_limit", kSwigluLimit);

  // Dense and sparse layers: mlp_layer_types, else the legacy moe_layer_freq (popped by the class
  // whatever mlp_layer_types says), else every layer sparse.
  const int64_t layers = c.num_hidden_layers;
  std::vector<bool> sparse_mlp(static_cast<size_t>(layers), true);
  const bool freq = f.has("moe_layer_freq");
  if (f.has("mlp_layer_types")) {
    sparse_mlp = layer_strings(f, "mlp_layer_types", layers, "sparse", "dense");
  } else if (freq) {
    sparse_mlp = layer_flags(f, "moe_layer_freq", "", f.raw("moe_layer_freq"), layers);
  }
  for (int64_t i = 0; i < layers; ++i) {
    if (!sparse_mlp[static_cast<size_t>(i)]) c.dense_layers.push_back(i);
  }
  c.dense_intermediate_size = f.integer("dense_intermediate_size", 12288);
  if (!c.dense_layers.empty() && c.dense_intermediate_size <= 0) {
    f.fail("dense_intermediate_size", std::to_string(c.dense_intermediate_size) +
                                          ", expected a positive width for the dense layers");
  }

  // The indexer: the flat keys, over which the legacy sparse_attention_config's win (the class
  // sets them after its own fields).
  const nlohmann::json* sparse = nullptr;
  if (f.has("sparse_attention_config")) {
    sparse = &f.raw("sparse_attention_config");
    if (!sparse->is_object()) {
      f.fail("sparse_attention_config", "expected an object or null, got " + sparse->dump());
    }
  }
  const auto index_field = [&](const char* flat, const char* legacy, int64_t dflt) {
    if (sparse != nullptr && sparse->contains(legacy)) {
      (void)f.has(flat);  // read, and overridden as the class overrides it
      const ConfigFields sf(*sparse, f.source());
      return sf.integer(legacy);
    }
    return f.integer(flat, dflt);
  };
  c.index_n_heads = index_field("index_n_heads", "sparse_num_index_heads", 4);
  c.index_head_dim = index_field("index_head_dim", "sparse_index_dim", 128);
  const int64_t block = index_field("index_block_size", "sparse_block_size", 128);
  const int64_t blocks = index_field("index_topk_blocks", "sparse_topk_blocks", 16);
  const int64_t local = index_field("index_local_blocks", "sparse_local_block", 1);
  const std::pair<const char*, int64_t> positive[] = {{"index_n_heads", c.index_n_heads},
                                                      {"index_head_dim", c.index_head_dim},
                                                      {"index_block_size", block},
                                                      {"index_topk_blocks", blocks}};
  for (const auto& [key, v] : positive) {
    if (v <= 0 || v > kMaxIndexBlocks) {
      f.fail(key, std::to_string(v) + ", expected a positive integer up to " +
                      std::to_string(kMaxIndexBlocks));
    }
  }
  // Its rotated channels pair up (rotate_half), whichever of e and the heads' r it rotates.
  if (c.index_head_dim % 2 != 0) {
    f.fail("index_head_dim",
           std::to_string(c.index_head_dim) +
               ", expected an even width (the indexer rotates pairs of channels)");
  }
  // The local blocks are forced among the top blocks (their scores set to infinity): they change
  // no count of keys, only which blocks are read.
  if (local < 0) f.fail("index_local_blocks", std::to_string(local) + ", expected >= 0");
  c.index_block_size = block;
  c.index_topk = blocks * block;

  // Which layers run the indexer: layer_types, else the legacy sparse_attention_freq, else none.
  std::vector<bool> sparse_attention(static_cast<size_t>(layers), false);
  if (f.has("layer_types")) {
    sparse_attention = layer_strings(f, "layer_types", layers, kSparseType, "full_attention");
  } else if (sparse != nullptr && sparse->contains("sparse_attention_freq")) {
    sparse_attention =
        layer_flags(f, "sparse_attention_config",
                    "sparse_attention_freq: ", sparse->at("sparse_attention_freq"), layers);
  }
  for (int64_t i = 0; i < layers; ++i) {
    c.layer_types.push_back(sparse_attention[static_cast<size_t>(i)] ? AttentionType::kSparse
                                                                     : AttentionType::kFull);
  }
  if (std::find(sparse_attention.begin(), sparse_attention.end(), true) == sparse_attention.end()) {
    return;
  }
  // The block mask repeats each indexer head's selection over num_attention_heads / index_n_heads
  // query heads (build_block_mask), so the indexer heads must divide them.
  if (c.num_attention_heads > 0 && c.num_attention_heads % c.index_n_heads != 0) {
    f.fail("index_n_heads", std::to_string(c.index_n_heads) +
                                " does not divide num_attention_heads " +
                                std::to_string(c.num_attention_heads) +
                                " (each indexer head selects for a group of query heads)");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // intermediate_size: the experts' width
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["num_local_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["shared_intermediate_size"] = c.shared_expert_intermediate_size;
  j["dense_intermediate_size"] = c.dense_intermediate_size;
  nlohmann::json mlp = nlohmann::json::array(), types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    mlp.push_back(k.ffn == FfnKind::kMoe ? "sparse" : "dense");
    types.push_back(k.attention == AttentionType::kSparse ? kSparseType : "full_attention");
  }
  j["mlp_layer_types"] = mlp;
  j["layer_types"] = types;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_block_size"] = c.index_block_size;
  j["index_topk_blocks"] = c.index_block_size > 0 ? c.index_topk / c.index_block_size : 0;
}

// ---- model -----------------------------------------------------------------------------------

// MiniMaxM3VLRMSNorm: Gemma's, scaling by (1 + weight).
ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>(std::string(kPrefix) + "RMSNorm", dim, c.norm_eps,
                                                 o);
}

// SwiGLU-OAI on the two halves of a gate_up projection (MiniMaxM3VLDenseMLP.forward,
// MiniMaxM3VLExperts._apply_gate): each clamp traced as a minimum (and a maximum), as OLMo's
// clip_qkv.
Tensor swiglu_oai(const Tensor& gate, const Tensor& up) {
  const Tensor g = binary(BinaryOp::kMinimum, gate, Scalar(kSwigluLimit));
  const Tensor u = binary(BinaryOp::kMinimum, binary(BinaryOp::kMaximum, up, Scalar(-kSwigluLimit)),
                          Scalar(kSwigluLimit));
  return mul(add(u, 1.0), mul(g, sigmoid(mul(g, kSwigluAlpha))));
}

// MiniMaxM3VLDenseMLP: gate_up_proj [2 width, h] ([gate; up]), down_proj [h, width]; the dense
// layers' MLP and the shared expert.
class DenseMlp : public Module {
 public:
  DenseMlp(const ModelConfig& c, int64_t width, const TensorOptions& o)
      : Module(std::string(kPrefix) + "DenseMLP"), width_(width) {
    register_module("gate_up_proj", std::make_shared<Linear>(c.hidden_size, 2 * width, false, o));
    register_module("down_proj", std::make_shared<Linear>(width, c.hidden_size, false, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor gu = child("gate_up_proj")->call(x);
    return child("down_proj")
        ->call(swiglu_oai(narrow(gu, -1, 0, width_), narrow(gu, -1, width_, width_)));
  }

 private:
  int64_t width_;
};

// MiniMaxM3VLExperts: GroupedExperts' [E, 2F, h] and [E, h, F] whose activation is SwiGLU-OAI on
// both halves (GroupedExperts' own forward applies an activation to the gate half alone).
class Experts : public GroupedExperts {
 public:
  Experts(const ModelConfig& c, const TensorOptions& o)
      : GroupedExperts(
            std::string(kPrefix) + "Experts", c.num_local_experts, c.hidden_size,
            c.intermediate_size, Layout::kOutIn, /*bias=*/false,
            [](const Tensor& x) { return x; },  // unused: forward below applies the GLU
            o) {}
  // x [E, n, h] -> [E, n, h], one batched GEMM per projection.
  Tensor forward(const Tensor& x) override {
    const Tensor gu = bmm(x, transpose(parameter("gate_up_proj"), 1, 2));  // [E, n, 2F]
    const Tensor act = swiglu_oai(narrow(gu, 2, 0, ffn()), narrow(gu, 2, ffn(), ffn()));
    return bmm(act, transpose(parameter("down_proj"), 1, 2));
  }
};

// MiniMaxM3VLTopKRouter: weight [E, h] (its e_score_correction_bias is a buffer, counted aside:
// ModelFamily::router_score_bias). Returns the routing weights [T, k] of tokens `flat` [T, h].
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "TopKRouter"), top_k_(c.num_experts_per_tok) {
    register_parameter("weight", empty({c.num_local_experts, c.hidden_size}, o));
  }
  Tensor forward(const Tensor& flat) override {
    // F.linear in the weight's dtype, then sigmoid scores in float32; the bias joins them for the
    // top-k choice only, and narrow stands in for topk's gather (Note [Expected-load MoE] in
    // models.h); the k weights renormalized.
    const Tensor scores = sigmoid(to(linear(flat, parameter("weight")), DType::kFloat32));
    Tensor w = narrow(scores, 1, 0, top_k_);
    w = div(w, sum(w, {-1}, /*keepdim=*/true));
    return to(w, flat.dtype());
  }

 private:
  int64_t top_k_;
};

// MiniMaxM3VLSparseMoeBlock: gate, experts, shared_experts. Its forward runs the shared expert
// first, then the router and the routed experts, whose output is multiplied by
// routed_scaling_factor (traced as a multiply by 1: the factor changes no count and is not kept)
// before the shared output joins it.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "SparseMoeBlock") {
    gate = register_module("gate", std::make_shared<Router>(c, o));
    experts = register_module("experts", std::make_shared<Experts>(c, o));
    shared_experts = register_module(
        "shared_experts", std::make_shared<DenseMlp>(c, c.shared_expert_intermediate_size, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    const Tensor shared = shared_experts->call(flat);
    const Tensor routed = models::expected_load_experts(*experts, flat, gate->call(flat));
    return view(add(mul(routed, 1.0), shared), {b, s, h});
  }
  std::shared_ptr<Experts> experts;
  ModulePtr gate, shared_experts;
};

// MiniMaxM3VLIndexer: q_proj [m e, h], k_proj [e, h] (one key head), q_norm and k_norm [e].
// Note [Lightning indexer trace] in latent_attention.h: its scoring, every query against every
// earlier key per indexer head then a max over each block of keys, is one fused kernel in
// training (MiniMax's MSA library; transformers' eager scores, under no gradient, are not what a
// trainer runs), traced as one causal scaled_dot_product_attention of m heads of e channels
// against the single key head. Its one-channel "value" stands for the per-block max the kernel
// writes (an epilogue of the score product, priced at its rate: planner/cost/block_cost.cpp).
class Indexer : public Module {
 public:
  Indexer(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "Indexer"), heads_(c.index_n_heads), dim_(c.index_head_dim) {
    register_module("q_proj",
                    std::make_shared<Linear>(c.hidden_size, heads_ * dim_, /*bias=*/false, o));
    register_module("k_proj", std::make_shared<Linear>(c.hidden_size, dim_, /*bias=*/false, o));
    register_module("q_norm", norm(dim_, c, o));
    register_module("k_norm", norm(dim_, c, o));
  }
  // x [B, S, h] and the model's rotary tables [1, 1, S, r] -> the scores' stand-in [B, m, S, 1].
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // cos[..., :index_head_dim]: the indexer rotates min(r, e) of its channels.
    const int64_t rot = std::min(cos_t.size(-1), dim_);
    const Tensor c = rot == cos_t.size(-1) ? cos_t : narrow(cos_t, -1, 0, rot);
    const Tensor s = rot == sin_t.size(-1) ? sin_t : narrow(sin_t, -1, 0, rot);
    const Tensor q = models::apply_rotary(
        child("q_norm")->call(models::split_heads(child("q_proj")->call(x), heads_, dim_)), c, s);
    const Tensor k = models::apply_rotary(
        child("k_norm")->call(models::split_heads(child("k_proj")->call(x), 1, dim_)), c, s);
    return scaled_dot_product_attention(q, k, narrow(k, -1, 0, 1), Tensor(), 0.0,
                                        /*is_causal=*/true, std::nullopt, /*enable_gqa=*/true);
  }

 private:
  int64_t heads_, dim_;
};

// MiniMaxM3VLAttention: q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, then the indexer on
// sparse layers (the order of its __init__).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj = register_module("q_proj", std::make_shared<Linear>(h, q, false, o));
    k_proj = register_module("k_proj", std::make_shared<Linear>(h, kv, false, o));
    v_proj = register_module("v_proj", std::make_shared<Linear>(h, kv, false, o));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, h, false, o));
    q_norm = register_module("q_norm", norm(head_dim_, c, o));
    k_norm = register_module("k_norm", norm(head_dim_, c, o));
    if (kind.attention == AttentionType::kSparse) {
      // The indexer's index_topk_blocks x index_block_size keys bound each query's (a band, as
      // DeepSeek Sparse Attention's top-k is priced).
      window_ = kind.window;
      indexer = register_module("indexer", std::make_shared<Indexer>(c, o));
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // Normed per head over head_dim, then rotated on their first r channels.
    const Tensor q = models::apply_rotary(
        q_norm->call(models::split_heads(q_proj->call(x), heads_, head_dim_)), cos_t, sin_t);
    const Tensor k = models::apply_rotary(
        k_norm->call(models::split_heads(k_proj->call(x), kv_heads_, head_dim_)), cos_t, sin_t);
    const Tensor v = models::split_heads(v_proj->call(x), kv_heads_, head_dim_);
    // The indexer selects each query's blocks before the attention reads them.
    if (indexer) (void)indexer->run(x, cos_t, sin_t);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    return o_proj->call(models::merge_heads(out));
  }
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  ModulePtr q_norm, k_norm;
  std::shared_ptr<Indexer> indexer;  // sparse layers only

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::optional<int64_t> window_;
};

// MiniMaxM3VLDecoderLayer, made empty and filled once it sits in its ModuleList (Note [Filling
// repeated blocks after registration], tensor/models/blocks.h): self_attn, mlp, input_layernorm,
// post_attention_layernorm.
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    self_attn = register_module("self_attn", std::make_shared<Attention>(c, kind, o, training));
    if (kind.ffn == FfnKind::kMoe) {
      mlp = register_module("mlp", std::make_shared<SparseMoe>(c, o));
    } else {
      mlp = register_module("mlp", std::make_shared<DenseMlp>(c, c.dense_intermediate_size, o));
    }
    input_layernorm = register_module("input_layernorm", norm(c.hidden_size, c, o));
    post_attention_layernorm =
        register_module("post_attention_layernorm", norm(c.hidden_size, c, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor h = add(x, self_attn->run(input_layernorm->call(x), cos_t, sin_t));
    return add(h, mlp->call(post_attention_layernorm->call(h)));
  }
  std::shared_ptr<Attention> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm;
};

// MiniMaxM3VLTextModel: embed_tokens (padding_idx = pad_token_id), layers, norm, rotary_emb (its
// inv_freq a non-persistent buffer of r / 2); empty until build(), like DecoderLayer.
class Model : public Module {
 public:
  Model() : Module(std::string(kPrefix) + "TextModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    // Configs built in code: only what this family builds.
    bool types_built = true;
    for (const AttentionType t : c.layer_types) {
      types_built = types_built && (t == AttentionType::kFull || t == AttentionType::kSparse);
    }
    SP_CHECK(types_built && c.nope_layers.empty() && c.shared_indexer_layers.empty() &&
                 c.kv_lora_rank == 0 && c.shared_expert_intermediate_size > 0 &&
                 (c.dense_layers.empty() || c.dense_intermediate_size > 0),
             "minimax_m3_vl_text builds full or block-sparse attention with its own indexer on "
             "every layer that rotates q and k, and a shared expert beside the routed ones; "
             "expected no other layer types, nope_layers, shared_indexer_layers or latent "
             "attention, a positive shared_expert_intermediate_size, and a positive "
             "dense_intermediate_size for dense layers");
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto list = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(list->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module("norm", norm(c.hidden_size, c, o));
    rotary_emb = register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                                   std::string(kPrefix) + "RotaryEmbedding",
                                                   models::rotary_dim(c), c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm_->call(h);
  }
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  ModulePtr norm_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Model>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                   training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"shared_expert_intermediate_size", "shared_intermediate_size"},
                                    {"dense_layers", "mlp_layer_types"},
                                    {"index_topk", "index_topk_blocks"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3): q, k and v column-parallel by heads, o_proj
// row-parallel; each fused gate_up_proj (the dense MLPs', the shared expert's) column-parallel
// over its two halves, [gate; up], so that every rank holds its gates beside their ups (as
// GLM-4's), down_proj row-parallel; the routed experts by expert parallelism or split within
// (style "experts": the gate and up halves of each expert's F split alike); the embedding by
// vocabulary rows and the output layer by vocabulary. Replicated: the router, the per-head q/k
// norms (one [d] weight for every head) and the indexer (4 heads against one key head: each rank
// runs all of it, as DeepSeek Sparse Attention's). transformers' own base_model_tp_plan gathers
// the q/k/v outputs instead (colwise_gather_output), which Megatron's layout does not need.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_up_proj", "colwise", 2},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_up_proj", "colwise", 2},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// MiniMaxM3VLPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the pad_token_id row zero), the fused experts and the router's
// weight normal, every MiniMaxM3VLRMSNorm weight zero (it scales by 1 + w).
constexpr InitRule kOwnInitRules[] = {{"MiniMaxM3VLTopKRouter", "weight", InitFill::kNormal},
                                      {"MiniMaxM3VLRMSNorm", "weight", InitFill::kZeros}};
constexpr auto kInitRules =
    models::concat_init_rules(kOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kMinimaxM3VlTextFamily{
    .model_type = "minimax_m3_vl_text",
    .hf_class_prefix = kPrefix,
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .moe = true,
    .experts_class = "MiniMaxM3VLExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,  // mlp.gate.e_score_correction_bias
    .unloaded_key = "mtp",
    .block_sparse_attention = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
