// The rotary decoder shaped like Llama, shared by the families whose transformers code is a copy
// of modeling_llama.py with small changes (llama, mistral, mixtral, qwen2, gemma): one parse of
// the LlamaConfig fields with the defaults each family's config class sets, its to_hf_json, and
// one builder taking the class prefix and the norm. Internal to tensor/models/; each family's own
// differences (extra fields, biases, defaults, norm) live in its family_<model_type>.cpp.
//   void parse(const ConfigFields& f, ModelConfig& c) {
//     parse_rotary_decoder(f, c, {.max_position_embeddings = 4096 * 32, .rms_norm_eps = 1e-6});
//     c.sliding_window = f.opt_integer("sliding_window");
//   }
//   ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
//     return build_rotary_decoder(c, o, training, {.prefix = "Mistral"});
//   }
#pragma once

#include <array>
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/gated_delta_net.h"
#include "tensor/models/latent_attention.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// The defaults of a family's config class where config.json leaves a field out.
// The sizes a family's config class defaults when its file omits them. Most families' files state
// every size and a file without one is refused (a config with no hidden_size is not a model's);
// a family whose real files omit sizes (Gemma 3's text_config inside the multimodal config.json)
// gives its config class's defaults here.
struct RotaryDecoderSizes {
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  int64_t num_key_value_heads;
};

struct RotaryDecoderDefaults {
  std::optional<RotaryDecoderSizes> sizes = std::nullopt;  // absent: the sizes are required
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  bool tie_word_embeddings = false;
  const char* act_key = "hidden_act";  // Gemma: hidden_activation
  const char* hidden_act = "silu";
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads (Gemma 2 and 3: 256)
  bool mrope = false;    // a rope_scaling of type "mrope" is no scaling (Qwen2-VL, Qwen2.5-VL)
};

// The fields every such family reads: sizes, heads (num_key_value_heads defaults to heads,
// head_dim to hidden / heads), max positions, activation, rms_norm_eps, tied embeddings,
// rope_theta, rope_scaling, attention_dropout. Biases, sliding window and experts are the
// family's to read.
void parse_rotary_decoder(const ConfigFields& f, ModelConfig& c, const RotaryDecoderDefaults& d);
// sliding_window as transformers' configs with a default window read it: null means none, absent
// the default (MistralConfig, Qwen2Config, Qwen3Config: 4096).
std::optional<int64_t> sliding_window_or(const ConfigFields& f, int64_t absent);
// Qwen's sliding windows (Qwen2Config, Qwen3Config, Qwen2MoeConfig, Qwen3MoeConfig): a window
// only with use_sliding_window (sliding_window_or 4096; without it the window and layer_types are
// ignored, as the configs set sliding_window to None), max_window_layers (default 28), and the
// layer types from the file's layer_types, else `rule`. Qwen attention slides only on
// "sliding_attention" layers: a "chunked_attention" entry attends in full. A config class without
// layer_types (Qwen3MoeConfig: every layer slides) passes has_layer_types false: `rule` decides.
void parse_qwen_sliding_window(const ConfigFields& f, ModelConfig& c,
                               AttentionType (*rule)(const ModelConfig&, int64_t),
                               bool has_layer_types = true, int64_t max_window_layers = 28);
void qwen_sliding_window_to_hf_json(const ModelConfig& c, nlohmann::json& j,
                                    bool has_layer_types = true);
// Qwen2Config's and Qwen3Config's rule: layer i slides from max_window_layers on.
AttentionType slides_from_max_window_layers(const ModelConfig& c, int64_t layer);
// The MoE fields of Qwen2-MoE and Qwen3-MoE: num_experts, num_experts_per_tok,
// moe_intermediate_size (the experts' width; intermediate_size is then the dense layers'), and
// which layers are sparse: layer i routes to experts unless it is in mlp_only_layers or
// (i + 1) % decoder_sparse_step != 0 (Qwen3MoeDecoderLayer).
void parse_qwen_moe(const ConfigFields& f, ModelConfig& c);
void qwen_moe_to_hf_json(const ModelConfig& c, nlohmann::json& j);
// The renames of those families (errors name the file's keys).
inline constexpr FieldRename kQwenMoeRenames[] = {{"norm_eps", "rms_norm_eps"},
                                                  {"num_local_experts", "num_experts"},
                                                  {"intermediate_size", "moe_intermediate_size"},
                                                  {"dense_intermediate_size", "intermediate_size"},
                                                  {"dense_layers", "mlp_only_layers"}};

