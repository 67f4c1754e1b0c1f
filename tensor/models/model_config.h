// The architecture of a decoder-only language model as a plain value, parsed strictly from a
// Hugging Face config.json. Parsing (JSON) and building (tensor/models/models.h) are separate, so
// the planner can build models from configs it synthesizes without any JSON.
//   ModelConfig c = load_model_config(find_config("models", "llama3-70b"));
//   c.num_hidden_layers = 2;                                   // a smaller variant
//   auto model = build_model(c);                               // tensor/models/models.h
//
// Note [Strict config parsing]
// Hugging Face's config classes fill every absent field with a default; a planner must not silently
// plan Llama-2-7B because a field was misspelled. So the fields that fix parameter shapes
// (vocabulary, hidden, intermediate, layers, heads, experts) are required; the ones Hugging Face
// documents as optional with a default that depends on the others (num_key_value_heads = heads,
// head_dim = hidden / heads, tie_word_embeddings, biases, rope) take that default. Wrong JSON
// types, non-positive sizes and inconsistent values are errors naming the file and the field.
// Unknown fields (tokenizer ids, dropout of inference configs, ...) are ignored, as HF does,
// except those that change the architecture (layer_types, first_k_dense_replace, ...): a family
// that does not read one refuses it (Note [Architecture fields nobody read] in model_config.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace shardplan::tensor {

// The model families shardplan builds: Hugging Face's `model_type` values, sorted (one registry
// entry each, tensor/models/family.h).
std::vector<std::string> supported_model_types();

// `rope_scaling` of Llama 3.1 and friends (transformers' modeling_rope_utils).
struct RopeScaling {
  std::string rope_type;  // "linear", "dynamic", "yarn", "longrope", "llama3"
  double factor = 1;      // context extension factor, >= 1
  // llama3 only (transformers' _compute_llama3_parameters):
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  std::optional<int64_t> original_max_position_embeddings;
  bool operator==(const RopeScaling&) const = default;
};

// How a decoder layer attends (transformers' layer_types): to every earlier position, to the last
// sliding_window positions (itself included), to the positions of its own attention_chunk_size
// chunk (Llama 4), to the index_topk earlier positions a lightning indexer selects (DeepSeek
// Sparse Attention: DeepSeek-V3.2, GLM-5), or through a recurrent state instead of keys (linear
// attention: Qwen3-Next's Gated DeltaNet layers), or not at all (kNone: a Nemotron-H block that
// is only a feed-forward). DeepSeek-V4's layers attend a sliding window plus compressed entries:
// kCompressedSparse the index_topk entries a lightning indexer picks among windows of
// compress_rate_csa tokens, kHeavilyCompressed every earlier entry of compress_rate_hca tokens
// (tensor/models/compressed_attention.h).
enum class AttentionType : uint8_t {
  kFull,
  kSliding,
  kChunked,
  kSparse,
  kLinear,
  kNone,
  kCompressedSparse,
  kHeavilyCompressed
};
// "full_attention", "sliding_attention", "chunked_attention", "deepseek_sparse_attention",
// "linear_attention", "compressed_sparse_attention", "heavily_compressed_attention":
// transformers' spelling; kNone "none".
std::string_view to_string(AttentionType t);

