// falcon: TII's Falcon-7B, -40B, -180B, Falcon2-11B and Falcon-RW as transformers' FalconConfig and
// modeling_falcon.py (FalconForCausalLM). h hidden, d = h / heads, F ffn_hidden_size (4 h by
// default), g = heads / kv heads; every FalconLinear with a bias only with `bias`:
//   transformer.word_embeddings.weight [vocab, h]
//   transformer.h.N.self_attention.query_key_value.weight [W, h], W by layout:
//     new_decoder_architecture  (heads + 2 kv) d: per group [g queries, k, v] (40B, 180B, 11B)
//     multi_query               (heads + 2) d: [every query, k, v] (Falcon-7B)
//     neither                   3 h: per head [q, k, v] (Falcon-RW)
//   transformer.h.N.self_attention.dense.weight [h, h]
//   transformer.h.N.mlp.dense_h_to_4h.weight [F, h], mlp.dense_4h_to_h.weight [h, F]
//   then the layer's LayerNorms [h] (weight, bias), registered after the MLP:
//     parallel_attn false       post_attention_layernorm, input_layernorm
//     num_ln_in_parallel_attn 2 ln_attn, ln_mlp (new_decoder_architecture's default)
//     otherwise                 input_layernorm, shared by attention and MLP
//   transformer.ln_f.{weight, bias} [h], lm_head.weight [vocab, h] (tied by default)
// The fused layouts are one view each (FalconAttention._split_heads); Note [Falcon layouts].
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {
namespace models {
namespace {

// Note [Falcon layouts]
// FalconConfig's switches give four layers that real checkpoints use:
//   Falcon-7B     multi_query, parallel_attn: one k and v head, one input_layernorm
//   Falcon-40B/180B new_decoder_architecture: num_kv_heads groups, ln_attn and ln_mlp
//   Falcon2-11B   new_decoder_architecture with num_ln_in_parallel_attn 1: one input_layernorm
//   Falcon-RW     neither, parallel_attn false, bias, alibi: per-head q/k/v, two LayerNorms
// Each keeps its own arithmetic in FalconAttention: the new decoder copies each group's k and v
// out to its g query heads (an index, a broadcast and a flatten: copies [B, S, heads, d]) and
// rotates and attends at full width; multi_query hands SDPA one k and v head; the per-head
// layout is three views. ModelConfig holds the switches as num_key_value_heads (1 for
// multi_query, heads for the per-head layout), use_parallel_residual, new_decoder_architecture
// and num_ln_in_parallel_attn; alibi as nope_layers (every layer; below).
// transformers fails on the other combinations, so they are refused: new_decoder_architecture
// without parallel_attn (the layer builds input/post_attention_layernorm but its forward calls
// ln_attn, or with num_ln_in_parallel_attn 1 reads an MLP input it never set), and ln_attn/ln_mlp
// without new_decoder_architecture (its forward calls input_layernorm); num_kv_heads other than
// num_attention_heads without either switch (the per-head view cannot reshape k to it).

constexpr const char* kFamily = "Falcon";

// FalconLinear: input @ weight.T, then + bias as an op of its own (transformers keeps the
// rounding to bfloat16 between the two that Falcon was trained with). A Linear to the
// tensor-parallel rules.
class FalconLinear : public Linear {
 public:
  using Linear::Linear;
  Tensor forward(const Tensor& x) override {
    const Tensor y = linear(x, weight());
    return bias().defined() ? add(y, bias()) : y;
  }
};

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("FalconAttention"),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        new_decoder_(c.new_decoder_architecture),
        rotary_(c.nope_layers.empty()) {
    // SDPA drops attention probabilities on the ALiBi path and in FalconFlashAttention2; the
    // rotary SDPA and eager paths pass dropout_p 0.0.
    if (training && (!rotary_ || c.attn_implementation == "flash_attention_2")) {
      dropout_ = c.attention_dropout;
    }
    const int64_t h = c.hidden_size;
    const int64_t width =
        new_decoder_ || kv_heads_ == 1 ? (heads_ + 2 * kv_heads_) * head_dim_ : 3 * h;
    register_module("query_key_value", std::make_shared<FalconLinear>(h, width, c.qkv_bias, o));
    register_module("dense", std::make_shared<FalconLinear>(h, h, c.o_bias, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    const Tensor fused = child("query_key_value")->call(x);
    Tensor q, k, v;  // [B, S, heads (or 1 k and v head), d]
    if (new_decoder_) {
      // [B, S, kv, g + 2, d]: each group's queries, then its k and v, indexed out (a copy, as
      // qkv[:, :, :, [-2]]), broadcast over the group and flattened to every head.
      const int64_t g = heads_ / kv_heads_;
      const Tensor qkv = view(fused, {b, s, kv_heads_, g + 2, d});
      const DimVector group{b, s, kv_heads_, g, d};
      q = flatten(narrow(qkv, 3, 0, g), 2, 3);
      k = flatten(expand(contiguous(narrow(qkv, 3, g, 1)), group), 2, 3);
      v = flatten(expand(contiguous(narrow(qkv, 3, g + 1, 1)), group), 2, 3);
    } else if (kv_heads_ == 1) {
      // [B, S, heads + 2, d]: the queries, then the one k and v head (copies, as [[-2]]).
      const Tensor qkv = view(fused, {b, s, heads_ + 2, d});
      q = narrow(qkv, 2, 0, heads_);
      k = contiguous(narrow(qkv, 2, heads_, 1));
      v = contiguous(narrow(qkv, 2, heads_ + 1, 1));
    } else {
      const Tensor qkv = view(fused, {b, s, heads_, 3, d});  // per head [q, k, v]
      q = select(qkv, 3, 0);
      k = select(qkv, 3, 1);
      v = select(qkv, 3, 2);
    }
    // [B, S, H, d] -> [B, H, S, d]: transpose(1, 2) and a reshape to the same shape (a view).
    q = transpose(q, 1, 2);
    k = transpose(k, 1, 2);
    v = transpose(v, 1, 2);
    if (rotary_) {
      q = apply_rotary(q, cos_t, sin_t);
      k = apply_rotary(k, cos_t, sin_t);
    }
    // With alibi the per-head linear bias is inside the fused attention kernel (FlashAttention-2
    // takes ALiBi slopes natively) and not traced; transformers adds it to a materialized mask.
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true,
                                                    {}, /*enable_gqa=*/k.size(1) != heads_);
    return child("dense")->call(merge_heads(out));
  }

 private:
  int64_t heads_, kv_heads_, head_dim_;
  bool new_decoder_, rotary_;
  double dropout_ = 0;
};

class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const TensorOptions& o) : Module("FalconMLP"), act_(c.hidden_act) {
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    register_module("dense_h_to_4h", std::make_shared<FalconLinear>(h, f, c.mlp_bias, o));
    register_module("dense_4h_to_h", std::make_shared<FalconLinear>(f, h, c.mlp_bias, o));
  }
  Tensor forward(const Tensor& x) override {
    return child("dense_4h_to_h")->call(activation(act_, child("dense_h_to_4h")->call(x)));
  }

 private:
  std::string act_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Layer : public Module {
 public:
  Layer() : Module("FalconDecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    parallel_ = c.use_parallel_residual;
    two_norms_ = c.num_ln_in_parallel_attn == 2;
    training_ = training;
    attention_dropout_ = c.attention_dropout;
    hidden_dropout_ = c.resid_dropout;
    attention = register_module("self_attention", std::make_shared<Attention>(c, o, training));
    register_module("mlp", std::make_shared<Mlp>(c, o));
    const DimVector h{c.hidden_size};
    auto norm = [&](const char* name) {
      register_module(name, std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    };
    if (!parallel_) {
      norm("post_attention_layernorm");  // registered first, as FalconDecoderLayer does
      norm("input_layernorm");
    } else if (two_norms_) {
      norm("ln_attn");
      norm("ln_mlp");
    } else {
      norm("input_layernorm");
    }
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    Tensor attn_in, mlp_in;
    if (two_norms_) {
      attn_in = child("ln_attn")->call(x);
      mlp_in = child("ln_mlp")->call(x);
    } else {
      attn_in = child("input_layernorm")->call(x);
      mlp_in = attn_in;
    }
    const Tensor a = attention->run(attn_in, cos_t, sin_t);
    if (parallel_) {
      // x + dropout(mlp(n_mlp) + attn(n_attn)), the sum in place in transformers.
      const Tensor m = add(child("mlp")->call(mlp_in), a);
      return add(x, maybe_dropout(m, hidden_dropout_, training_));
    }
    // Sequential (Falcon-RW): the attention's residual add drops out at attention_dropout.
    const Tensor r = add(x, maybe_dropout(a, attention_dropout_, training_));
    const Tensor m = child("mlp")->call(child("post_attention_layernorm")->call(r));
    return add(r, maybe_dropout(m, hidden_dropout_, training_));
  }
  std::shared_ptr<Attention> attention;

 private:
  bool parallel_ = false, two_norms_ = false, training_ = false;
  double attention_dropout_ = 0, hidden_dropout_ = 0;
};

class FalconModel : public Module {
 public:
  FalconModel(const ModelConfig& c, const TensorOptions& o, bool training) : Module("FalconModel") {
    register_module("word_embeddings", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto layers = register_module("h", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Layer>> empty;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty.push_back(layers->push_back(std::make_shared<Layer>()));
    }
    register_module(
        "ln_f", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o));
    // Built and run with alibi too: FalconModel computes the tables whatever the layers use.
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>("FalconRotaryEmbedding", c.head_dim, c.rope_theta));
    for (const auto& layer : empty) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = child("word_embeddings")->call(ids);
    const auto [cos_t, sin_t] = rotary_emb->cos_sin(position_ids(ids.size(1)), h.dtype());
    const Tensor cos_h = per_head(cos_t), sin_h = per_head(sin_t);
    for (const auto& [name, layer] : child("h")->named_children()) {
      h = static_cast<Layer&>(*layer).run(h, cos_h, sin_h);
    }
    return child("ln_f")->call(h);
  }
  std::shared_ptr<RotaryEmbedding> rotary_emb;
};

// RoPE as transformers 5 reads FalconConfig: rope_theta and a legacy rope_scaling, then
// rope_parameters over them (ModelFamily::rope_parameters_by_layer_type skips the shared reading).
// FalconRotaryEmbedding's default type makes a table of the whole head_dim whatever
// partial_rotary_factor says; another type's narrower table would not broadcast against the
// whole head apply_rotary_pos_emb rotates (a forward error), so a factor other than 1 is refused
// there, as Falcon-H1's.
void parse_rope(const ConfigFields& f, ModelConfig& c) {
  c.rope_theta = f.number("rope_theta", 10000.0);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
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
                    "': FalconAttention rotates all of head_dim, which that narrower table does "
                    "not cover; expected 1");
  }
  c.partial_rotary_factor = 1;  // validate checks rope_theta (ModelFamily::rotary)
}

