// longcat_flash (Meituan's LongCat-Flash-Chat; Meituan LongCat Team 2025, "LongCat-Flash
// Technical Report", arXiv:2509.01322): transformers 5's LongcatFlashConfig and
// modeling_longcat_flash.py. Each of the num_layers decoder layers runs two multi-head latent
// attention blocks (tensor/models/latent_attention.h, DeepSeek-V3's with LongCat's latent scales)
// and two dense SwiGLU MLPs, plus one MoE block that reads the first MLP's input and whose output
// joins the layer's at its end (the "shortcut-connected MoE", report §2.2); its router also picks
// among zero-computation experts (Note [Zero-computation experts] in tensor/models/models.h).
// Names and shapes, h hidden, n heads, E n_routed_experts, Z zero_expert_num, Fe
// expert_ffn_hidden_size, F ffn_hidden_size, in named_parameters order:
//   model.embed_tokens.weight                               [V, h]
//   model.layers.N.mlp.experts.gate_up_proj                 [E + Z, 2 Fe, h]  (Z slices idle)
//   model.layers.N.mlp.experts.down_proj                    [E, h, Fe]
//   model.layers.N.mlp.router.classifier.weight             [E + Z, h]
//   model.layers.N.self_attn.{0,1}.q_a_proj ... o_proj      latent attention (latent_attention.h)
//   model.layers.N.mlps.{0,1}.{gate,up,down}_proj.weight    [F, h], [F, h], [h, F]
//   model.layers.N.input_layernorm.{0,1}.weight             [h]
//   model.layers.N.post_attention_layernorm.{0,1}.weight    [h]
//   model.norm.weight [h], lm_head.weight [V, h] (untied by default)
// The router's e_score_correction_bias [E + Z] is a buffer (counted aside, parameters_beyond_model)
// and the checkpoints' multi-token prediction module (model.mtp.*) is skipped, as transformers
// skips it. A layer of two attention blocks is one planner layer kind ("moe"): the planner traces
// the built layer, both blocks included (docs/models.md, "longcat_flash").
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/limits.h"
#include "tensor/models/blocks.h"
#include "tensor/models/deepseek_config.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kLongcatFlashFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "LongcatFlash";

// LongcatFlashConfig's attribute_map: `alias` sets the field `key` names (intermediate_size is
// ffn_hidden_size, num_local_experts n_routed_experts, num_experts_per_tok moe_topk). A file
// giving both with different values is refused: which one transformers keeps depends on the
// order it sets them.
int64_t aliased_integer(const ConfigFields& f, const char* key, const char* alias, int64_t dflt) {
  if (!f.has(alias)) return f.integer(key, dflt);
  const int64_t v = f.integer(alias);
  if (f.has(key) && f.integer(key) != v) {
    f.fail(alias, std::to_string(v) + " differs from " + key + " " +
                      std::to_string(f.integer(key)) +
                      " (LongcatFlashConfig maps one onto the other); expected one value");
  }
  return v;
}

