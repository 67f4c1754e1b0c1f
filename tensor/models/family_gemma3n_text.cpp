// gemma3n_text (the language model of Google's Gemma 3n E2B and E4B, published as the multimodal
// `gemma3n` files): transformers' Gemma3nTextConfig (E4B's sizes: vocab 262400, hidden 2048, MLP
// 16384, 35 layers of 8 heads and 2 key-value heads of 256, a window of 512 on four layers of
// five, 32768 positions, rms_norm_eps 1e-6, tied, gelu_pytorch_tanh, logits soft-capped at 30,
// the last 15 layers sharing keys and values, per-layer inputs of 256 over 262144 rows) and
// modeling_gemma3n.py. Gemma 4 took its norms, attention, per-layer embeddings and key-value
// sharing from here (tensor/models/gemma_text_blocks.h); what Gemma 3n has of its own
// (docs/models.md "Gemma 3n"):
// - AltUp (Baykal et al. 2023): altup_num_inputs (n = 4) copies of the hidden state between the
//   layers, the first the scaled embeddings, the others their altup_projections [h, h] rescaled to
//   the embeddings' RMS. Each layer predicts every copy from all of them (its `altup`: a router of
//   the active copy, prediction_coefs [n^2, n]), runs on the active copy, and corrects the copies
//   by what it made (correction_coefs [n, n]). At the end altup_unembed_projections bring the
//   copies back, rescaled, and their mean is normed;
// - LAuReL (Menghani et al. 2024): beside the attention, x + norm(linear_right(linear_left(x))) of
//   rank laurel_rank on the normed input, summed with the attention's residual and scaled by
//   2^-1/2;
// - the per-layer gate reads the corrected active copy (times altup.correct_output_scale with
//   altup_correct_scale) and adds to the other copies;
// - activation sparsity: the MLPs of the layers activation_sparsity_pattern marks (by default the
//   first 10 at 0.95) cut their gate at mean + std x Phi^-1(share) over the MLP's width, a relu
//   of the difference, before the activation.
// A layer's parameters, in named_parameters order: self_attn (q_proj [H d, h], q_norm [d], k_proj,
// v_proj [kv d, h], k_norm [d], o_proj [h, H d]; v_norm has no weight; a key-value-shared layer
// has no k or v parts), mlp (gate_proj, up_proj [I, h], down_proj [h, I]), input_layernorm,
// post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm [h], altup
// (correct_output_scale [h], its own, first; correction_coefs [n, n], prediction_coefs [n^2, n],
// modality_router [n, h], router_norm [h]), laurel (linear_left [r, h], linear_right [h, r],
// post_laurel_norm [h]), per_layer_input_gate [P, h], per_layer_projection [h, P],
// post_per_layer_input_norm [h].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/gemma_text_blocks.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kGemma3nTextFamily;  // listed in family_registry.cpp

