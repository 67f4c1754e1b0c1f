#include "tensor/models/model_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "base/checked.h"
#include "base/config_paths.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/limits.h"
#include "base/strict_json.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"

namespace shardplan::tensor {

using nlohmann::json;

void validate(const ModelConfig& c, std::string_view source) {
  const ModelFamily* family = find_family(c.model_type);
  if (!family) {
    SP_FAIL(source, ": field 'model_type': '", c.model_type,
            "' is not supported; expected one of: ", model_types_list());
  }
  validate(c, *family, source);
}

void validate(const ModelConfig& c, const ModelFamily& family, std::string_view source) {
  auto fail = [&](std::string_view field, const auto&... what) {
    // A renamed key also says ModelConfig's name, for configs built in code.
    const std::string_view key = family.file_key(field);
    if (key == field) SP_FAIL(source, ": field '", field, "': ", what...);
    SP_FAIL(source, ": field '", key, "' (", field, "): ", what...);
  };
  if (c.model_type != family.model_type) {
    fail("model_type", "'", c.model_type, "' is not this family's ('", family.model_type, "')");
  }
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [name, v] : sizes) {
    if (v <= 0) fail(name, "must be a positive integer, got ", v);
  }
  // Work and memory grow with the layers and the experts (every one is modules and tensors): the
  // bounds of base/limits.h keep any config within seconds and a few hundred MB.
  if (c.num_hidden_layers > kMaxLayers) {
    fail("num_hidden_layers", c.num_hidden_layers, " layers, expected at most ", kMaxLayers,
         " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  if (c.mtp_layers > kMaxLayers) {
    fail("num_nextn_predict_layers", c.mtp_layers, " prediction layers, expected at most ",
         kMaxLayers, " (the most shardplan builds; docs/user-guide.md \"Limits\")");
  }
  if (c.index_n_heads < 0 || c.index_head_dim < 0 || c.index_topk < 0) {
    fail("index_n_heads", "and index_head_dim, index_topk must be >= 0, got ", c.index_n_heads,
         ", ", c.index_head_dim, ", ", c.index_topk);
  }
  // A block size only where the family's indexer picks blocks (MiniMax-M3), dividing the keys.
  if (c.index_block_size < 0 || (c.index_block_size > 0 && !family.block_sparse_attention) ||
      (c.index_block_size > 0 && c.index_topk % c.index_block_size != 0)) {
    fail("index_block_size", c.index_block_size, " with index_topk ", c.index_topk,
         ", expected 0 (single keys)",
         family.block_sparse_attention ? " or a positive block size dividing index_topk" : "");
  }
  if (c.index_n_heads > 0 && c.index_head_dim < c.qk_rope_head_dim) {
    fail("index_head_dim", c.index_head_dim, ", expected at least qk_rope_head_dim (",
         c.qk_rope_head_dim, "): the indexer rotates that many of its channels");
  }
  if (!c.nope_layers.empty() && !family.rotary) {
    fail("no_rope_layers", "lists NoPE layers, but model_type '", family.model_type,
         "' has no rotary embedding to leave out");
  }
  for (size_t i = 0; i < c.nope_layers.size(); ++i) {
    const int64_t l = c.nope_layers[i];
    if (l < 0 || l >= c.num_hidden_layers || (i > 0 && l <= c.nope_layers[i - 1])) {
      fail("no_rope_layers", "NoPE layer ", l, ", expected distinct layers 0..",
           c.num_hidden_layers - 1, " in order");
    }
  }
  for (size_t i = 0; i < c.shared_indexer_layers.size(); ++i) {
    const int64_t l = c.shared_indexer_layers[i];
    if (l < 0 || l >= c.num_hidden_layers || (i > 0 && l <= c.shared_indexer_layers[i - 1])) {
      fail("indexer_types", "shared layer ", l, ", expected distinct layers 0..",
           c.num_hidden_layers - 1, " in order");
    }
  }
  for (size_t i = 0; i < c.hash_moe_layers.size(); ++i) {
    const int64_t l = c.hash_moe_layers[i];
    if (l < 0 || l >= c.num_hidden_layers || (i > 0 && l <= c.hash_moe_layers[i - 1])) {
      fail("mlp_layer_types", "hash_moe layer ", l, ", expected distinct layers 0..",
           c.num_hidden_layers - 1, " in order");
    }
  }
  if (!c.hash_moe_layers.empty() && c.num_local_experts <= 0) {
    fail("mlp_layer_types", "lists hash_moe layers, but the model has no routed experts");
  }
  // DeepSeek-V4's sizes (tensor/models/compressed_attention.h): bounded so that their products
  // cannot overflow before the parameter bound below.
  const std::pair<const char*, int64_t> v4[] = {{"compress_rates", c.compress_rate_csa},
                                                {"compress_rates", c.compress_rate_hca},
                                                {"o_groups", c.o_groups},
                                                {"o_lora_rank", c.o_lora_rank},
                                                {"hc_mult", c.hc_mult},
                                                {"hc_sinkhorn_iters", c.hc_sinkhorn_iters}};
  for (const auto& [name, v] : v4) {
    if (v < 0 || v > (name == std::string_view("hc_mult") ? 64 : 1 << 20)) {
      fail(name, v, ", expected between 0 and ",
           name == std::string_view("hc_mult") ? 64 : 1 << 20);
    }
  }
  const std::pair<const char*, int64_t> linear[] = {
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim}};
  const bool any_linear = std::find(c.layer_types.begin(), c.layer_types.end(),
                                    AttentionType::kLinear) != c.layer_types.end();
  for (const auto& [name, v] : linear) {
    // Falcon-H1's Mamba-2 mixer beside every attention (parallel_mamba) needs all five; MiniMax's
    // lightning attention none (its heads are the attention's); xLSTM's mLSTM all but the
    // convolution, which it has not.
    const bool conv = name == std::string_view("linear_conv_kernel_dim");
    const bool needed = (any_linear && !family.lightning_mixer &&
                         (!family.short_conv_mixer || conv) && !(family.mlstm_mixer && conv)) ||
                        c.parallel_mamba;
    if (family.lightning_mixer && v != 0) {
      fail(name, v, ", expected 0: model_type '", family.model_type,
           "' has lightning attention, whose heads and width are num_attention_heads and head_dim");
    }
    if (family.mlstm_mixer && conv && v != 0) {
      fail(name, v, ", expected 0: model_type '", family.model_type,
           "' builds the mLSTM, which has no convolution");
    }
    if (v < 0 || (needed && v == 0)) {
      const char* why = any_linear         ? " (the model has linear_attention layers)"
                        : c.parallel_mamba ? " (every layer has a Mamba-2 mixer beside attention)"
                                           : "";
      fail(name, "must be a positive integer", why, ", got ", v);
    }
    // A convolution wider than 2^12 taps, or key heads beyond 2^16, is no model's: bounded so
    // that widths times heads cannot overflow before the parameter bound below.
    if (v > (name == std::string_view("linear_conv_kernel_dim") ? 4096 : 65536)) {
      fail(name, v, " is beyond what shardplan builds (at most ",
           name == std::string_view("linear_conv_kernel_dim") ? 4096 : 65536, ")");
    }
  }
  // Mamba-1's time-step rank (Jamba: hidden_size / 16), bounded as the other linear widths are.
  if (c.linear_dt_rank < 0 || c.linear_dt_rank > 65536) {
    fail("linear_dt_rank", c.linear_dt_rank,
         ", expected a time-step rank in 1..65536 (0: no Mamba-1 mixer)");
  }
  // Lightning attention's block (its decay buffers are B x B per head), bounded; other families
  // have none.
  if (!family.lightning_mixer && c.linear_block_size != 0) {
    fail("linear_block_size", c.linear_block_size,
         " sets a lightning attention block, but model_type '", family.model_type,
         "' builds no lightning attention; expected 0");
  }
  if (family.lightning_mixer && (c.linear_block_size < 0 || c.linear_block_size > 65536 ||
                                 (any_linear && c.linear_block_size == 0))) {
    fail("linear_block_size", c.linear_block_size,
         " is not a lightning attention block, expected 1..65536");
  }
  if (!(c.linear_norm_eps >= 0) || !std::isfinite(c.linear_norm_eps)) {
    fail("linear_norm_eps", "must be a finite epsilon >= 0 (0: norm_eps), got ", c.linear_norm_eps);
  }
  if (any_linear && !family.linear_attention) {
    std::string builders;  // the registered families that do, from the table itself
    for (const ModelFamily* f : model_families()) {
      if (!f->linear_attention) continue;
      builders += (builders.empty() ? "" : ", ") + std::string(f->model_type);
    }
    fail("layer_types", "has linear_attention layers, but model_type '", family.model_type,
         "' builds no linear attention; expected a family that does (", builders, ")");
  }
  if (c.parallel_mamba && !family.parallel_mamba) {
    fail("parallel_mamba", "sets a Mamba-2 mixer beside every attention, but model_type '",
         family.model_type, "' builds none; expected a family that does (falcon_h1)");
  }
  // Single-part layers (ModelFamily::single_part_layers): each a token mixer or a feed-forward.
  for (size_t i = 0; i < c.no_ffn_layers.size(); ++i) {
    const int64_t l = c.no_ffn_layers[i];
    if (l < 0 || l >= c.num_hidden_layers || (i > 0 && l <= c.no_ffn_layers[i - 1])) {
      fail("no_ffn_layers", "layer ", l, ", expected distinct layers 0..", c.num_hidden_layers - 1,
           " in order");
    }
  }
  const bool any_mixerless = std::find(c.layer_types.begin(), c.layer_types.end(),
                                       AttentionType::kNone) != c.layer_types.end();
  // Zamba2's Mamba-2 layers have no feed-forward either (ModelFamily::shared_transformer_blocks,
  // checked below).
  if ((any_mixerless || (!c.no_ffn_layers.empty() && !family.shared_transformer_blocks)) &&
      !family.single_part_layers) {
    fail("layer_types",
         "has layers without a token mixer or without a feed-forward, but "
         "model_type '",
         family.model_type,
         "' builds none; expected a family of single-part "
         "blocks (nemotron_h)");
  }
  if (family.single_part_layers) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool mixer =
          !c.layer_types.empty() && c.layer_types[static_cast<size_t>(i)] != AttentionType::kNone;
      const bool ffn = !std::binary_search(c.no_ffn_layers.begin(), c.no_ffn_layers.end(), i);
      if (mixer == ffn) {
        fail("layer_types", "layer ", i, " has ",
             mixer ? "both a token mixer and a feed-forward" : "neither a mixer nor a feed-forward",
             ", expected one of them per block");
      }
    }
  }
  // Shared transformer blocks (Zamba2, Zamba: ModelFamily::shared_transformer_blocks): a Mamba
  // layer (kLinear, no feed-forward) or a hybrid layer (kFull, whose block has the MLP) each; the
  // hybrid layers bounded as each builds an adapter slot for every one (base/limits.h). Zamba's
  // one block has no adapters (adapter_rank 0).
  if (c.num_mem_blocks < 0 || c.num_mem_blocks > 65536 || c.adapter_rank < 0 ||
      c.adapter_rank > 65536) {
    fail("num_mem_blocks", c.num_mem_blocks, " blocks of adapter rank ", c.adapter_rank,
         ", expected 0..65536 each");
  }
  if ((c.num_mem_blocks > 0 || c.adapter_rank > 0 || c.shared_attention_adapter) &&
      !family.shared_transformer_blocks) {
    fail("num_mem_blocks", "sets shared transformer blocks, but model_type '", family.model_type,
         "' builds none; expected a family that does (zamba2)");
  }
  if (family.shared_transformer_blocks) {
    if (c.num_mem_blocks <= 0) {
      fail("num_mem_blocks", c.num_mem_blocks, " blocks of adapter rank ", c.adapter_rank,
           ", expected at least one block and a positive rank (or 0: no adapters, Zamba's)");
    }
    int64_t hybrid = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const AttentionType t =
          c.layer_types.empty() ? AttentionType::kFull : c.layer_types[static_cast<size_t>(i)];
      const bool ffn = !std::binary_search(c.no_ffn_layers.begin(), c.no_ffn_layers.end(), i);
      if (!(t == AttentionType::kLinear && !ffn) && !(t == AttentionType::kFull && ffn)) {
        fail("layer_types", "layer ", i, " attends ", to_string(t), ffn ? " with" : " without",
             " a feed-forward; expected a Mamba-2 layer (linear_attention, no feed-forward) or a "
             "hybrid layer (full_attention, its shared block's MLP)");
      }
      hybrid += t == AttentionType::kFull;
    }
    if (hybrid > kMaxHybridLayers) {
      fail("layer_types", hybrid, " hybrid layers, expected at most ", kMaxHybridLayers,
           " (each builds an adapter slot for every one; docs/user-guide.md \"Limits\")");
    }
  }
  // HRM-Text's recurrence (Note [Layers run in cycles] in layer_kinds.h): built only by a family
  // with a paired stack, which always runs one. At least one cycle of each stack; per high cycle
  // 0 or more low-level passes with a graph; and transformers' num_hidden_layers, the layer calls
  // of a forward (N h (l + 1), a cache slot each), within what shardplan builds and traces
  // (base/limits.h).
  const bool recurrent = c.h_cycles != 0 || c.l_cycles != 0 || !c.l_bp_cycles.empty();
  if (recurrent && family.paired_layers_path.empty()) {
    fail("h_cycles", "sets a hierarchical recurrence (", c.h_cycles, " high and ", c.l_cycles,
         " low cycles), but model_type '", family.model_type,
         "' builds none; expected a family that does (hrm_text)");
  }
  if (!family.paired_layers_path.empty()) {
    for (const auto& [name, v] : {std::pair<const char*, int64_t>{"h_cycles", c.h_cycles},
                                  std::pair<const char*, int64_t>{"l_cycles", c.l_cycles}}) {
      if (v < 1 || v > kMaxLayers) fail(name, v, " cycles, expected 1..", kMaxLayers);
    }
    if (static_cast<int64_t>(c.l_bp_cycles.size()) > kMaxLayers) {
      fail("l_bp_cycles", c.l_bp_cycles.size(), " entries, expected at most ", kMaxLayers);
    }
    for (const int64_t n : c.l_bp_cycles) {
      if (n < 0) fail("l_bp_cycles", n, ", expected counts of low-level cycles >= 0");
    }
    // Each factor is at most kMaxLayers (+ 1): the product fits int64.
    const int64_t calls = c.num_hidden_layers * c.h_cycles * (c.l_cycles + 1);
    if (c.num_hidden_layers > 0 && calls > kMaxLayers) {
      fail("num_hidden_layers", c.num_hidden_layers, " layers a stack run ", c.h_cycles, " x (",
           c.l_cycles, " + 1) times: ", calls, " layer calls a forward, expected at most ",
           kMaxLayers, " (the most shardplan builds; docs/user-guide.md \"Limits\")");
    }
  }
  if (c.gated_norm_rank < 0 || c.gated_norm_rank > 65536) {
    fail("gated_norm_rank", c.gated_norm_rank,
         " is not a gate rank (1..65536 for gated norms; 0: none)");
  }
  // ZAYA1's convolution widths and router width (0: none): bounded, as the other widths, so that
  // their products with the heads cannot overflow before the parameter bound below.
  const std::pair<const char*, int64_t> zaya[] = {{"cca_time0", c.cca_time0},
                                                  {"cca_time1", c.cca_time1},
                                                  {"router_hidden_size", c.router_hidden_size}};
  for (const auto& [name, v] : zaya) {
    const int64_t most = name == std::string_view("router_hidden_size") ? 65536 : 4096;
    if (v < 0 || v > most) fail(name, v, ", expected between 0 (none) and ", most);
  }
  if (c.moe_latent_size < 0 || c.moe_latent_size > 65536 ||
      (c.moe_latent_size > 0 && c.num_local_experts <= 0)) {
    fail("moe_latent_size", c.moe_latent_size,
         " is not a latent width (1..65536, an MoE model's; 0: none)");
  }
  if (c.linear_num_key_heads > 0 && c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    fail("linear_num_value_heads", c.linear_num_value_heads, " is not a multiple of ",
         family.file_key("linear_num_key_heads"), " ", c.linear_num_key_heads,
         " (each key head serves an equal group of value heads)");
  }
  // A layer type's own key-value heads (0: num_key_value_heads).
  const std::tuple<const char*, int64_t, const char*> per_type_kv[] = {
      {"sliding_num_key_value_heads", c.sliding_num_key_value_heads, "sliding"},
      {"global_num_key_value_heads", c.global_num_key_value_heads, "full"}};
  // The sliding layers' own query heads (Laguna; 0: num_attention_heads), which their key-value
  // heads must divide as the full layers' do.
  const int64_t sliding_heads =
      c.sliding_num_attention_heads > 0 ? c.sliding_num_attention_heads : c.num_attention_heads;
  for (const auto& [field, kv, type] : per_type_kv) {
    const int64_t heads =
        std::string_view(type) == "sliding" ? sliding_heads : c.num_attention_heads;
    if (kv < 0 || (kv > 0 && heads % kv != 0)) {
      fail(field, kv, " (the ", type, " layers' key-value heads) does not divide ",
           std::string_view(type) == "sliding" && c.sliding_num_attention_heads > 0
               ? "sliding_num_attention_heads "
               : "num_attention_heads ",
           heads);
    }
  }
  const int64_t sliding_kv =
      c.sliding_num_key_value_heads > 0 ? c.sliding_num_key_value_heads : c.num_key_value_heads;
  if (c.sliding_num_attention_heads < 0 || (c.sliding_num_attention_heads > 0 && sliding_kv > 0 &&
                                            c.sliding_num_attention_heads % sliding_kv != 0)) {
    fail("sliding_num_attention_heads", c.sliding_num_attention_heads,
         " (the sliding layers' query heads; 0: num_attention_heads) is not a multiple of their ",
         sliding_kv, " key-value heads");
  }
  if (c.global_head_dim < 0 || c.global_head_dim % 2 != 0) {
    fail("global_head_dim", c.global_head_dim,
         " (the full layers' head width) must be a positive even number (0: head_dim)");
  }
  // Inkling's relative position bias: bounded so that r_proj's and the profiles' sizes cannot
  // overflow before the parameter bound below.
  if (c.d_rel < 0 || c.d_rel > 65536) {
    fail("d_rel", c.d_rel, ", expected between 0 and 65536 relative states per head");
  }
  if (c.rel_extent < 0 || c.rel_extent > (int64_t{1} << 30)) {
    fail("rel_extent", c.rel_extent, ", expected between 0 and ", int64_t{1} << 30, " tokens");
  }
  if (c.log_scaling_n_floor < 0 || !std::isfinite(c.log_scaling_alpha)) {
    fail("log_scaling_n_floor", c.log_scaling_n_floor, " with log_scaling_alpha ",
         c.log_scaling_alpha, ", expected a position >= 0 (0: no scaling) and a finite strength");
  }
  if (c.num_kv_shared_layers < 0 || c.num_kv_shared_layers > c.num_hidden_layers) {
    fail("num_kv_shared_layers", c.num_kv_shared_layers, ", expected 0..num_hidden_layers (",
         c.num_hidden_layers, ")");
  }
  if (c.per_layer_input_size < 0 ||
      (c.per_layer_input_size > 0 &&
       (c.per_layer_input_vocab <= 0 || c.per_layer_input_layers < c.num_hidden_layers))) {
    fail("per_layer_input_size", c.per_layer_input_size, " with a table of ",
         c.per_layer_input_vocab, " rows for ", c.per_layer_input_layers,
         " layers; expected >= 0 (0: none), and then rows > 0 and a slice for each of the ",
         c.num_hidden_layers, " layers");
  }
  // Gemma 3n's AltUp copies and LAuReL rank (0: none), bounded as hc_mult and the other ranks are;
  // its activation sparsity one share in [0, 1) per layer (a share of 1 puts the cutoff at
  // infinity).
  if (c.altup_num_inputs < 0 || c.altup_num_inputs > 64) {
    fail("altup_num_inputs", c.altup_num_inputs, ", expected between 0 (none) and 64");
  }
  if (c.laurel_rank < 0 || c.laurel_rank > 65536) {
    fail("laurel_rank", c.laurel_rank, ", expected between 0 (none) and 65536");
  }
  if (!c.activation_sparsity.empty() &&
      static_cast<int64_t>(c.activation_sparsity.size()) != c.num_hidden_layers) {
    fail("activation_sparsity", c.activation_sparsity.size(), " entries, expected one per layer (",
         c.num_hidden_layers, ") or none");
  }
  for (const double share : c.activation_sparsity) {
    if (!(share >= 0 && share < 1)) {
      fail("activation_sparsity", share, ", expected a share in [0, 1) for each layer");
    }
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("num_key_value_heads", c.num_key_value_heads, " does not divide num_attention_heads ",
         c.num_attention_heads);
  }
  // Fused-qkv families (GPT-2, GPT-NeoX) split hidden_size across the heads.
  int64_t qkv_width = 0;  // checked: validate also sees configs built in code
  if (family.fused_qkv &&
      (!mul_into(c.head_dim, c.num_attention_heads, qkv_width) || qkv_width != c.hidden_size)) {
    fail("num_attention_heads", c.num_attention_heads, " heads of ", c.head_dim,
         " do not make hidden_size ", c.hidden_size);
  }
  if (family.rotary) {
    if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
      fail("partial_rotary_factor", "must be in (0, 1], got ", c.partial_rotary_factor);
    }
    // Rotary rotates pairs: the rotated width int(head_dim * factor) must be even (HF GPT-NeoX).
    const auto rot =
        static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (rot <= 0 || rot % 2 != 0) {
      fail("head_dim", "the rotary width head_dim * partial_rotary_factor = ", rot,
           " must be a positive even number");
    }
    if (!(c.rope_theta > 0)) fail("rope_theta", "must be positive, got ", c.rope_theta);
  }
  if (!models::known_activation(c.hidden_act)) {
    // Named by the file's key alone (GPT-2: 'activation_function').
    fail(family.file_key("hidden_act"), "'", c.hidden_act,
         "' is not supported; expected one of: ", models::known_activations());
  }
  if (!(c.norm_eps > 0)) fail("norm_eps", "must be positive, got ", c.norm_eps);
  if (!(c.post_norm_eps >= 0) || !std::isfinite(c.post_norm_eps)) {
    fail("post_norm_eps", "must be positive (or 0: norm_eps), got ", c.post_norm_eps);
  }
  const std::pair<const char*, double> drops[] = {{"embd_dropout", c.embd_dropout},
                                                  {"attention_dropout", c.attention_dropout},
                                                  {"resid_dropout", c.resid_dropout}};
  for (const auto& [name, p] : drops) {
    if (!(p >= 0 && p < 1)) fail(name, "a dropout probability must be in [0, 1), got ", p);
  }
  if (c.word_embed_proj_dim < 0) {
    fail("word_embed_proj_dim", "must be a positive integer (0: hidden_size), got ",
         c.word_embed_proj_dim);
  }
  // Zero-computation experts (LongCat-Flash): only a family that builds them, beside routed ones.
  if (c.zero_experts < 0 ||
      (c.zero_experts > 0 && (!family.zero_experts || c.num_local_experts <= 0))) {
    fail("zero_experts", c.zero_experts, " zero-computation experts, expected 0",
         family.zero_experts ? " or more beside routed experts"
                             : " (model_type '" + std::string(family.model_type) +
                                   "' has none; expected a family that builds them)");
  }
  if (c.zero_experts > kMaxExpertMlps / c.num_hidden_layers) {
    fail("zero_experts", c.zero_experts, " zero experts in each of ", c.num_hidden_layers,
         " layers, expected at most ", kMaxExpertMlps, " in the model");
  }
  if (family.moe || c.num_local_experts != 0) {
    if (c.num_local_experts <= 0)
      fail("num_local_experts", "must be positive, got ", c.num_local_experts);
    // The router picks among the zero experts too (Note [Zero-computation experts] in models.h).
    const int64_t pickable = c.num_local_experts + c.zero_experts;
    if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > pickable) {
      fail("num_experts_per_tok", "must be in [1, num_local_experts",
           c.zero_experts > 0 ? " + zero_experts" : "", " = ", pickable, "], got ",
           c.num_experts_per_tok);
    }
    if (c.num_local_experts > kMaxExpertMlps / c.num_hidden_layers) {
      fail("num_local_experts", c.num_local_experts, " experts in each of ", c.num_hidden_layers,
           " layers, expected at most ", kMaxExpertMlps,
           " routed experts in the model (the most shardplan builds; docs/user-guide.md "
           "\"Limits\")");
    }
  }
  if (!c.dense_layers.empty() || c.dense_intermediate_size != 0) {
    if (c.num_local_experts <= 0) {
      fail("dense_layers", "lists dense layers of a model without experts, expected an MoE model");
    }
    for (size_t i = 0; i < c.dense_layers.size(); ++i) {
      const int64_t l = c.dense_layers[i];
      if (l < 0 || l >= c.num_hidden_layers || (i > 0 && l <= c.dense_layers[i - 1])) {
        fail("dense_layers", "layer ", l,
             " out of order or range, expected increasing layers in 0..", c.num_hidden_layers - 1);
      }
    }
    if (c.dense_intermediate_size < 0) {
      fail("dense_intermediate_size", "must be positive (or 0: intermediate_size), got ",
           c.dense_intermediate_size);
    }
  }
  if (c.shared_expert_intermediate_size != 0) {
    if (c.num_local_experts <= 0) {
      fail("shared_expert_intermediate_size",
           "sets a shared expert in a model without experts, expected an MoE model");
    }
    if (c.shared_expert_intermediate_size < 0) {
      fail("shared_expert_intermediate_size", "must be positive (or 0: none), got ",
           c.shared_expert_intermediate_size);
    }
  }
  if (c.sliding_window && *c.sliding_window <= 0) {
    fail("sliding_window", "must be positive, got ", *c.sliding_window);
  }
  if (c.attention_chunk_size < 0) {
    fail("attention_chunk_size", "must be positive, got ", c.attention_chunk_size);
  }
  // Granite's, Cohere's, Falcon-H1's and Muse Glimmer's multipliers scale activations: a finite
  // number each; the logits are divided by logits_scaling, and a negative softmax scale would
  // invert the attention.
  const std::pair<const char*, double> scales[] = {
      {"embedding_multiplier", c.embedding_multiplier},
      {"residual_multiplier", c.residual_multiplier},
      {"attention_multiplier", c.attention_multiplier},
      {"logits_scaling", c.logits_scaling},
      {"logit_scale", c.logit_scale},
      {"key_multiplier", c.key_multiplier},
      {"query_multiplier", c.query_multiplier},
      {"attention_in_multiplier", c.attention_in_multiplier},
      {"attention_out_multiplier", c.attention_out_multiplier},
      {"ssm_in_multiplier", c.ssm_in_multiplier},
      {"ssm_out_multiplier", c.ssm_out_multiplier},
      {"lm_head_multiplier", c.lm_head_multiplier},
      {"mlp_gate_multiplier", c.mlp_gate_multiplier},
      {"mlp_down_multiplier", c.mlp_down_multiplier},
      {"ssm_multipliers", c.ssm_multipliers[0]},
      {"ssm_multipliers", c.ssm_multipliers[1]},
      {"ssm_multipliers", c.ssm_multipliers[2]},
      {"ssm_multipliers", c.ssm_multipliers[3]},
      {"ssm_multipliers", c.ssm_multipliers[4]}};
  for (const auto& [name, v] : scales) {
    if (!std::isfinite(v)) fail(name, "must be a finite number, got ", v);
  }
  if (c.attention_multiplier < 0) {
    fail("attention_multiplier", "must be positive (the softmax scale), got ",
         c.attention_multiplier);
  }
  if (c.logits_scaling == 0)
    fail("logits_scaling", "divides the logits, expected a nonzero number");
  if (!c.layer_types.empty()) {
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
      fail("layer_types", c.layer_types.size(), " entries, expected one per layer (",
           c.num_hidden_layers, ")");
    }
    for (const AttentionType t : c.layer_types) {
      if (t == AttentionType::kSliding && !c.sliding_window) {
        fail("sliding_window", "is not set, but layer_types has sliding_attention layers");
      }
      if (t == AttentionType::kChunked && c.attention_chunk_size <= 0) {
        fail("attention_chunk_size", "is not set, but layer_types has chunked_attention layers");
      }
      if (t == AttentionType::kSparse && !family.block_sparse_attention &&
          (c.index_topk <= 0 || c.index_n_heads <= 0 || c.index_head_dim <= 0 ||
           c.q_lora_rank <= 0 || c.kv_lora_rank <= 0)) {
        fail("index_topk",
             "and the indexer's heads must be set, with a query and key-value "
             "latent, for deepseek_sparse_attention layers");
      }
      // MiniMax-M3's indexer reads the hidden states and picks blocks of keys: no latent.
      if (t == AttentionType::kSparse && family.block_sparse_attention &&
          (c.index_topk <= 0 || c.index_n_heads <= 0 || c.index_head_dim <= 0 ||
           c.index_block_size <= 0)) {
        fail("index_topk",
             "and the indexer's heads and block size must be set for block-sparse attention "
             "layers");
      }
      const bool compressed =
          t == AttentionType::kCompressedSparse || t == AttentionType::kHeavilyCompressed;
      if (compressed && !c.sliding_window) {
        fail("sliding_window", "is not set, but layer_types has ", to_string(t),
             " layers, whose queries also attend a sliding window");
      }
      if (t == AttentionType::kCompressedSparse &&
          (c.compress_rate_csa <= 0 || c.index_topk <= 0 || c.index_n_heads <= 0 ||
           c.index_head_dim <= 0 || c.q_lora_rank <= 0)) {
        fail("compress_rates",
             "must give compressed_sparse_attention a positive rate, with the indexer's heads, "
             "index_topk and a query latent, for compressed_sparse_attention layers");
      }
      if (t == AttentionType::kHeavilyCompressed && c.compress_rate_hca <= 0) {
        fail("compress_rates",
             "must give heavily_compressed_attention a positive rate for such layers");
      }
    }
  }
  if (!is_floating(c.torch_dtype))
    fail("torch_dtype", "must be a floating dtype, got ", c.torch_dtype);
  // The parameter count must fit int64 with room to spare: bound it in floating point first,
  // every product and sum in double (heads * head_dim or vocab + positions may not fit int64).
  // The error names the largest factor of the largest term: the field a user mistyped.
  struct Factor {
    const char* field;
    int64_t value;
  };
  struct Term {
    double count;
    std::vector<Factor> factors;  // hidden_size is in every term: named only if largest
  };
  const double h = static_cast<double>(c.hidden_size);
  const double layers = static_cast<double>(c.num_hidden_layers);
  // The zero experts' idle gate_up_proj slices (Note [Zero-computation experts] in models.h)
  // count as experts here: a bound, not the total.
  const double experts =
      static_cast<double>(std::max<int64_t>(1, c.num_local_experts + c.zero_experts));
  const Factor layer_count{"num_hidden_layers", c.num_hidden_layers};
  const Term terms[] = {
      {layers * 4.0 * h * static_cast<double>(c.num_attention_heads) *
           static_cast<double>(c.head_dim),
       {layer_count, {"num_attention_heads", c.num_attention_heads}, {"head_dim", c.head_dim}}},
      // Laguna's sliding layers: their own query heads (q_proj, o_proj and the gate).
      {layers * 3.0 * h * static_cast<double>(c.sliding_num_attention_heads) *
           static_cast<double>(c.head_dim),
       {layer_count,
        {"sliding_num_attention_heads", c.sliding_num_attention_heads},
        {"head_dim", c.head_dim}}},
      // Gemma 4's per-layer embeddings: the table, the projection and each layer's gate and
      // projection.
      {(static_cast<double>(c.per_layer_input_vocab) + h) *
               static_cast<double>(c.per_layer_input_layers) *
               static_cast<double>(c.per_layer_input_size) +
           layers * 2.0 * h * static_cast<double>(c.per_layer_input_size),
       {{"vocab_size_per_layer_input", c.per_layer_input_vocab},
        {"hidden_size_per_layer_input", c.per_layer_input_size}}},
      // Gemma 3n's AltUp (per layer its n x n and n x n^2 coefficients, router [n, h] and two
      // [h] vectors; the model's 2 (n - 1) projections [h, h]) and LAuReL ([r, h] and [h, r]).
      {layers * (static_cast<double>(c.altup_num_inputs) *
                     (static_cast<double>(c.altup_num_inputs) *
                          (1.0 + static_cast<double>(c.altup_num_inputs)) +
                      h) +
                 2.0 * h * (1.0 + static_cast<double>(c.laurel_rank))) +
           2.0 * static_cast<double>(c.altup_num_inputs) * h * h,
       {layer_count, {"altup_num_inputs", c.altup_num_inputs}, {"laurel_rank", c.laurel_rank}}},
      // Gemma 4's full layers: their own head width.
      {layers * 4.0 * h * static_cast<double>(c.num_attention_heads) *
           static_cast<double>(c.global_head_dim),
       {layer_count,
        {"num_attention_heads", c.num_attention_heads},
        {"global_head_dim", c.global_head_dim}}},
      // A value width of its own (MiMo-V2-Flash's v_proj and o_proj; latent attention's kv_b_proj
      // and o_proj): v_head_dim over every head and twice the sliding layers' key-value heads.
      {layers * 2.0 * h *
           (static_cast<double>(c.num_attention_heads) +
            2.0 * static_cast<double>(c.sliding_num_key_value_heads)) *
           static_cast<double>(c.v_head_dim),
       {layer_count, {"num_attention_heads", c.num_attention_heads}, {"v_head_dim", c.v_head_dim}}},
      // Inkling's relative states (r_proj [heads d_rel, h] on either layer type) and profiles
      // [d_rel, rel_extent] per layer.
      {layers * static_cast<double>(c.d_rel) *
           (h * (static_cast<double>(c.num_attention_heads) +
                 static_cast<double>(c.sliding_num_attention_heads)) +
            static_cast<double>(c.rel_extent)),
       {layer_count, {"d_rel", c.d_rel}, {"rel_extent", c.rel_extent}}},
      // LFM2's short convolution: in_proj [3h, h], out_proj [h, h] and the taps [h, 1, K] per
      // layer (counted over every layer: a bound, not the total).
      {family.short_conv_mixer
           ? layers * h * (4.0 * h + static_cast<double>(c.linear_conv_kernel_dim))
           : 0.0,
       {layer_count, {"hidden_size", c.hidden_size}}},
      {layers * 3.0 * h * static_cast<double>(c.intermediate_size) * experts,
       {layer_count,
        {"intermediate_size", c.intermediate_size},
        {"num_local_experts", c.num_local_experts}}},
      {layers * 3.0 * h * static_cast<double>(c.dense_intermediate_size),
       {layer_count, {"dense_intermediate_size", c.dense_intermediate_size}}},
      {layers * 3.0 * h * static_cast<double>(c.shared_expert_intermediate_size),
       {layer_count, {"shared_expert_intermediate_size", c.shared_expert_intermediate_size}}},
      {layers * static_cast<double>(c.index_n_heads) * static_cast<double>(c.index_head_dim) *
           (static_cast<double>(c.q_lora_rank) + h),
       {layer_count, {"index_n_heads", c.index_n_heads}, {"index_head_dim", c.index_head_dim}}},
      // Gated DeltaNet: in_proj_qkvz, in_proj_ba and out_proj over hidden, and the convolution's
      // taps over q, k and v.
      {layers * (h + static_cast<double>(c.linear_conv_kernel_dim)) *
           (2.0 * static_cast<double>(c.linear_num_key_heads) *
                static_cast<double>(c.linear_key_head_dim) +
            3.0 * static_cast<double>(c.linear_num_value_heads) *
                static_cast<double>(c.linear_value_head_dim) +
            2.0 * static_cast<double>(c.linear_num_value_heads)),
       {layer_count,
        {"linear_num_key_heads", c.linear_num_key_heads},
        {"linear_key_head_dim", c.linear_key_head_dim},
        {"linear_num_value_heads", c.linear_num_value_heads},
        {"linear_value_head_dim", c.linear_value_head_dim},
        {"linear_conv_kernel_dim", c.linear_conv_kernel_dim}}},
      // DeepSeek-V4: the grouped output projection (o_a_proj [groups x rank, heads x head_dim /
      // groups], o_b_proj [h, groups x rank]) and the hyper-connections' mixing weights
      // ((2 + n) n x n h per site, two sites a layer).
      {layers * static_cast<double>(c.o_groups) * static_cast<double>(c.o_lora_rank) *
               (h + static_cast<double>(c.num_attention_heads) * static_cast<double>(c.head_dim) /
                        static_cast<double>(std::max<int64_t>(1, c.o_groups))) +
           layers * 2.0 * (2.0 + static_cast<double>(c.hc_mult)) * static_cast<double>(c.hc_mult) *
               static_cast<double>(c.hc_mult) * h,
       {layer_count,
        {"o_groups", c.o_groups},
        {"o_lora_rank", c.o_lora_rank},
        {"hc_mult", c.hc_mult}}},
      // ZAYA1's CCA: the grouped convolution [(H + K) d, d, cca_time1] and the depthwise one
      // [(H + K) d, 1, cca_time0] per layer; its router: down_proj [r, h], two [r, r] layers
      // and the logits [E + 1, r].
      {layers *
               (static_cast<double>(c.num_attention_heads) +
                static_cast<double>(c.num_key_value_heads)) *
               static_cast<double>(c.head_dim) *
               (static_cast<double>(c.head_dim) * static_cast<double>(c.cca_time1) +
                static_cast<double>(c.cca_time0)) +
           layers * static_cast<double>(c.router_hidden_size) *
               (h + 2.0 * static_cast<double>(c.router_hidden_size) + experts + 1.0),
       {layer_count,
        {"head_dim", c.head_dim},
        {"cca_time1", c.cca_time1},
        {"router_hidden_size", c.router_hidden_size}}},
      // Zamba2's adapters: each hybrid layer's block (one per layer when untied) holds up to one
      // per hybrid layer, rank x (h + 2 I) on the MLP and 3 x rank x 4 h on q, k and v (a bound
      // over every layer). The blocks themselves are within the attention and MLP terms.
      {layers * layers * static_cast<double>(c.adapter_rank) *
           (13.0 * h + 2.0 * static_cast<double>(c.intermediate_size)),
       {layer_count, {"adapter_rank", c.adapter_rank}}},
      {2.0 * h * static_cast<double>(c.vocab_size), {{"vocab_size", c.vocab_size}}},
      // OPT's embeddings at word_embed_proj_dim: the table, the output layer, project_in and out.
      {2.0 * static_cast<double>(c.word_embed_proj_dim) * (static_cast<double>(c.vocab_size) + h),
       {{"word_embed_proj_dim", c.word_embed_proj_dim}, {"vocab_size", c.vocab_size}}},
      {2.0 * h * static_cast<double>(c.max_position_embeddings),
       {{"max_position_embeddings", c.max_position_embeddings}}}};
  double total = 0;
  const Term* largest = &terms[0];
  for (const Term& t : terms) {
    total += t.count;
    if (t.count > largest->count) largest = &t;
  }
  if (!(total < 1e18)) {
    Factor blamed{"hidden_size", c.hidden_size};
    for (const Factor& f : largest->factors) {
      if (f.value > blamed.value) blamed = f;
    }
    fail(blamed.field, blamed.value, " makes the model hold about ", total,
         " parameters, beyond what shardplan counts exactly (1e18)");
  }
}

