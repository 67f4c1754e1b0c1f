// gpt_neo: EleutherAI's GPT-Neo (125M, 1.3B, 2.7B) as transformers' GPTNeoConfig and
// modeling_gpt_neo.py, GPTNeoForCausalLM: GPT-2's layout with nn.Linear layers, learned positions,
// LayerNorms with biases, q/k/v without biases and out_proj with one, a GeLU MLP (gelu_new) with
// biases, lm_head tied to wte; layers attending globally or locally by `attention_types`:
//   transformer.wte.weight [vocab, hidden], transformer.wpe.weight [max_positions, hidden]
//   transformer.h.N.ln_1.{weight,bias} [hidden]
//   transformer.h.N.attn.attention.{k_proj,v_proj,q_proj}.weight [hidden, hidden] (in that order)
//   transformer.h.N.attn.attention.out_proj.{weight [hidden, hidden], bias [hidden]}
//   transformer.h.N.ln_2.{weight,bias}
//   transformer.h.N.mlp.c_fc.{weight [F, hidden], bias [F]}, mlp.c_proj.{weight [hidden, F],
//   bias [hidden]} (F: intermediate_size, 4 hidden when null)
//   transformer.ln_f.{weight,bias}, lm_head.weight (tied to wte unless tie_word_embeddings false)
// and, per attention, the non-persistent bool buffer transformer.h.N.attn.attention.bias
// [1, 1, max_positions, max_positions]: the causal mask, banded to the window on local layers.
//
// Note [GPT-Neo's local attention and softmax scale]
// GPTNeoConfig expands attention_types ([[["global", "local"], 16]]: the pair 16 times) into one
// type per layer (attention_layers; a file's own attention_layers key, which the published files
// carry, is set after the expansion and wins). A "local" layer masks every key more than
// window_size - 1 positions back (its buffer is tril(ones) xor tril(ones, -window_size)): each
// query sees the window_size latest keys, itself included, which is ModelConfig's sliding
// window, so local layers are AttentionType::kSliding of window window_size and global ones
// kFull (tensor/models/layer_kinds.h prices them as two kinds). GPT-Neo does not divide its
// scores by sqrt(head_dim): the eager path multiplies q and k as they are and the
// FlashAttention-2 path passes softmax_scale 1.0 (mesh-tensorflow's GPT-Neo had no scale either),
// so the attention is traced with scale 1, which changes no shape or count.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {
namespace models {
namespace {

// GPTNeoSelfAttention (the eager class; GPTNeoFlashAttention2 holds the same modules).
class SelfAttention : public Module {
 public:
  SelfAttention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("GPTNeoSelfAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        attn_dropout_(training ? c.attention_dropout : 0.0),
        resid_dropout_(c.resid_dropout),
        training_(training) {
    SP_CHECK(kind.attention == AttentionType::kFull || kind.attention == AttentionType::kSliding,
             "gpt_neo: a layer attends ", to_string(kind.attention),
             "; expected global (full_attention) or local (sliding_attention) attention");
    if (kind.attention == AttentionType::kSliding) window_ = kind.window;
    // The mask every layer keeps (persistent=False: not in a checkpoint). transformers 5's eager
    // path slices it; the fused kernel takes the window as a number instead.
    const int64_t p = c.max_position_embeddings;
    register_buffer("bias", empty({1, 1, p, p}, {.dtype = DType::kBool, .device = o.device}),
                    /*persistent=*/false);
    const int64_t h = c.hidden_size;
    // GPTNeoSelfAttention.__init__ registers k, v, q, then out_proj: named_parameters' order.
    register_module("k_proj", std::make_shared<Linear>(h, h, false, o));
    register_module("v_proj", std::make_shared<Linear>(h, h, false, o));
    register_module("q_proj", std::make_shared<Linear>(h, h, false, o));
    register_module("out_proj", std::make_shared<Linear>(h, h, true, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor q = split_heads(child("q_proj")->call(x), heads_, head_dim_);
    const Tensor k = split_heads(child("k_proj")->call(x), heads_, head_dim_);
    const Tensor v = split_heads(child("v_proj")->call(x), heads_, head_dim_);
    // Softmax scale 1, and a local layer's window bounds the keys of each query (Note [GPT-Neo's
    // local attention and softmax scale]). transformers' eager path casts q and k to float32 and
    // materializes the scores; the planner prices the fused kernel unless the file says eager.
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), attn_dropout_, /*is_causal=*/true,
                                     /*scale=*/1.0, /*enable_gqa=*/false, window_);
    return maybe_dropout(child("out_proj")->call(merge_heads(out)), resid_dropout_, training_);
  }

 private:
  int64_t heads_, head_dim_;
  double attn_dropout_, resid_dropout_;
  bool training_;
  std::optional<int64_t> window_;  // local layers: window_size
};

// GPTNeoAttention: a holder choosing the attention class by the layer's type, with no
// parameters of its own (hence the ".attn.attention." in every name).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("GPTNeoAttention") {
    register_module("attention", std::make_shared<SelfAttention>(c, kind, o, training));
  }
  Tensor forward(const Tensor& x) override { return child("attention")->call(x); }
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("GPTNeoBlock") {}
  void build(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training) {
    const DimVector h{c.hidden_size};
    register_module("ln_1", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("attn", std::make_shared<Attention>(c, kind, o, training));
    register_module("ln_2", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    // GPTNeoMLP's dropout is resid_dropout too.
    register_module("mlp", std::make_shared<TwoLayerMlp>(
                               "GPTNeoMLP", "c_fc", "c_proj", c.hidden_size, c.intermediate_size,
                               c.hidden_act, training ? c.resid_dropout : 0.0, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = add(child("attn")->call(child("ln_1")->call(x)), x);
    return add(h, child("mlp")->call(child("ln_2")->call(h)));
  }
};

class NeoModel : public Module {
 public:
  NeoModel(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTNeoModel"),
        max_positions_(c.max_position_embeddings),
        dropout_(c.embd_dropout),
        training_(training) {
    register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    register_module("wpe",
                    std::make_shared<Embedding>(c.max_position_embeddings, c.hidden_size, o));
    auto h = register_module("h", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Block>> blocks;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      blocks.push_back(h->push_back(std::make_shared<Block>()));
    }
    register_module(
        "ln_f", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o));
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i]->build(c, layer_kind(c, static_cast<int64_t>(i)), o, training);
    }
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    // Learned positions exist only up to max_position_embeddings (transformers fails with an
    // index error beyond; the mask buffers are that wide too).
    SP_CHECK(seq <= max_positions_, "gpt_neo: sequence length ", seq,
             " exceeds max_position_embeddings ", max_positions_);
    Tensor h = add(child("wte")->call(ids), child("wpe")->call(position_ids(seq)));
    h = maybe_dropout(h, dropout_, training_);
    for (const auto& [name, block] : child("h")->named_children()) h = block->call(h);
    return child("ln_f")->call(h);
  }

 private:
  int64_t max_positions_;
  double dropout_;
  bool training_;
};

constexpr const char* kGlobal = "global";
constexpr const char* kLocal = "local";

// A size GPTNeoConfig holds under its own key, also settable by the name its attribute_map gives
// it (num_attention_heads for num_heads, num_hidden_layers for num_layers): transformers 5 sets
// such a key after the dataclass fields, so when a file holds both, the standard name wins.
const char* size_key(const ConfigFields& f, const char* key, const char* alias) {
  return f.has(alias) ? alias : key;
}

// GPTNeoConfig.expand_attention_types_params: each [types, n] item appends `types` n times. Null
// or absent: the class's [[["global", "local"], 12]]. A malformed item (Python would fail on it,
// or extend the list by a string's characters, which GPTNeoAttention then refuses) is refused
// here; the expansion stops past `layers` entries, the count it must meet.
std::vector<std::string> expand_attention_types(const ConfigFields& f, int64_t layers) {
  const char* key = "attention_types";
  std::vector<std::string> out;
  if (!f.has(key)) {
    for (int i = 0; i < 12; ++i) out.insert(out.end(), {kGlobal, kLocal});
    return out;
  }
  const nlohmann::json& items = f.raw(key);
  const std::string form =
      "; expected a list of [[types...], count] items, e.g. [[[\"global\", \"local\"], 12]]";
  if (!items.is_array()) f.fail(key, items.dump().substr(0, 60) + " is not a list" + form);
  for (const nlohmann::json& item : items) {
    const std::string shown = item.dump().substr(0, 60);
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() ||
        !item[1].is_number_integer()) {
      f.fail(key, shown + " is not a [[types...], count] item" + form);
    }
    if (item[1].is_number_unsigned() ? item[1].get<uint64_t>() > uint64_t{INT64_MAX}
                                     : item[1].get<int64_t>() < 0) {
      f.fail(key, shown + ": the count must be an integer >= 0" + form);
    }
    const auto count = item[1].get<int64_t>();
    for (const nlohmann::json& t : item[0]) {
      if (!t.is_string()) f.fail(key, shown + ": " + t.dump().substr(0, 40) + " is not a name");
    }
    for (int64_t n = 0; n < count && !item[0].empty(); ++n) {
      for (const nlohmann::json& t : item[0]) out.push_back(t.get<std::string>());
      if (static_cast<int64_t>(out.size()) > layers) return out;  // too many: refused by caller
    }
  }
  return out;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // GPTNeoConfig's defaults (the class's, GPT-Neo 1.3B's sizes) for every key a file omits.
  c.vocab_size = f.integer("vocab_size", 50257);
  c.hidden_size = f.integer("hidden_size", 2048);
  const char* layers_key = size_key(f, "num_layers", "num_hidden_layers");
  c.num_hidden_layers = f.integer(layers_key, 24);
  // The layer count sizes the attention list below: checked first, naming its key.
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail(layers_key, std::to_string(c.num_hidden_layers) + " layers, expected 1 to " +
                           std::to_string(kMaxLayers));
  }
  const char* heads_key = size_key(f, "num_heads", "num_attention_heads");
  c.num_attention_heads = f.integer(heads_key, 16);
  c.num_key_value_heads = c.num_attention_heads;
  // GPTNeoSelfAttention raises unless the heads split hidden_size evenly.
  head_dim_from_hidden(f, c, heads_key, "hidden_size");
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  // Every layer keeps a [P, P] mask buffer: their sum stays countable, as validate keeps the
  // parameters' (1e18).
  const double mask_values = static_cast<double>(c.num_hidden_layers) *
                             static_cast<double>(c.max_position_embeddings) *
                             static_cast<double>(c.max_position_embeddings);
  if (c.max_position_embeddings > 0 && !(mask_values < 1e18)) {
    f.fail("max_position_embeddings",
           std::to_string(c.max_position_embeddings) +
               " positions make each layer's [max_position_embeddings, max_position_embeddings] "
               "mask buffer too large: about " +
               std::to_string(mask_values) + " values, beyond what shardplan counts (1e18)");
  }
  // intermediate_size: null or absent means 4 * hidden_size (GPTNeoBlock).
  int64_t default_inner = 0;
  if (!f.has("intermediate_size") && !mul_into(c.hidden_size, 4, default_inner) &&
      c.hidden_size > 0) {
    f.fail("hidden_size", std::to_string(c.hidden_size) +
                              " is too large for the default intermediate_size = 4 * hidden_size, "
                              "expected at most " +
                              std::to_string(INT64_MAX / 4) + " or an explicit intermediate_size");
  }
  c.intermediate_size = f.integer("intermediate_size", default_inner);