namespace {

using nlohmann::json;

// Gemma3nTextConfig.default_theta: the full layers' RoPE base and the sliding layers'.
constexpr double kFullTheta = 1e6, kSlidingTheta = 1e4;
// Gemma3nTextConfig's activation_sparsity_pattern when none is given: the first 10 layers (of
// more than 10) at 0.95.
constexpr int64_t kSparseLayers = 10;
constexpr double kSparseShare = 0.95;

// ---- config ----------------------------------------------------------------------------------

// A JSON integer (16384.0 too, as ConfigFields::integer reads one), or nothing.
std::optional<int64_t> integral(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// intermediate_size: one width, or one per layer (Gemma3nTextConfig's list, which the released
// files write out). shardplan builds one MLP width for the whole stack (its layer kinds carry no
// width), so the list's entries must agree.
int64_t parse_intermediate_size(const ConfigFields& f, int64_t layers) {
  if (!f.has("intermediate_size")) return 16384;
  const json& v = f.raw("intermediate_size");
  if (!v.is_array()) return f.integer("intermediate_size");
  if (static_cast<int64_t>(v.size()) != layers) {
    f.fail("intermediate_size", std::to_string(v.size()) +
                                    " widths, expected one for every layer (num_hidden_layers = " +
                                    std::to_string(layers) + ") or one for all");
  }
  const std::optional<int64_t> width = integral(v.at(0));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::optional<int64_t> w = integral(v.at(i));
    if (!w) {
      f.fail("intermediate_size", "entry " + std::to_string(i) + " is " +
                                      v.at(i).dump().substr(0, 30) + ", expected an integer");
    }
    if (*w != *width) {
      f.fail("intermediate_size", "layer " + std::to_string(i) + " is " + std::to_string(*w) +
                                      " wide and layer 0 " + std::to_string(*width) +
                                      ": shardplan builds one MLP width for every layer; "
                                      "expected equal widths");
    }
  }
  return *width;
}

// activation_sparsity_pattern: one share per layer, or (absent or null) Gemma3nTextConfig's
// default. The config class takes its len(), so a single number is refused, as it fails there.
std::vector<double> parse_activation_sparsity(const ConfigFields& f, int64_t layers) {
  std::vector<double> out(static_cast<size_t>(layers), 0.0);
  if (!f.has("activation_sparsity_pattern")) {
    if (layers > kSparseLayers) std::fill_n(out.begin(), kSparseLayers, kSparseShare);
    return out;
  }
  const json& v = f.raw("activation_sparsity_pattern");
  if (!v.is_array() || static_cast<int64_t>(v.size()) != layers) {
    f.fail("activation_sparsity_pattern",
           v.dump().substr(0, 40) +
               ": expected a list of one share per layer (num_hidden_layers = " +
               std::to_string(layers) + ")");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const double share = v.at(i).is_number() ? v.at(i).get<double>() : -1;
    // A share of 1 puts the cutoff at infinity (Phi^-1(1)), and transformers leaves a layer of
    // a negative share dense: neither is a share, both refused.
    if (!(share >= 0 && share < 1)) {
      f.fail("activation_sparsity_pattern", "layer " + std::to_string(i) + ": " +
                                                v.at(i).dump().substr(0, 30) +
                                                ", expected a share in [0, 1)");
    }
    out[i] = share;
  }
  return out;
}

// Layer i slides unless (i + 1) % 5 == 0 (Gemma3nTextConfig's rule when layer_types is absent).
AttentionType gemma3n_layer_type(const ModelConfig&, int64_t i) {
  return (i + 1) % 5 != 0 ? AttentionType::kSliding : AttentionType::kFull;
}

// One layer type's RoPE set after Gemma3nTextConfig.convert_rope_params_to_dict: "default" (the
// whole head; a partial_rotary_factor there is not read, as compute_default_rope_parameters does
// not) or a scaling transformers' rope functions compute, over the whole head. Returns its base;
// the full layers' scaling goes to c.rope_scaling (values only: no shape or work changes).
double parse_rope_set(const ConfigFields& f, const json& set, std::string_view type, double base,
                      ModelConfig& c) {
  const std::string where = "rope_parameters." + std::string(type);
  if (!set.is_object()) {
    f.fail("rope_parameters", where + " is " + set.dump().substr(0, 40) + ", expected an object");
  }
  const ConfigFields s(set, f.source());
  const double theta = s.number("rope_theta", base);
  if (!(theta > 0)) {
    f.fail("rope_parameters", where + ".rope_theta " + std::to_string(theta) + ", expected > 0");
  }
  const std::string kind =
      s.has("rope_type") ? s.string("rope_type", "default") : s.string("type", "default");
  if (kind == "default") return theta;
  const RopeScaling scaling = parse_rope_scaling(set, f, "rope_parameters");
  if (s.has("partial_rotary_factor") && s.number("partial_rotary_factor", 1) != 1) {
    f.fail("rope_parameters", where + ".partial_rotary_factor " +
                                  std::to_string(s.number("partial_rotary_factor", 1)) +
                                  ": Gemma3nTextAttention rotates the whole head; expected 1");
  }
  if (type == "full_attention") c.rope_scaling = scaling;
  return theta;
}

// Gemma3nTextConfig.convert_rope_params_to_dict: rope_parameters keyed by layer type (absent or
// null: "default" for both); a legacy rope_scaling updates the full layers' set; a set without a
// base takes the legacy rope_theta (full layers, default 1e6) or rope_local_base_freq (sliding
// layers, default 1e4). The full layers' base is kept as rope_theta.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.partial_rotary_factor = 1;
  c.rope_scaling.reset();
  json sets = json::object();
  if (f.has("rope_parameters")) {
    sets = f.raw("rope_parameters");
    if (!sets.is_object()) {
      f.fail("rope_parameters", sets.dump().substr(0, 60) +
                                    ": expected an object keyed by layer "
                                    "type, or null");
    }
    for (const auto& [key, value] : sets.items()) {
      if (key != "full_attention" && key != "sliding_attention") {
        f.fail("rope_parameters", "key \"" + key.substr(0, 30) +
                                      "\": Gemma3nRotaryEmbedding reads it by layer type; expected "
                                      "\"full_attention\" and \"sliding_attention\" entries");
      }
    }
  }
  for (const char* type : {"full_attention", "sliding_attention"}) {
    if (!sets.contains(type) || sets.at(type).is_null()) sets[type] = {{"rope_type", "default"}};
  }
  if (f.has("rope_scaling")) {
    const json& legacy = f.raw("rope_scaling");
    if (!legacy.is_object()) {
      f.fail("rope_scaling", legacy.dump().substr(0, 40) + ": expected an object or null");
    }
    if (sets.at("full_attention").is_object()) sets["full_attention"].update(legacy);
  }
  c.rope_theta = parse_rope_set(f, sets.at("full_attention"), "full_attention",
                                f.number("rope_theta", kFullTheta), c);
  parse_rope_set(f, sets.at("sliding_attention"), "sliding_attention",
                 f.number("rope_local_base_freq", kSlidingTheta), c);
}