// Note [Multimodal configs]
// The config.json of a vision-language model (Gemma 3 4B-27B: model_type "gemma3"; Llama 4 Scout
// and Maverick: "llama4"; Mistral Small 3.1: "mistral3"; LLaVA) nests its language model's
// config as "text_config" beside a "vision_config". transformers builds the language model from
// text_config alone, and its settings decide the language model's shape. So such a file parses
// to its text_config, when that is a family shardplan builds, and the result remembers the outer
// model_type (ModelConfig::multimodal_model_type). Three things come from the outer object: the
// dtype, which the outer file states for the whole model when text_config does not; the text
// model_type when text_config omits it (transformers then uses the wrapper's default text config
// class: kDefaultTextTypes); and, for most wrappers, whether the output layer is tied
// (kWrapperTies): transformers 5 ties by the config of the model that owns lm_head
// (get_expanded_tied_weights_keys reads self.config), and Gemma 3's, Mistral 3's, LLaVA's and
// the Qwen-VL wrappers own it, while Llama 4's language model owns its own. The vision encoder and
// its projector are not modelled: they are a few percent of these models' parameters (Gemma 3 27B:
// a 0.4B SigLIP encoder), and the commands say so (multimodal_note). Parameter names are the
// language model's as its own *ForCausalLM names them; a multimodal checkpoint's (language_model.*)
// are matched to them by Note [Multimodal checkpoints] in tensor/safetensors_check.cpp. A text
// model with no *ForCausalLM in transformers (muse_glimmer_text) is named as it sits in its
// *ForConditionalGeneration: model.language_model.*, lm_head.*.
namespace {

struct DefaultTextType {
  std::string_view wrapper;
  std::string_view text;
};
constexpr DefaultTextType kDefaultTextTypes[] = {{"gemma3", "gemma3_text"},
                                                 {"gemma4", "gemma4_text"},
                                                 {"llama4", "llama4_text"},
                                                 {"mistral3", "mistral"},
                                                 {"llava", "llama"},
                                                 {"llava_next", "llama"},
                                                 {"qwen3_5", "qwen3_5_text"},
                                                 {"qwen3_5_moe", "qwen3_5_moe_text"},
                                                 {"qwen2_vl", "qwen2_vl_text"},
                                                 {"qwen2_5_vl", "qwen2_5_vl_text"},
                                                 {"qwen3_vl", "qwen3_vl_text"},
                                                 {"qwen3_vl_moe", "qwen3_vl_moe_text"},
                                                 {"lfm2_vl", "lfm2"},
                                                 {"kimi_k25", "deepseek_v3"},
                                                 {"exaone4_5", "exaone4"},
                                                 {"cohere_compass", "cohere_compass_text"},
                                                 {"step3p7", "step3p5"},
                                                 {"muse_glimmer", "muse_glimmer_text"},
                                                 {"minimax_m3_vl", "minimax_m3_vl_text"},
                                                 {"inkling_mm_model", "inkling_text"},
                                                 {"gemma3n", "gemma3n_text"},
                                                 {"fuyu", "persimmon"},
                                                 {"aria", "aria_text"},
                                                 {"gemma4_unified", "gemma4_unified_text"}};

// Wrappers whose published files are flat: the text model's keys at the top level beside
// vision_config (Qwen2-VL, Qwen2.5-VL, saved by transformers 4.4x); their config classes move
// those keys into text_config, and so does parsing here.
// Wrappers whose text model is always their own text class, whatever text_config's model_type
// says (transformers 5.16's Qwen2VLConfig, Qwen2_5_VLConfig, Qwen3VLConfig, Qwen3VLMoeConfig;
// MuseGlimmerConfig); they tie as the outer config says (kWrapperTies).
constexpr DefaultTextType kFixedTextTypes[] = {{"gemma4", "gemma4_text"},
                                               {"qwen2_vl", "qwen2_vl_text"},
                                               {"qwen2_5_vl", "qwen2_5_vl_text"},
                                               {"qwen3_vl", "qwen3_vl_text"},
                                               {"qwen3_vl_moe", "qwen3_vl_moe_text"},
                                               {"cohere_compass", "cohere_compass_text"},
                                               {"step3p7", "step3p5"},
                                               {"muse_glimmer", "muse_glimmer_text"},
                                               {"minimax_m3_vl", "minimax_m3_vl_text"},
                                               {"inkling_mm_model", "inkling_text"},
                                               {"gemma3n", "gemma3n_text"},
                                               {"aria", "aria_text"},
                                               {"gemma4_unified", "gemma4_unified_text"}};

// Which config ties the output layer (Note [Multimodal configs]): the wrapper's own
// tie_word_embeddings (its class default when absent, a null one false), or that OR the text
// config's (LlavaConfig copies a true text_config value up). Wrappers not listed (llama4, whose
// Llama4ForCausalLM owns lm_head, and those not checked) take the text config's.
// InklingForConditionalGeneration ties nothing (_tied_weights_keys is empty), whatever the file
// says; its text family builds the output layer untied in any case.
enum class TieRule : uint8_t { kOuter, kOuterOrText };
struct WrapperTie {
  std::string_view wrapper;
  TieRule rule;
  bool outer_default;
};
constexpr WrapperTie kWrapperTies[] = {{"gemma3", TieRule::kOuter, true},
                                       {"mistral3", TieRule::kOuter, true},
                                       {"llava", TieRule::kOuterOrText, false},
                                       {"qwen2_vl", TieRule::kOuter, false},
                                       {"qwen2_5_vl", TieRule::kOuter, false},
                                       {"qwen3_vl", TieRule::kOuter, false},
                                       {"qwen3_vl_moe", TieRule::kOuter, false},
                                       {"lfm2_vl", TieRule::kOuter, true},
                                       {"kimi_k25", TieRule::kOuter, true},
                                       {"exaone4_5", TieRule::kOuter, false},
                                       {"gemma4", TieRule::kOuter, true},
                                       {"cohere_compass", TieRule::kOuter, false},
                                       {"step3p7", TieRule::kOuter, false},
                                       {"muse_glimmer", TieRule::kOuter, false},
                                       {"minimax_m3_vl", TieRule::kOuterOrText, false},
                                       {"inkling_mm_model", TieRule::kOuter, false},
                                       {"gemma3n", TieRule::kOuter, true},
                                       {"fuyu", TieRule::kOuter, false},
                                       {"aria", TieRule::kOuter, false},
                                       {"gemma4_unified", TieRule::kOuter, true}};

// A text model_type a wrapper's first release wrote and its config class now reads as another
// (Exaone4_5Config: "exaone4_5_text" is exaone4; AriaConfig builds AriaTextConfig from the
// original release's "aria_moe_lm" text_config, as from any other).
struct RenamedTextType {
  std::string_view wrapper;
  std::string_view old_text;
  std::string_view text;
};
constexpr RenamedTextType kRenamedTextTypes[] = {{"exaone4_5", "exaone4_5_text", "exaone4"},
                                                 {"aria", "aria_moe_lm", "aria_text"}};

constexpr DefaultTextType kFlatTextTypes[] = {{"qwen2_vl", "qwen2_vl_text"},
                                              {"qwen2_5_vl", "qwen2_5_vl_text"}};

// The sizes of transformers' LlamaConfig and MistralConfig defaults. A top-level config.json must
// state its sizes (a file without hidden_size is more likely the wrong file than a default
// model), but a multimodal file's text_config often leans on its class's defaults as
// transformers builds it (llava-1.5-7b-hf's states only vocab_size, max positions and eps).
// gemma3_text's family applies Gemma3TextConfig's own (RotaryDecoderSizes).
struct TextSizeDefaults {
  std::string_view model_type;
  const char* sizes;
};
constexpr TextSizeDefaults kTextSizeDefaults[] = {
    {"llama",
     R"({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
         "num_hidden_layers": 32, "num_attention_heads": 32})"},
    {"mistral",
     R"({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8})"}};