// The MoE fields of DeepSeek-V3 and GLM-4.5 (DeepseekV3Config, Glm4MoeConfig): n_routed_experts,
// num_experts_per_tok, moe_intermediate_size (the experts' width; intermediate_size is then the
// dense layers'), n_shared_experts shared experts of that width (one MLP of their summed width),
// the first first_k_dense_replace layers dense; the grouped top-k routing (n_group, topk_group,
// routed_scaling_factor, norm_topk_prob) is read and changes no shape. `d` holds the config
// class's defaults for first_k_dense_replace and n_shared_experts.
struct DeepseekMoeDefaults {
  int64_t first_k_dense_replace = 3;
  int64_t n_shared_experts = 1;
  // The experts' sizes when the file omits them; 0: required (most families' files state them,
  // and one without them is more likely the wrong file; Solar Open's class defaults them all).
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  // A.X-K2: moe_layer_freq is a period, layer i sparse when i >= first_k_dense_replace and
  // i % moe_layer_freq == 0 (AXK2Config); others refuse any moe_layer_freq but 1.
  bool moe_layer_freq_period = false;
};
void parse_deepseek_moe(const ConfigFields& f, ModelConfig& c, const DeepseekMoeDefaults& d);
// DeepSeek's group-limited routing: n_group (default 1) must divide the experts and topk_group
// (default 1) lie in [1, n_group]; refused naming n_group otherwise.
void check_expert_groups(const ConfigFields& f, const ModelConfig& c);
// The width of `count` shared experts of `width` (>= 0, read from `key`) as one MLP: refused,
// naming `key`, when the product does not fit in int64 (validate() bounds it afterwards).
int64_t shared_experts_width(const ConfigFields& f, const char* key, int64_t count, int64_t width);
void deepseek_moe_to_hf_json(const ModelConfig& c, nlohmann::json& j);
inline constexpr FieldRename kDeepseekMoeRenames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"num_local_experts", "n_routed_experts"},
    {"intermediate_size", "moe_intermediate_size"},
    {"dense_intermediate_size", "intermediate_size"},
    {"dense_layers", "first_k_dense_replace"},
    {"shared_expert_intermediate_size", "n_shared_experts"}};

// Granite's four multipliers (GraniteConfig, GraniteMoeConfig, GraniteMoeSharedConfig: each 1.0
// when absent; attention_multiplier, the softmax scale, must be positive), and back.
void parse_granite_multipliers(const ConfigFields& f, ModelConfig& c);
void granite_multipliers_to_hf_json(const ModelConfig& c, nlohmann::json& j);

// Cohere's logit_scale (CohereConfig, Cohere2Config: 0.0625 when absent; the logits are
// multiplied by it, so a null one is refused).
void parse_logit_scale(const ConfigFields& f, ModelConfig& c);

// A key of a family's own released files that transformers' class does not read: a file stating
// anything but what transformers builds (`built`) describes another model, refused as
// "<value>: transformers' <family> builds <what>; expected <built>".
void require_built_value(const ConfigFields& f, const char* key, const nlohmann::json& built,
                         std::string_view family, const char* what);

// The pad_token_id of the family's config class where the file has no such key (a null one
// stays none, as transformers reads it); parse_model_config checks it against the vocabulary.
void pad_token_id_or(const ConfigFields& f, ModelConfig& c, int64_t absent);

// The RoPE a config class fills in when the file has neither rope_parameters nor rope_scaling
// (Ministral3Config, Mistral4Config, ApertusConfig): its base and its scaling. A file's top-level
// rope_theta does not replace that base (convert_rope_params_to_dict only sets it where the
// parameters lack one).
void class_rope_unless_given(const ConfigFields& f, ModelConfig& c, double theta,
                             const RopeScaling& scaling);
// What such a family writes so that reading it back does not apply the class's scaling: with no
// scaling, rope_parameters of type "default" at c's base.
void say_when_rope_is_unscaled(const ModelConfig& c, nlohmann::json& j);