// Gemma3nTextConfig is a strict dataclass: these fields are typed without None.
constexpr const char* kNotNull[] = {"vocab_size",
                                    "hidden_size",
                                    "intermediate_size",
                                    "num_hidden_layers",
                                    "num_attention_heads",
                                    "num_key_value_heads",
                                    "head_dim",
                                    "hidden_activation",
                                    "max_position_embeddings",
                                    "rms_norm_eps",
                                    "tie_word_embeddings",
                                    "attention_bias",
                                    "sliding_window",
                                    "final_logit_softcapping",
                                    "vocab_size_per_layer_input",
                                    "hidden_size_per_layer_input",
                                    "altup_active_idx",
                                    "altup_coef_clip",
                                    "altup_correct_scale",
                                    "altup_num_inputs",
                                    "num_kv_shared_layers",
                                    "laurel_rank"};

// AltUp and LAuReL: n copies (at least one: predict mixes them with an [n, n] matrix), the active
// copy one of them (which one changes no work: the model builds the first), a finite clip (its
// value changes no work), the rank positive.
void parse_altup_and_laurel(const ConfigFields& f, ModelConfig& c) {
  c.altup_num_inputs = f.integer("altup_num_inputs", 4);
  if (c.altup_num_inputs < 1 || c.altup_num_inputs > 64) {
    f.fail("altup_num_inputs",
           std::to_string(c.altup_num_inputs) + ", expected 1..64 copies of the hidden state");
  }
  const int64_t active = f.integer("altup_active_idx", 0);
  if (active < 0 || active >= c.altup_num_inputs) {
    f.fail("altup_active_idx", std::to_string(active) + ", expected a copy in 0.." +
                                   std::to_string(c.altup_num_inputs - 1));
  }
  const double clip = f.number("altup_coef_clip", 120.0);
  if (!std::isfinite(clip)) {
    f.fail("altup_coef_clip", std::to_string(clip) + ", expected a finite bound");
  }
  c.altup_correct_scale = f.boolean("altup_correct_scale", true);
  c.laurel_rank = f.integer("laurel_rank", 64);
  if (c.laurel_rank <= 0) {
    f.fail("laurel_rank", std::to_string(c.laurel_rank) +
                              ", expected a positive rank (LAuReL is part of every layer)");
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  for (const char* key : kNotNull) {
    if (f.is_null(key)) {
      f.fail(key,
             "is null; Gemma3nTextConfig's field is typed without None (strict): expected a "
             "value, or no key for the class's default");
    }
  }
  c.vocab_size = f.integer("vocab_size", 262400);
  c.hidden_size = f.integer("hidden_size", 2048);
  c.num_hidden_layers = f.integer("num_hidden_layers", 35);
  // Bounded before anything is made per layer, as parse_rotary_decoder bounds it.
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  c.num_attention_heads = f.integer("num_attention_heads", 8);
  c.num_key_value_heads = f.integer("num_key_value_heads", 2);
  c.head_dim = f.integer("head_dim", 256);
  // Gemma3nTextConfig.validate_architecture, although head_dim need not be hidden / heads.
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads",
           std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
               std::to_string(c.hidden_size) + " (Gemma3nTextConfig's check)");
  }
  c.intermediate_size = parse_intermediate_size(f, c.num_hidden_layers);
  c.max_position_embeddings = f.integer("max_position_embeddings", 32768);
  c.hidden_act = f.string("hidden_activation", "gelu_pytorch_tanh");
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  models::pad_token_id_or(f, c, 0);
  c.sliding_window = f.integer("sliding_window", 512);
  if (*c.sliding_window <= 0) {
    f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
  }
  c.layer_types = models::parse_layer_types(f, c.num_hidden_layers, gemma3n_layer_type, c);
  for (const AttentionType t : c.layer_types) {
    if (t != AttentionType::kFull && t != AttentionType::kSliding) {
      f.fail("layer_types",
             std::string(to_string(t)) +
                 ": Gemma 3n masks full_attention and sliding_attention layers only");
    }
  }
  f.has("sliding_window_pattern");  // not a Gemma3nTextConfig field: layer_types decides
  f.has("query_pre_attn_scalar");   // stored by the released files; the softmax scale is 1
  f.has("attn_logit_softcapping");  // not applied by Gemma3nTextAttention
  parse_rope(f, c);
  // Gemma3nForCausalLM divides the logits by the cap: 0 is not "none" there, and null is refused.
  c.final_logit_softcapping = f.number("final_logit_softcapping", 30.0);
  if (!(c.final_logit_softcapping > 0)) {
    f.fail("final_logit_softcapping",
           "must be positive, got " + std::to_string(c.final_logit_softcapping));
  }
  // Per-layer embeddings: always built (a width of 0 would leave zero-width gates).
  c.per_layer_input_size = f.integer("hidden_size_per_layer_input", 256);
  c.per_layer_input_vocab = f.integer("vocab_size_per_layer_input", 262144);
  c.per_layer_input_layers = c.num_hidden_layers;
  if (c.per_layer_input_size <= 0 || c.per_layer_input_vocab <= 0) {
    const bool width = c.per_layer_input_size <= 0;
    f.fail(width ? "hidden_size_per_layer_input" : "vocab_size_per_layer_input",
           std::to_string(width ? c.per_layer_input_size : c.per_layer_input_vocab) +
               ", expected > 0 (Gemma 3n's layers always read their per-layer inputs)");
  }
  // Default 15: a file of fewer layers must say how many share (Gemma3nTextAttention's source
  // search fails with that many).
  models::parse_kv_shared_layers(f, c, 15);
  parse_altup_and_laurel(f, c);
  c.activation_sparsity = parse_activation_sparsity(f, c.num_hidden_layers);
  // No sparse layer: none (ModelConfig's "empty or 0"), so that a config built in code without
  // the list reads back equal.
  if (std::all_of(c.activation_sparsity.begin(), c.activation_sparsity.end(),
                  [](double share) { return share == 0; })) {
    c.activation_sparsity.clear();
  }
}