ModelConfig parse_text_config(const json& j, const ConfigFields& f, const std::string& type,
                              std::string_view source) {
  const json& inner = j.at("text_config");
  const std::string text_source = std::string(source) + ": text_config";
  json text = inner;
  if (!text.contains("model_type")) {
    for (const DefaultTextType& d : kDefaultTextTypes) {
      if (d.wrapper == type) text["model_type"] = d.text;
    }
  }
  for (const RenamedTextType& r : kRenamedTextTypes) {
    if (r.wrapper == type && text.contains("model_type") && text.at("model_type") == r.old_text) {
      text["model_type"] = r.text;
    }
  }
  const ConfigFields tf(text, text_source);
  if (!tf.has("model_type")) {
    tf.fail("model_type", "missing, and model_type '" + type +
                              "' of the outer config has no default text model; expected one of: " +
                              model_types_list());
  }
  const std::string text_type = tf.string("model_type", "");
  for (const DefaultTextType& d : kFixedTextTypes) {
    if (d.wrapper != type) continue;
    if (text_type != d.text) {
      tf.fail("model_type", "'" + text_type + "', but '" + type +
                                "' always builds its text model " + std::string(d.text) +
                                "; expected \"" + std::string(d.text) + "\"");
    }
  }
  for (const WrapperTie& t : kWrapperTies) {
    if (t.wrapper != type) continue;
    bool outer = f.is_null("tie_word_embeddings")
                     ? false
                     : f.boolean("tie_word_embeddings", t.outer_default);
    // Lfm2VlConfig takes a legacy tie_embedding of its own first, as Lfm2Config does.
    if (type == "lfm2_vl" && f.has("tie_embedding")) outer = f.boolean("tie_embedding", true);
    if (t.rule == TieRule::kOuter || outer) text["tie_word_embeddings"] = outer;
    if (t.rule == TieRule::kOuter) text.erase("tie_embedding");  // the wrapper's tie decides
  }
  if (!find_family(text_type)) {
    f.fail("model_type", "'" + type + "' is not supported, nor is its text_config's model_type '" +
                             text_type + "'; expected one of: " + model_types_list());
  }
  for (const TextSizeDefaults& d : kTextSizeDefaults) {
    if (d.model_type != text_type) continue;
    const json sizes = json::parse(d.sizes);
    for (const auto& [key, value] : sizes.items()) {
      if (!text.contains(key) || text.at(key).is_null()) text[key] = value;
    }
  }
  if (!text.contains("torch_dtype") && !text.contains("dtype")) {
    for (const char* key : {"torch_dtype", "dtype"}) {
      if (f.has(key)) text[key] = j.at(key);
    }
  }
  ModelConfig c = parse_model_config(text, text_source);
  c.multimodal_model_type = type;
  return c;
}

}  // namespace