// A rope_scaling object of type "default": no scaling.
bool names_default_rope(const nlohmann::json& r) {
  for (const char* key : {"rope_type", "type"}) {
    if (r.is_object() && r.contains(key)) return r.at(key) == "default";
  }
  return false;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // LongcatFlashConfig's defaults are LongCat-Flash-Chat's sizes.
  c.vocab_size = f.integer("vocab_size", 131072);
  c.hidden_size = f.integer("hidden_size", 6144);
  c.num_hidden_layers = f.integer("num_layers", 28);
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1 to " +
                             std::to_string(kMaxLayers) + " (docs/user-guide.md \"Limits\")");
  }
  // LongcatFlashModel sets num_hidden_layers to 2 x num_layers (one per attention block, for its
  // cache) whatever the file says: read and ignored.
  (void)f.has("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads", 64);
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  if (f.is_null("num_key_value_heads")) c.num_key_value_heads = c.num_attention_heads;
  // kv_b_proj makes keys and values for every head; grouping them again (repeat_kv) would not
  // match the queries' heads.
  if (c.num_key_value_heads != c.num_attention_heads) {
    f.fail("num_key_value_heads",
           std::to_string(c.num_key_value_heads) + ", expected num_attention_heads " +
               std::to_string(c.num_attention_heads) +
               " (the latent attention expands keys and values to every head)");
  }
  c.max_position_embeddings = f.integer("max_position_embeddings", 131072);
  c.hidden_act = f.string("hidden_act", "silu");
  if (c.hidden_act == "xielu") {
    f.fail("hidden_act",
           "'xielu' has learned parameters in every MLP and in the experts, which this family "
           "does not build; expected silu, gelu, relu or their variants");
  }
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  // The legacy keys (rope_parameters, when given, is read after this, Note [rope_parameters]).
  c.rope_theta = f.number("rope_theta", 1e7);  // LongcatFlashConfig.default_theta
  if (f.has("rope_scaling") && !names_default_rope(f.raw("rope_scaling"))) {
    c.rope_scaling = parse_rope_scaling(f);
  }
  // The rotary tables are head_dim wide and rotate all qk_rope_head_dim channels of q and k.
  bool partial = f.number("partial_rotary_factor", 1.0) != 1.0;
  if (f.has("rope_parameters") && f.raw("rope_parameters").is_object() &&
      f.raw("rope_parameters").contains("partial_rotary_factor")) {
    const nlohmann::json& v = f.raw("rope_parameters").at("partial_rotary_factor");
    partial = partial || !v.is_number() || v.get<double>() != 1.0;
  }
  if (partial) {
    f.fail("partial_rotary_factor",
           "rotates part of qk_rope_head_dim, which LongcatFlashMLA does not; expected 1");
  }

  // Latent attention: LongcatFlashMLA always goes through the query latent (its scale divides
  // by q_lora_rank), so a null rank, which transformers cannot build, is refused.
  if (f.is_null("q_lora_rank")) {
    f.fail("q_lora_rank",
           "is null; LongcatFlashMLA always projects queries through the latent "
           "(mla_scale_q_lora divides by it): expected a rank");
  }
  models::parse_latent_attention(f, c, {});
  if (c.q_lora_rank <= 0) {
    f.fail("q_lora_rank", "must be a positive integer, got " + std::to_string(c.q_lora_rank));
  }
  // head_dim sizes the rotary tables (LongcatFlashRotaryEmbedding), which must be as wide as the
  // rotated slice they multiply; qk_head_dim sizes q_b_proj's heads, which split into nope + rope.
  const int64_t head_dim = f.integer("head_dim", 64);
  if (head_dim != c.qk_rope_head_dim) {
    f.fail("head_dim", std::to_string(head_dim) + ", expected qk_rope_head_dim " +
                           std::to_string(c.qk_rope_head_dim) +
                           " (the rotary tables' width is the rotated slice's)");
  }
  if (f.has("qk_head_dim") && f.integer("qk_head_dim") != c.qk_nope_head_dim + c.qk_rope_head_dim) {
    f.fail("qk_head_dim", std::to_string(f.integer("qk_head_dim")) +
                              ", expected qk_nope_head_dim + qk_rope_head_dim = " +
                              std::to_string(c.qk_nope_head_dim + c.qk_rope_head_dim) +
                              " (each head's query splits into those two parts)");
  }
  // LongcatFlashMLA scales the latents always; a file saying otherwise is another model.
  models::require_built_value(f, "mla_scale_q_lora", true, "longcat_flash",
                              "the query latent scale always");
  models::require_built_value(f, "mla_scale_kv_lora", true, "longcat_flash",
                              "the key-value latent scale always");

  // The dense MLPs and the experts.
  c.dense_intermediate_size = aliased_integer(f, "ffn_hidden_size", "intermediate_size", 12288);
  c.intermediate_size = f.integer("expert_ffn_hidden_size", 2048);
  // The original release's config class also saved moe_intermediate_size: it must be the
  // experts' width, which transformers reads from expert_ffn_hidden_size.
  models::require_built_value(f, "moe_intermediate_size", c.intermediate_size, "longcat_flash",
                              "experts of expert_ffn_hidden_size");
  c.num_local_experts = aliased_integer(f, "n_routed_experts", "num_local_experts", 512);
  c.num_experts_per_tok = aliased_integer(f, "moe_topk", "num_experts_per_tok", 12);
  // `zero_expert_num or 0`: null is none.
  c.zero_experts = f.is_null("zero_expert_num") ? 0 : f.integer("zero_expert_num", 256);
  if (c.zero_experts < 0) {
    f.fail("zero_expert_num", "must be >= 0 (null: none), got " + std::to_string(c.zero_experts));
  }
  if (c.num_local_experts <= 0) {
    // LongcatFlashExperts then registers no weights and every pick is a zero expert: a model
    // without a feed-forward worth planning as MoE.
    f.fail("n_routed_experts", "must be positive, got " + std::to_string(c.num_local_experts));
  }
  models::require_built_value(f, "zero_expert_type", "identity", "longcat_flash",
                              "identity zero experts");
  // router_bias gives the classifier a bias its forward never adds (F.linear without it): not
  // built; the released files say false.
  models::require_built_value(f, "router_bias", false, "longcat_flash",
                              "the router without the bias its forward would ignore");
  // Routing values that change no shape or work of the expected-load trace.
  f.number("routed_scaling_factor", 6.0);
  f.boolean("norm_topk_prob", false);  // the original code's; transformers never renormalizes
  // The multi-token prediction module of the checkpoints (model.mtp.*): not built by
  // transformers (_keys_to_ignore_on_load_unexpected), not priced.
  if (f.integer("num_nextn_predict_layers", 0) < 0) {
    f.fail("num_nextn_predict_layers", "must be >= 0");
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["ffn_hidden_size"] = c.dense_intermediate_size;
  j["expert_ffn_hidden_size"] = c.intermediate_size;
  j["num_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["attention_dropout"] = c.attention_dropout;
  j["attention_bias"] = c.qkv_bias;
  j["q_lora_rank"] = c.q_lora_rank;
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["head_dim"] = c.head_dim;
  j["n_routed_experts"] = c.num_local_experts;
  j["moe_topk"] = c.num_experts_per_tok;
  j["zero_expert_num"] = c.zero_experts;
}

// LongcatFlashExperts: GroupedExperts whose gate_up_proj holds E + Z slices, as transformers 5
// sizes it, of which the first E compute (Note [Zero-computation experts] in models.h).
class Experts : public GroupedExperts {
 public:
  Experts(const ModelConfig& c, const TensorOptions& o)
      : GroupedExperts(
            std::string(kPrefix) + "Experts", c.num_local_experts, c.hidden_size,
            c.intermediate_size, Layout::kOutIn, false,
            [act = c.hidden_act](const Tensor& x) { return models::activation(act, x); }, o),
        act_(c.hidden_act) {
    TensorOptions p = o;
    p.requires_grad = false;  // a leaf, as GroupedExperts registers its own
    set_parameter(
        "gate_up_proj",
        empty({c.num_local_experts + c.zero_experts, 2 * c.intermediate_size, c.hidden_size}, p));
  }
  // x [E, n, h] -> [E, n, h], each projection one batched GEMM over the computing experts.
  Tensor forward(const Tensor& x) override {
    const Tensor w1 = narrow(parameter("gate_up_proj"), 0, 0, experts());
    const Tensor gu = bmm(x, transpose(w1, 1, 2));
    const Tensor gate = models::activation(act_, narrow(gu, 2, 0, ffn()));
    return bmm(mul(gate, narrow(gu, 2, ffn(), ffn())), transpose(parameter("down_proj"), 1, 2));
  }

 private:
  std::string act_;
};

// LongcatFlashTopkRouter: `classifier` [E + Z, h] without a bias, its logits F.linear of the
// float32 tokens and the float32 weight. e_score_correction_bias (a buffer: it only picks the top
// k) is counted aside.
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "TopkRouter") {
    classifier_ = register_module(
        "classifier",
        std::make_shared<Linear>(c.hidden_size, c.num_local_experts + c.zero_experts, false, o));
  }
  Tensor forward(const Tensor& x) override {
    return matmul(to(x, DType::kFloat32),
                  transpose(to(classifier_->weight(), DType::kFloat32), 0, 1));
  }

 private:
  std::shared_ptr<Linear> classifier_;
};