// The layout switches (Note [Falcon layouts]).
void parse_layout(const ConfigFields& f, ModelConfig& c) {
  const int64_t heads = c.num_attention_heads;
  c.new_decoder_architecture = f.boolean("new_decoder_architecture", false);
  // Both read even where the new decoder ignores them, so a file stating them is understood.
  const bool multi_query = f.boolean("multi_query", true);
  const bool parallel_attn = f.boolean("parallel_attn", true);
  const int64_t kv = f.integer("num_kv_heads", heads);
  const std::optional<int64_t> norms = f.opt_integer("num_ln_in_parallel_attn");
  if (norms && *norms != 1 && *norms != 2) {
    f.fail("num_ln_in_parallel_attn",
           std::to_string(*norms) +
               ", expected 1 (one input_layernorm), 2 (ln_attn and ln_mlp) or null");
  }
  c.use_parallel_residual = parallel_attn;
  if (c.new_decoder_architecture) {
    if (!parallel_attn) {
      f.fail("parallel_attn",
             "false with new_decoder_architecture: transformers' FalconDecoderLayer then builds "
             "input_layernorm and post_attention_layernorm, but its forward calls ln_attn (or, "
             "with num_ln_in_parallel_attn 1, reads an MLP input it never set); expected true");
    }
    c.num_key_value_heads = kv;  // validate: positive, dividing the heads
    c.num_ln_in_parallel_attn = norms.value_or(2);
    return;
  }
  if (!multi_query && kv != heads) {
    f.fail("num_kv_heads",
           std::to_string(kv) +
               " without new_decoder_architecture or multi_query: FalconAttention splits q, k "
               "and v per head and cannot reshape k to it; expected num_attention_heads (" +
               std::to_string(heads) + ") or no key");
  }
  c.num_key_value_heads = multi_query ? 1 : heads;
  if (parallel_attn && norms == 2) {
    f.fail("num_ln_in_parallel_attn",
           "2 without new_decoder_architecture: transformers' FalconDecoderLayer builds ln_attn "
           "and ln_mlp, but its forward calls input_layernorm; expected 1 or null");
  }
  c.num_ln_in_parallel_attn = parallel_attn ? 1 : 0;  // sequential: the key is ignored
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  // FalconConfig still takes GPT-2's n_embed, which wins over hidden_size.
  c.hidden_size = f.has("n_embed") ? f.integer("n_embed") : f.integer("hidden_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  const int64_t h = c.hidden_size, heads = c.num_attention_heads;
  if (heads > 0 && h % heads != 0) {
    // FalconAttention raises: hidden_size must be heads x head_dim.
    f.fail("num_attention_heads",
           std::to_string(heads) + " does not divide hidden_size " + std::to_string(h));
  }
  c.head_dim = heads > 0 ? h / heads : 0;
  // ffn_hidden_size: null or absent means 4 x hidden_size. (validate reports hidden_size <= 0.)
  int64_t default_ffn = 0;
  if (!f.has("ffn_hidden_size") && !mul_into(h, 4, default_ffn) && h > 0) {
    f.fail("hidden_size", std::to_string(h) +
                              " is too large for the default ffn_hidden_size = 4 x hidden_size, "
                              "expected at most " +
                              std::to_string(INT64_MAX / 4) + " or an explicit ffn_hidden_size");
  }
  c.intermediate_size = f.integer("ffn_hidden_size", default_ffn);
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.hidden_act = f.string("activation", "gelu");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("bias", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("hidden_dropout", 0.0);
  parse_layout(f, c);
  parse_rope(f, c);
  // ALiBi rotates neither q nor k: to the layer kinds every layer is a NoPE layer (ModelConfig::
  // nope_layers), whose position bias sits inside the fused attention kernel.
  if (f.boolean("alibi", false)) {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.nope_layers.push_back(i);
  }
  // The legacy RW key of Falcon-7B's and -40B's files (false there): modeling_falcon.py always
  // adds the layer's input, never its normed input, to the residual stream.
  require_built_value(f, "apply_residual_connection_post_layernorm", false, kFamily,
                      "the residual from the layer's input");
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_kv_heads"] = c.num_key_value_heads;
  j["ffn_hidden_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["activation"] = c.hidden_act;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["bias"] = c.qkv_bias;
  j["attention_dropout"] = c.attention_dropout;
  j["hidden_dropout"] = c.resid_dropout;
  j["new_decoder_architecture"] = c.new_decoder_architecture;
  j["multi_query"] = !c.new_decoder_architecture && c.num_key_value_heads == 1;
  j["parallel_attn"] = c.use_parallel_residual;
  j["num_ln_in_parallel_attn"] =
      c.num_ln_in_parallel_attn > 0 ? nlohmann::json(c.num_ln_in_parallel_attn) : nullptr;
  j["alibi"] = !c.nope_layers.empty();
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
}

// What parse guarantees, checked again for a config built in code (the planner copies configs
// and cuts their layers; a switch set by hand could ask for a layer transformers cannot run).
void check_layout(const ModelConfig& c) {
  const int64_t kv = c.num_key_value_heads, heads = c.num_attention_heads;
  const int64_t norms = c.num_ln_in_parallel_attn;
  SP_CHECK(
      c.nope_layers.empty() || static_cast<int64_t>(c.nope_layers.size()) == c.num_hidden_layers,
      "falcon: nope_layers lists ", c.nope_layers.size(), " of ", c.num_hidden_layers,
      " layers; expected none (rotary) or every layer (alibi)");
  if (c.new_decoder_architecture) {
    SP_CHECK(c.use_parallel_residual && (norms == 1 || norms == 2),
             "falcon: new_decoder_architecture with use_parallel_residual ",
             c.use_parallel_residual, " and num_ln_in_parallel_attn ", norms,
             "; expected a parallel layer of 1 or 2 LayerNorms (Note [Falcon layouts])");
    return;
  }
  SP_CHECK(kv == 1 || kv == heads, "falcon: ", kv, " key-value heads of ", heads,
           " without new_decoder_architecture; expected 1 (multi_query) or ", heads);
  SP_CHECK(norms == (c.use_parallel_residual ? 1 : 0), "falcon: num_ln_in_parallel_attn ", norms,
           " with use_parallel_residual ", c.use_parallel_residual,
           " without new_decoder_architecture; expected 1 for a parallel layer, else 0");
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return std::make_shared<LmHeadModel<FalconModel>>(
      "FalconForCausalLM", c, o, training, "transformer", "transformer.word_embeddings.weight");
}

// FalconConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"intermediate_size", "ffn_hidden_size"},
    {"num_key_value_heads", "num_kv_heads"},
    {"hidden_act", "activation"},
    {"norm_eps", "layer_norm_epsilon"},
    {"resid_dropout", "hidden_dropout"},
    {"qkv_bias", "bias"},
    {"use_parallel_residual", "parallel_attn"},
    {"nope_layers", "alibi"},
};

}  // namespace
}  // namespace models

