// inkling_text (Thinking Machines Lab's Inkling, 2026: 975B parameters, 41B active; the language
// model of the multimodal inkling_mm_model): transformers' InklingTextConfig (vocab 201024, hidden
// 6144, 66 layers; full layers of 64 heads and 8 key-value heads of 128, sliding layers of 64 and
// 16 of 128 over a window of 512 on all but every sixth layer, (i + 1) % 6 != 0; relative states
// of 16 per head over 1024 tokens; max positions 131072, rms_norm_eps 1e-6, untied; 256 experts of
// 3072, top 6, two shared experts of 3072 in every layer; the final hidden states divided by 24)
// and modeling_inkling.py. No rotary embedding and no position table: positions enter through a
// relative position bias and causal short convolutions. h hidden, H and K a layer's query and
// key-value heads of d channels (its type's), r = d_rel, R the bias extent (rel_extent on full
// layers, the window on sliding ones), k = conv_kernel_size, E experts and S shared experts of
// width F, in named_parameters order:
//   model.embed_tokens.weight                                 [V, h]
//   model.layers.N.self_attn.{q,k,v}_proj.weight              [H d, h], [K d, h], [K d, h]
//   model.layers.N.self_attn.r_proj.weight                    [H r, h]  (relative states)
//   model.layers.N.self_attn.o_proj.weight                    [h, H d]
//   model.layers.N.self_attn.{k,v}_sconv.conv1d.weight        [K d, 1, k]  (float32)
//   model.layers.N.self_attn.{q,k}_norm.weight                [d]
//   model.layers.N.self_attn.rel_logits_proj.proj             [r, R]
//   model.layers.N.mlp.gate.{weight, global_scale, e_score_correction_bias}  [E + S, h], [1], [E]
//   model.layers.N.mlp.experts.{gate_up_proj, down_proj}      [E, 2F, h], [E, h, F]
//   model.layers.N.mlp.shared_experts.{gate,up,down}_proj     [S, F, h], [S, F, h], [S, h, F]
//     (dense layers, mlp_layer_types: mlp.global_scale [1], mlp.{gate,up,down}_proj.weight)
//   model.layers.N.{input,post_attention}_layernorm.weight    [h]
//   model.layers.N.{attn,mlp}_sconv.conv1d.weight             [h, 1, k]  (float32)
//   model.norm.weight, model.embed_norm.weight [h], lm_head.weight [V, h]
// The router's e_score_correction_bias and global_scale are nn.Parameters (counted). The four short
// convolutions of a layer are kept in float32 (_keep_in_fp32_modules_strict) and run in float32,
// each adding its input back: x + conv(x). The layer: h = x + attn_sconv(attn(norm(x))), then
// h + mlp_sconv(mlp(norm(h))). The checkpoint's multi-token prediction layers (model.mtp.*) are
// not built, as transformers skips them. Note [Inkling relative position bias] says how the bias
// is traced.
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kInklingTextFamily;  // listed in family_registry.cpp