// Which layers rotate q and k, as SmolLM3Config and Llama4TextConfig read it: no_rope_layers, one
// integer per layer (1: RoPE, 0: none; SmolLM3 takes a longer list and reads the first entries,
// `longer_ok`), else every layer but each no_rope_layer_interval-th (default 4). Returns the NoPE
// layers, sorted (ModelConfig::nope_layers); to_hf_json writes them back with no_rope_layers_json.
std::vector<int64_t> parse_no_rope_layers(const ConfigFields& f, int64_t layers, bool longer_ok);
nlohmann::json no_rope_layers_json(const ModelConfig& c);

// transformers' layer_types when the file has one (each "full_attention", "sliding_attention" or
// "chunked_attention", one per layer), else `rule(i)` for each layer i (the family's default).
std::vector<AttentionType> parse_layer_types(const ConfigFields& f, int64_t layers,
                                             AttentionType (*rule)(const ModelConfig&, int64_t),
                                             const ModelConfig& c);
nlohmann::json layer_types_json(const ModelConfig& c);
// EXAONE 4's and Cohere2's hybrid attention: the windowed layers rotate q and k, the full ones
// take no position encoding (ModelConfig::nope_layers gets them, and every layer when the config
// has no window). `types` (one per layer) holding chunked_attention, which neither runs, is
// refused naming `family`.
void rope_on_windowed_layers_only(const ConfigFields& f, ModelConfig& c,
                                  const std::vector<AttentionType>& types, std::string_view family);
// Every layer slides when the config has a sliding_window (Mistral, Mixtral, Phi-3: their
// attention passes config.sliding_window to every layer); the rule for parse_layer_types.
AttentionType every_layer_sliding(const ModelConfig& c, int64_t layer);

// What parse_rotary_decoder reads back, and sliding_window when set.
void rotary_decoder_to_hf_json(const ModelConfig& c, nlohmann::json& j,
                               const char* act_key = "hidden_act");

// These families spell norm_eps rms_norm_eps (ModelFamily::renamed).
inline constexpr FieldRename kRotaryDecoderRenames[] = {{"norm_eps", "rms_norm_eps"}};

// LlamaPreTrainedModel._init_weights, shared by Mistral, Qwen2 and the MoE families (their own
// _init_weights are the same): Linear weights and Embedding rows normal(0, initializer_range), the
// padding_idx row (config.pad_token_id, when set) zero, Linear biases zero, RMSNorm weights one
// (their constructor value; recent transformers fill them explicitly), LayerNorm weights one and
// biases zero. The routers are Linear
// modules; the fused experts' projections are normal(0, initializer_range) and their biases zero
// (transformers 5's _init_weights for the *Experts modules).
inline constexpr InitRule kRotaryDecoderInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"*", "gate_up_proj", InitFill::kNormal},
    {"*", "down_proj", InitFill::kNormal},
    {"*", "gate_up_proj_bias", InitFill::kZeros},
    {"*", "down_proj_bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"RMSNorm", "weight", InitFill::kOnes},
    // DeepSeek Sparse Attention's indexer k_norm (nn.LayerNorm, as _init_weights fills it).
    {"LayerNorm", "weight", InitFill::kOnes},
    {"LayerNorm", "bias", InitFill::kZeros}};

// The rules of `first`, then those of `then` (the first match wins): a family's own rules before
// shared ones.
template <size_t A, size_t B>
constexpr std::array<InitRule, A + B> concat_init_rules(const InitRule (&first)[A],
                                                        const InitRule (&then)[B]) {
  std::array<InitRule, A + B> out{};
  for (size_t i = 0; i < A; ++i) out[i] = first[i];
  for (size_t i = 0; i < B; ++i) out[A + i] = then[i];
  return out;
}

