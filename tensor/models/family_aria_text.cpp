// aria_text (Rhymes AI's Aria, rhymes-ai/Aria: "25.3B total, 3.9B active", the language model of
// the multimodal `aria` file; Li et al. 2024, "Aria: An Open Multimodal Native Mixture-of-Experts
// Model"): transformers 5's AriaTextConfig and modeling_aria.py (AriaTextForCausalLM). A Llama
// body whose every feed-forward is AriaTextMoELayer, a fine-grained mixture of experts: a Linear
// router, E routed experts of width F held as two grouped GEMMs (AriaGroupedExpertsGemm), and
// moe_num_shared_experts = n shared experts as one MLP of their summed width n F. h hidden, H
// heads and K key-value heads of d, E moe_num_experts, k moe_topk, F intermediate_size (each
// expert's width), V vocab_size; in named_parameters order:
//   model.embed_tokens.weight                                [V, h]  (padding_idx pad_token_id)
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight           q [H d, h], k/v [K d, h], o [h, H d]
//                                                            (biases on all four: attention_bias)
//   model.layers.N.mlp.router.weight                         [E, h]
//   model.layers.N.mlp.experts.fc1.weight                    [E, h, 2F]  each expert's [in, out]:
//   model.layers.N.mlp.experts.fc2.weight                    [E, F, h]   x @ W, no transpose
//   model.layers.N.mlp.shared_experts.{gate,up}_proj.weight  [n F, h]    (biases: mlp_bias)
//   model.layers.N.mlp.shared_experts.down_proj.weight       [h, n F]
//   model.layers.N.{input,post_attention}_layernorm.weight   [h]
//   model.norm.weight [h]; lm_head.weight [V, h], untied by default
// Routing (AriaExperts.route_tokens_to_experts): the top k of the router's logits and their
// softmax, both in the model's dtype (no softmax over all E, no float32). fc1's output is chunked
// into [projection; gate] and silu(projection) * gate feeds fc2: silu whatever hidden_act says
// (AriaExperts hard-codes it), while the shared experts' act_fn is hidden_act. The k outputs,
// weighted, are summed, plus the shared experts' output. Attention and RoPE are Llama's over the
// whole head. The routed experts are traced at their expected load (Note [Expected-load MoE] in
// tensor/models/models.h); fc1 and fc2 are GroupedExperts projections in the [E, in, out] layout
// (tensor/layers.h), which expert parallelism splits by expert and the style "experts" by
// features (Note [Aria tensor parallelism] below).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kAriaTextFamily;  // listed in family_registry.cpp

namespace {

constexpr const char* kFamily = "aria_text";
// AriaTextConfig's pad_token_id, which AriaTextModel passes to embed_tokens as padding_idx.
constexpr int64_t kPadTokenId = 2;
using Layout = GroupedExperts::Layout;
using Projection = GroupedExperts::Projection;

// ---- config ----------------------------------------------------------------------------------

// RoPE's share of each head: AriaTextRotaryEmbedding's default tables are head_dim wide (its
// compute_default_rope_parameters reads no partial_rotary_factor) and apply_rotary_pos_emb
// multiplies the whole head by them, so a share below 1 is either ignored (default RoPE) or fails
// to broadcast (the scaled types): refused, top level or in rope_parameters (which the shared
// reading takes after parse).
void refuse_partial_rotary(const ConfigFields& f) {
  auto refuse = [&](const ConfigFields& in, const char* key) {
    if (!in.has("partial_rotary_factor") || in.number("partial_rotary_factor", 1.0) == 1.0) return;
    f.fail(key, "partial_rotary_factor " + in.raw("partial_rotary_factor").dump() +
                    ": AriaTextAttention rotates every channel of q and k; expected 1 (or none)");
  };
  refuse(f, "partial_rotary_factor");
  if (f.has("rope_parameters") && f.raw("rope_parameters").is_object()) {
    refuse(ConfigFields(f.raw("rope_parameters"), f.source()), "rope_parameters");
  }
}

// AriaTextConfig: LlamaConfig's keys (sizes required, Note [Strict config parsing]; the rest at
// the class's defaults) and the MoE's moe_num_experts and moe_topk (required, as Mixtral's) and
// moe_num_shared_experts (default 2).
void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .rms_norm_eps = 1e-6});
  // validate_architecture: the heads divide hidden_size even when head_dim is given.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads", std::to_string(c.num_attention_heads) +
                                      " does not divide hidden_size " +
                                      std::to_string(c.hidden_size) +
                                      " (AriaTextConfig.validate_architecture requires it)");
  }
  if (c.hidden_act == "xielu") {
    // ACT2FN's XIELUActivation would be a module of the shared experts with learned scalars.
    f.fail("hidden_act",
           "'xielu' has learned parameters, which Aria's shared experts do not build; expected "
           "an activation without parameters (silu, gelu, ...)");
  }
  refuse_partial_rotary(f);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::pad_token_id_or(f, c, kPadTokenId);
  c.num_local_experts = f.integer("moe_num_experts");
  c.num_experts_per_tok = f.integer("moe_topk");
  // n shared experts of width F are AriaSharedExpertsMLP of n F. With none, transformers would
  // still build its three projections, each of width 0: not a model anyone trains.
  const int64_t shared = f.integer("moe_num_shared_experts", 2);
  if (shared <= 0) {
    f.fail("moe_num_shared_experts",
           std::to_string(shared) +
               ": AriaTextMoELayer always builds its shared experts (none would be projections "
               "of width 0); expected a positive count");
  }
  c.shared_expert_intermediate_size =
      models::shared_experts_width(f, "moe_num_shared_experts", shared, c.intermediate_size);
  // The original release's AriaMoELMConfig sized the experts by moe_intermediate_size; its
  // converted files carry it beside intermediate_size, which AriaTextConfig reads instead. A file
  // where the two differ describes experts transformers does not build.
  models::require_built_value(
      f, "moe_intermediate_size", c.intermediate_size, kFamily,
      ("experts of intermediate_size " + std::to_string(c.intermediate_size)).c_str());
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["moe_num_experts"] = c.num_local_experts;
  j["moe_topk"] = c.num_experts_per_tok;
  j["moe_num_shared_experts"] =
      c.intermediate_size > 0 ? c.shared_expert_intermediate_size / c.intermediate_size : 0;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 2
}