std::string multimodal_note(const ModelConfig& c) {
  if (c.multimodal_model_type.empty()) return "";
  return "'" + c.multimodal_model_type + "' is a multimodal model: its language model (" +
         c.model_type +
         ", its text_config) is what is planned; the vision encoder and projector are not modelled";
}

ModelConfig parse_model_config(const json& j, std::string_view source) {
  SP_CHECK(j.is_object(), source, ": expected a JSON object (a Hugging Face config.json), got ",
           j.type_name());
  const ConfigFields f(j, source);
  if (!f.has("model_type")) {
    f.fail("model_type", "missing; expected one of: " + model_types_list());
  }
  const std::string type = f.string("model_type", "");
  const ModelFamily* family = find_family(type);
  if (!family && f.has("text_config") && j.at("text_config").is_object()) {
    return parse_text_config(j, f, type, source);
  }
  for (const DefaultTextType& d : kFlatTextTypes) {
    if (family || d.wrapper != type) continue;
    if (f.has("text_config")) {  // present, not null, and not an object
      f.fail("text_config", std::string("expected an object (or none: the text keys at the top "
                                        "level), got a ") +
                                j.at("text_config").type_name());
    }
    json outer = {{"model_type", type}, {"text_config", j}};
    outer["text_config"]["model_type"] = d.text;
    outer["text_config"].erase("vision_config");
    // The flat file's tie is the outer config's own field (kWrapperTies).
    if (f.has("tie_word_embeddings")) outer["tie_word_embeddings"] = j.at("tie_word_embeddings");
    return parse_text_config(outer, ConfigFields(outer, source), type, source);
  }
  if (!family && find_family(type + "_text") != nullptr) {
    // gemma3, llama4, qwen3_vl, ...: a multimodal file whose language model is `type`_text.
    f.fail("text_config", "missing; '" + type +
                              "' is a multimodal config, expected its language model's keys in a "
                              "'text_config' object (model_type " +
                              type + "_text)");
  }
  if (!family) {
    f.fail("model_type", "'" + type + "' is not supported; expected one of: " + model_types_list());
  }
  return parse_model_config(j, *family, source);
}