// The Mamba-2 decoders' _init_weights (GraniteMoeHybridPreTrainedModel's, BambaPreTrainedModel's):
// in each mixer dt_bias and D one, A_log = log(1 .. heads), the gated norm's weight one (an
// RMSNorm by its class name), the depthwise convolution as PreTrainedModel fills nn.Conv1d
// (weight normal(0, initializer_range), bias zero); the rest as the Llama-shaped decoders.
inline constexpr InitRule kMamba2MixerInitRules[] = {
    {"*", "mamba.A_log", InitFill::kLogArange}, {"*", "mamba.dt_bias", InitFill::kOnes},
    {"*", "mamba.D", InitFill::kOnes},          {"*", "mamba.norm.weight", InitFill::kOnes},
    {"Conv1d", "weight", InitFill::kNormal},    {"Conv1d", "bias", InitFill::kZeros}};
inline constexpr auto kMamba2DecoderInitRules =
    concat_init_rules(kMamba2MixerInitRules, kRotaryDecoderInitRules);

// The tensor-parallel plan of the Llama-shaped decoders (ModelFamily::tp_plan); the patterns match
// tensor/models/rotary_decoder.cpp's module names, which are transformers'.
inline constexpr TensorParallelRule kRotaryDecoderTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"lm_head", "colwise"}};
// The hybrids of attention and Mamba-2 layers named as Bamba names them (bamba, falcon_h1): the
// same attention, the gated MLP as `feed_forward`, the Mamba-2 mixer's in_proj column-parallel and
// out_proj row-parallel (tp must divide mamba_n_groups, ParallelDim tp); its convolution, dt_bias,
// A_log, D and gated norm follow the sharded channels.
inline constexpr TensorParallelRule kMamba2HybridTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mamba.in_proj", "colwise"},
    {"model.layers.*.mamba.out_proj", "rowwise"},
    {"model.layers.*.feed_forward.gate_proj", "colwise"},
    {"model.layers.*.feed_forward.up_proj", "colwise"},
    {"model.layers.*.feed_forward.down_proj", "rowwise"},
    {"lm_head", "colwise"}};
// The MoE families: the same attention, and every expert split like a gated MLP (the style
// "experts": gate_up_proj split on its features, each half over the ranks, down_proj on its input
// features: Megatron-LM's expert tensor parallelism); the shared expert as a dense MLP; the router
// stays replicated. A dense
// layer of a mixed stack (ModelConfig::dense_layers) splits its MLP as Llama's; the planner
// applies the rules that match the model at hand (planner/cost/tensor_parallel.h).
inline constexpr TensorParallelRule kMoeTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_expert.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_expert.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_expert.down_proj", "rowwise"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// GraniteMoe and GraniteMoeShared: the MoE plan under their names (block_sparse_moe), the shared
// MLP's fused input_linear column-parallel over its two halves, [gate; up] (as GLM-4's
// gate_up_proj), its output_linear row-parallel.
inline constexpr TensorParallelRule kGraniteMoeTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.block_sparse_moe.experts", "experts"},
    {"model.layers.*.shared_mlp.input_linear", "colwise", 2},
    {"model.layers.*.shared_mlp.output_linear", "rowwise"},
    {"lm_head", "colwise"}};