// What parse guarantees, checked again for a config built in code (the planner copies configs
// and cuts their layers).
void check_layout(const ModelConfig& c) {
  SP_CHECK(c.partial_rotary_factor == 1.0, kFamily, ": partial_rotary_factor ",
           c.partial_rotary_factor, ", expected 1 (AriaTextAttention rotates every channel)");
  SP_CHECK(
      c.layer_types.empty() && c.nope_layers.empty() && c.dense_layers.empty() && !c.sliding_window,
      kFamily,
      ": every layer is full attention with RoPE and a MoE block; expected no layer types, "
      "NoPE, dense layers or window");
  SP_CHECK(c.shared_expert_intermediate_size > 0 && c.intermediate_size > 0 &&
               c.shared_expert_intermediate_size % c.intermediate_size == 0,
           kFamily, ": shared experts of width ", c.shared_expert_intermediate_size,
           ", expected moe_num_shared_experts >= 1 times intermediate_size ", c.intermediate_size);
  SP_CHECK(c.qkv_bias == c.o_bias, kFamily,
           ": one attention_bias sets the biases of q, k, v and o alike");
}

// ---- model -----------------------------------------------------------------------------------

ModulePtr norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{c.hidden_size}, c.norm_eps, true, o);
}

// AriaExperts: fc1 [E, h, 2F] and fc2 [E, F, h], each an AriaGroupedExpertsGemm. Its forward here
// takes the dispatched picks [E, n, h] and returns [E, n, h]: fc1, silu(projection) * gate, fc2.
// transformers' AriaExperts also picks the top k and permutes the tokens; those steps are the
// block's below, as the other families' expected-load blocks hold them.
class Experts : public Module {
 public:
  Experts(const ModelConfig& c, const TensorOptions& o)
      : Module("AriaExperts"), width_(c.intermediate_size) {
    const int64_t e = c.num_local_experts, h = c.hidden_size;
    // fc1's output features are [projection; gate], two parts each split over the ranks.
    fc1 = register_module(
        "fc1", std::make_shared<GroupedExperts>("AriaGroupedExpertsGemm", e, h, 2 * width_,
                                                Projection::kFirst, 2, o, Layout::kInOut));
    fc2 = register_module(
        "fc2", std::make_shared<GroupedExperts>("AriaGroupedExpertsGemm", e, width_, h,
                                                Projection::kSecond, 1, o, Layout::kInOut));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor up = fc1->call(x);  // [E, n, 2F]
    const Tensor act = mul(silu(narrow(up, 2, 0, width_)), narrow(up, 2, width_, width_));
    return fc2->call(act);
  }
  std::shared_ptr<GroupedExperts> fc1, fc2;

 private:
  int64_t width_;
};

