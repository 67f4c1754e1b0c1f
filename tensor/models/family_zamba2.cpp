// zamba2 (Zyphra Zamba2: 1.2B, 2.7B, 7B). transformers 5's Zamba2Config and modeling_zamba2.py
// (Zamba2ForCausalLM): a stack of Mamba-2 layers, some of them "hybrid" (layers_block_type). A
// hybrid layer first runs one of num_mem_blocks shared transformer blocks on [x; e], its input
// beside the token embeddings e (2h wide), projects the block's output through its own `linear`
// and adds it to the input of its Mamba-2 layer (Glorioso et al. 2024, "Zamba", eq. 6 and fig. 2;
// "The Zamba2 Suite", 2024):
//   Mamba-2 layer  x + mamba(input_layernorm(x))
//   hybrid layer   t = linear(mlp(pre_ff_layernorm(attn(input_layernorm([x; e])))))   (no
//                  residual inside the block), then x + mamba(input_layernorm(x + t))
// e is a copy of the embeddings (torch.clone) that every hybrid layer reads. Names and shapes, h
// hidden, V vocabulary, n heads and kv key-value heads of d = 2h / n (attention_head_dim), I the
// MLP width (4 h by default), r adapter_rank, and the mixer as tensor/models/mamba2_mixer.h has it
// (H = n_mamba_heads of P, d_inner = mamba_expand x h = H P, g = mamba_ngroups of state N, K taps,
// conv = d_inner + 2 g N; its convolution always with a bias, whatever use_conv_bias says):
//   model.embed_tokens.weight [V, h]
//   model.layers.N (Zamba2MambaDecoderLayer)  mamba.{dt_bias, A_log, D} [H], mamba.conv1d.weight
//     [conv, 1, K], mamba.conv1d.bias [conv], mamba.in_proj.weight [d_inner + conv + H, h],
//     mamba.norm.weight [d_inner], mamba.out_proj.weight [h, d_inner], input_layernorm.weight [h]
//   model.layers.N (Zamba2HybridLayer)  linear.weight [h, h], mamba_decoder.* (the above), and
//     shared_transformer (Zamba2AttentionDecoderLayer): self_attn.q_proj [n d, 2h], k_proj and
//     v_proj [kv d, 2h], o_proj [h, n d], with use_shared_attention_adapter
//     self_attn.linear_{q,k,v}_adapter_list.i.{0 [r, 2h], 1 [2h, r]}; feed_forward.gate_up_proj
//     [2I, h] ([gate; up]), down_proj [h, I], gate_up_proj_adapter_list.i.{0 [r, h], 1 [2I, r]};
//     input_layernorm [2h], pre_ff_layernorm [h]
//   model.final_layernorm.weight [h]; lm_head [V, h], tied to the embedding by default
// add_bias_linear gives biases to gate_up_proj, down_proj, in_proj and out_proj. Note [Zamba2
// shared blocks] says which layers hold a block's weights and adapters. ModelConfig keeps the
// Mamba-2 layers as kLinear in no_ffn_layers, the hybrid layers as kFull (their block's MLP is
// their feed-forward; NoPE without use_mem_rope), the mixer in linear_* and the blocks in
// num_mem_blocks, adapter_rank and shared_attention_adapter. Refused as transformers fails on them
// or builds something else: a block type other than a Mamba-2 or hybrid layer (get_layers builds a
// Mamba-2 layer for it), a list of another length than num_hidden_layers, no list and not the
// class's 54 layers, hybrid_layer_ids, attention_hidden_size or mamba_headdim that differ from
// what the file's other keys give (the file's value wins in transformers and breaks the forward),
// Mamba-2 heads that do not split mamba_expand x h, attention adapters whose outputs (2h wide)
// differ from q's or k's width, use_shared_mlp_adapter false (Zamba2MLP builds its adapters
// whatever it says), and partial_rotary_factor below 1 with a scaled RoPE type.
// num_logits_to_keep, use_mamba_kernels, use_mem_eff_path, time_step_* (initialization and a
// clamp at run time), chunk_size (the scan's tiling) and the derived kv_channels and
// num_query_groups are read by no module that sizes or runs anything priced.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/hybrid_layer_list.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/mamba2_mixer.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kZamba2Family;  // listed in family_registry.cpp