// How a family lays out its MoE blocks (transformers 5): the router's name and bias and whether it
// comes before the experts, the experts' layout and biases, the shared expert's name and gate.
struct MoeStyle {
  std::string_view router = "gate";
  bool router_bias = false;
  bool router_first = true;  // Mixtral, Qwen2-MoE; Qwen3-MoE and DeepSeek register experts first
  GroupedExperts::Layout layout = GroupedExperts::Layout::kOutIn;
  bool expert_bias = false;
  bool interleaved_gate_up = false;                // GPT-OSS: gate and up in alternating columns
  bool sigmoid_router = false;                     // DeepSeek-V3: sigmoid scores instead of softmax
  std::string_view shared_name = "shared_expert";  // DeepSeek: "shared_experts"
  bool shared_gate = false;  // Qwen2-MoE: the shared expert's output times sigmoid(gate(x))
  // ERNIE 4.5: the router is its own module (<prefix>TopKRouter) holding `weight` [E, h] in
  // float32 and a `moe_statics` child (<prefix>Statics) whose e_score_correction_bias [1, E] is a
  // frozen float32 parameter (counted by transformers, unlike DeepSeek's buffer); the router's
  // logits are a float32 GEMM.
  bool router_with_statics = false;
  // GraniteMoeShared: the shared MLP is the layer's own `shared_mlp` (one fused input_linear
  // [gate; up] and output_linear), beside the sparse block rather than inside it; its output joins
  // the routed experts' before the residual multiplier.
  bool shared_in_layer = false;
  // HunYuan MoE: the router "gate" is its own module (<prefix>Gate) holding a float32 linear
  // "wg" [E, h]; the tokens are cast to float32 for the logits.
  bool float32_wg_router = false;
  // GraniteMoe: the softmax runs over the top k logits only (no renormalization); others take a
  // softmax over every expert, then the top k renormalized.
  bool softmax_after_top_k = false;
  // HY 3: the block's class name (HYV3MoE; empty: <prefix>SparseMoeBlock), and its router
  // <prefix>TopKRouter, a bare `weight` [E, h] in the model's dtype whose logits are a float32
  // GEMM (tokens and weight cast up on every call).
  std::string_view block_class = {};
  bool float32_topk_router = false;
  // The routed and shared outputs summed in float32 (ModelConfig::moe_float32_combine).
  bool float32_combine = false;
  // AFMoE: the router a module of this class holding the Linear `gate` (registered under
  // `router`), the shared experts registered before the routed ones, and a frozen parameter [E]
  // of this name registered last (expert_bias: it picks the top k; transformers counts it).
  std::string_view router_class = {};
  bool shared_before_experts = false;
  std::string_view frozen_bias = {};
  // A.X K1: an RMSNorm over hidden_size registered last in the block under this name, applied to
  // the block's output (routed + shared) before it joins the residual stream. Empty: none.
  std::string_view output_norm = {};
};

// DeepSeek-V3's MoE block, which GLM-4.5, GLM-4.7-Flash, DeepSeek-V3.2 and GLM-5 share: the
// experts registered before the sigmoid router "gate", then "shared_experts".
inline constexpr MoeStyle kDeepseekMoeStyle{
    .router_first = false, .sigmoid_router = true, .shared_name = "shared_experts"};

// The names of the per-head q and k norms (RotaryDecoderStyle::qk_norm_names).
struct QkNormNames {
  std::string_view q = "q_norm";
  std::string_view k = "k_norm";
};
inline constexpr QkNormNames kHunYuanQkNormNames{"query_layernorm", "key_layernorm"};

enum class LinearMixer : uint8_t { kGatedDeltaNet, kMamba2, kShortConv };

// The gated MLP's projections (LFM2: w1, w3, w2).
struct MlpNames {
  std::string_view gate = "gate_proj";
  std::string_view up = "up_proj";
  std::string_view down = "down_proj";
};

// Where a layer's norms sit: before each half (Llama), before and after each half (Gemma 2 and 3:
// input, post_attention, pre_feedforward and post_feedforward norms; GLM-4: input and
// post_attention before each half, post_self_attn and post_mlp after it, registered in that
// order), after each half only (OLMo 2: post_attention and post_feedforward norms, no input
// norm), or one norm before both halves run side by side (Cohere: x + attn(n) + mlp(n), n the
// input_layernorm of x).
enum class NormPlacement : uint8_t { kPre, kSandwich, kGlmSandwich, kPost, kParallel };