// Megatron-LM's split (Shoeybi et al. 2019, §3). The fused query_key_value of every layout is laid
// out by key-value group: per group [its g queries, k, v] (the new decoder; the per-head layout
// is the case g = 1, [q, k, v] per head). A plain column split of its rows therefore gives each
// rank whole groups with their queries exactly when tp divides num_kv_heads, and no placement
// splits it otherwise: a group's k and v would have to be on several ranks (Megatron-LM
// replicates them, a different layout of the weight). Falcon-7B's multi_query (one k and v head
// after all the queries) is the one-group case: tp 1 only. The planner refuses such a tp for a
// fused_qkv family (planner/candidate/parallel_dims.cpp), so the rule below is only ever applied
// where it is exact. word_embeddings by vocabulary rows and lm_head by vocabulary, consistent
// when tied.
constexpr TensorParallelRule kTpPlan[] = {
    {"transformer.word_embeddings", "rowwise"},
    {"transformer.h.*.self_attention.query_key_value", "colwise"},
    {"transformer.h.*.self_attention.dense", "rowwise"},
    {"transformer.h.*.mlp.dense_h_to_4h", "colwise"},
    {"transformer.h.*.mlp.dense_4h_to_h", "rowwise"},
    {"lm_head", "colwise"}};

// FalconPreTrainedModel._init_weights: FalconLinear and nn.Linear weights normal(0,
// initializer_range) with zero biases, the embedding normal (no padding_idx), LayerNorm weight one
// and bias zero (PreTrainedModel._init_weights).
constexpr std::span<const InitRule> kInitRules = kPreTrainedInitRules;

extern const ModelFamily kFalconFamily;  // listed in family_registry.cpp
const ModelFamily kFalconFamily{
    .model_type = "falcon",
    .hf_class_prefix = "Falcon",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rope_parameters_by_layer_type = true,
    .fused_qkv = true,
    .tp_plan = kTpPlan,
    .init_rules = kInitRules,
};

}  // namespace shardplan::tensor