namespace {

constexpr const char* kPrefix = "Zamba2";

// Note [Zamba2 shared blocks]
// transformers 5 builds a Zamba2AttentionDecoderLayer in every hybrid layer and ties their
// parameters through Zamba2Model._tied_weights_keys: the first num_mem_blocks hybrid layers hold
// the blocks' weights, and hybrid layer j (counting hybrid layers only) takes block j %
// num_mem_blocks, all of its parameters tied to that layer's (PreTrainedModel.tie_weights sets
// the source's Parameter into the target module, so named_parameters lists it once, under the
// source layer). Each block holds an adapter list with a slot per hybrid layer: slot i is
// Sequential(Linear(in, r), Linear(r, out)) when i % num_mem_blocks is the block's id, else
// nn.Identity, and hybrid layer j runs slot j; so the adapters of all the layers sharing a block
// live in that block's source layer, and every hybrid layer runs its own. transformers 5 at the
// commit this follows takes the block's id from the layer's index in the whole stack (layer_id %
// num_mem_blocks), which disagrees with the tie cycle (in hybrid order) unless the hybrid layers
// alternate in parity: the tie then pairs blocks with different adapter slots, and Zamba2-2.7B
// and -7B raise ValueError in get_expanded_tied_weights_keys before any weight is read
// (huggingface/transformers#47994, fixed by #48325 with the id taken in hybrid order). This builds
// the fixed behaviour, which is the checkpoints' layout; with num_mem_blocks 1 (Zamba2-1.2B) both
// agree. The tie is applied only with tie_word_embeddings (get_expanded_tied_weights_keys returns
// nothing without it): an untied model holds a block in every hybrid layer, as transformers
// allocates it. The planner prices each hybrid layer's block as its own work (the traced layer runs
// it whole): the weights are shared, the work is not.

// Zamba2Config's layers_block_type when the file has none (54 layers): a Mamba-2 layer, seven
// times five Mamba-2 layers and a hybrid one, then 4, hybrid, 3, hybrid, 2.
constexpr int64_t kDefaultLayers = 54;
std::vector<bool> default_hybrid_layers() {
  std::vector<bool> out(1, false);
  for (int i = 0; i < 7; ++i) {
    out.insert(out.end(), 5, false);
    out.push_back(true);
  }
  for (const int run : {4, 3}) {
    out.insert(out.end(), static_cast<size_t>(run), false);
    out.push_back(true);
  }
  out.insert(out.end(), 2, false);
  return out;
}

// Which layers are hybrid (hybrid_layer_list.h); without a list the class's default holds 54.
std::vector<bool> hybrid_layers(const ConfigFields& f, int64_t layers) {
  return models::read_hybrid_layer_list(f, layers, {"Zamba2Config", "Zamba2", "Mamba-2"}, [&] {
    if (layers != kDefaultLayers) {
      f.fail("num_hidden_layers",
             std::to_string(layers) +
                 " layers and no layers_block_type: Zamba2Config's default list has 54 "
                 "entries (transformers refuses the mismatch); expected a layers_block_type of " +
                 std::to_string(layers) + " entries");
    }
    return default_hybrid_layers();
  });
}

// A derived attribute the file may also hold (Zamba2Config sets it in __post_init__, and
// PreTrainedConfig then sets the file's keys over it): refused when it differs from `want`.
void require_derived(const ConfigFields& f, const char* key, int64_t want, const char* why) {
  if (f.has(key) && f.integer(key) != want) {
    f.fail(key, std::to_string(f.integer(key)) + " differs from " + std::to_string(want) + ", " +
                    why + " (transformers takes the file's value, and its forward then fails)");
  }
}

// RoPE of the hybrid layers' attention (with use_mem_rope): the top-level rope_theta and
// rope_scaling, then rope_parameters over them (Note [rope_parameters]). Zamba2RotaryEmbedding's
// default type rotates all of attention_head_dim whatever partial_rotary_factor says; the scaled
// types would build a narrower table that the whole head does not broadcast against (a forward
// error), so a factor other than 1 is refused there, as for Falcon-H1.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.rope_theta = f.number("rope_theta", 10000.0);
  if (f.has("rope_scaling")) {
    // rope_type (or the older type) "default" scales nothing.
    const nlohmann::json& r = f.raw("rope_scaling");
    bool unscaled = false;
    for (const char* key : {"rope_type", "type"}) {
      if (r.is_object() && r.contains(key)) {
        unscaled = r.at(key).is_string() && r.at(key).get<std::string>() == "default";
        break;
      }
    }
    if (!unscaled) c.rope_scaling = parse_rope_scaling(f);
  }
  if (f.has("rope_parameters")) parse_rope_parameters(f, c);
  const char* key = "rope_parameters";
  double factor = c.partial_rotary_factor;
  if (f.has("partial_rotary_factor") && factor == 1) {
    factor = f.number("partial_rotary_factor", 1.0);
    key = "partial_rotary_factor";
  }
  if (c.rope_scaling && factor != 1) {
    f.fail(key, "partial_rotary_factor " + nlohmann::json(factor).dump() + " with rope type '" +
                    c.rope_scaling->rope_type +
                    "': Zamba2's attention rotates all of attention_head_dim, which that "
                    "narrower table does not cover; expected 1");
  }
  c.partial_rotary_factor = 1;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 32000);
  c.hidden_size = f.integer("hidden_size", 2560);
  c.num_hidden_layers = f.integer("num_hidden_layers", kDefaultLayers);
  // Bounded before anything is made per layer (validate() refuses them too, later).
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + " layers, expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (docs/user-guide.md \"Limits\")");
  }
  if (c.hidden_size <= 0) {
    f.fail("hidden_size", "must be a positive integer, got " + std::to_string(c.hidden_size));
  }
  const std::vector<bool> hybrid = hybrid_layers(f, c.num_hidden_layers);
  std::vector<int64_t> hybrid_ids;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (hybrid[static_cast<size_t>(i)]) hybrid_ids.push_back(i);
  }
  if (f.has("hybrid_layer_ids") && f.raw("hybrid_layer_ids") != nlohmann::json(hybrid_ids)) {
    f.fail("hybrid_layer_ids",
           f.raw("hybrid_layer_ids").dump().substr(0, 60) +
               " differs from the hybrid layers of layers_block_type " +
               nlohmann::json(hybrid_ids).dump().substr(0, 60) +
               " (transformers sizes the adapter lists by the one and builds the layers by the "
               "other); expected them equal, or no key");
  }
  // The shared attention reads [x; e]: attention_hidden_size is 2h.
  int64_t width = 0;
  if (!mul_into(int64_t{2}, c.hidden_size, width)) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " is beyond int64 once doubled");
  }
  require_derived(f, "attention_hidden_size", width,
                  "2 x hidden_size, the width of [x; e] the attention reads");
  c.num_attention_heads = f.integer("num_attention_heads", 32);
  if (c.num_attention_heads <= 0) {
    f.fail("num_attention_heads",
           "must be a positive integer, got " + std::to_string(c.num_attention_heads));
  }
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  // attention_head_dim (head_dim, its attribute_map alias): 2h // n unless the file sets it.
  const char* head_key = f.has("attention_head_dim") ? "attention_head_dim" : "head_dim";
  c.head_dim = f.integer(head_key, width / c.num_attention_heads);
  if (f.has("attention_head_dim") && f.has("head_dim") &&
      f.integer("head_dim") != f.integer("attention_head_dim")) {
    f.fail("head_dim", "differs from attention_head_dim, which it aliases; expected one value");
  }
  c.intermediate_size = f.integer("intermediate_size", 0);
  if (c.intermediate_size == 0 && !mul_into(int64_t{4}, c.hidden_size, c.intermediate_size)) {
    f.fail("hidden_size", std::to_string(c.hidden_size) + " x 4 (the MLP width) is beyond int64");
  }
  c.hidden_act = f.string("hidden_act", "gelu");
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.max_position_embeddings = f.integer("max_position_embeddings", 4096);
  // use_long_context sets the positions to 16,384 (Zamba2Config.__post_init__, over the file's).
  if (f.boolean("use_long_context", false)) c.max_position_embeddings = 16384;
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  models::pad_token_id_or(f, c, 0);
  const bool bias = f.boolean("add_bias_linear", false);
  c.mlp_bias = bias;

  // The Mamba-2 mixer (Zamba2MambaMixer).
  const int64_t heads = f.integer("n_mamba_heads", 8);
  const int64_t expand = f.integer("mamba_expand", 2);
  int64_t inner = 0;
  if (expand <= 0 || !mul_into(expand, c.hidden_size, inner)) {
    f.fail("mamba_expand",
           std::to_string(expand) + " must be positive, with mamba_expand x hidden_size in int64");
  }
  if (heads <= 0 || inner % heads != 0) {
    f.fail("n_mamba_heads",
           std::to_string(heads) +
               " does not split mamba_expand x hidden_size = " + std::to_string(inner) +
               " into whole heads (the mixer views it as heads x mamba_headdim)");
  }
  require_derived(f, "mamba_headdim", inner / heads,
                  "mamba_expand x hidden_size / n_mamba_heads, the mixer's head width");
  c.linear_num_value_heads = heads;
  c.linear_value_head_dim = inner / heads;
  c.linear_num_key_heads = f.integer("mamba_ngroups", 1);
  c.linear_key_head_dim = f.integer("mamba_d_state", 64);
  c.linear_conv_kernel_dim = f.integer("mamba_d_conv", 4);
  (void)f.boolean("use_conv_bias", true);  // Zamba2MambaMixer's conv1d has a bias whatever it says
  c.linear_conv_bias = true;
  c.linear_proj_bias = bias;
  // The scan's chunk changes the kernels' tiling, not the model: read, priced at kMambaChunk
  // (Note [Mamba-2 scan work] in tensor/ops.h).
  if (f.integer("chunk_size", 256) <= 0) {
    f.fail("chunk_size", "must be positive, got " + f.raw("chunk_size").dump());
  }

  // The shared blocks and their adapters.
  c.num_mem_blocks = f.integer("num_mem_blocks", 1);
  c.adapter_rank = f.integer("adapter_rank", 128);
  // validate() takes rank 0 (Zamba's block has no adapters); Zamba2's always has them.
  if (c.adapter_rank <= 0) {
    f.fail("adapter_rank", std::to_string(c.adapter_rank) +
                               ", expected a positive rank (every hybrid layer runs its adapters)");
  }
  c.shared_attention_adapter = f.boolean("use_shared_attention_adapter", false);
  if (!f.boolean("use_shared_mlp_adapter", true)) {
    f.fail("use_shared_mlp_adapter",
           "false: transformers' Zamba2MLP builds and runs the gate_up_proj adapters whatever it "
           "says; expected true (or no key)");
  }
  // The adapters' outputs are 2h wide and added to q, k and v.
  int64_t q_width = 0;
  if (c.shared_attention_adapter &&
      (c.num_key_value_heads != c.num_attention_heads ||
       !mul_into(c.num_attention_heads, c.head_dim, q_width) || q_width != width)) {
    f.fail("use_shared_attention_adapter",
           "true with " + std::to_string(c.num_attention_heads) + " heads and " +
               std::to_string(c.num_key_value_heads) + " key-value heads of " +
               std::to_string(c.head_dim) +
               ": each adapter's output is 2 x hidden_size = " + std::to_string(width) +
               " wide, added to q, k and v, which must then be as wide (transformers' forward "
               "fails otherwise)");
  }
  parse_rope(f, c);
  const bool rope = f.boolean("use_mem_rope", false);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (hybrid[static_cast<size_t>(i)]) {
      c.layer_types.push_back(AttentionType::kFull);
      if (!rope) c.nope_layers.push_back(i);
    } else {
      c.layer_types.push_back(AttentionType::kLinear);
      c.no_ffn_layers.push_back(i);
    }
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    types.push_back(layer_kind(c, i).attention == AttentionType::kFull ? "hybrid"
                                                                       : "linear_attention");
  }
  j["layers_block_type"] = types;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["attention_head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["use_long_context"] = false;                     // its 16,384 positions are written as such
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 0
  j["add_bias_linear"] = c.mlp_bias;
  j["n_mamba_heads"] = c.linear_num_value_heads;
  j["mamba_headdim"] = c.linear_value_head_dim;
  j["mamba_expand"] = c.linear_num_value_heads * c.linear_value_head_dim / c.hidden_size;
  j["mamba_ngroups"] = c.linear_num_key_heads;
  j["mamba_d_state"] = c.linear_key_head_dim;
  j["mamba_d_conv"] = c.linear_conv_kernel_dim;
  j["use_conv_bias"] = true;
  j["num_mem_blocks"] = c.num_mem_blocks;
  j["adapter_rank"] = c.adapter_rank;
  j["use_shared_attention_adapter"] = c.shared_attention_adapter;
  j["use_shared_mlp_adapter"] = true;
  j["use_mem_rope"] = c.nope_layers.empty();
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
}