struct RotaryDecoderStyle {
  std::string_view prefix;  // "Llama": LlamaForCausalLM, LlamaDecoderLayer, LlamaAttention, ...
  // The norms of width `dim` (layer, final and q/k norms); unset: RMSNorm with a weight
  // (LlamaRMSNorm).
  ModulePtr (*make_norm)(int64_t dim, double eps, const TensorOptions& o) = nullptr;
  bool scale_embeddings = false;  // embeddings * sqrt(hidden) (Gemma's normalizer)
  // A norm over head_dim on each head of q and k before RoPE (Qwen3's and Gemma 3's q_norm and
  // k_norm, registered after o_proj as transformers does).
  bool qk_norm = false;
  // Cohere's use_qk_norm: those norms with a weight per head, [heads, head_dim] for q and
  // [kv_heads, head_dim] for k (made by this; unset: make_norm over head_dim). Read only with
  // qk_norm.
  ModulePtr (*make_head_norm)(int64_t heads, int64_t head_dim, double eps,
                              const TensorOptions& o) = nullptr;
  // Those norms' names, and whether they norm the rotated q and k (HunYuan: query_layernorm and
  // key_layernorm, after RoPE) rather than q and k before RoPE.
  QkNormNames qk_norm_names = {};
  bool qk_norm_after_rope = false;
  // Cohere: q and k rotated in float32 (cast up before RoPE, back after), as its
  // apply_rotary_pos_emb does.
  bool rope_in_float32 = false;
  // OLMo 2: q_norm and k_norm over the whole projection width, right after q_proj and k_proj.
  bool qk_norm_full_width = false;
  // BitNet's Sub-LN (Wang et al. 2023, "Magneto: A Foundation Transformer", ICML): a norm over
  // the merged heads before o_proj (attn_sub_norm, registered after o_proj, over hidden_size:
  // the heads must span it) and over act(gate) * up before down_proj (ffn_sub_norm, registered
  // after down_proj, over the MLP width).
  bool sub_norms = false;
  NormPlacement norms = NormPlacement::kPre;
  // StableLM's hidden_dropout: ModelConfig::resid_dropout drops out the feed-forward half's
  // output only (others drop out both halves).
  bool resid_dropout_ffn_only = false;
  // The names of the norms before the token mixer (Apertus: attention_layernorm) and before the
  // feed-forward (Bamba: pre_ff_layernorm; Apertus: feedforward_layernorm).
  std::string_view input_norm_name = "input_layernorm";
  std::string_view post_attention_norm_name = "post_attention_layernorm";
  // The norms around the feed-forward (NormPlacement::kSandwich; kPost has the second only),
  // named as Gemma 2 names them (AFMoE: pre_mlp_layernorm and post_mlp_layernorm).
  std::string_view pre_ffn_norm_name = "pre_feedforward_layernorm";
  std::string_view post_ffn_norm_name = "post_feedforward_layernorm";
  // The norms after each half in GLM-4's layout (NormPlacement::kGlmSandwich; HyperCLOVA X:
  // post_norm1 and post_norm2).
  std::string_view post_self_attn_norm_name = "post_self_attn_layernorm";
  std::string_view post_mlp_norm_name = "post_mlp_layernorm";
  // The attention's output projection (LFM2: out_proj) and the gated MLP's names.
  std::string_view o_proj_name = "o_proj";
  MlpNames mlp_names = {};
  // Phi-3: attention's o_proj then one qkv_proj ([q; k; v]); the MLP's gate_up_proj ([gate; up]).
  bool fused_projections = false;
  // GLM-4: the MLP's gate_up_proj ([gate; up]) alone, q, k and v apart (Phi3MLP).
  bool fused_gate_up = false;
  // Arcee: an MLP without a gate, down_proj(act(up_proj(x))) (up_proj registered first), its two
  // projections so named (Starcoder2: c_fc and c_proj).
  bool ungated_mlp = false;
  std::string_view ungated_in_name = "up_proj";
  std::string_view ungated_out_name = "down_proj";
  bool attention_sinks = false;  // GPT-OSS: a learned logit per head, `sinks` [heads]
  // MiMo-V2-Flash: those sinks on the sliding layers only; and v times
  // ModelConfig::attention_value_scale before attention.
  bool sinks_on_sliding_layers_only = false;
  bool scale_values = false;
  // Falcon-H1: k times ModelConfig::key_multiplier once split into heads, before any k norm and
  // RoPE (FalconH1Attention), even at 1.
  bool scale_keys = false;
  // Llama 4: with ModelConfig::qk_norm_per_head the RoPE layers (not ModelConfig::nope_layers)
  // L2-normalize q and k per head after rotating them (Llama4TextL2Norm, no weight).
  bool l2_qk_norm_on_rope_layers = false;
  // DeepSeek-V3: multi-head latent attention (tensor/models/latent_attention.h) instead of q, k,
  // v and o projections.
  bool latent_attention = false;
  // A.X-K2: that attention's queries and an output gate from one q_gate_proj
  // [heads (d + r + v), 2 q_lora_rank] over [q_a_layernorm(q_a); q_a]; each head's first d + r
  // channels are its query, the other v its gate: o_proj(out * sigmoid(gate)), the gate in float32.
  bool latent_query_gate = false;
  // Qwen3-Next: q_proj makes, per head, the query and a gate as wide; the attention output is
  // multiplied by sigmoid(gate) before o_proj (Qwen3NextAttention).
  bool output_gate = false;
  // AFMoE: the gate a projection of its own under this name ([heads * head_dim, h], no bias,
  // registered after the q/k norms): o_proj(out * sigmoid(gate(x))). Empty: none.
  std::string_view separate_output_gate = {};
  // The token mixer of kLinear layers: the Gated DeltaNet ("linear_attn", with these
  // projections, tensor/models/gated_delta_net.h), Mamba-2 ("mamba",
  // tensor/models/mamba2_mixer.h) or LFM2's short convolution ("conv", <prefix>ShortConv,
  // tensor/models/short_conv.h).
  LinearMixer linear_mixer = LinearMixer::kGatedDeltaNet;
  // The Mamba-2 mixer's type, after the prefix ("MambaLayer": GraniteMoeHybridMambaLayer;
  // Bamba: "Mixer"); its gated norm is <prefix>RMSNormGated.
  std::string_view linear_mixer_name = "MambaLayer";
  GatedDeltaProjections linear_projections = GatedDeltaProjections::kFusedPerKeyHead;
  std::string_view ffn_name = "mlp";  // the feed-forward module of a layer (Llama 4: feed_forward)
  std::string_view final_norm_name = "norm";  // the model's last norm (LFM2: embedding_norm)
  // NanoChat: that last norm (parameterless there) also normalizes the token embeddings before the
  // first layer: NanoChatModel.forward calls its one `norm` module twice.
  bool norm_embeddings = false;
  // GraniteMoe: the layer registers its norms before the feed-forward (self_attn,
  // input_layernorm, post_attention_layernorm, block_sparse_moe); others after it.
  bool norms_before_ffn = false;
  // GraniteMoeHybrid: the token mixer (self_attn or mamba) registered last, after the norms and
  // the feed-forward; and with MoeStyle::shared_in_layer a layer without routed experts has the
  // layer's shared_mlp as its whole feed-forward.
  bool mixer_last = false;
  // GraniteMoeHybrid: no rotary_emb module at all when no layer rotates (its model builds one only
  // for position_embedding_type "rope"); others build it always.
  bool rotary_module_only_with_rope = false;
  // Granite: ModelConfig's embedding_multiplier, residual_multiplier, attention_multiplier (the
  // softmax scale) and logits_scaling (logits divided by it), applied always.
  bool granite_multipliers = false;
  // HyperCLOVA X: with granite_multipliers, the logits multiplied by logits_scaling rather than
  // divided.
  bool logits_scaling_multiplies = false;
  // MiniCPM3: with granite_multipliers, logits_scaling divides the final hidden states before
  // lm_head instead of the logits after it.
  bool logits_scaling_on_hidden = false;
  // Cohere: the logits times ModelConfig::logit_scale, always.
  bool logit_scale = false;
  MoeStyle moe = {};
};