namespace {

// Note [Inkling relative position bias]
// InklingRelativeLogits: each token's relative states (r_proj, r per head) times a learned bank
// of bias-by-distance profiles `proj` [r, R] give, per query and head, one bias for each backward
// distance 0..R-1, added to that query's score of the key so far back (zero beyond R, and
// causality is the mask's). transformers' eager path gathers them into a dense [B, H, S, S] bias;
// trainers run the attention as one fused kernel whose score modifier reads the [B, S, H, R]
// relative logits by distance (SGLang's RelLogitsProj with FlashAttention-4's score_mod, which
// InklingRelativeLogits' docstring names), as FlashAttention-2 takes ALiBi's slopes. So the trace
// runs r_proj and the product with `proj` (2 r R FLOPs per token and head, a real GEMM), and
// prices the attention as the fused scaled_dot_product_attention: the gather by distance, the
// addition to the scores and, with log scaling, the bias's scaling are inside the kernel, not
// traced (as the lightning indexer's selection is not: Note [Lightning indexer trace] in
// latent_attention.h). The product's backward (the gradients of the states and of `proj`) is
// counted as any product's; the kernel's gradient of the relative logits feeding it is not, and
// the logits the kernel keeps for its backward (B S H R elements a layer) are not counted as
// saved.

constexpr const char* kFamily = "Inkling";

// InklingTextConfig.__post_init__'s rule when neither layer_types nor local_layer_ids is given:
// every layer slides but each sixth ((i + 1) % 6 == 0, layers 5, 11, ...).
bool slides_by_default(int64_t i) { return (i + 1) % 6 != 0; }

// InklingTextConfig's attribute_map: `alias` sets the field `key` names (sliding_window is
// sliding_window_size, num_local_experts n_routed_experts, sconv_kernel_size conv_kernel_size,
// model_max_length max_position_embeddings). A file giving both with different values is refused:
// which one transformers keeps depends on the order it sets them.
int64_t aliased_integer(const ConfigFields& f, const char* key, const char* alias, int64_t dflt) {
  if (!f.has(alias)) return f.integer(key, dflt);
  const int64_t v = f.integer(alias);
  if (f.has(key) && f.integer(key) != v) {
    f.fail(alias, std::to_string(v) + " differs from " + key + " " +
                      std::to_string(f.integer(key)) + " (InklingTextConfig maps one onto the " +
                      "other); expected one value");
  }
  return v;
}

// A size InklingTextConfig's modules need positive (a zero one is no model's; a negative one makes
// no tensor).
int64_t positive(const ConfigFields& f, const char* key, int64_t v) {
  if (v <= 0) f.fail(key, std::to_string(v) + ", expected a positive integer");
  return v;
}

// layer_types ("hybrid": full attention, "hybrid_sliding": the window), else local_layer_ids (the
// sliding layers; indices outside the stack are ignored, as the class builds a set of them), else
// slides_by_default. The class accepts any of transformers' layer types, but InklingAttention
// slides only on "hybrid_sliding" and the model masks in full only on "hybrid": any other word
// builds a full-width attention under a sliding mask, which is refused.
std::vector<AttentionType> parse_layer_types(const ConfigFields& f, int64_t layers) {
  std::vector<AttentionType> out;
  if (f.has("layer_types")) {
    const nlohmann::json& v = f.raw("layer_types");
    if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
      f.fail("layer_types",
             "expected a list of num_hidden_layers = " + std::to_string(layers) + " layer types");
    }
    for (const nlohmann::json& t : v) {
      if (t != "hybrid" && t != "hybrid_sliding") {
        f.fail("layer_types", t.dump().substr(0, 60) +
                                  ": Inkling's layers are \"hybrid\" (full attention) or "
                                  "\"hybrid_sliding\" (the window); expected one of them");
      }
      out.push_back(t == "hybrid" ? AttentionType::kFull : AttentionType::kSliding);
    }
    return out;
  }
  out.assign(static_cast<size_t>(layers), AttentionType::kFull);
  if (f.has("local_layer_ids")) {
    const nlohmann::json& v = f.raw("local_layer_ids");
    if (!v.is_array()) f.fail("local_layer_ids", "expected a list of layer indices");
    for (const nlohmann::json& e : v) {
      if (!e.is_number_integer()) {
        f.fail("local_layer_ids", e.dump().substr(0, 40) + ", expected a layer index");
      }
      const int64_t i = e.get<int64_t>();
      if (i >= 0 && i < layers) out[static_cast<size_t>(i)] = AttentionType::kSliding;
    }
    return out;
  }
  for (int64_t i = 0; i < layers; ++i) {
    if (slides_by_default(i)) out[static_cast<size_t>(i)] = AttentionType::kSliding;
  }
  return out;
}