void to_hf_json(const ModelConfig& c, json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_activation"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  j["attention_bias"] = c.qkv_bias;
  if (c.sliding_window) j["sliding_window"] = *c.sliding_window;
  j["layer_types"] = models::layer_types_json(c);
  json full = {{"rope_type", "default"}};
  if (c.rope_scaling) full = rope_scaling_json(c.rope_scaling);
  full["rope_theta"] = c.rope_theta;
  // The sliding layers' base changes no shape: written as the class's.
  j["rope_parameters"] = {
      {"full_attention", full},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", kSlidingTheta}}}};
  j["final_logit_softcapping"] = c.final_logit_softcapping;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // not the class's 0
  j["hidden_size_per_layer_input"] = c.per_layer_input_size;
  j["vocab_size_per_layer_input"] = c.per_layer_input_vocab;
  j["num_kv_shared_layers"] = c.num_kv_shared_layers;
  j["altup_num_inputs"] = c.altup_num_inputs;
  j["altup_correct_scale"] = c.altup_correct_scale;
  j["laurel_rank"] = c.laurel_rank;
  // Written out in full: without the key the class makes the first 10 layers sparse.
  j["activation_sparsity_pattern"] =
      c.activation_sparsity.empty()
          ? std::vector<double>(static_cast<size_t>(c.num_hidden_layers), 0.0)
          : c.activation_sparsity;
}

// ---- modules ---------------------------------------------------------------------------------

// Gemma3nRMSNorm (tensor/models/gemma_text_blocks.h): x / rms(x), times the weight where it has
// one, in float32; the weight starts at one.
ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o, bool with_scale = true) {
  return std::make_shared<models::ScaledRmsNorm>("Gemma3nRMSNorm", dim, c.norm_eps, with_scale, o);
}

constexpr models::KvSharingAttention::Style kAttentionStyle{
    "Gemma3nTextAttention", "Gemma3nRMSNorm", models::KvSharingAttention::Order::kProjectionsFirst};