// nn.Identity: an adapter slot that is not its block's (no parameters; it keeps the indices).
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

// Where a hybrid layer's block stands (Note [Zamba2 shared blocks]): the layer's index among the
// hybrid layers (its adapter slot), their count (the slots of each list) and the block's id.
struct Slot {
  int64_t index = 0;
  int64_t count = 1;
  int64_t block = 0;
};

// An adapter list (Zamba2Attention's linear_*_adapter_list, Zamba2MLP's
// gate_up_proj_adapter_list): a slot per hybrid layer, Sequential(Linear(in, r), Linear(r, out))
// without biases where the slot's index modulo num_mem_blocks is the block's id, else nn.Identity.
std::shared_ptr<ModuleList> adapter_list(const ModelConfig& c, const Slot& s, int64_t in,
                                         int64_t out, const TensorOptions& o) {
  auto list = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < s.count; ++i) {
    if (i % c.num_mem_blocks != s.block) {
      list->push_back(std::make_shared<Identity>());
      continue;
    }
    auto adapter = std::make_shared<Sequential>();
    adapter->push_back(std::make_shared<Linear>(in, c.adapter_rank, false, o));
    adapter->push_back(std::make_shared<Linear>(c.adapter_rank, out, false, o));
    list->push_back(adapter);
  }
  return list;
}