// mlp_layer_types ("dense" or "sparse" per layer), else the first dense_mlp_idx layers dense (a
// key __post_init__ pops; 0: every layer sparse). InklingDecoderLayer builds experts for "sparse"
// only, and the class accepts only these two words.
void parse_mlp_layer_types(const ConfigFields& f, ModelConfig& c) {
  const int64_t layers = c.num_hidden_layers;
  c.dense_layers.clear();
  if (!f.has("mlp_layer_types")) {
    const int64_t dense = f.integer("dense_mlp_idx", 0);
    for (int64_t i = 0; i < layers && i < dense; ++i) c.dense_layers.push_back(i);
    return;
  }
  (void)f.has("dense_mlp_idx");  // popped only when mlp_layer_types is None: inert here
  const nlohmann::json& v = f.raw("mlp_layer_types");
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail("mlp_layer_types", "expected a list of num_hidden_layers = " + std::to_string(layers) +
                                  " entries, \"dense\" or \"sparse\"");
  }
  for (int64_t i = 0; i < layers; ++i) {
    const nlohmann::json& e = v[static_cast<size_t>(i)];
    if (e == "dense") {
      c.dense_layers.push_back(i);
    } else if (e != "sparse") {
      f.fail("mlp_layer_types", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                    ", expected \"dense\" or \"sparse\"");
    }
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 201024);
  c.hidden_size = f.integer("hidden_size", 6144);
  c.num_hidden_layers = f.integer("num_hidden_layers", 66);
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1 to " +
                                    std::to_string(kMaxLayers) +
                                    " (docs/user-guide.md \"Limits\")");
  }
  c.max_position_embeddings =
      aliased_integer(f, "max_position_embeddings", "model_max_length", 131072);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.hidden_act = f.string("hidden_act", "silu");
  if (c.hidden_act == "xielu") {
    f.fail("hidden_act",
           "'xielu' has learned parameters in every MLP and in the experts, which this family "
           "does not build; expected silu, gelu, relu or their variants");
  }
  c.attention_dropout = f.number("attention_dropout", 0.0);
  // InklingForCausalLM ties nothing (_tied_weights_keys is empty: the checkpoints' embed and
  // unembed are separate tensors), whatever tie_word_embeddings says.
  (void)f.boolean("tie_word_embeddings", false);
  c.tie_word_embeddings = false;

  // Heads per layer type. ModelConfig keeps Gemma 4's convention (layer_kinds.h): head_dim is the
  // sliding layers' width and global_head_dim the full layers' when it differs; the sliding
  // layers' heads are sliding_num_* when they differ from the full layers'.
  const int64_t heads = positive(f, "num_attention_heads", f.integer("num_attention_heads", 64));
  const int64_t kv = positive(f, "num_key_value_heads", f.integer("num_key_value_heads", 8));
  const int64_t dim = positive(f, "head_dim", f.integer("head_dim", 128));
  const int64_t swa_heads =
      positive(f, "swa_num_attention_heads", f.integer("swa_num_attention_heads", 64));
  const int64_t swa_kv =
      positive(f, "swa_num_key_value_heads", f.integer("swa_num_key_value_heads", 16));
  const int64_t swa_dim = positive(f, "swa_head_dim", f.integer("swa_head_dim", 128));
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = swa_dim;
  c.global_head_dim = dim != swa_dim ? dim : 0;
  c.sliding_num_attention_heads = swa_heads != heads ? swa_heads : 0;
  c.sliding_num_key_value_heads = swa_kv != kv ? swa_kv : 0;

  c.layer_types = parse_layer_types(f, c.num_hidden_layers);
  // The window of the sliding layers and the extent of their relative bias (an int the class
  // requires; an unused one must still make a window).
  c.sliding_window = positive(f, "sliding_window_size",
                              aliased_integer(f, "sliding_window_size", "sliding_window", 512));

  // The relative position bias (Note [Inkling relative position bias]).
  c.d_rel = positive(f, "d_rel", f.integer("d_rel", 16));
  c.rel_extent = positive(f, "rel_extent", f.integer("rel_extent", 1024));
  c.log_scaling_n_floor = 0;  // null (the class's default): no scaling
  if (f.has("log_scaling_n_floor")) {
    c.log_scaling_n_floor = f.integer("log_scaling_n_floor");
    if (c.log_scaling_n_floor <= 0) {
      f.fail("log_scaling_n_floor",
             std::to_string(c.log_scaling_n_floor) +
                 ": the queries' scale divides the position by it; expected a positive position "
                 "(or null: no scaling)");
    }
  }
  c.log_scaling_alpha = f.number("log_scaling_alpha", 0.1);
  if (!std::isfinite(c.log_scaling_alpha)) {
    f.fail("log_scaling_alpha", "expected a finite number");
  }
  // The four short convolutions' width (conv1d [channels, 1, k]).
  c.linear_conv_kernel_dim = positive(
      f, "conv_kernel_size", aliased_integer(f, "conv_kernel_size", "sconv_kernel_size", 4));

  // The MoE block: n_routed_experts of moe_intermediate_size, top num_experts_per_tok, and
  // n_shared_experts of that width, which the router also scores (ModelConfig keeps their summed
  // width, shared_expert_intermediate_size); the dense layers' MLP intermediate_size wide
  // (dense_intermediate_size, a key __post_init__ pops, wins when not null).
  c.dense_intermediate_size = f.integer("intermediate_size", 24576);
  if (f.has("dense_intermediate_size")) {
    c.dense_intermediate_size = f.integer("dense_intermediate_size");
  }
  positive(f, f.has("dense_intermediate_size") ? "dense_intermediate_size" : "intermediate_size",
           c.dense_intermediate_size);
  c.intermediate_size =
      positive(f, "moe_intermediate_size", f.integer("moe_intermediate_size", 3072));
  c.num_local_experts = aliased_integer(f, "n_routed_experts", "num_local_experts", 256);
  c.num_experts_per_tok = f.integer("num_experts_per_tok", 6);
  parse_mlp_layer_types(f, c);
  const int64_t shared = f.integer("n_shared_experts", 2);
  const bool any_sparse = static_cast<int64_t>(c.dense_layers.size()) < c.num_hidden_layers;
  if (any_sparse && shared < 1) {
    f.fail("n_shared_experts",
           std::to_string(shared) +
               ": InklingTopkRouter takes the routed scores as all but the last n_shared_experts "
               "(scores[..., :-n]), which is empty for 0; expected at least 1");
  }
  c.shared_expert_intermediate_size =
      models::shared_experts_width(f, "n_shared_experts", shared, c.intermediate_size);
  // Routing constants: they change no shape or count (route_scale is traced as a multiply by 1).
  // shared_expert_sink and rms_norm_eps_moe_gate are attributes InklingTopkRouter never reads (it
  // always scores the shared experts, and has no norm).
  if (!std::isfinite(f.number("route_scale", 8.0))) {
    f.fail("route_scale", "expected a finite number");
  }
  (void)f.boolean("shared_expert_sink", true);
  (void)f.number("rms_norm_eps_moe_gate", 1e-6);

  // The final hidden states divided by the muP width multiplier before lm_head (its alias
  // embedding_multiplier names it too), kept as Granite's logits_scaling, applied on the hidden
  // states as MiniCPM3's.
  c.logits_scaling = f.number("logits_mup_width_multiplier", 24.0);
  if (f.has("embedding_multiplier")) {
    const double alias = f.number("embedding_multiplier", 24.0);
    if (f.has("logits_mup_width_multiplier") && alias != c.logits_scaling) {
      f.fail("embedding_multiplier",
             std::to_string(alias) + " differs from logits_mup_width_multiplier " +
                 std::to_string(c.logits_scaling) +
                 " (InklingTextConfig maps one onto the other); expected one value");
    }
    c.logits_scaling = alias;
  }
  if (c.logits_scaling == 0 || !std::isfinite(c.logits_scaling)) {
    f.fail("logits_mup_width_multiplier",
           "divides the final hidden states; expected a nonzero finite number");
  }
  // The logits past unpadded_vocab_size are dropped (a slice): the head stays vocab_size wide.
  if (f.has("unpadded_vocab_size") && f.integer("unpadded_vocab_size") <= 0) {
    f.fail("unpadded_vocab_size",
           "expected a positive row count (or null: the head is not padded)");
  }
  // The multi-token prediction layers transformers does not build (model.mtp.* is skipped on
  // load): read, not built.
  for (const char* key : {"num_mtp_layers", "chain_hidden_post_norm", "mtp_hidden_states_first",
                          "mtp_local_layer_ids"}) {
    (void)f.has(key);
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.norm_eps;
  j["hidden_act"] = c.hidden_act;
  j["attention_dropout"] = c.attention_dropout;
  const LayerKind full{.attention = AttentionType::kFull};
  const LayerKind sliding{.attention = AttentionType::kSliding};
  j["num_attention_heads"] = attention_heads_of(c, full);
  j["num_key_value_heads"] = kv_heads_of(c, full);
  j["head_dim"] = head_dim_of(c, full);
  j["swa_num_attention_heads"] = attention_heads_of(c, sliding);
  j["swa_num_key_value_heads"] = kv_heads_of(c, sliding);
  j["swa_head_dim"] = head_dim_of(c, sliding);
  j["sliding_window_size"] = c.sliding_window.value_or(0);
  j["d_rel"] = c.d_rel;
  j["rel_extent"] = c.rel_extent;
  j["log_scaling_n_floor"] =
      c.log_scaling_n_floor > 0 ? nlohmann::json(c.log_scaling_n_floor) : nlohmann::json(nullptr);
  j["log_scaling_alpha"] = c.log_scaling_alpha;
  j["conv_kernel_size"] = c.linear_conv_kernel_dim;
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["n_routed_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["n_shared_experts"] = c.shared_expert_intermediate_size / c.intermediate_size;
  j["logits_mup_width_multiplier"] = c.logits_scaling;
  nlohmann::json types = nlohmann::json::array(), mlp = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    types.push_back(k.attention == AttentionType::kSliding ? "hybrid_sliding" : "hybrid");
    mlp.push_back(k.ffn == FfnKind::kMoe ? "sparse" : "dense");
  }
  j["layer_types"] = types;
  j["mlp_layer_types"] = mlp;
}