struct ModelConfig {
  std::string model_type;  // one of supported_model_types()
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // MLP width (per expert for MoE)
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // == heads: MHA; 1: MQA; between: GQA
  int64_t head_dim = 0;             // q/k/v width per head (Gemma: not hidden / heads)
  int64_t max_position_embeddings = 0;
  std::string hidden_act;  // HF's name: "silu", "gelu", "gelu_new", "gelu_pytorch_tanh", ...
  double norm_eps = 1e-5;  // rms_norm_eps or layer_norm_eps / layer_norm_epsilon
  bool tie_word_embeddings = false;
  bool qkv_bias = false;      // biases of q, k, v projections (Qwen2: true; Llama: attention_bias)
  bool o_bias = false;        // bias of the output projection (Llama: attention_bias)
  bool mlp_bias = false;      // biases of MLP projections (Llama mlp_bias; GPT-2/NeoX: always)
  bool lm_head_bias = false;  // a bias on the output layer [vocab] (PhiMoE's lm_head_bias)
  double rope_theta = 10000;  // rotary base (GPT-NeoX: rotary_emb_base)
  double partial_rotary_factor = 1;  // fraction of head_dim rotated (GPT-NeoX rotary_pct)
  std::optional<RopeScaling> rope_scaling;
  std::optional<int64_t> sliding_window;  // the window of kSliding layers
  int64_t max_window_layers = 0;  // Qwen2 with use_sliding_window: layers from this one on slide
  // Per layer, how it attends; empty: every layer full attention. Families fill it from
  // layer_types or their own rule (Mistral: every layer sliding when sliding_window is set).
  std::vector<AttentionType> layer_types;
  // The layers, sorted, that apply no rotary embedding to q and k (NoPE: SmolLM3's and Llama 4's
  // no_rope_layers zeros); empty: every layer rotates.
  std::vector<int64_t> nope_layers;
  int64_t attention_chunk_size = 0;  // the chunk of kChunked layers (Llama 4)
  // Gemma 2: logits = cap * tanh(logits / cap) (final_logit_softcapping); 0: none.
  double final_logit_softcapping = 0;
  // Scalar multipliers that some families apply always, even at 1 (their builders read them; the
  // others leave them at their defaults): Granite's muP-style embedding_multiplier (the token
  // embeddings times it), residual_multiplier (each half's output times it before it joins the
  // residual stream), attention_multiplier (the softmax scale in place of 1/sqrt(head_dim); 0:
  // that default) and logits_scaling (the logits divided by it); Cohere's logit_scale (the
  // logits times it). docs/models.md, "Granite" and "Cohere".
  double embedding_multiplier = 1;
  double residual_multiplier = 1;
  double attention_multiplier = 0;
  double logits_scaling = 1;
  double logit_scale = 1;
  // Falcon-H1's muP multipliers (its builder reads them, each one multiply even at 1; its
  // embeddings take embedding_multiplier above): k before RoPE (key_multiplier), the attention's
  // input and output (attention_in_multiplier, attention_out_multiplier), the Mamba-2 mixer's
  // input and output (ssm_in_multiplier, ssm_out_multiplier), the logits (lm_head_multiplier,
  // a product, unlike Granite's logits_scaling), the MLP's gate projection before its activation
  // and its output (mlp_multipliers [gate, down]), and the mixer's in_proj output by segment
  // z, x, B, C, dt (ssm_multipliers: its non-persistent mup_vector buffer).
  double key_multiplier = 1;
  double attention_in_multiplier = 1;
  double attention_out_multiplier = 1;
  double ssm_in_multiplier = 1;
  double ssm_out_multiplier = 1;
  double lm_head_multiplier = 1;
  double mlp_gate_multiplier = 1;
  double mlp_down_multiplier = 1;
  std::array<double, 5> ssm_multipliers = {1, 1, 1, 1, 1};
  // Muse Glimmer's qk_scale_factor: q times it after its weightless QK-norm, before RoPE, on top
  // of the softmax's 1/sqrt(head_dim) (its builder multiplies even at 1; others leave it at 1).
  double query_multiplier = 1;
  int64_t num_local_experts = 0;          // MoE (Mixtral); 0 = dense MLP
  int64_t num_experts_per_tok = 0;        // top-k of the router
  // LongCat-Flash's zero-computation experts (zero_expert_num): the router picks its top k among
  // num_local_experts + zero_experts, and a zero expert returns the token itself, weighted (Note
  // [Zero-computation experts] in tensor/models/models.h). 0: none; other families keep it 0.
  int64_t zero_experts = 0;
  // MoE models whose stack mixes layer kinds (tensor/models/layer_kinds.h): the layers, sorted,
  // that keep a dense MLP instead of routed experts (DeepSeek's first_k_dense_replace, Qwen-MoE's
  // mlp_only_layers), and that MLP's width (0: intermediate_size). Families that read no such
  // field leave them empty; a config built in code may set them.
  std::vector<int64_t> dense_layers;
  int64_t dense_intermediate_size = 0;
  // The shared expert beside the routed ones in every MoE layer, always active (Qwen2-MoE's
  // shared_expert_intermediate_size; DeepSeek's n_shared_experts x moe_intermediate_size): its
  // MLP width, 0 when there is none.
  int64_t shared_expert_intermediate_size = 0;
  // HY 3 (enable_moe_fp32_combine): the routed and shared experts' outputs summed in float32,
  // then cast back (two float32 copies of the tokens and a float32 add per MoE layer).
  bool moe_float32_combine = false;
  // Multi-head latent attention (DeepSeek-V2/V3; tensor/models/latent_attention.h): the ranks of
  // the query and key-value latents (q_lora_rank 0: queries projected directly), the unrotated
  // and rotated query/key widths per head and the value width per head. kv_lora_rank 0: none.
  // head_dim is then the rotated width, as transformers sets it.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Without latent attention, v_head_dim > 0 is the value width per head of the Llama-shaped
  // attention (MiMo-V2-Flash: 128 beside q/k heads of 192; value_head_dim in layer_kinds.h). That
  // attention's sliding layers may have their own key-value heads (0: num_key_value_heads;
  // MiMo-V2-Flash's are twice the full layers'), and v may be scaled before attention (MiMo's
  // attention_value_scale).
  int64_t sliding_num_key_value_heads = 0;
  double attention_value_scale = 1;
  // Laguna: the sliding layers' own query heads (its num_attention_heads_per_layer: XS.2 has 64 on
  // the sliding layers, 48 on the full ones; 0: num_attention_heads), which make q_proj, o_proj
  // and the output gate as wide on those layers (attention_heads_of in layer_kinds.h); and that
  // gate, o_proj(out * softplus(g_proj(x))), one value per head broadcast over its channels (true:
  // gating true or "per-head") or one per channel (false: "per-element").
  int64_t sliding_num_attention_heads = 0;
  bool attention_gate_per_head = false;
  // Gemma 4: the full-attention layers' own head width and key-value heads (global_head_dim,
  // num_global_key_value_heads; 0: head_dim and num_key_value_heads, which are then the sliding
  // layers'), and attention_k_eq_v: those layers have no v_proj, their values are the key
  // projection's output before k_norm and RoPE (head_dim_of and kv_heads_of in layer_kinds.h).
  int64_t global_head_dim = 0;
  int64_t global_num_key_value_heads = 0;
  bool attention_k_eq_v = false;
  // Inkling's relative position bias (tensor/models/family_inkling_text.cpp): each layer projects
  // every token to d_rel relative states per head (r_proj) and mixes them through a bank of
  // bias-by-distance profiles [d_rel, extent], extent rel_extent on full layers and the sliding
  // window on sliding ones (0: none; other families keep both 0). From position
  // log_scaling_n_floor on (0: never), the full layers scale their queries (and that bias) by
  // 1 + log_scaling_alpha log(position / log_scaling_n_floor).
  int64_t d_rel = 0;
  int64_t rel_extent = 0;
  int64_t log_scaling_n_floor = 0;
  double log_scaling_alpha = 0;
  // Gemma 4 E2B and E4B. The last num_kv_shared_layers layers attend with the keys and values of
  // the last earlier layer of their type and have no key or value projections of their own
  // (LayerKind::kv_shared); with double_wide_shared_mlp their MLPs are twice as wide. Per-layer
  // embeddings (hidden_size_per_layer_input; 0: none): a table of per_layer_input_vocab rows
  // holding, per token, a slice of per_layer_input_size for each of per_layer_input_layers
  // layers, and a projection of the embeddings as wide; each layer gates its slice into the
  // residual. per_layer_input_layers is the full model's layer count, which a one-layer model of
  // a kind keeps: the table and its projection run once per model, at its start.
  int64_t num_kv_shared_layers = 0;
  bool double_wide_shared_mlp = false;
  int64_t per_layer_input_size = 0;
  int64_t per_layer_input_vocab = 0;
  int64_t per_layer_input_layers = 0;
  // Gemma 3n (tensor/models/family_gemma3n_text.cpp). AltUp (Baykal et al. 2023, "Alternating
  // Updates for Efficient Transformers"): altup_num_inputs copies of the hidden state pass between
  // the layers ([B, S, n, h]; 0: none, a plain residual), each layer predicting them from one
  // another, running on one and correcting the others by what it made; with altup_correct_scale
  // the corrected active copy is scaled by a learned vector before the per-layer gate. LAuReL
  // (Menghani et al. 2024, "LAuReL: Learned Augmented Residual Layer"): a low-rank residual of
  // rank laurel_rank beside each attention (0: none). activation_sparsity: per layer, the share of
  // the MLP's gate activations kept at zero by a Gaussian cutoff (mean + std x Phi^-1(share));
  // empty or 0: none (LayerKind::sparse_activation).
  int64_t altup_num_inputs = 0;
  bool altup_correct_scale = false;
  int64_t laurel_rank = 0;
  std::vector<double> activation_sparsity;
  // DeepSeek-V3's multi-token prediction modules (num_nextn_predict_layers): trained beside the
  // model, dropped by transformers (not in the parameter total).
  int64_t mtp_layers = 0;
  // DeepSeek Sparse Attention (tensor/models/latent_attention.h): the lightning indexer's heads
  // and head width (index_n_heads 0: no indexer), the keys each query attends (index_topk), and
  // the layers, sorted, that reuse an earlier layer's selection and have no indexer of their own
  // (GLM-5's indexer_types "shared"). Layers attend kSparse (layer_types).
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  std::vector<int64_t> shared_indexer_layers;
  // MiniMax-M3's indexer picks whole blocks of this many keys (ModelFamily::block_sparse_attention;
  // index_topk is then its index_topk_blocks times this); 0: single keys (DeepSeek).
  int64_t index_block_size = 0;
  // DeepSeek-V4 (tensor/models/compressed_attention.h, hyper_connections.h): the tokens pooled
  // into one compressed entry on kCompressedSparse and kHeavilyCompressed layers; the grouped
  // low-rank output projection (o_groups groups of heads, each projected to o_lora_rank); hc_mult
  // residual streams mixed by hyper-connections (0: a plain residual), their Sinkhorn iterations
  // and epsilon; the RoPE base of the compressed layers; the layers, sorted, that route tokens
  // by a fixed token-to-expert table instead of a learned top-k (hash_moe).
  int64_t compress_rate_csa = 0;
  int64_t compress_rate_hca = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  double compress_rope_theta = 0;
  std::vector<int64_t> hash_moe_layers;
  // Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks"; Qwen3-Next's linear_attention
  // layers, tensor/models/gated_delta_net.h): its key heads and value heads (a multiple of the
  // key heads, which are repeated to match), their widths, and the width of the causal depthwise
  // convolution over q, k and v. Set when a layer attends kLinear; 0 otherwise. A Mamba-2 layer
  // (tensor/models/mamba2_mixer.h) has the same parts under other names: its B/C groups
  // (mamba_n_groups) are the key heads, the state width (mamba_d_state) their width, its heads
  // (mamba_n_heads) the value heads and the head width (mamba_d_head) theirs, mamba_d_conv the
  // convolution's; and the convolution's bias (mamba_conv_bias) and the in/out projections'
  // biases (mamba_proj_bias).
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;
  bool linear_conv_bias = false;
  bool linear_proj_bias = false;
  // Falcon-H1 splits what the other Mamba-2 families fix: the gated RMSNorm may be absent
  // (mamba_rms_norm false: y * silu(z) inside the scan), and out_proj's bias has its own key
  // (projectors_bias; unset: linear_proj_bias, as in_proj's).
  bool linear_gated_norm = true;
  std::optional<bool> linear_out_proj_bias;
  // Mamba-1 (Gu and Dao 2023; tensor/models/mamba_mixer.h, Jamba's mamba layers): the rank of the
  // time step's projection (mamba_dt_rank), > 0 for a Mamba-1 mixer. Such a mixer has no heads:
  // its d_inner channels are the value heads, each of width 1 (every channel has its own time
  // step, as a Mamba-2 head has), B and C one group (linear_num_key_heads 1) of the state width;
  // Zamba's mixer splits the channels into linear_num_key_heads heads, each with its own x_proj
  // (so its own B and C), dt_proj, A and D (tensor/models/family_zamba.cpp).
  // 0: not Mamba-1 (the other families leave it 0).
  int64_t linear_dt_rank = 0;
  // MiniMax's lightning attention (ModelFamily::lightning_mixer; block_size): the tokens of one
  // block of its intra/inter split, which sizes its persistent decay buffers ([H, B, 1] twice and
  // [1, H, B, B]; the fused op is priced at kLightningBlock whatever it says). 0 for the others.
  int64_t linear_block_size = 0;
  // FalconMamba's mixer_rms_eps: the epsilon of its Mamba-1 mixer's dt, B and C RMSNorms, which
  // differs from the block norms' layer_norm_epsilon. 0: norm_eps (Jamba's mixer norms take
  // rms_norm_eps); the other families leave it 0.
  double linear_norm_eps = 0;
  // OLMo Hybrid's linear_allow_neg_eigval: the Gated DeltaNet's write strength beta = 2 sigmoid(b),
  // in [0, 2] (negative eigenvalues of the state transition); one more elementwise multiply, no
  // shape. The Qwen families leave it false.
  bool linear_allow_neg_eigval = false;
  // xLSTM's weight_mode "fused": the mLSTM layer's q, k, v and output gate one projection
  // (qkv_opreact), its input and forget gates one (ifgate_preact), the feed-forward's gate and up
  // one (proj_up_gate_z); false ("single"): each its own. The other families leave it false.
  bool fused_projections = false;
  // Falcon-H1: every layer runs a Mamba-2 mixer (the linear_* fields) beside its attention, both
  // on the same normed input, their outputs summed (LayerKind::parallel_mamba); layer_types stay
  // the attention's.
  bool parallel_mamba = false;
  // Mamba2Config's and MambaConfig's residual_in_fp32: each block adds its output to a float32
  // copy of the residual, so the stream between blocks is float32 (twice the bytes of bfloat16
  // activations kept there). Read by the families that build it (tensor/models/mamba_lm.h: mamba,
  // falcon_mamba, mamba2); the others leave it false.
  bool residual_in_fp32 = false;
  // Single-part layers (Nemotron-H's blocks: ModelFamily::single_part_layers): the layers, sorted,
  // that have a token mixer and no feed-forward; a layer without a mixer attends kNone.
  std::vector<int64_t> no_ffn_layers;
  // Zamba2's shared transformer blocks (ModelFamily::shared_transformer_blocks): num_mem_blocks
  // blocks of attention and MLP whose weights the hybrid layers (those attending kFull) take in
  // turn, each layer with its own adapters of rank adapter_rank on the MLP's gate_up_proj,
  // and on q, k and v with shared_attention_adapter (Zamba: one block, adapter_rank 0, none).
  // 0: no shared blocks (every other family).
  int64_t num_mem_blocks = 0;
  int64_t adapter_rank = 0;
  bool shared_attention_adapter = false;
  // HRM-Text's hierarchical recurrence (Note [Layers run in cycles] in
  // tensor/models/layer_kinds.h; ModelFamily::paired_layers_path): a low-level and a high-level
  // stack of num_hidden_layers layers each, h_cycles times the low-level stack l_cycles times and
  // then the high-level one, the same weights every time; in training, in high cycle i only the
  // last l_grad_cycles(c, i) low-level passes keep an autograd graph, the list l_bp_cycles as the
  // file gives it (transformers' L_bp_cycles, left-padded with 1s to h_cycles entries). 0 and
  // empty: no recurrence (every other family).
  int64_t h_cycles = 0;
  int64_t l_cycles = 0;
  std::vector<int64_t> l_bp_cycles;
  // Nemotron 3's latent MoE: the routed experts work at this width between two projections from
  // and back to hidden_size (0: at hidden_size).
  int64_t moe_latent_size = 0;
  // A.X-K2's gated norms (gated_norm_rank; 0: none): every layer's input_layernorm, and the
  // post_attention_layernorm of MoE layers, are an RMSNorm followed by a gate through this rank,
  // y * sigmoid(fc2(silu(fc1(y)))) with y the normed input (AXK2GatedRMSNorm).
  int64_t gated_norm_rank = 0;
  // ZAYA1's compressed convolutional attention (tensor/models/cca_attention.h): the widths over
  // time of its two convolutions of the concatenated queries and keys, depthwise (cca_time0) then
  // grouped by head (cca_time1); and its router's own width (router_hidden_size: the tokens
  // projected to it, an MLP there, the logits from it). 0: none (every other family).
  int64_t cca_time0 = 0;
  int64_t cca_time1 = 0;
  int64_t router_hidden_size = 0;
  // A norm over head_dim on each head of q and k, for families where it is optional (GLM-4.5's
  // use_qk_norm); families that always have one say so in their builder.
  bool qk_norm_per_head = false;
  bool use_parallel_residual = false;     // GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x))
  // BLOOM's (Megatron-LM's) apply_residual_connection_post_layernorm: each half adds its output
  // to its normed input, n + attn(n) with n = ln1(x), rather than to its input x.
  bool apply_residual_connection_post_layernorm = false;
  // Falcon's new_decoder_architecture (Falcon-40B, -180B, Falcon2-11B): the fused query_key_value
  // laid out per key-value group, whose k and v the model code copies out to every query head
  // before attention, and a parallel layer normed by num_ln_in_parallel_attn LayerNorms (2:
  // ln_attn and ln_mlp; 1: one input_layernorm for both; 0: not a parallel layer). Other
  // families leave both unset.
  bool new_decoder_architecture = false;
  int64_t num_ln_in_parallel_attn = 0;
  // HyperCLOVA X's use_post_norm (Peri-LN): each half's output normed again before it joins the
  // residual stream.
  bool use_post_norm = false;
  // OPT's do_layer_norm_before false (OPT-350m): each half's LayerNorm applied after its residual
  // add (the original Transformer's post-norm, Vaswani et al. 2017), and no final norm.
  bool norm_after_residual = false;
  // OPT's layer_norm_elementwise_affine false: its LayerNorms have neither weight nor bias.
  bool norm_elementwise_affine = true;
  // OPT's word_embed_proj_dim (OPT-350m: 512 beside a hidden size of 1,024): the token embeddings
  // and the output layer at this width, projected to hidden_size before the layers (project_in)
  // and back after them (project_out). 0: hidden_size, no projections.
  int64_t word_embed_proj_dim = 0;
  // OLMo's clip_qkv: q, k and v clamped to [-clip_qkv, clip_qkv] right after their projections;
  // unset: none.
  std::optional<double> clip_qkv;
  // Muse Glimmer's post_norm_eps: the epsilon of the norms on each half's output (after the
  // attention and after the MLP, before the residual add); 0: norm_eps, as the other families
  // norm everything with it.
  double post_norm_eps = 0;
  // Cohere2-MoE without rms_norm_eps: its norms subtract the mean (a LayerNorm with a weight
  // only, layer_norm_eps) rather than RMSNorm.
  bool mean_subtracting_norms = false;
  // AFMoE's mup_enabled: the token embeddings times sqrt(hidden_size), as Gemma's always are.
  bool scale_embeddings = false;
  // Dropout probabilities applied when a model is built for training (GPT-2's embd/attn/resid
  // pdrop; Llama-family attention_dropout).
  double embd_dropout = 0;
  double attention_dropout = 0;
  double resid_dropout = 0;
  DType torch_dtype = DType::kFloat32;  // parameters' dtype (absent in the file: float32, as HF)
  // How the model computes attention when trained (Hugging Face's attn_implementation: "eager",
  // "sdpa", "flash_attention_2", ...; also read from "_attn_implementation"). Empty: not stated.
  std::string attn_implementation;
  // Standard deviation of the normal init of weights in the family's _init_weights (Hugging
  // Face's initializer_range; 0.02 when the file does not state it, transformers' default).
  double initializer_range = 0.02;
  // The standard deviation of the token embedding's rows where the family's _init_weights draws
  // them with their own (Youtu's embedding_initializer_range); 0: initializer_range.
  double embedding_initializer_range = 0;
  // DiffLlama's lambda_std_dev: the standard deviation of the normal init of its attention's
  // lambda_q1, lambda_k1, lambda_q2 and lambda_k2 (InitFill::kNormalLambdaStd). No shape depends
  // on it; the other families leave it 0.
  double lambda_std_dev = 0;
  // Hugging Face's pad_token_id (absent or null: none). The Llama-shaped families pass it to
  // nn.Embedding as padding_idx, whose row starts at zero (InitFill::kNormalPaddingRowZero); a
  // negative id counts from the end, as padding_idx does.
  std::optional<int64_t> pad_token_id;
  // Set when the file was a multimodal model's config (Note [Multimodal configs] in
  // model_config.cpp): its model_type ("gemma3", "llama4"), of which this is the text_config,
  // the language model. Not written by to_hf_json: a plan holds the language model alone.
  std::string multimodal_model_type;