// Zamba2Attention over the normed [x; e]: q, k and v from 2h channels (plus, with
// use_shared_attention_adapter, the layer's adapters of each), RoPE on the whole head with
// use_mem_rope, causal attention with the softmax scaled by (d / 2)^-0.5 (Zamba's attention
// scaled as for the h-wide half, its docstring says), o_proj back to h. No biases.
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const Slot& s, bool rope, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        slot_(s.index),
        rope_(rope),
        dropout_(training ? c.attention_dropout : 0.0),
        scale_(std::sqrt(2.0 / static_cast<double>(c.head_dim))) {
    const int64_t in = 2 * c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    q_proj_ = register_module("q_proj", std::make_shared<Linear>(in, q, false, o));
    k_proj_ = register_module("k_proj", std::make_shared<Linear>(in, kv, false, o));
    v_proj_ = register_module("v_proj", std::make_shared<Linear>(in, kv, false, o));
    o_proj_ = register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, false, o));
    if (c.shared_attention_adapter) {
      for (const char* name :
           {"linear_q_adapter_list", "linear_k_adapter_list", "linear_v_adapter_list"}) {
        adapters_.push_back(register_module(name, adapter_list(c, s, in, in, o)));
      }
    }
  }
  // transformers' op order: the three projections, then each plus its adapter's output.
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor q = q_proj_->call(x), k = k_proj_->call(x), v = v_proj_->call(x);
    if (!adapters_.empty()) {
      q = add(q, (*adapters_[0])[static_cast<size_t>(slot_)].call(x));
      k = add(k, (*adapters_[1])[static_cast<size_t>(slot_)].call(x));
      v = add(v, (*adapters_[2])[static_cast<size_t>(slot_)].call(x));
    }
    Tensor qh = models::split_heads(q, heads_, head_dim_);
    Tensor kh = models::split_heads(k, kv_heads_, head_dim_);
    const Tensor vh = models::split_heads(v, kv_heads_, head_dim_);
    if (rope_) {
      qh = models::apply_rotary(qh, cos_t, sin_t);
      kh = models::apply_rotary(kh, cos_t, sin_t);
    }
    const Tensor out = scaled_dot_product_attention(qh, kh, vh, Tensor(), dropout_,
                                                    /*is_causal=*/true, scale_,
                                                    /*enable_gqa=*/kv_heads_ != heads_);
    return o_proj_->call(models::merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_, head_dim_, slot_;
  bool rope_;
  double dropout_, scale_;
  ModulePtr q_proj_, k_proj_, v_proj_, o_proj_;
  std::vector<std::shared_ptr<ModuleList>> adapters_;  // q, k, v
};