namespace {

// Note [Architecture fields nobody read]
// Hugging Face's config classes ignore keys they do not know, and so does parsing here (tokenizer
// ids, inference settings). A key that changes the architecture is different: a config of a
// family whose parse never asked about it would build a different model from the one the file
// describes (a Llama-style file with "layer_types" of sliding layers, a DeepSeek-style
// "first_k_dense_replace"). So these keys, when a file holds one with a value that changes
// anything and the family's parse did not read it, are refused, naming the key. Neutral values
// (null, false, 0, an empty list, layer types all "full_attention") pass: exporters write them.
constexpr const char* kArchitectureKeys[] = {"layer_types",
                                             "mlp_only_layers",
                                             "moe_layer_freq",
                                             "first_k_dense_replace",
                                             "decoder_sparse_step",
                                             "interleave_moe_layer_step",
                                             "no_rope_layers",
                                             "sliding_window_pattern",
                                             "attn_logit_softcapping",
                                             "final_logit_softcapping",
                                             "q_lora_rank",
                                             "kv_lora_rank",
                                             "n_shared_experts",
                                             "n_routed_experts",
                                             "num_nextn_predict_layers",
                                             "shared_expert_intermediate_size",
                                             "moe_intermediate_size",
                                             "num_experts",
                                             "query_pre_attn_scalar",
                                             "attention_chunk_size",
                                             "use_qk_norm",
                                             "mlp_layer_types",
                                             "index_n_heads",
                                             "index_topk",
                                             "indexer_types",
                                             "index_topk_pattern",
                                             "index_topk_freq",
                                             "linear_num_key_heads",
                                             "linear_num_value_heads",
                                             "linear_key_head_dim",
                                             "linear_value_head_dim",
                                             "linear_conv_kernel_dim",
                                             "full_attention_interval",
                                             "mamba_n_heads",
                                             "mamba_n_groups",
                                             "mamba_d_state",
                                             "mamba_d_head",
                                             "mamba_expand",
                                             "mamba_d_ssm",
                                             "projectors_bias",
                                             "hybrid_override_pattern",
                                             "moe_num_experts",
                                             "moe_num_shared_experts",
                                             "lm_head_bias",
                                             "global_head_dim",
                                             "attention_k_eq_v",
                                             "num_kv_shared_layers",
                                             "hidden_size_per_layer_input",
                                             "enable_moe_block",
                                             "clip_qkv",
                                             "use_post_norm",
                                             "hc_mult",
                                             "compress_ratios",
                                             "compress_rates",
                                             "o_groups",
                                             "o_lora_rank",
                                             "num_hash_layers",
                                             "gated_norm_rank",
                                             "num_attention_heads_per_layer",
                                             "attn_layer_period",
                                             "expert_layer_period",
                                             "mamba_dt_rank",
                                             "num_mem_blocks",
                                             "use_shared_attention_adapter",
                                             "altup_num_inputs",
                                             "laurel_rank",
                                             "block_types",
                                             "_block_types",
                                             "lru_width"};

bool neutral(const json& v) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return true;
  if (v.is_number()) return v.get<double>() == 0;
  if (v.is_array()) {
    return std::all_of(v.begin(), v.end(),
                       [](const json& e) { return e.is_string() && e == "full_attention"; });
  }
  return false;
}

