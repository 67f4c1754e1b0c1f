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

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"
#include "tensor/module.h"

namespace shardplan::tensor::models {

// The defaults of a family's config class where config.json leaves a field out.
struct RotaryDecoderDefaults {
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  bool tie_word_embeddings = false;
  const char* act_key = "hidden_act";  // Gemma: hidden_activation
  const char* hidden_act = "silu";
};

// The fields every such family reads: sizes, heads (num_key_value_heads defaults to heads,
// head_dim to hidden / heads), max positions, activation, rms_norm_eps, tied embeddings,
// rope_theta, rope_scaling, attention_dropout. Biases, sliding window and experts are the
// family's to read.
void parse_rotary_decoder(const ConfigFields& f, ModelConfig& c, const RotaryDecoderDefaults& d);
// What parse_rotary_decoder reads back, and sliding_window when set.
void rotary_decoder_to_hf_json(const ModelConfig& c, nlohmann::json& j,
                               const char* act_key = "hidden_act");

// These families spell norm_eps rms_norm_eps (ModelFamily::renamed).
inline constexpr FieldRename kRotaryDecoderRenames[] = {{"norm_eps", "rms_norm_eps"}};

// LlamaPreTrainedModel._init_weights, shared by Mistral, Qwen2 and Mixtral (their own
// _init_weights are the same): Linear weights and Embedding rows normal(0, initializer_range), the
// padding_idx row (config.pad_token_id, when set) zero, Linear biases zero, RMSNorm weights one
// (their constructor value; recent transformers fill them explicitly). Mixtral's router and
// experts are Linear modules, so they follow the same rules.
inline constexpr InitRule kRotaryDecoderInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"RMSNorm", "weight", InitFill::kOnes}};

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
// Mixtral: the same attention, and every expert split like a gated MLP (w1 and w3 column-parallel,
// w2 row-parallel: Megatron-LM's expert tensor parallelism); the router stays replicated. A dense
// layer of a mixed stack (ModelConfig::dense_layers) splits its MLP as Llama's; the planner
// applies the rules that match the model at hand (planner/cost/tensor_parallel.h).
inline constexpr TensorParallelRule kMixtralTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.block_sparse_moe.experts.*.w1", "colwise"},
    {"model.layers.*.block_sparse_moe.experts.*.w3", "colwise"},
    {"model.layers.*.block_sparse_moe.experts.*.w2", "rowwise"},
    {"lm_head", "colwise"}};

struct RotaryDecoderStyle {
  std::string_view prefix;  // "Llama": LlamaForCausalLM, LlamaDecoderLayer, LlamaAttention, ...
  // The layer and final norms; unset: RMSNorm with a weight (LlamaRMSNorm).
  ModulePtr (*make_norm)(const ModelConfig& c, const TensorOptions& o) = nullptr;
  bool scale_embeddings = false;  // embeddings * sqrt(hidden) (Gemma's normalizer)
  // RMSNorm over head_dim on each head of q and k before RoPE (Qwen3's q_norm and k_norm,
  // registered after o_proj as transformers does).
  bool qk_norm = false;
};

// <prefix>ForCausalLM of `c` (tensor/models/rotary_decoder.cpp lists its parameter names). A
// config with num_local_experts > 0 gets Mixtral's sparse MoE blocks.
ModulePtr build_rotary_decoder(const ModelConfig& c, const TensorOptions& o, bool training,
                               const RotaryDecoderStyle& style);

}  // namespace shardplan::tensor::models