// Zamba2MLP: down_proj(act(gate) * up), [gate; up] = gate_up_proj(x) + the layer's adapter of
// it (always built, whatever use_shared_mlp_adapter says).
class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const Slot& s, const TensorOptions& o)
      : Module(std::string(kPrefix) + "MLP"), act_(c.hidden_act), slot_(s.index) {
    const int64_t h = c.hidden_size, width = c.intermediate_size;
    gate_up_ =
        register_module("gate_up_proj", std::make_shared<Linear>(h, 2 * width, c.mlp_bias, o));
    down_ = register_module("down_proj", std::make_shared<Linear>(width, h, c.mlp_bias, o));
    adapters_ = register_module("gate_up_proj_adapter_list", adapter_list(c, s, h, 2 * width, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor gate_up = add(gate_up_->call(x), (*adapters_)[static_cast<size_t>(slot_)].call(x));
    const std::vector<Tensor> parts = chunk(gate_up, 2, -1);
    return down_->call(mul(models::activation(act_, parts[0]), parts[1]));
  }

 private:
  std::string act_;
  int64_t slot_;
  ModulePtr gate_up_, down_;
  std::shared_ptr<ModuleList> adapters_;
};

// Zamba2AttentionDecoderLayer (the shared block as one hybrid layer holds it): self_attn,
// feed_forward, input_layernorm over [x; e] (2h), pre_ff_layernorm; no residual of its own.
class SharedBlock : public Module {
 public:
  SharedBlock(const ModelConfig& c, const Slot& s, bool rope, const TensorOptions& o, bool training)
      : Module(std::string(kPrefix) + "AttentionDecoderLayer") {
    const int64_t h = c.hidden_size;
    attn_ = register_module("self_attn", std::make_shared<Attention>(c, s, rope, o, training));
    mlp_ = register_module("feed_forward", std::make_shared<Mlp>(c, s, o));
    input_norm_ = register_module("input_layernorm",
                                  std::make_shared<RMSNorm>(DimVector{2 * h}, c.norm_eps, true, o));
    pre_ff_norm_ = register_module("pre_ff_layernorm",
                                   std::make_shared<RMSNorm>(DimVector{h}, c.norm_eps, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& e, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor a = attn_->run(input_norm_->call(cat({x, e}, -1)), cos_t, sin_t);
    return mlp_->call(pre_ff_norm_->call(a));
  }

 private:
  std::shared_ptr<Attention> attn_;
  ModulePtr mlp_, input_norm_, pre_ff_norm_;
};

// A decoder layer, made empty and filled by build() once it sits in its ModuleList (Note
// [Filling repeated blocks after registration], blocks.h); run reads the embeddings e too.
class Layer : public Module {
 public:
  using Module::Module;
  virtual void build(const ModelConfig& c, int64_t index, const TensorOptions& o,
                     bool training) = 0;
  virtual Tensor run(const Tensor& x, const Tensor& e, const Tensor& cos_t,
                     const Tensor& sin_t) = 0;
};

// Zamba2MambaDecoderLayer: mamba, input_layernorm; x + mamba(input_layernorm(x + t)), t the
// hybrid layer's projected block output (none in a Mamba-2 layer).
class MambaLayer : public Layer {
 public:
  MambaLayer() : Layer(std::string(kPrefix) + "MambaDecoderLayer") {}
  void build(const ModelConfig& c, int64_t /*index*/, const TensorOptions& o,
             bool /*training*/) override {
    mamba_ = register_module("mamba",
                             models::make_mamba2_mixer(c, std::string(kPrefix) + "MambaMixer",
                                                       std::string(kPrefix) + "RMSNormGated", o));
    norm_ = register_module("input_layernorm", std::make_shared<RMSNorm>(DimVector{c.hidden_size},
                                                                         c.norm_eps, true, o));
  }
  Tensor run(const Tensor& x, const Tensor& /*e*/, const Tensor& /*cos_t*/,
             const Tensor& /*sin_t*/) override {
    return run_after(x, Tensor());
  }
  Tensor run_after(const Tensor& x, const Tensor& t) {
    CallScope scope(*this);
    const Tensor n = norm_->call(t.defined() ? add(x, t) : x);
    return add(x, mamba_->run(n, Tensor(), Tensor()));
  }

 private:
  std::shared_ptr<models::AttentionBlock> mamba_;
  ModulePtr norm_;
};

// Zamba2HybridLayer: linear, mamba_decoder, shared_transformer (registered in that order); the
// block runs first, its output projected by `linear` into the Mamba-2 layer's input.
class HybridLayer : public Layer {
 public:
  HybridLayer() : Layer(std::string(kPrefix) + "HybridLayer") {}
  void build(const ModelConfig& c, int64_t index, const TensorOptions& o, bool training) override {
    Slot s;
    s.count = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (layer_kind(c, i).attention != AttentionType::kFull) continue;
      if (i < index) ++s.index;
      ++s.count;
    }
    s.block = s.index % c.num_mem_blocks;  // hybrid order: Note [Zamba2 shared blocks]
    const int64_t h = c.hidden_size;
    linear_ = register_module("linear", std::make_shared<Linear>(h, h, false, o));
    mamba_ = register_module("mamba_decoder", std::make_shared<MambaLayer>());
    mamba_->build(c, index, o, training);
    block_ = register_module(
        "shared_transformer",
        std::make_shared<SharedBlock>(c, s, layer_kind(c, index).rope, o, training));
  }
  Tensor run(const Tensor& x, const Tensor& e, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    const Tensor t = linear_->call(block_->run(x, e, cos_t, sin_t));
    return mamba_->run_after(x, t);
  }

 private:
  ModulePtr linear_;
  std::shared_ptr<MambaLayer> mamba_;
  std::shared_ptr<SharedBlock> block_;
};

// Zamba2Model: embed_tokens (padding_idx pad_token_id), layers, final_layernorm, and rotary_emb
// (Zamba2RotaryEmbedding over attention_head_dim) when the hybrid layers rotate (use_mem_rope).
class Backbone : public Module {
 public:
  Backbone() : Module(std::string(kPrefix) + "Model") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    embed_ = register_module("embed_tokens",
                             std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<int64_t> hybrid;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const LayerKind kind = layer_kind(c, i);
      if (kind.attention == AttentionType::kFull) {
        hybrid.push_back(i);
        rope_ = rope_ || kind.rope;
        layers_.push_back(layers->push_back(std::make_shared<HybridLayer>()));
      } else {
        layers_.push_back(layers->push_back(std::make_shared<MambaLayer>()));
      }
    }
    norm_ = register_module("final_layernorm", std::make_shared<RMSNorm>(DimVector{c.hidden_size},
                                                                         c.norm_eps, true, o));
    if (rope_) {
      rotary_ = register_module(
          "rotary_emb", std::make_shared<models::RotaryEmbedding>(
                            std::string(kPrefix) + "RotaryEmbedding", c.head_dim, c.rope_theta));
    }
    // Filled once in place (Note [Filling repeated blocks after registration], blocks.h).
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(c, static_cast<int64_t>(i), o, training);
    }
    // Note [Zamba2 shared blocks]: hybrid layer j's block tied to hybrid layer j % blocks'.
    if (!c.tie_word_embeddings) return;
    const auto blocks = static_cast<size_t>(c.num_mem_blocks);
    for (size_t j = blocks; j < hybrid.size(); ++j) {
      const std::string target = "layers." + std::to_string(hybrid[j]) + ".shared_transformer.";
      const std::string source =
          "layers." + std::to_string(hybrid[j % blocks]) + ".shared_transformer.";
      for (const NamedTensor& p :
           get_submodule(source.substr(0, source.size() - 1)).named_parameters()) {
        tie_parameters(*this, target + p.name, source + p.name);
      }
    }
  }
  // The embeddings' copy e (torch.clone) beside the stream, the RoPE tables once per forward.
  Tensor forward(const Tensor& ids) override {
    Tensor h = embed_->call(ids);
    const Tensor e = to(h, h.dtype(), /*copy=*/true);
    Tensor cos_h, sin_h;
    if (rotary_) {
      const auto [cos_t, sin_t] = rotary_->cos_sin(models::position_ids(ids.size(1)), h.dtype());
      cos_h = models::per_head(cos_t);
      sin_h = models::per_head(sin_t);
    }
    for (const auto& layer : layers_) h = layer->run(h, e, cos_h, sin_h);
    return norm_->call(h);
  }

 private:
  bool rope_ = false;
  ModulePtr embed_, norm_;
  std::shared_ptr<models::RotaryEmbedding> rotary_;
  std::vector<std::shared_ptr<Layer>> layers_;
};

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Backbone>>(std::string(kPrefix) + "ForCausalLM", c, o,
                                                      training, "model.embed_tokens.weight");
}

