// The model families shardplan builds, one registry entry per Hugging Face `model_type`: how the
// family's config.json is read and written, how its Module tree is built, and the facts the rest
// of shardplan asks about a family (where the repeated blocks are, whether positions are learned).
//   const ModelFamily* f = find_family("gpt2");      // nullptr for an unsupported model_type
//   f->layers_path;                                  // "transformer.h"
//   for (const ModelFamily* f : model_families()) ...  // sorted by model_type
//
// Note [Adding a model family]
// A family is one file, tensor/models/family_<model_type>.cpp, defining its `const ModelFamily`
// (parse, to_hf_json, build, names, flags, tensor-parallel plan), plus its line in the table of
// tensor/models/family_registry.cpp. Nothing else names a model_type: parse_model_config,
// validate, to_hf_json, build_model and layers_path dispatch through the entry. Rotary decoders
// shaped like Llama reuse tensor/models/rotary_decoder.h (a shared parse with per-family
// defaults, and a builder taking the class prefix and the norm); other layouts bring their own
// builder in their file (family_gpt2.cpp, family_gpt_neox.cpp). An entry that is not registered
// still works through the explicit-family overloads below (tests/tensor/models/model_family_test
// builds one).
// What this does not cover (docs/architecture.md "Where to make a change"): a config field no
// family had yet is a ModelConfig field (model_config.h) and its parse. A family whose layers
// differ says so through ModelConfig (dense_layers today; tensor/models/layer_kinds.h turns a
// config into its stack of kinds) and the planner prices the stack with no edit; a difference no
// kind describes yet (sliding or chunked attention, latent attention) is a LayerKind field, its
// rule in layer_kind(), and the builder reading it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::tensor {

class ConfigFields;  // tensor/models/config_fields.h

// A ModelConfig field that the family's config.json spells differently (GPT-2: hidden_size is
// n_embd), so that an error names the key the user finds in the file.
struct FieldRename {
  std::string_view field;  // ModelConfig's name
  std::string_view key;    // the config.json key
};

// One rule of a family's tensor-parallel plan: a module FQN pattern (dot components with shell
// wildcards, relative to the *ForCausalLM root) and the style's name as mesh/parallel_style.h
// spells it ("colwise", "rowwise"). Names, not mesh types: tensor/ may not include mesh/.
struct TensorParallelRule {
  std::string_view pattern;
  std::string_view style;
  int64_t fused_parts = 1;  // colwise over [q; k; v] concatenated: 3 (mesh::StyleRule)
};

// How the family's Hugging Face `_init_weights` fills one kind of parameter (transformers'
// modeling_<family>.py, PreTrainedModel._init_weights): normal(0, initializer_range); GPT-2's
// residual projections normal(0, initializer_range / sqrt(2 n_layer)) (Radford et al. 2019, §2.3,
// the "c_proj.weight" special case of GPT2PreTrainedModel); zeros; ones.
// kNormalPaddingRowZero: normal, then the row of pad_token_id (if any) zero, as nn.Embedding's
// padding_idx row (torch.nn.Embedding.reset_parameters and the families' _init_weights zero it).
// kLogArange: log(1), log(2), ... along the tensor, the Mamba-2 mixers' A_log =
// log(arange(1, heads + 1)) (GraniteMoeHybrid's, Bamba's _init_weights).
// kLogArangePerRow: log(1), ..., log(N) along each row of N = ModelConfig::linear_key_head_dim
// (the state width), the Mamba-1 mixers' A_log [d_inner, N] = log(arange(1, N + 1)) expanded over
// the channels (JambaPreTrainedModel._init_weights).
// kSoftplusInverse: every element log(expm1(x)), x the rule's `x`, each step rounded to the
// parameter's dtype as PyTorch computes it on a tensor of that dtype (transformers'
// XIELUActivation: alpha_p = log(expm1(0.8)), alpha_n = log(expm1(0.8 - 0.5)) in the model's
// dtype; bfloat16 gives 0.2041015625 where the exact value is 0.20338...).
// kNormalLambdaStd: normal(0, ModelConfig::lambda_std_dev), DiffLlama's lambda vectors
// (DiffLlamaPreTrainedModel._init_weights).
enum class InitFill {
  kNormal,
  kNormalDepthScaled,
  kNormalPaddingRowZero,
  kZeros,
  kOnes,
  kLogArange,
  kSoftplusInverse,
  kLogArangePerRow,
  kNormalLambdaStd
};