// ---- model -----------------------------------------------------------------------------------

ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{dim}, c.norm_eps, true, o);
}

// InklingShortConvolution: conv1d [channels, 1, k] (depthwise, no bias), float32 whatever the
// model's 16-bit dtype (_keep_in_fp32_modules_strict). x [B, S, channels] -> x + conv(x), computed
// in float32 and cast back: causal_conv1d_fn without an activation, one kernel (Note [Short
// convolution trace] in short_conv.h).
class ShortConvolution : public Module {
 public:
  ShortConvolution(int64_t channels, int64_t width, const TensorOptions& o)
      : Module("InklingShortConvolution") {
    TensorOptions f32 = o;
    if (o.dtype == DType::kBFloat16 || o.dtype == DType::kFloat16) f32.dtype = DType::kFloat32;
    conv1d_ =
        register_module("conv1d", models::make_conv1d_parameters(channels, width, false, f32));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor x32 = to(x, conv1d_->parameter("weight").dtype());
    const Tensor y = causal_conv1d(transpose(x32, 1, 2), conv1d_->parameter("weight"), Tensor(),
                                   /*silu=*/false);
    return to(add(transpose(y, 1, 2), x32), x.dtype());
  }

 private:
  ModulePtr conv1d_;
};

// InklingRelativeLogits: `proj` [r, R]. Relative states [B, S, H, r] -> the relative logits
// [B, S, H, R] (Note [Inkling relative position bias]); transformers' transpose to [B, H, S, R] is
// a view the kernel does not need, left out so that no [.., S, R] view passes for scores.
class RelativeLogits : public Module {
 public:
  RelativeLogits(int64_t d_rel, int64_t extent, const TensorOptions& o)
      : Module("InklingRelativeLogits") {
    register_parameter("proj", empty({d_rel, extent}, o));
  }
  // One GEMM over every token and head, [B S H, r] x [r, R], as torch.matmul folds a product
  // with a 2-D operand.
  Tensor forward(const Tensor& states) override {
    const Tensor proj = parameter("proj");
    DimVector shape = states.sizes();
    shape.back() = proj.size(1);
    return view(matmul(reshape(states, {-1, proj.size(0)}), proj), shape);
  }
};