  bool operator==(const ModelConfig&) const = default;
};

std::ostream& operator<<(std::ostream& os, const ModelConfig& c);

// Checks what parsing checks on a config built in code: positive sizes, heads dividing, a known
// model_type. `source` names where it came from in the error ("<file>: field 'x': ...").
void validate(const ModelConfig& c, std::string_view source = "model config");

// Strict parse of a Hugging Face config.json document (Note [Strict config parsing]). A
// multimodal config whose text_config is a supported family parses to its language model (Note
// [Multimodal configs]).
ModelConfig parse_model_config(const nlohmann::json& j, std::string_view source = "config.json");
// "" for a language model's own config; for the language model of a multimodal config, a
// sentence saying what is planned and what is not, for the commands to print as a note.
std::string multimodal_note(const ModelConfig& c);
// The Hugging Face config.json fields that describe `c` (what parse_model_config reads back to
// an equal ModelConfig).
nlohmann::json to_hf_json(const ModelConfig& c);

// Reads and parses a file; errors name the file.
ModelConfig load_model_config(const std::filesystem::path& path);
// The config.json `name_or_path` names: a folder's config.json (a Hugging Face model folder, with
// or without weights), a path to a file, or a name in configs/models/ (base/config_paths.h).
// Throws shardplan::Error for a folder without config.json.
std::filesystem::path model_config_path(std::string_view name_or_path);
// load_model_config(model_config_path(name_or_path)).
ModelConfig find_model_config(std::string_view name_or_path);

}  // namespace shardplan::tensor