// One rule: a parameter owned by a module of type `module_type` ("Linear", "*" for any) whose FQN
// is `suffix` or ends with "." + `suffix` ("weight", "c_proj.weight") gets `fill`. The first
// matching rule of the family's list applies.
struct InitRule {
  std::string_view module_type;
  std::string_view suffix;
  InitFill fill;
  double x = 0;  // kSoftplusInverse's argument
};

// PreTrainedModel._init_weights, transformers' default that GPT-NeoX, GPT-J, BLOOM and Falcon
// follow: Linear weights and Embedding rows normal(0, initializer_range) with no padding row (their
// embeddings have no padding_idx), Linear biases zero, LayerNorm weight one and bias zero.
inline constexpr InitRule kPreTrainedInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                                    {"Linear", "bias", InitFill::kZeros},
                                                    {"Embedding", "weight", InitFill::kNormal},
                                                    {"LayerNorm", "weight", InitFill::kOnes},
                                                    {"LayerNorm", "bias", InitFill::kZeros}};

struct ModelFamily;
// Whether the family builds its token embedding with padding_idx = pad_token_id (an init rule
// kNormalPaddingRowZero): the Llama-shaped decoders and Gemma do, GPT-2 and GPT-NeoX do not.
bool embeds_with_padding_idx(const ModelFamily& family);