  // The layer types: attention_types expanded, or the file's attention_layers, which
  // transformers sets over the expansion (Note [GPT-Neo's local attention and softmax scale]).
  std::vector<std::string> types = expand_attention_types(f, c.num_hidden_layers);
  const char* types_key = "attention_types";
  if (f.is_null("attention_layers")) {
    f.fail("attention_layers",
           "is null; expected one \"global\" or \"local\" per layer (or no attention_layers: the "
           "expansion of attention_types)");
  }
  if (f.has("attention_layers")) {
    types_key = "attention_layers";
    const nlohmann::json& listed = f.raw(types_key);
    if (!listed.is_array()) {
      f.fail(types_key, listed.dump().substr(0, 60) + " is not a list of layer types");
    }
    types.clear();
    for (const nlohmann::json& t : listed) {
      if (!t.is_string()) f.fail(types_key, t.dump().substr(0, 40) + " is not a layer type");
      types.push_back(t.get<std::string>());
    }
  }
  const auto layers = static_cast<size_t>(c.num_hidden_layers);
  if (types.size() != layers) {
    // The expansion stops past the layer count: "more than" is all it knows then.
    const std::string given = types.size() > layers ? "more than " + std::to_string(layers)
                                                    : std::to_string(types.size());
    f.fail(types_key, "gives " + given + " layer types for " + layers_key + " = " +
                          std::to_string(layers) +
                          " layers (GPTNeoConfig's check); expected one per layer");
  }
  bool any_local = false;
  for (const std::string& t : types) {
    if (t != kGlobal && t != kLocal) {
      f.fail(types_key, "'" + t.substr(0, 40) +
                            "' is not a GPT-Neo attention type; expected \"global\" or \"local\"");
    }
    any_local = any_local || t == kLocal;
    c.layer_types.push_back(t == kLocal ? AttentionType::kSliding : AttentionType::kFull);
  }
  const int64_t window = f.integer("window_size", 256);
  if (window > 0) {
    c.sliding_window = window;
  } else if (any_local) {
    f.fail("window_size", std::to_string(window) +
                              " leaves a local layer's queries no key (its mask keeps the "
                              "window_size latest); expected a positive window");
  }
  c.hidden_act = f.string("activation_function", "gelu_new");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = false;            // k_proj, v_proj, q_proj: bias=False always
  c.o_bias = c.mlp_bias = true;  // out_proj, c_fc, c_proj: bias=True
  c.partial_rotary_factor = 0;   // learned positions, no rotary
  c.embd_dropout = f.number("embed_dropout", 0.0);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("resid_dropout", 0.0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_layers"] = c.num_hidden_layers;
  j["num_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["intermediate_size"] = c.intermediate_size;
  // One item listing every layer's type once: the expansion is the list itself. An empty
  // layer_types (a config built in code) is every layer global.
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool local =
        !c.layer_types.empty() && c.layer_types[static_cast<size_t>(i)] == AttentionType::kSliding;
    types.push_back(local ? kLocal : kGlobal);
  }
  j["attention_types"] = nlohmann::json::array({nlohmann::json::array({types, 1})});
  // No window (every layer global with a window_size <= 0): 0, read back as none.
  j["window_size"] = c.sliding_window.value_or(0);
  j["activation_function"] = c.hidden_act;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["embed_dropout"] = c.embd_dropout;
  j["attention_dropout"] = c.attention_dropout;
  j["resid_dropout"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<NeoModel>>("GPTNeoForCausalLM", c, o, training, "transformer",
                                                 "transformer.wte.weight");
}

// GPTNeoConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"num_hidden_layers", "num_layers"},
    {"num_attention_heads", "num_heads"},
    {"num_key_value_heads", "num_heads"},  // derived: kv heads = heads
    {"head_dim", "num_heads"},             // derived: hidden_size / num_heads
    {"hidden_act", "activation_function"},
    {"norm_eps", "layer_norm_epsilon"},
    {"embd_dropout", "embed_dropout"},
    {"layer_types", "attention_types"},
    {"sliding_window", "window_size"},
};

}  // namespace
}  // namespace models