// InklingAttention: q_proj, k_proj, v_proj, r_proj, o_proj, k_sconv, v_sconv, q_norm, k_norm,
// rel_logits_proj (the order of its __init__). Softmax scale 1 / d (q and k are RMS-normed per
// head).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("InklingAttention"),
        heads_(attention_heads_of(c, kind)),
        kv_heads_(kv_heads_of(c, kind)),
        head_dim_(head_dim_of(c, kind)),
        d_rel_(c.d_rel),
        dropout_(training ? c.attention_dropout : 0.0) {
    const bool sliding = kind.attention == AttentionType::kSliding;
    if (sliding) window_ = kind.window;
    // The full layers' queries scale with the log of their position (log_scaling_n_floor).
    if (!sliding && c.log_scaling_n_floor > 0) {
      n_floor_ = static_cast<double>(c.log_scaling_n_floor);
      alpha_ = c.log_scaling_alpha;
    }
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    const int64_t k = c.linear_conv_kernel_dim;
    register_module("q_proj", std::make_shared<Linear>(h, q, false, o));
    register_module("k_proj", std::make_shared<Linear>(h, kv, false, o));
    register_module("v_proj", std::make_shared<Linear>(h, kv, false, o));
    register_module("r_proj", std::make_shared<Linear>(h, heads_ * d_rel_, false, o));
    register_module("o_proj", std::make_shared<Linear>(q, h, false, o));
    register_module("k_sconv", std::make_shared<ShortConvolution>(kv, k, o));
    register_module("v_sconv", std::make_shared<ShortConvolution>(kv, k, o));
    register_module("q_norm", norm(head_dim_, c, o));
    register_module("k_norm", norm(head_dim_, c, o));
    // A sliding layer's bias reaches as far back as its window.
    register_module("rel_logits_proj",
                    std::make_shared<RelativeLogits>(
                        d_rel_, sliding ? c.sliding_window.value_or(0) : c.rel_extent, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1);
    const Tensor q_lin = child("q_proj")->call(x);
    const Tensor k_lin = child("k_sconv")->call(child("k_proj")->call(x));
    const Tensor v_lin = child("v_sconv")->call(child("v_proj")->call(x));
    const Tensor states = child("r_proj")->call(x);
    Tensor q = child("q_norm")->call(models::split_heads(q_lin, heads_, head_dim_));
    const Tensor k = child("k_norm")->call(models::split_heads(k_lin, kv_heads_, head_dim_));
    const Tensor v = models::split_heads(v_lin, kv_heads_, head_dim_);
    // The relative logits the fused kernel's score modifier reads (Note [Inkling relative
    // position bias]): computed here, consumed inside the attention kernel.
    (void)child("rel_logits_proj")->call(view(states, {b, s, heads_, d_rel_}));
    if (n_floor_ > 0) {
      // tau = 1 + alpha log(max((position + 1) / n_floor, 1)) per query, q scaled in float32.
      const Tensor n = to(add(view(models::position_ids(s), {s}), 1), DType::kFloat32);
      const Tensor ratio = binary(BinaryOp::kMaximum, div(n, n_floor_), Scalar(1.0));
      const Tensor tau = add(mul(log(ratio), alpha_), 1.0);
      q = to(mul(to(q, DType::kFloat32), view(tau, {1, 1, s, 1})), q_lin.dtype());
    }
    // A sliding layer's window bounds the keys of each query.
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true,
                                                    1.0 / static_cast<double>(head_dim_),
                                                    /*enable_gqa=*/kv_heads_ != heads_, window_);
    return child("o_proj")->call(models::merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_, head_dim_, d_rel_;
  double dropout_;
  std::optional<int64_t> window_;
  double n_floor_ = 0, alpha_ = 0;
};

// InklingMLP (the dense layers'): gate_proj, up_proj, down_proj and global_scale [1], a parameter
// of the MLP itself (listed first), multiplying its output.
class Mlp : public models::GatedMlp {
 public:
  Mlp(const ModelConfig& c, int64_t width, const TensorOptions& o)
      : models::GatedMlp("InklingMLP", c.hidden_size, width, false, c.hidden_act, o) {
    register_parameter("global_scale", empty({1}, o));
  }
  Tensor forward(const Tensor& x) override {
    return mul(models::GatedMlp::forward(x), parameter("global_scale"));
  }
};

// InklingTopkRouter: weight [E + S, h] (the routed experts' rows, then the shared ones'),
// global_scale [1] and e_score_correction_bias [E], all nn.Parameters. route() gives, for tokens
// `flat` [T, h], the routed experts' weights [T, k] and the shared experts' [T, S].
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module("InklingTopkRouter"),
        experts_(c.num_local_experts),
        shared_(c.shared_expert_intermediate_size / c.intermediate_size),
        top_k_(c.num_experts_per_tok) {
    register_parameter("weight", empty({experts_ + shared_, c.hidden_size}, o));
    register_parameter("global_scale", empty({1}, o));
    register_parameter("e_score_correction_bias", empty({experts_}, o));
  }
  std::pair<Tensor, Tensor> route(const Tensor& flat) {
    CallScope scope(*this);
    const Tensor logits = linear(flat, parameter("weight"));
    // sigmoid scores; the bias joins the routed ones for the top-k choice only (topk itself,
    // data dependent, is not traced: Note [Expected-load MoE] in models.h).
    const Tensor scores = sigmoid(logits);
    (void)add(narrow(scores, 1, 0, experts_), parameter("e_score_correction_bias"));
    // The k chosen logits (narrow stands in for the gather) beside the shared experts', through
    // logsigmoid, normalized over the k + S (exp(lp - logsumexp(lp)): a softmax), then times
    // route_scale (read, not kept: traced as a multiply by 1) and global_scale.
    const Tensor chosen =
        cat({narrow(logits, 1, 0, top_k_), narrow(logits, 1, experts_, shared_)}, -1);
    const Tensor weights =
        mul(mul(softmax(log(sigmoid(chosen)), -1), 1.0), parameter("global_scale"));
    const Tensor gammas = contiguous(narrow(weights, 1, top_k_, shared_));
    return {contiguous(narrow(weights, 1, 0, top_k_)), gammas};
  }

 private:
  int64_t experts_, shared_, top_k_;
};