constexpr FieldRename kRenames[] = {{"norm_eps", "rms_norm_eps"},
                                    {"head_dim", "attention_head_dim"},
                                    {"layer_types", "layers_block_type"},
                                    {"no_ffn_layers", "layers_block_type"},
                                    {"nope_layers", "use_mem_rope"},
                                    {"mlp_bias", "add_bias_linear"},
                                    {"linear_num_key_heads", "mamba_ngroups"},
                                    {"linear_num_value_heads", "n_mamba_heads"},
                                    {"linear_key_head_dim", "mamba_d_state"},
                                    {"linear_value_head_dim", "mamba_headdim"},
                                    {"linear_conv_kernel_dim", "mamba_d_conv"},
                                    {"linear_conv_bias", "use_conv_bias"},
                                    {"linear_proj_bias", "add_bias_linear"},
                                    {"shared_attention_adapter", "use_shared_attention_adapter"}};

// Megatron-LM's split (Shoeybi et al. 2019, §3), on every layer that holds the module: the
// Mamba-2 mixers' in_proj column-parallel and out_proj row-parallel (heads and groups over the
// ranks: tp must divide mamba_ngroups, ParallelDim tp); the shared block's q, k, v column-parallel
// (by heads) and o_proj row-parallel, gate_up_proj column-parallel over its two halves [gate; up]
// (each rank its gates beside their ups) and down_proj row-parallel. Each adapter is a LoRA pair
// on a column-parallel projection: its first Linear [r, in] stays replicated (r is small, its
// input the projection's) and its second is split as the projection it adds to (q, k, v by
// heads; the gate_up adapter over the same two halves), so each rank adds its own columns. The
// hybrid layer's `linear` [h, h] reads the reduced block output and feeds the residual: it stays
// replicated. The embedding by vocabulary rows and lm_head by vocabulary, as every family.
constexpr TensorParallelRule kTpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.mamba.in_proj", "colwise"},
    {"model.layers.*.mamba.out_proj", "rowwise"},
    {"model.layers.*.mamba_decoder.mamba.in_proj", "colwise"},
    {"model.layers.*.mamba_decoder.mamba.out_proj", "rowwise"},
    {"model.layers.*.shared_transformer.self_attn.q_proj", "colwise"},
    {"model.layers.*.shared_transformer.self_attn.k_proj", "colwise"},
    {"model.layers.*.shared_transformer.self_attn.v_proj", "colwise"},
    {"model.layers.*.shared_transformer.self_attn.o_proj", "rowwise"},
    {"model.layers.*.shared_transformer.self_attn.linear_q_adapter_list.*.1", "colwise"},
    {"model.layers.*.shared_transformer.self_attn.linear_k_adapter_list.*.1", "colwise"},
    {"model.layers.*.shared_transformer.self_attn.linear_v_adapter_list.*.1", "colwise"},
    {"model.layers.*.shared_transformer.feed_forward.gate_up_proj", "colwise", 2},
    {"model.layers.*.shared_transformer.feed_forward.gate_up_proj_adapter_list.*.1", "colwise", 2},
    {"model.layers.*.shared_transformer.feed_forward.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

}  // namespace

// No init rules: Zamba2PreTrainedModel._init_weights draws dt_bias as the inverse softplus of a
// log-uniform draw, a fill shardplan's kernels do not have, so materialize refuses the family by
// name (docs/models.md).
const ModelFamily kZamba2Family{
    .model_type = "zamba2",
    .hf_class_prefix = "Zamba2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kRenames,
    .rotary = true,
    .rope_parameters_by_layer_type = true,  // parse_rope reads it, then checks the factor
    .linear_attention = true,
    .shared_transformer_blocks = true,
    .tp_plan = kTpPlan,
};

}  // namespace shardplan::tensor