// Megatron's split with transformers' module names (GPTNeoConfig has no base_model_tp_plan). q, k
// and v are separate Linears whose rows are [heads, head_dim]: a column split hands each rank
// whole heads of each, so no fused parts; out_proj and c_proj are row-parallel, their biases
// added once after the all-reduce. The output layer is tied to wte; both are laid out by
// vocabulary rows. Local layers split the same way: the window is per head, local to a rank.
constexpr TensorParallelRule kGptNeoTpPlan[] = {
    {"transformer.wte", "rowwise"},
    {"transformer.h.*.attn.attention.q_proj", "colwise"},
    {"transformer.h.*.attn.attention.k_proj", "colwise"},
    {"transformer.h.*.attn.attention.v_proj", "colwise"},
    {"transformer.h.*.attn.attention.out_proj", "rowwise"},
    {"transformer.h.*.mlp.c_fc", "colwise"},
    {"transformer.h.*.mlp.c_proj", "rowwise"},
    {"lm_head", "colwise"}};

// GPTNeoPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), no padding row since wte has no padding_idx, Linear biases zero,
// LayerNorm weight one and bias zero), then each attention's mask buffer recomputed, which
// materialize (parameters only) does not fill.
constexpr std::span<const InitRule> kGptNeoInitRules = kPreTrainedInitRules;

extern const ModelFamily kGptNeoFamily;  // listed in family_registry.cpp
const ModelFamily kGptNeoFamily{
    .model_type = "gpt_neo",
    .hf_class_prefix = "GPTNeo",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = true,
    .tp_plan = kGptNeoTpPlan,
    .init_rules = kGptNeoInitRules,
};

}  // namespace shardplan::tensor