// Which AltUp copy the layers run on (altup_active_idx): any one is the same work, and the model
// builds the first. Note [AltUp copies]: the copies are kept as [B, S, n, h], HF's [n, B, S, h]
// transposed, so that no activation of the layer is [.., S, h] with S == h, which the planner
// would take for attention scores (is_score_op, planner/cost/block_cost.cpp) at a sequence as long
// as the hidden size (E4B's 2,048). The ops and their sizes are HF's.
constexpr int64_t kActive = 0;

// Gemma3nTextMLP: down(act(gate(x)) * up(x)), no biases; on a sparse layer the gate first cut
// at mean + std x Phi^-1(share) over the MLP's width (_gaussian_topk: relu(gate - cutoff)).
class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, double share, const TensorOptions& o)
      : Module("Gemma3nTextMLP"), act_(c.hidden_act), share_(share) {
    const int64_t h = c.hidden_size, w = c.intermediate_size;
    register_module("gate_proj", std::make_shared<Linear>(h, w, false, o));
    register_module("up_proj", std::make_shared<Linear>(h, w, false, o));
    register_module("down_proj", std::make_shared<Linear>(w, h, false, o));
  }
  Tensor forward(const Tensor& x) override {
    Tensor gate = child("gate_proj")->call(x);
    if (share_ > 0) {
      // torch.mean, then torch.std (unbiased=False): two reductions over the width; the share
      // stands in for Phi^-1(share), a scalar whose value meta tensors do not hold.
      const Tensor mu = mean(gate, {-1}, /*keepdim=*/true);
      const Tensor sd = sqrt(var(gate, DimVector{-1}, /*correction=*/0, /*keepdim=*/true));
      gate = relu(sub(gate, add(mu, mul(sd, share_))));
    }
    const Tensor a = models::activation(act_, gate);
    return child("down_proj")->call(mul(a, child("up_proj")->call(x)));
  }

 private:
  std::string act_;
  double share_;  // 0: a dense layer
};