void refuse_unread_architecture_keys(const json& j, const ConfigFields& f,
                                     const ModelFamily& family) {
  for (const char* key : kArchitectureKeys) {
    if (!j.contains(key) || f.was_read(key) || neutral(j.at(key))) continue;
    f.fail(key, j.at(key).dump().substr(0, 80) + " changes the architecture, and model_type '" +
                    std::string(family.model_type) +
                    "' does not build it; expected a config of a family that does (or no '" +
                    key + "')");
  }
}

}  // namespace

ModelConfig parse_model_config(const json& j, const ModelFamily& family, std::string_view source) {
  SP_CHECK(j.is_object(), source, ": expected a JSON object (a Hugging Face config.json), got ",
           j.type_name());
  const ConfigFields f(j, source);
  ModelConfig c;
  c.model_type = family.model_type;
  family.parse(f, c);
  if (family.rotary && !family.rope_parameters_by_layer_type && f.has("rope_parameters")) {
    parse_rope_parameters(f, c);
  }
  // Note [dtype and torch_dtype]: transformers 4.56 renamed the config's torch_dtype to dtype
  // (huggingface/transformers#39782), and files saved since then say "dtype". A file without
  // either is float32, as transformers reads it; one naming two different dtypes is refused.
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!f.has(key)) continue;
    const std::string name = f.string(key, "");
    DType t = DType::kFloat32;
    if (!try_parse_dtype(name, &t) || !is_floating(t)) {
      f.fail(key, "'" + name + "' is not a floating dtype (float32, bfloat16, float16, ...)");
    }
    if (key == std::string_view("dtype") && f.has("torch_dtype") && t != c.torch_dtype) {
      f.fail(key, "'" + name + "' differs from torch_dtype '" + f.string("torch_dtype", "") +
                      "', expected one dtype for the model's parameters");
    }
    c.torch_dtype = t;
  }
  for (const char* key : {"attn_implementation", "_attn_implementation"}) {
    if (f.has(key)) c.attn_implementation = f.string(key, "");
  }
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  if (!std::isfinite(c.initializer_range) || c.initializer_range < 0) {
    f.fail("initializer_range",
           "expected a finite standard deviation >= 0, got " + std::to_string(c.initializer_range));
  }
  // The file's pad_token_id, else the one the family's parse took from its config class.
  if (f.has("pad_token_id")) c.pad_token_id = f.integer("pad_token_id");
  if (c.pad_token_id) {
    // PyTorch's nn.Embedding refuses a padding_idx outside [-num_embeddings, num_embeddings);
    // families that do not pass it to their embedding ignore it, as transformers does.
    const int64_t pad = *c.pad_token_id;
    if (embeds_with_padding_idx(family) && (pad < -c.vocab_size || pad >= c.vocab_size)) {
      f.fail("pad_token_id", "expected a token id in [-vocab_size, vocab_size) = [" +
                                 std::to_string(-c.vocab_size) + ", " +
                                 std::to_string(c.vocab_size) +
                                 ") (nn.Embedding's padding_idx), got " + std::to_string(pad) +
                                 (f.has("pad_token_id") ? "" : " (the config class's default)"));
    }
    // Gemma 4's per-layer table pads the same row (padding_idx = pad_token_id).
    const int64_t rows = c.per_layer_input_vocab;
    if (c.per_layer_input_size > 0 && (pad < -rows || pad >= rows)) {
      f.fail("pad_token_id", std::to_string(pad) +
                                 " is not a row of the per-layer table of "
                                 "vocab_size_per_layer_input = " +
                                 std::to_string(rows) + " rows (its padding_idx)");
    }
  }
  refuse_unread_architecture_keys(j, f, family);
  validate(c, family, source);
  return c;
}