// AriaTextMoELayer: router, experts, shared_experts (its __init__'s order). Note [Expected-load
// MoE]: every expert runs ceil(T k / E) of the T tokens' k picks, the permuted copy the grouped
// GEMMs read; the top k weights are the first k logits' softmax (narrow stands in for topk's
// values). The un-permuting index_copy_ into zeros is a view of the expected-load rows here.
class MoeLayer : public Module {
 public:
  MoeLayer(const ModelConfig& c, const TensorOptions& o)
      : Module("AriaTextMoELayer"), experts_(c.num_local_experts), top_k_(c.num_experts_per_tok) {
    router = register_module("router", std::make_shared<Linear>(c.hidden_size, experts_, false, o));
    experts = register_module("experts", std::make_shared<Experts>(c, o));
    shared_experts = register_module(
        "shared_experts", std::make_shared<models::GatedMlp>("AriaSharedExpertsMLP", c.hidden_size,
                                                             c.shared_expert_intermediate_size,
                                                             c.mlp_bias, c.hidden_act, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2), tokens = b * s;
    const Tensor flat = reshape(x, {tokens, h});
    const Tensor weights = softmax(narrow(router->call(flat), 1, 0, top_k_), 1);  // [T, k]
    const int64_t per_expert = (tokens * top_k_ + experts_ - 1) / experts_;
    const Tensor dispatched =
        contiguous(expand(unsqueeze(narrow(flat, 0, 0, per_expert), 0), {experts_, per_expert, h}));
    const Tensor out = reshape(experts->call(dispatched), {experts_ * per_expert, h});
    const Tensor picks = view(narrow(out, 0, 0, tokens * top_k_), {tokens, top_k_, h});
    const Tensor routed = sum(mul(picks, unsqueeze(weights, -1)), {1});  // [T, h]
    return add(view(routed, {b, s, h}), shared_experts->call(x));
  }
  std::shared_ptr<Linear> router;
  std::shared_ptr<Experts> experts;
  ModulePtr shared_experts;

 private:
  int64_t experts_, top_k_;
};

// AriaTextDecoderLayer: self_attn (Llama's attention, the shared rotary decoder's), mlp,
// input_layernorm, post_attention_layernorm; empty until build() (Note [Filling repeated blocks
// after registration], blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("AriaTextDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const models::RotaryDecoderStyle style{.prefix = kAriaTextFamily.hf_class_prefix};
    self_attn = register_module(
        "self_attn", models::make_rotary_attention(c, layer_kind(c, index), style,
                                                   std::string(style.prefix), o, training));
    mlp = register_module("mlp", std::make_shared<MoeLayer>(c, o));
    input_layernorm = register_module("input_layernorm", norm(c, o));
    post_attention_layernorm = register_module("post_attention_layernorm", norm(c, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor h = add(x, self_attn->run(input_layernorm->call(x), cos_t, sin_t));
    return add(h, mlp->call(post_attention_layernorm->call(h)));
  }
  std::shared_ptr<models::AttentionBlock> self_attn;
  ModulePtr mlp, input_layernorm, post_attention_layernorm;
};

// AriaTextModel: embed_tokens, layers, norm, then rotary_emb (its non-persistent inv_freq alone,
// head_dim wide); filled once it sits under the root.
class Model : public Module {
 public:
  Model() : Module("AriaTextModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    register_module("norm", norm(c, o));
    rotary_emb =
        register_module("rotary_emb", std::make_shared<models::RotaryEmbedding>(
                                          "AriaTextRotaryEmbedding", c.head_dim, c.rope_theta));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_tokens")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(models::position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = models::per_head(cos_t), sin_h = models::per_head(sin_t);
    for (const auto& layer : layers_) h = layer->run(h, cos_h, sin_h);
    return child("norm")->call(h);
  }
  std::shared_ptr<models::RotaryEmbedding> rotary_emb;

 private:
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<models::CausalLm<Model>>("AriaTextForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

constexpr FieldRename kRenamed[] = {{"norm_eps", "rms_norm_eps"},
                                    {"num_local_experts", "moe_num_experts"},
                                    {"num_experts_per_tok", "moe_topk"},
                                    {"shared_expert_intermediate_size", "moe_num_shared_experts"},
                                    {"qkv_bias", "attention_bias"},
                                    {"o_bias", "attention_bias"}};

// Note [Aria tensor parallelism]
// AriaTextConfig.base_model_tp_plan in Megatron's terms (Shoeybi et al. 2019, §3): q, k and v
// column-parallel by heads (three projections, a contiguous split is whole heads), o_proj
// row-parallel; the shared experts as a dense gated MLP (gate_proj and up_proj column-parallel,
// down_proj row-parallel). transformers' plan leaves the routed experts out (its grouped GEMM has
// no parallel style); here each expert splits as a gated MLP with the style "experts" on both
// AriaGroupedExpertsGemm projections: fc1 [E, h, 2F] on its output features, dim 2, as two parts
// (_StridedShard(2, 2): a rank holds the same F / tp columns of the projection half and of the
// gate half, so chunk(2) on its local [E, n, 2F / tp] pairs each projection channel with its own
// gate); fc2 [E, F, h] on its input features, dim 1, its output a partial sum reduced before the
// routing weights. The router and the norms replicated; the embedding by vocabulary rows and
// lm_head by vocabulary. Expert parallelism splits dim 0 of fc1 and fc2 (GroupedExperts).
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.experts.fc1", "experts"},
    {"model.layers.*.mlp.experts.fc2", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// AriaTextPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the padding_idx row zero, Linear biases zero, RMSNorm weights
// one), then every AriaGroupedExpertsGemm weight normal(0, initializer_range).
constexpr InitRule kOwnInitRules[] = {{"AriaGroupedExpertsGemm", "weight", InitFill::kNormal}};
constexpr auto kInitRules =
    models::concat_init_rules(kOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

const ModelFamily kAriaTextFamily{
    .model_type = "aria_text",
    .hf_class_prefix = "AriaText",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenamed,
    .moe = true,
    .experts_class = "AriaExperts",
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