// InklingSharedExperts: gate_proj, up_proj [S, F, h] and down_proj [S, h, F], grouped experts
// that every token passes through (GroupedExperts::shared). run() gives, for tokens `flat`
// [T, h] and their weights `gammas` [T, S], the sum over the S experts of
// gamma down(act(gate(x)) * up(x)), summed in float32 as InklingSharedExperts does.
class SharedExperts : public GroupedExperts {
 public:
  SharedExperts(const ModelConfig& c, const TensorOptions& o)
      : GroupedExperts(
            "InklingSharedExperts", c.shared_expert_intermediate_size / c.intermediate_size,
            c.hidden_size, c.intermediate_size, Layout::kOutIn, /*bias=*/false,
            [act = c.hidden_act](const Tensor& x) { return models::activation(act, x); }, o,
            /*interleaved=*/false, /*gated=*/true, /*separate_gate_up=*/true, /*shared=*/true),
        act_(c.hidden_act) {}
  Tensor run(const Tensor& flat, const Tensor& gammas) {
    CallScope scope(*this);
    const int64_t n = experts(), tokens = flat.size(0), h = flat.size(1);
    // Every token to every shared expert, [S, T, h] (an expanded view), and its weights [S, T, 1].
    const Tensor x = expand(unsqueeze(flat, 0), {n, tokens, h});
    const Tensor g = transpose(reshape(gammas, {tokens, n, 1}), 0, 1);
    const Tensor gate = bmm(x, transpose(parameter("gate_proj"), 1, 2));
    const Tensor up = bmm(x, transpose(parameter("up_proj"), 1, 2));
    const Tensor act = mul(mul(models::activation(act_, gate), up), g);
    const Tensor down = bmm(act, transpose(parameter("down_proj"), 1, 2));  // [S, T, h]
    return to(sum(to(down, DType::kFloat32), {0}), flat.dtype());
  }

