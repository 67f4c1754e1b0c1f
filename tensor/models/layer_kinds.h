// What differs between a model's decoder layers, and the model as an ordered stack of those layer
// kinds: the planner traces one layer of each distinct kind and sums a stage's layers by kind
// (docs/cost-model.md §8.1 "A model is a stack of layer kinds").
//   LayerStack s = layer_stack(cfg);           // DeepSeek-V3: kinds {dense, moe}, 3 + 58 layers
//   s.uniform();                               // Llama: one kind
//   s.kind_of(0); s.first_layer(1);            // a layer's kind; the first layer of a kind
//   ModelConfig one = uniform_config(cfg, s.kinds[1]);     // a one-layer model of that kind
//
// Note [Layer kinds]
// A kind names what changes a layer's work, parameters or collectives: the feed-forward part (a
// dense MLP, or routed experts) and how the layer attends (every earlier position, a sliding
// window, a chunk: ModelConfig::layer_types), and whether it rotates q and k. Other variants join
// as fields here when a family builds them; the planner then prices them with no edit, because it
// asks only for the kinds, their order and one traced layer of each. Two layers of the same kind
// are interchangeable for the cost model (equal shapes, equal traced work).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/models/model_config.h"

namespace shardplan::tensor {

// kNone: a layer without a feed-forward (a Nemotron-H mixer block, ModelConfig::no_ffn_layers).
enum class FfnKind : uint8_t { kDense, kMoe, kNone };
std::string_view to_string(FfnKind k);

struct LayerKind {
  FfnKind ffn = FfnKind::kDense;
  AttentionType attention = AttentionType::kFull;
  // The keys a query attends at most: the sliding window, the chunk or the indexer's top-k; 0 for
  // full attention.
  int64_t window = 0;
  // A kSparse layer that runs its own lightning indexer (not one reusing an earlier layer's
  // selection, ModelConfig::shared_indexer_layers).
  bool indexer = false;
  // q and k rotated (RoPE); false on a NoPE layer (ModelConfig::nope_layers), whose attention
  // sees no positions but through the causal mask.
  bool rope = true;
  // Attends with an earlier layer's keys and values and computes none (Gemma 4's last
  // ModelConfig::num_kv_shared_layers layers).
  bool kv_shared = false;
  // DeepSeek-V4: the tokens pooled into one compressed entry (kCompressedSparse,
  // kHeavilyCompressed; 0 otherwise), and experts picked by a fixed token-to-expert table rather
  // than by a top-k of the router's scores (ModelConfig::hash_moe_layers).
  int64_t compress_rate = 0;
  bool hash_router = false;
  // Falcon-H1: a Mamba-2 mixer runs beside the attention on the same normed input
  // (ModelConfig::parallel_mamba, model-wide). The attention half keeps its own type, so keys,
  // values and RoPE are priced as any such layer's; the mixer's work comes from the traced layer.
  bool parallel_mamba = false;
  // Gemma 3n: the MLP's gate activations pass a Gaussian cutoff first, its mean and standard
  // deviation over the MLP's width (ModelConfig::activation_sparsity), elementwise work over the
  // gate's output that the layers without it do not have.
  bool sparse_activation = false;
  bool operator==(const LayerKind&) const = default;
};
// "dense", "moe", "sliding 4096 dense", "chunked 8192 moe", "sparse 2048 moe" (its own indexer),
// "sparse 2048 reused moe" (an earlier layer's selection), "linear moe" (Gated DeltaNet), "nope
// dense" (no RoPE), "kv-shared sliding 512 dense" (an earlier layer's keys and values), "linear
// mixer" and "attention mixer" (a mixer without a feed-forward), "ffn moe" (a feed-forward without
// a mixer): how bills and reports name a kind; DeepSeek-V4's "csa 4 keys 640 moe" (entries of 4
// tokens, 640 keys a query: the window and the picks), "hca 128 sliding 128 hash-moe";
// Falcon-H1's "attention+mamba dense" (a Mamba-2 mixer beside the attention); Gemma 3n's
// "sliding 512 sparse-gate dense" (the MLP's gate cut at a Gaussian threshold).
std::string describe(const LayerKind& k);

// The kind of decoder layer `layer` (0 <= layer < c.num_hidden_layers) of a validated config: an
// MoE model's layers route to experts except those listed in c.dense_layers, and the layers of
// c.no_ffn_layers have no feed-forward; the attention is c.layer_types[layer] (full when the list
// is empty). A compressed layer's window is its sliding window, plus index_topk on a
// kCompressedSparse layer (the entries its indexer picks); a kHeavilyCompressed layer's entries
// grow with the sequence, which the planner adds (planner/cost/block_cost.cpp).
LayerKind layer_kind(const ModelConfig& c, int64_t layer);

struct LayerStack {
  std::vector<LayerKind> kinds;        // distinct, in the order they first appear
  std::vector<int32_t> kind_of_layer;  // per layer, an index into kinds
  bool uniform() const { return kinds.size() <= 1; }
  int64_t layers() const { return static_cast<int64_t>(kind_of_layer.size()); }
  int32_t kind_of(int64_t layer) const { return kind_of_layer[static_cast<size_t>(layer)]; }
  int64_t first_layer(int32_t kind) const;  // -1 when no layer has it
  int64_t count(int32_t kind) const;        // layers of that kind
};
LayerStack layer_stack(const ModelConfig& c);

// A model of `layers` layers all of kind `k` (one of layer_stack(c).kinds), the embedding, final
// norm and output layer c's: what the planner traces (one layer) and counts (three) per kind.
ModelConfig uniform_config(const ModelConfig& c, const LayerKind& k, int64_t layers = 1);
// The first `layers` layers of c (1 <= layers <= c.num_hidden_layers), its per-layer lists
// (dense_layers, layer_types) cut to match: a smaller variant of the same stack.
ModelConfig first_layers(const ModelConfig& c, int64_t layers);

// Note [Layers run in cycles]
// HRM-Text (ModelConfig::h_cycles > 0; tensor/models/family_hrm_text.cpp) holds two stacks of
// num_hidden_layers layers, a low-level one (the family's layers_path) and a high-level one
// (ModelFamily::paired_layers_path), and runs them in cycles with the same weights: h_cycles times
// the low-level stack l_cycles times, then the high-level stack once. In training, in high cycle i
// only the last l_grad_cycles(c, i) low-level passes keep an autograd graph; the earlier ones run
// under torch.no_grad() (Note [No-grad regions] in tensor/trace.h), the high-level passes always
// with one. The stack's layer i stands for layer i of both stacks: the one-layer model the planner
// traces runs every pass of both (its no-grad passes forward only, keeping nothing), so that
// traced layer times the layers gives the step's work and saved activations exactly, and its
// parameters (planner/cost/tensor_parallel.h ParameterStage) are both layers', held once. What no
// count per layer can say is refused by the planner: a pipeline stage would be entered once per
// pass and a context-parallel ring turned once per attention call, so such a model keeps pp = 1
// and cp = 1 (planner/candidate/parallel_dims.cpp).
//
// transformers' rule (HrmTextModel): L_bp_cycles left-padded with 1s to h_cycles entries, entry i
// the graph-keeping low-level passes of high cycle i (0 or more; at most l_cycles count).
int64_t l_grad_cycles(const ModelConfig& c, int64_t high_cycle);

// The passes per step of layer i of the stack (every i alike), for model FLOPs
// (planner/cost/training_metrics.cpp): `forward` calls of its decoder layers, `backward` of them
// with a graph, `layers` decoder layers (their weights layer i's, of equal shapes). A model
// without a recurrence: one of each. HRM-Text: h (l + 1) calls, sum_i l_grad_cycles(c, i) + h of
// them with a backward, 2 layers (Note [Layers run in cycles]).
struct LayerPasses {
  int64_t forward = 1;
  int64_t backward = 1;
  int64_t layers = 1;
  bool operator==(const LayerPasses&) const = default;
};
LayerPasses layer_passes(const ModelConfig& c);

// The query heads of a layer of kind `kind`: ModelConfig::sliding_num_attention_heads on a
// sliding layer where a family sets it (Laguna), else num_attention_heads.
int64_t attention_heads_of(const ModelConfig& c, const LayerKind& kind);
// The key-value heads of a layer of kind `kind`: ModelConfig::sliding_num_key_value_heads on a
// sliding layer where a family sets it (MiMo-V2-Flash), global_num_key_value_heads on a full
// layer where one sets that (Gemma 4), else num_key_value_heads.
int64_t kv_heads_of(const ModelConfig& c, const LayerKind& kind);
// The q/k width per head of a layer of kind `kind`: ModelConfig::global_head_dim on a full layer
// where a family sets it (Gemma 4), else head_dim.
int64_t head_dim_of(const ModelConfig& c, const LayerKind& kind);
// The value width per head: v_head_dim for a Llama-shaped attention that sets it
// (MiMo-V2-Flash), else head_dim_of the kind (latent attention keeps its own,
// tensor/models/latent_attention.h).
int64_t value_head_dim(const ModelConfig& c, const LayerKind& kind);

}  // namespace shardplan::tensor