// <prefix>ForCausalLM of `c` (tensor/models/rotary_decoder.cpp lists its parameter names). A
// config with num_local_experts > 0 gets Mixtral's sparse MoE blocks.
// The attention these decoders build for a layer of kind `kind` (its q, k, v and o projections,
// norms, RoPE and window as `style` says), typed "<prefix>Attention": for families whose layers
// are laid out otherwise (Nemotron-H's single-part blocks).
std::shared_ptr<AttentionBlock> make_rotary_attention(const ModelConfig& c, const LayerKind& kind,
                                                      const RotaryDecoderStyle& style,
                                                      const std::string& prefix,
                                                      const TensorOptions& o, bool training);

ModulePtr build_rotary_decoder(const ModelConfig& c, const TensorOptions& o, bool training,
                               const RotaryDecoderStyle& style);

// Note [Expected-load MoE] in models.h: the routed experts run on their expected share of the
// tokens `flat` [T, h] x k assignments, their outputs weighted by `weights` [T, k] (the routing
// weights of each token's top k) and summed per token: [T, h]. For families whose MoE block is
// laid out otherwise (Gemma 4's router and experts in the decoder layer itself).
Tensor expected_load_experts(GroupedExperts& experts, const Tensor& flat, const Tensor& weights);

}  // namespace shardplan::tensor::models