struct ModelFamily {
  std::string_view model_type;       // Hugging Face's config.json model_type: "llama"
  std::string_view hf_class_prefix;  // of the transformers classes: "Llama" (LlamaForCausalLM)
  std::string_view layers_path;      // FQN of the ModuleList of repeated blocks: "model.layers"
  // Reads the family's fields into `c`, whose model_type is set; torch_dtype and validate() are
  // the caller's (parse_model_config). Errors go through f.fail (they name the file and field).
  void (*parse)(const ConfigFields& f, ModelConfig& c);
  // Writes the family's fields into `j`, which holds model_type, vocab_size, torch_dtype and
  // tie_word_embeddings already: parse reads the result back to an equal ModelConfig.
  void (*to_hf_json)(const ModelConfig& c, nlohmann::json& j);
  // The *ForCausalLM module of a validated `c` on meta (build_model's work).
  ModulePtr (*build)(const ModelConfig& c, const TensorOptions& o, bool training);
  std::span<const FieldRename> renamed;  // keys differing from ModelConfig's names
  bool rotary = true;              // rotary positions: partial_rotary_factor, rope_theta checked
  // Its parse reads rope_parameters itself: keyed by layer type, each type's table as wide as that
  // type's heads (Gemma 4), or by its own keys (DeepSeek-V4's main and compress), or read with the
  // shared reading and then checked (Falcon-H1: partial_rotary_factor ignored for the default
  // type, refused below 1 for the others). The shared reading after parse (Note
  // [rope_parameters]) is skipped.
  bool rope_parameters_by_layer_type = false;
  bool learned_positions = false;  // a table of max_position_embeddings positions: no longer seq
  bool fused_qkv = false;          // one qkv projection: heads * head_dim must be hidden_size
  bool moe = false;                // sparse experts required (num_local_experts > 0)
  // The fused qkv projection's rows come in this many blocks, each holding q, k and v of its
  // heads / blocks whole heads (CodeGen: transformers' hard-coded mp_num = 4, blocks of [q; v;
  // k], Note [CodeGen's qkv layout] in family_codegen.cpp). A plain column split hands every rank
  // whole blocks, so the same heads of q, k and v and out_proj's columns of them, only when tp
  // divides the blocks; the planner refuses any other tp (planner/candidate/parallel_dims.cpp).
  // 0: rows laid out otherwise (per head or per key-value group, which the heads' rule covers).
  int64_t fused_qkv_blocks = 0;
  // The module type of one routed expert ("MixtralBlockSparseTop2MLP"): parameter reports count
  // its parameters as experts rather than as a dense MLP. Empty for dense families.
  std::string_view experts_class = {};
  // Where the MoE block keeps a per-expert e_score_correction_bias: on the router (DeepSeek-V3,
  // GLM-4.5: mlp.gate.e_score_correction_bias) or on the block itself (MiniMax-M2:
  // mlp.e_score_correction_bias, block_sparse_moe.* in its Hub files). A buffer in transformers,
  // so not in its parameter count, but a tensor of the checkpoint.
  // NemotronH: on the router of the layer's mixer (mixer.gate.e_score_correction_bias).
  // LFM2-MoE: on the block under its own name (feed_forward.expert_bias).
  // LongCat-Flash: on the block's `router` (mlp.router.e_score_correction_bias), one value for
  // each routed and each zero-computation expert.
  enum class RouterBias : uint8_t {
    kNone,
    kOnRouter,
    kOnBlock,
    kOnMixer,
    kExpertBiasOnFeedForward,
    kOnMlpRouter
  };
  RouterBias router_score_bias = RouterBias::kNone;
  // A substring of checkpoint keys transformers skips on load wherever it stands (the family's
  // _keys_to_ignore_on_load_unexpected; ERNIE 4.5 MoE: "mtp", its prediction layers): listed
  // beside the model, not unexpected. Empty: none.
  std::string_view unloaded_key = {};
  // Attention with a learned sink logit per head (GPT-OSS): no fused training kernel computes
  // it, so it runs the unfused (math) attention (Note [Attention sinks] in
  // planner/cli/plan_args.cpp).
  bool attention_sinks = false;
  // Its kSparse layers' lightning indexer reads the hidden states (not a query latent) and picks
  // blocks of ModelConfig::index_block_size keys for a grouped-query attention (MiniMax-M3's
  // MiniMax Sparse Attention); DeepSeek Sparse Attention's needs q_lora_rank and kv_lora_rank.
  bool block_sparse_attention = false;
  // Builds linear-attention layers where layer_types says linear_attention (Gated DeltaNet:
  // Qwen3-Next, Qwen3.5; Mamba-2: Granite 4.0); other families refuse such a config, built in
  // code or read.
  bool linear_attention = false;
  // Those linear layers are LFM2's short convolution (tensor/models/short_conv.h): it has no heads,
  // so only ModelConfig::linear_conv_kernel_dim (and linear_conv_bias) describe it.
  bool short_conv_mixer = false;
  // Those linear layers are MiniMax's lightning attention (tensor/models/lightning_attention.h):
  // its heads and width are the attention's own (num_attention_heads, head_dim) and it has no
  // convolution, so the linear_* fields stay 0; ModelConfig::linear_block_size sizes its blocks.
  bool lightning_mixer = false;
  // Those linear layers are xLSTM's mLSTM (tensor/models/family_xlstm.cpp): heads and widths in
  // the linear_* fields, but no convolution, so linear_conv_kernel_dim stays 0.
  bool mlstm_mixer = false;
  // Each layer is one part, a token mixer or a feed-forward (Nemotron-H's blocks: a norm and one
  // mixer, ModelConfig::no_ffn_layers and kNone); other families refuse such layers.
  bool single_part_layers = false;
  // Builds a Mamba-2 mixer beside the attention of every layer, both reading one normed input
  // (Falcon-H1: ModelConfig::parallel_mamba); other families refuse such a config.
  bool parallel_mamba = false;
  // Its Mamba-2 layers (kLinear) have no feed-forward (ModelConfig::no_ffn_layers) and its hybrid
  // layers (kFull) run one of ModelConfig::num_mem_blocks shared transformer blocks before their
  // Mamba-2 mixer (Zamba2); other families refuse shared blocks.
  bool shared_transformer_blocks = false;
  // A second ModuleList whose layer i the stack's layer i also holds (HRM-Text: the high-level
  // stack model.H_module.layers beside the low-level model.L_module.layers, its layers_path): its
  // parameters count with that layer (planner/cost/tensor_parallel.h ParameterStage), and the
  // one-layer model the planner traces runs both. Such a family's layers run in cycles
  // (ModelConfig::h_cycles, Note [Layers run in cycles] in tensor/models/layer_kinds.h); other
  // families refuse a recurrence. Empty: none.
  std::string_view paired_layers_path = {};
  // Its routers also pick among ModelConfig::zero_experts zero-computation experts (LongCat-Flash:
  // Note [Zero-computation experts] in tensor/models/models.h); other families refuse such a
  // config.
  bool zero_experts = false;
  // Attention blocks each decoder layer runs, one after the other, each with its own keys and
  // values (LongCat-Flash: self_attn.0 and self_attn.1, 2): the planner's context-parallel key and
  // value traffic and MFU's attention term count each (the traced layer counts their work).
  int attentions_per_layer = 1;
  // Token exchanges with the routed experts each decoder layer makes under expert parallelism, an
  // all-to-all out to the picked experts and one back per exchange, each of tokens x top-k x
  // hidden (JetMoE, 3: its mixture of attention heads sends the query projection's inputs out and
  // the queries back, then the attention outputs out and the projected outputs back, beside its
  // MLP's one exchange; Shen et al. 2024, "JetMoE", §2).
  int routed_exchanges_per_layer = 1;
  // Megatron-LM's tensor-parallel split of the family (Shoeybi et al. 2019, §3): q/k/v and the
  // MLP's input projections column-parallel, the attention output and MLP output projections
  // row-parallel, the embedding split by vocabulary rows and the output layer by vocabulary
  // (Megatron's VocabParallelEmbedding and parallel cross-entropy); norms and routers replicated.
  // Empty: no plan yet, so the planner keeps such a family at tp = 1.
  std::span<const TensorParallelRule> tp_plan = {};
  // The family's _init_weights as rules (tensor/models/init_rules.h). Empty: the family's
  // parameters cannot be initialized as Hugging Face does, and materialize refuses it.
  std::span<const InitRule> init_rules = {};

  // The config.json key that holds ModelConfig's `field` in this family's files.
  std::string_view file_key(std::string_view field) const;
};

// The registered families, sorted by model_type.
const std::vector<const ModelFamily*>& model_families();
// The registered entry for `model_type`, nullptr when there is none.
const ModelFamily* find_family(std::string_view model_type);
// find_family(c.model_type); throws shardplan::Error naming the supported types when unknown.
const ModelFamily& family_of(const ModelConfig& c);
// "gemma, gpt2, ...": the registered model_types, for "expected one of" messages.
std::string model_types_list();

// parse_model_config, validate, to_hf_json and build_model (model_config.h, models.h) with the
// family given instead of looked up from model_type: the same steps for any entry, registered or
// not. parse takes the family's fields from `j` whatever its model_type says.
ModelConfig parse_model_config(const nlohmann::json& j, const ModelFamily& family,
                               std::string_view source);
void validate(const ModelConfig& c, const ModelFamily& family,
              std::string_view source = "model config");
nlohmann::json to_hf_json(const ModelConfig& c, const ModelFamily& family);
ModulePtr build_model(const ModelConfig& cfg, const ModelFamily& family,
                      const BuildOptions& opts = {});

}  // namespace shardplan::tensor