// Gemma3nTextLaurelBlock: x + post_laurel_norm(linear_right(linear_left(x))).
class Laurel : public Module {
 public:
  Laurel(const ModelConfig& c, const TensorOptions& o) : Module("Gemma3nTextLaurelBlock") {
    const int64_t h = c.hidden_size, r = c.laurel_rank;
    register_module("linear_left", std::make_shared<Linear>(h, r, false, o));
    register_module("linear_right", std::make_shared<Linear>(r, h, false, o));
    register_module("post_laurel_norm", norm(h, c, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor low = child("linear_right")->call(child("linear_left")->call(x));
    return add(x, child("post_laurel_norm")->call(low));
  }
};

// Gemma3nTextAltUp over the copies [B, S, n, h] (Note [AltUp copies]). Its forward is the scale
// of the corrected active copy (correct_output_scale, zero at init); predict and correct are the
// layer's two calls. The router reads a copy normed and times 1/h (router_input_scale, a scalar
// buffer: a product here), tanh in float32.
class AltUp : public Module {
 public:
  AltUp(const ModelConfig& c, const TensorOptions& o)
      : Module("Gemma3nTextAltUp"), n_(c.altup_num_inputs), hidden_(c.hidden_size) {
    register_parameter("correct_output_scale", empty({hidden_}, o));
    correction_coefs =
        register_module("correction_coefs", std::make_shared<Linear>(n_, n_, false, o));
    prediction_coefs =
        register_module("prediction_coefs", std::make_shared<Linear>(n_, n_ * n_, false, o));
    modality_router =
        register_module("modality_router", std::make_shared<Linear>(hidden_, n_, false, o));
    router_norm = register_module("router_norm", norm(hidden_, c, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor scale = parameter("correct_output_scale");
    return to(mul(to(x, scale.dtype()), scale), x.dtype());
  }
  // The copies predicted from one another: streams + streams^T-mixed by the router's [n, n]
  // coefficients per token (a batched [h, n] x [n, n] product per token).
  Tensor predict(const Tensor& streams) {
    CallScope scope(*this);
    const int64_t b = streams.size(0), s = streams.size(1);
    const Tensor modalities = route(select(streams, 2, kActive));
    // [B, S, n^2] as [B, S, n, n], transposed as HF's permute(0, 1, 3, 2).
    const Tensor coefs =
        transpose(reshape(prediction_coefs->call(modalities), {b, s, n_, n_}), 2, 3);
    const Tensor mixed = matmul(transpose(streams, 2, 3), coefs);  // [B, S, h, n]
    return contiguous(add(transpose(mixed, 2, 3), streams));
  }
  // The predictions corrected by the layer's output `activated` [B, S, h]: each copy plus its own
  // coefficient (+ 1) times the innovation, activated minus the active prediction, repeated n
  // times as HF's repeat copies it.
  Tensor correct(const Tensor& predictions, const Tensor& activated) {
    CallScope scope(*this);
    const int64_t b = activated.size(0), s = activated.size(1);
    const Tensor modalities = route(activated);
    const Tensor innovation = sub(activated, select(predictions, 2, kActive));
    const Tensor repeated = contiguous(expand(unsqueeze(innovation, 2), {b, s, n_, hidden_}));
    const Tensor coefs = unsqueeze(add(correction_coefs->call(modalities), 1.0), -1);
    return add(mul(repeated, coefs), predictions);
  }
  void reset_parameters(uint64_t /*seed*/) override {
    init_member_constant("correct_output_scale", 0.0);
  }
  ModulePtr correction_coefs, prediction_coefs, modality_router, router_norm;

 private:
  // compute_router_modalities: tanh(modality_router(router_norm(x) / h)) in float32 -> [B, S, n].
  Tensor route(const Tensor& x) {
    const Tensor routed =
        modality_router->call(mul(router_norm->call(x), 1.0 / static_cast<double>(hidden_)));
    return to(tanh(to(routed, DType::kFloat32)), x.dtype());
  }
  int64_t n_, hidden_;
};

// Made empty and filled once it sits in its ModuleList (Note [Filling repeated blocks after
// registration], tensor/models/blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("Gemma3nTextDecoderLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) {
    kind_ = layer_kind(c, index);
    act_ = c.hidden_act;
    correct_scale_ = c.altup_correct_scale;
    const int64_t h = c.hidden_size, p = c.per_layer_input_size;
    self_attn = register_module("self_attn", std::make_shared<models::KvSharingAttention>(
                                                 kAttentionStyle, c, kind_, o, training));
    const double share =
        kind_.sparse_activation ? c.activation_sparsity[static_cast<size_t>(index)] : 0.0;
    mlp = register_module("mlp", std::make_shared<Mlp>(c, share, o));
    input_layernorm = register_module("input_layernorm", norm(h, c, o));
    post_attention_layernorm = register_module("post_attention_layernorm", norm(h, c, o));
    pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", norm(h, c, o));
    post_feedforward_layernorm = register_module("post_feedforward_layernorm", norm(h, c, o));
    altup = register_module("altup", std::make_shared<AltUp>(c, o));
    laurel = register_module("laurel", std::make_shared<Laurel>(c, o));
    per_layer_input_gate =
        register_module("per_layer_input_gate", std::make_shared<Linear>(h, p, false, o));
    per_layer_projection =
        register_module("per_layer_projection", std::make_shared<Linear>(p, h, false, o));
    post_per_layer_input_norm = register_module("post_per_layer_input_norm", norm(h, c, o));
  }
  const LayerKind& kind() const { return kind_; }
  models::KvSharingAttention& attention() { return *self_attn; }
  // streams [B, S, n, h] -> [B, S, n, h]; per_layer [B, S, P], this layer's slice.
  Tensor run(const Tensor& streams, const Tensor& cos_t, const Tensor& sin_t,
             const Tensor& per_layer) {
    CallScope scope(*this);
    const Tensor predictions = altup->predict(streams);
    const Tensor active = select(predictions, 2, kActive);
    const Tensor normed = input_layernorm->call(active);
    const Tensor laurel_out = laurel->call(normed);
    const Tensor attn = post_attention_layernorm->call(self_attn->run(normed, cos_t, sin_t));
    const Tensor attn_laurel = div(add(add(active, attn), laurel_out), std::sqrt(2.0));
    const Tensor ffw =
        post_feedforward_layernorm->call(mlp->call(pre_feedforward_layernorm->call(attn_laurel)));
    const Tensor corrected = altup->correct(predictions, add(attn_laurel, ffw));
    // corrected_predictions[active].clone(), scaled by correct_output_scale.
    Tensor first = to(select(corrected, 2, kActive), corrected.dtype(), /*copy=*/true);
    if (correct_scale_) first = altup->call(first);
    const Tensor gated =
        models::per_layer_gate(first, per_layer, *per_layer_input_gate, *per_layer_projection,
                               *post_per_layer_input_norm, act_);
    // HF adds it in place to copies 1..n-1 (corrected_predictions[1:] += ...): traced as one add
    // over the n copies, 1 / n more elementwise work and no copy of the others.
    return add(corrected, unsqueeze(gated, 2));
  }
  std::shared_ptr<models::KvSharingAttention> self_attn;
  std::shared_ptr<AltUp> altup;
  ModulePtr mlp, input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm, laurel, per_layer_input_gate, per_layer_projection,
      post_per_layer_input_norm;

 private:
  LayerKind kind_;
  std::string act_;
  bool correct_scale_ = true;
};

// altup_projections and altup_unembed_projections: nn.ModuleLists of Linears in transformers that
// run once, before and after the layers. Typed apart from ModuleList, whose children the trace
// takes for the repeated blocks (Note [Blocks and recomputation] in tensor/training.h): these
// stay in the embedding and the output parts (planner/cost/block_cost.h), priced once a model.
class ProjectionList : public ModuleList {
 public:
  ProjectionList() : ModuleList("Gemma3nProjectionList") {}
};

// Empty until build(), like DecoderLayer.
class TextModel : public Module {
 public:
  TextModel() : Module("Gemma3nTextModel") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    hidden_ = c.hidden_size;
    per_layer_ = c.per_layer_input_size;
    table_layers_ = c.per_layer_input_layers;
    embed_tokens = register_module("embed_tokens",
                                   std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    norm_ = register_module("norm", norm(c.hidden_size, c, o));
    rotary_emb = register_module(
        "rotary_emb", std::make_shared<models::LayerTypeRotary>("Gemma3nRotaryEmbedding", c));
    // The table and projection cover the full model's layers (per_layer_input_layers), also in a
    // one-layer model of a kind: they run once, at the model's start.
    const int64_t width = table_layers_ * per_layer_;
    embed_tokens_per_layer = register_module(
        "embed_tokens_per_layer", std::make_shared<Embedding>(c.per_layer_input_vocab, width, o));
    per_layer_model_projection = register_module(
        "per_layer_model_projection", std::make_shared<Linear>(c.hidden_size, width, false, o));
    per_layer_projection_norm =
        register_module("per_layer_projection_norm", norm(per_layer_, c, o));
    auto up = register_module("altup_projections", std::make_shared<ProjectionList>());
    auto down = register_module("altup_unembed_projections", std::make_shared<ProjectionList>());
    for (int64_t i = 1; i < c.altup_num_inputs; ++i) {
      altup_projections_.push_back(
          up->push_back(std::make_shared<Linear>(c.hidden_size, c.hidden_size, false, o)));
    }
    for (int64_t i = 1; i < c.altup_num_inputs; ++i) {
      altup_unembed_projections_.push_back(
          down->push_back(std::make_shared<Linear>(c.hidden_size, c.hidden_size, false, o)));
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    // Gemma3nTextScaledWordEmbedding: the rows times sqrt(hidden).
    const Tensor embeds = mul(embed_tokens->call(ids), std::sqrt(static_cast<double>(hidden_)));
    const int64_t b = ids.size(0), s = ids.size(1);
    const Tensor per_layer =
        models::per_layer_inputs(ids, embeds, *embed_tokens_per_layer, *per_layer_model_projection,
                                 *per_layer_projection_norm, table_layers_, per_layer_);
    Tensor streams = spread(embeds);
    std::map<AttentionType, std::pair<Tensor, Tensor>> tables;  // RoPE, one per layer type
    models::SharedKeysAndValues kv;
    const Tensor pos = models::position_ids(s);
    for (size_t i = 0; i < layers_.size(); ++i) {
      DecoderLayer& layer = *layers_[i];
      const AttentionType type = layer.kind().attention;
      auto it = tables.find(type);
      if (it == tables.end()) {
        it = tables.emplace(type, rotary_emb->cos_sin(pos, type, embeds.dtype())).first;
      }
      kv.before(layer.attention(), layer.kind(), b, s, embeds.dtype());
      streams = layer.run(streams, it->second.first, it->second.second,
                          models::per_layer_slice(per_layer, static_cast<int64_t>(i)));
      kv.after(layer.attention(), layer.kind());
    }
    return norm_->call(gather(streams));
  }
  std::shared_ptr<Embedding> embed_tokens, embed_tokens_per_layer;
  std::shared_ptr<models::LayerTypeRotary> rotary_emb;
  ModulePtr per_layer_model_projection, per_layer_projection_norm;

 private:
  // (mean(x^2) over the width)^1/2, as HF writes it: [B, S, 1].
  static Tensor magnitude(const Tensor& x) { return pow(mean(pow(x, 2.0), {-1}, true), 0.5); }
  // x rescaled to the magnitude `target`: x target / max(mean(x^2), 1e-5)^1/2 (HF's
  // epsilon_tensor bounds the mean square).
  static Tensor rescaled(const Tensor& x, const Tensor& target) {
    const Tensor mean_square = mean(pow(x, 2.0), {-1}, true);
    return div(mul(x, target), sqrt(binary(BinaryOp::kMaximum, mean_square, 1e-5)));
  }
  // The embeddings and their altup_projections, rescaled to the embeddings' magnitude: [B, S, n,
  // h] (Note [AltUp copies]).
  Tensor spread(const Tensor& embeds) {
    const Tensor target = magnitude(embeds);
    std::vector<Tensor> copies{embeds};
    for (const auto& p : altup_projections_) copies.push_back(rescaled(p->call(embeds), target));
    return stack(copies, 2);
  }
  // The first copy and the others' altup_unembed_projections, rescaled to the first's magnitude,
  // averaged: [B, S, h].
  Tensor gather(const Tensor& streams) {
    const Tensor first = select(streams, 2, 0);
    const Tensor target = magnitude(first);
    std::vector<Tensor> copies{first};
    for (size_t i = 0; i < altup_unembed_projections_.size(); ++i) {
      const Tensor copy = select(streams, 2, static_cast<int64_t>(i) + 1);
      copies.push_back(rescaled(altup_unembed_projections_[i]->call(copy), target));
    }
    return mean(stack(copies, 2), {2});
  }

  int64_t hidden_ = 0, per_layer_ = 0, table_layers_ = 0;
  ModulePtr norm_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  std::vector<ModulePtr> altup_projections_, altup_unembed_projections_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::SoftcappedCausalLm<TextModel>>("Gemma3nForCausalLM", c, o,
                                                                 training);
}

constexpr FieldRename kGemma3nRenames[] = {{"hidden_act", "hidden_activation"},
                                           {"norm_eps", "rms_norm_eps"},
                                           {"qkv_bias", "attention_bias"},
                                           {"rope_theta", "rope_parameters"},
                                           {"per_layer_input_size", "hidden_size_per_layer_input"},
                                           {"per_layer_input_vocab", "vocab_size_per_layer_input"},
                                           {"activation_sparsity", "activation_sparsity_pattern"}};

// Megatron's split of the attention and the MLP (Gemma3nTextConfig.base_model_tp_plan, q/k/v
// column-parallel by heads, o_proj row-parallel, the MLP's gate and up by columns, down by rows;
// the per-head norms replicated), the token table and the per-layer table by vocabulary rows (the
// per-layer table is a third of E4B's parameters) and lm_head by vocabulary (Gemma3nForCausalLM's
// _tp_plan). AltUp, LAuReL, the per-layer gates and projections and altup_projections are
// replicated: small beside the rest, and their outputs feed norms and products over the whole
// hidden width.
constexpr TensorParallelRule kGemma3nTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                                 {"model.embed_tokens_per_layer", "rowwise"},
                                                 {"model.layers.*.self_attn.q_proj", "colwise"},
                                                 {"model.layers.*.self_attn.k_proj", "colwise"},
                                                 {"model.layers.*.self_attn.v_proj", "colwise"},
                                                 {"model.layers.*.self_attn.o_proj", "rowwise"},
                                                 {"model.layers.*.mlp.gate_proj", "colwise"},
                                                 {"model.layers.*.mlp.up_proj", "colwise"},
                                                 {"model.layers.*.mlp.down_proj", "rowwise"},
                                                 {"lm_head", "colwise"}};

// Gemma3nPreTrainedModel._init_weights: PreTrainedModel's (Linear weights normal, biases zero,
// both embedding tables normal with the padding_idx row zero, every RMSNorm weight one), then
// AltUp's correct_output_scale zero. Its scalar buffers (embed_scale, router_input_scale, the
// per-layer scales) are not built.
constexpr InitRule kGemma3nInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"Gemma3nRMSNorm", "weight", InitFill::kOnes},
    {"Gemma3nTextAltUp", "correct_output_scale", InitFill::kZeros}};

}  // namespace

const ModelFamily kGemma3nTextFamily{
    .model_type = "gemma3n_text",
    .hf_class_prefix = "Gemma3n",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kGemma3nRenames,
    .rope_parameters_by_layer_type = true,
    .tp_plan = kGemma3nTpPlan,
    .init_rules = kGemma3nInitRules,
};

}  // namespace shardplan::tensor