// LongcatFlashMoE (Note [Expected-load MoE] and Note [Zero-computation experts] in models.h):
// experts, then router.
class Moe : public Module {
 public:
  Moe(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "MoE"),
        experts_(c.num_local_experts),
        pickable_(c.num_local_experts + c.zero_experts),
        top_k_(c.num_experts_per_tok),
        // A token's picks of computing experts, k E / (E + Z), rounded down for the weighting
        // (exact for LongCat-Flash-Chat: 8 of 12).
        routed_k_(c.num_experts_per_tok * c.num_local_experts /
                  (c.num_local_experts + c.zero_experts)) {
    experts = register_module("experts", std::make_shared<Experts>(c, o));
    router = register_module("router", std::make_shared<Router>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    // Softmax over all E + Z experts in float32; narrow stands in for topk (the score-correction
    // bias only picks). routed_scaling_factor's product on [tokens, k] is not traced.
    const Tensor probs = softmax(router->call(flat), 1, DType::kFloat32);
    const Tensor weights = to(narrow(probs, 1, 0, top_k_), x.dtype());
    // Each computing expert on its expected share, ceil(tokens k / (E + Z)) tokens.
    const int64_t per_expert = (tokens * top_k_ + pickable_ - 1) / pickable_;
    const Tensor dispatched =
        contiguous(expand(unsqueeze(narrow(flat, 0, 0, per_expert), 0), {experts_, per_expert, h}));
    const Tensor out = reshape(experts->call(dispatched), {experts_ * per_expert, h});
    Tensor combined;
    if (routed_k_ > 0) {
      const Tensor routed = view(narrow(out, 0, 0, tokens * routed_k_), {tokens, routed_k_, h});
      combined = sum(mul(routed, unsqueeze(narrow(weights, 1, 0, routed_k_), -1)), {1});
    }
    if (top_k_ > routed_k_) {
      // The zero experts' picks: the token itself times each one's weight (nn.Identity).
      const Tensor zero_w = narrow(weights, 1, routed_k_, top_k_ - routed_k_);
      const Tensor kept = sum(mul(unsqueeze(flat, 1), unsqueeze(zero_w, -1)), {1});
      combined = combined.defined() ? add(combined, kept) : kept;
    }
    return view(combined, {b, s, h});
  }
  std::shared_ptr<Experts> experts;
  std::shared_ptr<Router> router;

 private:
  int64_t experts_, pickable_, top_k_, routed_k_;
};

// LongcatFlashDecoderLayer, made empty and filled by build() once it sits in its ModuleList
// (Note [Filling repeated blocks after registration] in blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module(std::string(kPrefix) + "DecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    const int64_t h = c.hidden_size;
    mlp_ = register_module("mlp", std::make_shared<Moe>(c, o));
    auto attns = register_module("self_attn", std::make_shared<ModuleList>());
    auto mlps = register_module("mlps", std::make_shared<ModuleList>());
    auto inputs = register_module("input_layernorm", std::make_shared<ModuleList>());
    auto posts = register_module("post_attention_layernorm", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i) {
      attn_[i] = attns->push_back(models::make_latent_attention(c, kind, kPrefix, o, training,
                                                                nullptr, /*query_gate=*/false,
                                                                /*latent_scales=*/true));
      mlps_[i] = mlps->push_back(std::make_shared<models::GatedMlp>(
          std::string(kPrefix) + "MLP", h, c.dense_intermediate_size, false, c.hidden_act, o));
      input_norm_[i] =
          inputs->push_back(std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
      post_norm_[i] =
          posts->push_back(std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor h = add(x, attn_[0]->run(input_norm_[0]->call(x), cos_t, sin_t));
    // The MoE reads the first MLP's input; its output joins the layer's output at the end.
    const Tensor n = post_norm_[0]->call(h);
    const Tensor shortcut = mlp_->call(n);
    h = add(h, mlps_[0]->call(n));
    h = add(h, attn_[1]->run(input_norm_[1]->call(h), cos_t, sin_t));
    return add(add(h, mlps_[1]->call(post_norm_[1]->call(h))), shortcut);
  }

 private:
  ModulePtr mlp_;
  std::shared_ptr<models::AttentionBlock> attn_[2];
  ModulePtr mlps_[2], input_norm_[2], post_norm_[2];
};

// LongcatFlashModel: embed_tokens, layers, norm, rotary_emb (its inv_freq a non-persistent
// buffer of head_dim / 2).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    // Configs built in code: every layer is this one layout (no dense, windowed or NoPE layers).
    SP_CHECK(c.dense_layers.empty() && c.layer_types.empty() && c.nope_layers.empty() &&
                 c.shared_expert_intermediate_size == 0 && c.partial_rotary_factor == 1,
             "longcat_flash builds every layer with two full latent attentions, two MLPs and the "
             "MoE block; expected no dense_layers, layer_types, nope_layers, shared expert or "
             "partial rotary factor");
    embed_tokens_ = register_module("embed_tokens",
                                    std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module(
        "norm", std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o));
    rotary_emb_ = register_module(
        "rotary_emb", std::make_shared<models::RotaryEmbedding>(
                          std::string(kPrefix) + "RotaryEmbedding", c.head_dim, c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_tokens_->call(ids);
    const auto [cos_t, sin_t] = rotary_emb_->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return norm_->call(h);
  }

 private:
  ModulePtr embed_tokens_, norm_;
  std::shared_ptr<models::RotaryEmbedding> rotary_emb_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"num_hidden_layers", "num_layers"},
                                    {"intermediate_size", "expert_ffn_hidden_size"},
                                    {"dense_intermediate_size", "ffn_hidden_size"},
                                    {"num_local_experts", "n_routed_experts"},
                                    {"num_experts_per_tok", "moe_topk"},
                                    {"zero_experts", "zero_expert_num"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3) with its MLA split: in both attention blocks the
// down projections (q_a_proj, kv_a_proj_with_mqa) and their norms replicated, the up projections
// (q_b_proj, kv_b_proj: contiguous per head) column-parallel by heads, o_proj row-parallel; both
// MLPs column- then row-parallel; the experts by expert parallelism or split within ("experts":
// gate and up halves each split, the idle slices with them); the router replicated; the
// embedding by vocabulary rows and the output layer by vocabulary.
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.mlp.experts", "experts"},
                                          {"model.layers.*.self_attn.*.q_b_proj", "colwise"},
                                          {"model.layers.*.self_attn.*.kv_b_proj", "colwise"},
                                          {"model.layers.*.self_attn.*.o_proj", "rowwise"},
                                          {"model.layers.*.mlps.*.gate_proj", "colwise"},
                                          {"model.layers.*.mlps.*.up_proj", "colwise"},
                                          {"model.layers.*.mlps.*.down_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

// _init_weights: PreTrainedModel's (Linear and Embedding normal with the padding row zero,
// RMSNorm one), the router's classifier normal, the experts' gate_up_proj and down_proj normal:
// the rotary decoders' rules.
const ModelFamily kLongcatFlashFamily{
    .model_type = "longcat_flash",
    .hf_class_prefix = kPrefix,
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .moe = true,
    .experts_class = "LongcatFlashExperts",
    .router_score_bias = ModelFamily::RouterBias::kOnMlpRouter,
    .unloaded_key = "model.mtp",
    .zero_experts = true,
    .attentions_per_layer = 2,  // self_attn.0 and self_attn.1
    .tp_plan = kTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