 private:
  std::string act_;
};

// InklingMoE: gate, experts, shared_experts. The routed experts run on their expected load (Note
// [Expected-load MoE] in models.h), the shared ones on every token; their outputs are summed.
class Moe : public Module {
 public:
  Moe(const ModelConfig& c, const TensorOptions& o) : Module("InklingMoE") {
    gate_ = register_module("gate", std::make_shared<Router>(c, o));
    const std::string act = c.hidden_act;
    experts_ = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       "InklingExperts", c.num_local_experts, c.hidden_size, c.intermediate_size,
                       GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
    shared_ = register_module("shared_experts", std::make_shared<SharedExperts>(c, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    const auto [weights, gammas] = gate_->route(flat);
    const Tensor routed = models::expected_load_experts(*experts_, flat, weights);
    return view(add(routed, shared_->run(flat, gammas)), {b, s, h});
  }

 private:
  std::shared_ptr<Router> gate_;
  std::shared_ptr<GroupedExperts> experts_;
  std::shared_ptr<SharedExperts> shared_;
};

// InklingDecoderLayer, made empty and filled once it sits in its ModuleList (Note [Filling
// repeated blocks after registration], blocks.h): self_attn, mlp, input_layernorm,
// post_attention_layernorm, attn_sconv, mlp_sconv.
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("InklingDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    const LayerKind kind = layer_kind(c, index);
    register_module("self_attn", std::make_shared<Attention>(c, kind, o, training));
    if (kind.ffn == FfnKind::kMoe) {
      register_module("mlp", std::make_shared<Moe>(c, o));
    } else {
      const int64_t width =
          c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
      register_module("mlp", std::make_shared<Mlp>(c, width, o));
    }
    register_module("input_layernorm", norm(c.hidden_size, c, o));
    register_module("post_attention_layernorm", norm(c.hidden_size, c, o));
    const int64_t h = c.hidden_size, k = c.linear_conv_kernel_dim;
    register_module("attn_sconv", std::make_shared<ShortConvolution>(h, k, o));
    register_module("mlp_sconv", std::make_shared<ShortConvolution>(h, k, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor attn = child("self_attn")->call(child("input_layernorm")->call(x));
    const Tensor h = add(x, child("attn_sconv")->call(attn));
    const Tensor mlp = child("mlp")->call(child("post_attention_layernorm")->call(h));
    return add(h, child("mlp_sconv")->call(mlp));
  }
};

// InklingTextModel: embed_tokens (padding_idx = pad_token_id), layers, norm, embed_norm (applied
// to the token embeddings before the first layer); empty until build(), like DecoderLayer.
class Model : public Module {
 public:
  Model() : Module("InklingTextModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto list = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(list->push_back(std::make_shared<DecoderLayer>()));
    }
    register_module("norm", norm(c.hidden_size, c, o));
    register_module("embed_norm", norm(c.hidden_size, c, o));
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("embed_norm")->call(child("embed_tokens")->call(ids));
    for (const auto& layer : layers_) h = layer->call(h);
    return child("norm")->call(h);
  }

 private:
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
};

// InklingForCausalLM: model, lm_head (never tied); the final hidden states divided by
// logits_mup_width_multiplier (ModelConfig::logits_scaling) before lm_head. The logits past
// unpadded_vocab_size, which transformers drops, are computed and kept (docs/models.md).
class ForCausalLm : public Module {
 public:
  ForCausalLm(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("InklingForCausalLM"), divisor_(c.logits_scaling) {
    auto model = register_module("model", std::make_shared<Model>());
    register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    model->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    return child("lm_head")->call(div(child("model")->call(ids), divisor_));
  }

 private:
  double divisor_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<ForCausalLm>(c, o, training);
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"head_dim", "swa_head_dim"},
                                    {"global_head_dim", "head_dim"},
                                    {"sliding_num_attention_heads", "swa_num_attention_heads"},
                                    {"sliding_num_key_value_heads", "swa_num_key_value_heads"},
                                    {"sliding_window", "sliding_window_size"},
                                    {"linear_conv_kernel_dim", "conv_kernel_size"},
                                    {"num_local_experts", "n_routed_experts"},
                                    {"intermediate_size", "moe_intermediate_size"},
                                    {"dense_intermediate_size", "intermediate_size"},
                                    {"dense_layers", "mlp_layer_types"},
                                    {"shared_expert_intermediate_size", "n_shared_experts"},
                                    {"logits_scaling", "logits_mup_width_multiplier"}};

// Megatron-LM's split (family.h), as InklingTextConfig.base_model_tp_plan splits the MLPs: q, k,
// v and the relative states r_proj column-parallel by heads (each projection's rows are head by
// head: a contiguous split is whole heads, and a head's k_sconv/v_sconv channels, q/k norms and
// relative logits stay on its rank; the depthwise convolutions and the profiles `proj` [r, R],
// shared by every head, are replicated), o_proj row-parallel; the dense MLP as Llama's; the routed
// experts and the two shared experts split on F (style "experts": gate and up column-parallel,
// down row-parallel; the shared experts' gate_proj and up_proj are tensors of their own, each
// split plainly); the router, the layer norms and attn_sconv / mlp_sconv (on the reduced hidden
// states) replicated; the embedding and lm_head by vocabulary rows.
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.q_proj", "colwise"},
                                          {"model.layers.*.self_attn.k_proj", "colwise"},
                                          {"model.layers.*.self_attn.v_proj", "colwise"},
                                          {"model.layers.*.self_attn.r_proj", "colwise"},
                                          {"model.layers.*.self_attn.o_proj", "rowwise"},
                                          {"model.layers.*.mlp.gate_proj", "colwise"},
                                          {"model.layers.*.mlp.up_proj", "colwise"},
                                          {"model.layers.*.mlp.down_proj", "rowwise"},
                                          {"model.layers.*.mlp.experts", "experts"},
                                          {"model.layers.*.mlp.shared_experts", "experts"},
                                          {"lm_head", "colwise"}};

// InklingPreTrainedModel._init_weights: PreTrainedModel's (Linear and Conv1d weights normal(0,
// initializer_range), Embedding rows normal with the pad_token_id row zero, RMSNorm weights one),
// then the relative profiles `proj` normal, the MLP's global_scale one, the fused experts normal,
// the router's weight normal, its global_scale one and its bias zero, the shared experts' three
// tensors normal.
constexpr InitRule kOwnInitRules[] = {
    {"InklingRelativeLogits", "proj", InitFill::kNormal},
    {"InklingMLP", "global_scale", InitFill::kOnes},
    {"InklingTopkRouter", "weight", InitFill::kNormal},
    {"InklingTopkRouter", "global_scale", InitFill::kOnes},
    {"InklingTopkRouter", "e_score_correction_bias", InitFill::kZeros},
    {"InklingSharedExperts", "gate_proj", InitFill::kNormal},
    {"InklingSharedExperts", "up_proj", InitFill::kNormal},
    {"InklingSharedExperts", "down_proj", InitFill::kNormal},
    {"Conv1d", "weight", InitFill::kNormal}};
constexpr auto kInitRules =
    models::concat_init_rules(kOwnInitRules, models::kRotaryDecoderInitRules);

}  // namespace

// No rotary embedding and no position table (rotary, learned_positions false): the relative
// position bias and the short convolutions carry positions, so a sequence past
// max_position_embeddings is planned as ALiBi's is. router_score_bias stays kNone: the
// score-correction bias is a parameter the model builds and counts.
const ModelFamily kInklingTextFamily{
    .model_type = "inkling_text",
    .hf_class_prefix = kFamily,
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = false,
    .moe = true,
    .experts_class = "InklingExperts",
    .unloaded_key = "model.mtp.",
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
