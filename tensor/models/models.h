// Hugging Face causal language models as Module trees on meta tensors, with exactly the Hugging
// Face parameter names and shapes (so a safetensors checkpoint lines up by name), and a forward
// that runs through the tensor ops so a trace (tensor/op_graph.h) records the real FLOPs.
//   ModelConfig cfg = find_model_config("llama3-70b");
//   ModulePtr lm = build_model(cfg);                      // meta, cfg.torch_dtype
//   lm->parameters_numel();                               // 70,553,706,496
//   OpGraph g = trace_model_forward(*lm, /*batch=*/1, /*seq=*/4096);
//
// Families (ModelConfig::model_type), one registry entry each (tensor/models/family.h): llama
// (1/2/3/3.1), mistral, mixtral, qwen2, gemma (one rotary decoder, tensor/models/rotary_decoder.h),
// gpt2 (family_gpt2.cpp), gpt_neox (family_gpt_neox.cpp).
//
// Note [What the traced forward counts]
// Attention is one scaled_dot_product_attention op with grouped-query heads (enable_gqa), counted
// in full (s^2, causal or not, sliding window or not), as Megatron's formulas and PyTorch's FLOP
// counter do. Rotary embedding is the pointwise ops it is: the cos/sin tables once per forward
// (position x inv_freq, cat, cos, sin), then per q and k: two halves, neg, cat, two mul, add.
// Position ids are a free int64 [1, S] tensor (HF's arange, which needs data). Dropout runs only in
// a model built with BuildOptions::training. Non-persistent buffers (rotary inv_freq) are
// registered as HF does, so named_buffers(persistent_only) matches a state_dict.
//
// Note [Expected-load MoE]
// Routing is data dependent, so a Mixtral block is traced capacity-free at its expected load: the
// router (gate Linear + softmax in float32) runs on every token, the top-k weights are the first
// k probabilities (a view standing in for topk, renormalized as Mixtral does), and EVERY expert
// runs on ceil(tokens * k / num_experts) tokens, i.e. every token reaches k experts under a
// perfectly balanced router. The k outputs per token are then weighted and summed. Expert FLOPs
// are therefore exact in expectation (exact when tokens * k divides by num_experts); real routing
// imbalance and capacity-factor drops are not modelled.
//
// Note [Zero-computation experts]
// LongCat-Flash's router (Meituan LongCat Team 2025, "LongCat-Flash Technical Report", §2.1)
// scores E routed experts and Z zero-computation experts (ModelConfig::zero_experts) and picks its
// top k among all E + Z; a zero expert returns the token itself times its routing weight: no
// parameter, no GEMM. Under balanced routing a token's k picks reach computing experts
// k E / (E + Z) times on average (LongCat-Flash-Chat: 12 x 512 / 768 = 8, the average the report
// holds with a PID-controlled expert bias; its "~27B activated on average" is the model with 8
// experts a layer, 18.6B with none and 31.3B with 12). So the expected-load trace runs each of
// the E experts on ceil(tokens k / (E + Z)) tokens, the zero experts' picks add the weighted
// token, and active_parameters counts k E / (E + Z) experts a MoE layer. transformers 5 sizes
// LongcatFlashExperts.gate_up_proj by E + Z slices though only the first E compute (down_proj
// has E): the Z idle slices are parameters (in the total, in memory, split by expert
// parallelism), never active.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tensor/models/model_config.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"

namespace shardplan::tensor {

struct BuildOptions {
  std::optional<DType> dtype;  // parameters' (and activations') dtype; unset: cfg.torch_dtype
  bool training = false;       // adds the config's dropout ops to the forward
};

// The model `cfg` describes, on meta; forward(ids [B, S] int64) -> logits [B, S, vocab]. The root
// is the Hugging Face *ForCausalLM module (type name "LlamaForCausalLM", "GPT2LMHeadModel", ...).
// Validates `cfg` first (validate(cfg)).
ModulePtr build_model(const ModelConfig& cfg, const BuildOptions& opts = {});

// Meta token ids [batch, seq] (int64), what a model's forward takes.
Tensor token_ids(int64_t batch, int64_t seq);

// trace_forward of `model` on token_ids(batch, seq). Throws shardplan::Error for non-positive
// sizes.
OpGraph trace_model_forward(Module& model, int64_t batch, int64_t seq);

// What a parameter is part of, from the module types of its ancestors: "embedding" (token and
// position tables), "attention", "mlp", "router" and "experts" (MoE), "norm", "lm_head" (an
// untied output layer; a tied one is the embedding and counts there once).
std::string block_kind(const Module& root, std::string_view parameter_fqn);

// Elements per block kind (keys of block_kind), each parameter once (ties de-duplicated).
std::map<std::string, int64_t> parameters_by_kind(const Module& root);

// The routed experts one token's top k reaches on average: num_experts_per_tok, or with zero
// experts k E / (E + Z) (Note [Zero-computation experts]); 0 for a dense model.
double routed_experts_per_token(const ModelConfig& cfg);

// The parameters one token passes through: every parameter but the routed experts, and top-k of
// each MoE layer's experts (parameters_by_kind's "experts" / num_local_experts x
// num_experts_per_tok; with zero experts, routed_experts_per_token of them, the idle slices left
// out). `root` is the model `cfg` builds. Equals the total for a dense model.
int64_t active_parameters(const Module& root, const ModelConfig& cfg);

// What a checkpoint holds beside the parameters transformers counts: the routers' per-expert
// e_score_correction_bias buffers (ModelFamily::router_score_bias: E per MoE layer, E + Z with
// zero experts), and the
// multi-token prediction modules (ModelConfig::mtp_layers; DeepSeek-AI 2024, "DeepSeek-V3" §2.2):
// each one MoE decoder layer, a projection eh_proj [h, 2h], the norms enorm, hnorm and
// shared_head.norm, and its router's bias; the embedding and output head are the model's, shared.
struct ParametersBeyondModel {
  int64_t router_bias = 0;
  int64_t mtp = 0;
};
ParametersBeyondModel parameters_beyond_model(const ModelConfig& cfg);

// The FQN of the ModuleList holding the repeated blocks, the family's ModelFamily::layers_path
// ("model.layers", "transformer.h", "gpt_neox.layers"): the planner's repeated block. Throws for
// an unsupported model_type.
std::string layers_path(const ModelConfig& cfg);

}  // namespace shardplan::tensor