json to_hf_json(const ModelConfig& c) { return to_hf_json(c, family_of(c)); }

json to_hf_json(const ModelConfig& c, const ModelFamily& family) {
  json j;
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["torch_dtype"] = std::string(dtype_name(c.torch_dtype));
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (!c.attn_implementation.empty()) j["attn_implementation"] = c.attn_implementation;
  j["initializer_range"] = c.initializer_range;
  if (c.pad_token_id) j["pad_token_id"] = *c.pad_token_id;
  family.to_hf_json(c, j);
  return j;
}

std::string_view to_string(AttentionType t) {
  switch (t) {
    case AttentionType::kSliding:
      return "sliding_attention";
    case AttentionType::kChunked:
      return "chunked_attention";
    case AttentionType::kSparse:
      return "deepseek_sparse_attention";
    case AttentionType::kLinear:
      return "linear_attention";
    case AttentionType::kNone:
      return "none";
    case AttentionType::kCompressedSparse:
      return "compressed_sparse_attention";
    case AttentionType::kHeavilyCompressed:
      return "heavily_compressed_attention";
    case AttentionType::kFull:
      break;
  }
  return "full_attention";
}

std::ostream& operator<<(std::ostream& os, const ModelConfig& c) {
  return os << "ModelConfig(" << c.model_type << ", layers=" << c.num_hidden_layers
            << ", hidden=" << c.hidden_size << ", heads=" << c.num_attention_heads << "/"
            << c.num_key_value_heads << "x" << c.head_dim << ", ffn=" << c.intermediate_size
            << ", vocab=" << c.vocab_size
            << (c.num_local_experts ? ", experts=" + std::to_string(c.num_local_experts) : "")
            << (c.dense_layers.empty() ? ""
                                       : ", dense layers=" + std::to_string(c.dense_layers.size()))
            << ", " << c.torch_dtype << ")";
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  // Strict: a key given twice ("num_hidden_layers": 32, ..., "num_hidden_layers": 80) is refused
  // instead of silently keeping the last; nesting is bounded while parsing (a config.json is a
  // flat object with a few nested ones: rope_scaling, quantization_config, text_config).
  constexpr int kMaxDepth = 16;
  const json j = parse_strict_json(read_text_file(path, "model config"), path.string(), kMaxDepth,
                                   "a Hugging Face config.json");
  return parse_model_config(j, path.string());
}

std::filesystem::path model_config_path(std::string_view name_or_path) {
  std::error_code ec;
  const std::filesystem::path p(name_or_path);
  if (!name_or_path.empty() && std::filesystem::is_directory(p, ec)) {
    // A config.json that is there but no file (a FIFO, a folder, a link to a device) is named by
    // the reader ("... is a FIFO"): only a missing one means the folder is not a model's.
    if (std::filesystem::exists(std::filesystem::symlink_status(p / "config.json", ec))) {
      return p / "config.json";
    }
    SP_CHECK(std::filesystem::is_regular_file(p / "config.json", ec), "model folder '",
             printable(p.string(), 256),
             "' has no config.json, expected a Hugging Face model folder (its config.json, with "
             "or without model.safetensors)");
    return p / "config.json";
  }
  return find_config("models", name_or_path);
}

ModelConfig find_model_config(std::string_view name_or_path) {
  return load_model_config(model_config_path(name_or_path));
}

}  // namespace shardplan::tensor
