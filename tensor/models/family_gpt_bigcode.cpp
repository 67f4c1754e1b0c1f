// gpt_bigcode: BigCode's StarCoder, StarCoderBase, SantaCoder (and fine-tunes such as WizardCoder)
// as transformers' GPTBigCodeConfig (GPT-2's key names: n_embd, n_layer, ...) and
// modeling_gpt_bigcode.py, GPTBigCodeForCausalLM: GPT-2's layout (learned positions, LayerNorm,
// GeLU MLP, tied output layer) with nn.Linear layers (weight [out, in], not GPT-2's Conv1D) and
// multi-query attention by default (Shazeer 2019, one key/value head shared by every query head):
//   transformer.wte.weight [vocab, n_embd], transformer.wpe.weight [n_positions, n_embd]
//   transformer.h.N.ln_1.{weight,bias} [n_embd]
//   transformer.h.N.attn.c_attn.{weight [n_embd + 2 kv, n_embd], bias}: kv = head_dim with
//     multi_query, [q; k; v] side by side; kv = n_embd without, laid out per head [q k v]_h
//   transformer.h.N.attn.c_proj.{weight [n_embd, n_embd], bias}, transformer.h.N.ln_2.*
//   transformer.h.N.mlp.c_fc.{weight [n_inner, n_embd], bias}, mlp.c_proj.{weight [n_embd,
//   n_inner], bias}; transformer.ln_f.*, lm_head.weight (tied to wte unless tie_word_embeddings
//   is false); the non-persistent buffer transformer.bias [n_positions, n_positions] (bool).
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

namespace shardplan::tensor {
namespace models {
namespace {

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTBigCodeAttention"),
        hidden_(c.hidden_size),
        heads_(c.num_attention_heads),
        kv_heads_(c.num_key_value_heads),
        head_dim_(c.head_dim),
        attn_dropout_(training ? c.attention_dropout : 0.0),
        resid_dropout_(c.resid_dropout),
        training_(training) {
    // multi_query false with one head gives kv_heads 1 too: both layouts are then [q; k; v].
    SP_CHECK(kv_heads_ == 1 || kv_heads_ == heads_, "gpt_bigcode: ", kv_heads_,
             " key/value heads for ", heads_,
             " heads, expected 1 (multi_query) or every head (GPTBigCodeAttention has no groups)");
    register_module(
        "c_attn", std::make_shared<Linear>(hidden_, hidden_ + 2 * kv_heads_ * head_dim_, true, o));
    register_module("c_proj", std::make_shared<Linear>(hidden_, hidden_, true, o));
    // scale_attn_weights false: the scores are not divided by sqrt(head_dim) (attention_multiplier
    // 1). The scale is inside the fused kernel: the same work either way.
    if (c.attention_multiplier > 0) scale_ = c.attention_multiplier;
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), d = head_dim_;
    const Tensor qkv = child("c_attn")->call(x);
    Tensor q, k, v;
    if (kv_heads_ == 1) {
      // [B, 1, S, n_embd + 2 d] split into q, k and v; q viewed per head, k and v keep the one
      // head the unsqueeze made ([B, 1, S, d]), shared by every query head (enable_gqa).
      const std::vector<Tensor> parts = split_with_sizes(unsqueeze(qkv, 1), {hidden_, d, d}, 3);
      q = transpose(view(parts[0], {b, s, heads_, d}), 1, 2);
      k = parts[1];
      v = parts[2];
    } else {
      // [B, S, heads, 3 d] -> [B, heads, S, 3 d]: q, k and v interleaved per head, split on the
      // last dim.
      const std::vector<Tensor> parts =
          split(transpose(view(qkv, {b, s, heads_, 3 * d}), 1, 2), d, 3);
      q = parts[0];
      k = parts[1];
      v = parts[2];
    }
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), attn_dropout_,
                                                    /*is_causal=*/true, scale_,
                                                    /*enable_gqa=*/kv_heads_ != heads_);
    return maybe_dropout(child("c_proj")->call(merge_heads(out)), resid_dropout_, training_);
  }

 private:
  int64_t hidden_, heads_, kv_heads_, head_dim_;
  double attn_dropout_, resid_dropout_;
  std::optional<double> scale_;
  bool training_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("GPTBigCodeBlock") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    const DimVector h{c.hidden_size};
    register_module("ln_1", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("attn", std::make_shared<Attention>(c, o, training));
    register_module("ln_2", std::make_shared<LayerNorm>(h, c.norm_eps, true, true, o));
    register_module("mlp",
                    std::make_shared<TwoLayerMlp>("GPTBigCodeMLP", "c_fc", "c_proj", c.hidden_size,
                                                  c.intermediate_size, c.hidden_act,
                                                  training ? c.resid_dropout : 0.0, o));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = add(child("attn")->call(child("ln_1")->call(x)), x);
    return add(child("mlp")->call(child("ln_2")->call(h)), h);
  }
};

class BigCodeModel : public Module {
 public:
  BigCodeModel(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTBigCodeModel"),
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
    // GPTBigCodeModel keeps a lower-triangular [n_positions, n_positions] bool mask as a
    // non-persistent buffer; transformers 5's forward builds its causal mask elsewhere and never
    // reads it (not a checkpoint tensor, no parameter; parse bounds n_positions so it has a size).
    const int64_t p = c.max_position_embeddings;
    register_buffer("bias", empty({p, p}, {.dtype = DType::kBool}), /*persistent=*/false);
    for (const auto& b : blocks) b->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    // Learned positions exist only up to n_positions (transformers fails with an index error).
    SP_CHECK(seq <= max_positions_, "gpt_bigcode: sequence length ", seq, " exceeds n_positions ",
             max_positions_);
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

// A size GPTBigCodeConfig holds under GPT-2's key, also settable by the name its attribute_map
// gives it (hidden_size for n_embd, ...): transformers 5 sets such a key after the dataclass
// fields, so when a file holds both, the standard name's value is the one built.
int64_t size_key(const ConfigFields& f, const char* key, const char* alias, int64_t dflt) {
  return f.has(alias) ? f.integer(alias) : f.integer(key, dflt);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // GPTBigCodeConfig's defaults (the class's, GPT-2 small's sizes) for every key a file omits.
  c.vocab_size = f.integer("vocab_size", 50257);
  c.hidden_size = size_key(f, "n_embd", "hidden_size", 768);
  c.num_hidden_layers = size_key(f, "n_layer", "num_hidden_layers", 12);
  c.num_attention_heads = size_key(f, "n_head", "num_attention_heads", 12);
  c.max_position_embeddings = size_key(f, "n_positions", "max_position_embeddings", 1024);
  // Multi-query attention (the class's default): one key/value head. transformers derives
  // num_key_value_heads from multi_query alone, and the attention builds by multi_query, so a
  // num_key_value_heads key in the file is not read.
  c.num_key_value_heads = f.boolean("multi_query", true) ? 1 : c.num_attention_heads;
  // n_inner: null or absent means 4 * n_embd (GPTBigCodeBlock). (validate reports n_embd <= 0.)
  int64_t default_inner = 0;
  if (!f.has("n_inner") && !mul_into(c.hidden_size, 4, default_inner) && c.hidden_size > 0) {
    f.fail("n_embd", std::to_string(c.hidden_size) +
                         " is too large for the default n_inner = 4 * n_embd, expected at most " +
                         std::to_string(INT64_MAX / 4) + " or an explicit n_inner");
  }
  c.intermediate_size = f.integer("n_inner", default_inner);
  // GPTBigCodeAttention raises unless the heads split n_embd evenly.
  head_dim_from_hidden(f, c, "n_head", "n_embd");
  // The causal-mask buffer holds n_positions^2 elements: a count that must fit int64.
  int64_t mask = 0;
  if (c.max_position_embeddings > 0 &&
      !mul_into(c.max_position_embeddings, c.max_position_embeddings, mask)) {
    f.fail("n_positions", std::to_string(c.max_position_embeddings) +
                              " positions make GPTBigCodeModel's [n_positions, n_positions] "
                              "causal-mask buffer overflow int64, expected at most 3037000499");
  }
  // Cross-attention (an encoder-decoder use) adds crossattention and ln_cross_attn to every block
  // and needs an encoder's states; a causal LM planned here has none.
  if (f.boolean("add_cross_attention", false)) {
    f.fail("add_cross_attention",
           "true adds cross-attention to an encoder to every block, which shardplan does not "
           "build; expected false (a decoder-only GPTBigCodeForCausalLM)");
  }
  c.hidden_act = f.string("activation_function", "gelu_pytorch_tanh");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // nn.Linear's default bias, on every projection
  c.partial_rotary_factor = 0;                // learned positions, no rotary
  // scale_attn_weights false: softmax(q k^T) unscaled, the softmax scale 1 (attention_multiplier
  // is the scale itself; 0 keeps 1 / sqrt(head_dim)).
  c.attention_multiplier = f.boolean("scale_attn_weights", true) ? 0.0 : 1.0;
  c.embd_dropout = f.number("embd_pdrop", 0.1);
  c.attention_dropout = f.number("attn_pdrop", 0.1);
  c.resid_dropout = f.number("resid_pdrop", 0.1);
  // attention_softmax_in_fp32 and scale_attention_softmax_in_fp32 are read by no code path of
  // transformers 5 (its attention takes the softmax in float32 whatever they say): not read.
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_hidden_layers;
  j["n_head"] = c.num_attention_heads;
  j["n_positions"] = c.max_position_embeddings;
  j["n_inner"] = c.intermediate_size;
  j["multi_query"] = c.num_key_value_heads == 1;
  j["activation_function"] = c.hidden_act;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["scale_attn_weights"] = c.attention_multiplier == 0;
  j["embd_pdrop"] = c.embd_dropout;
  j["attn_pdrop"] = c.attention_dropout;
  j["resid_pdrop"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<BigCodeModel>>("GPTBigCodeForCausalLM", c, o, training,
                                                     "transformer", "transformer.wte.weight");
}

// GPTBigCodeConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"hidden_size", "n_embd"},
    {"intermediate_size", "n_inner"},
    {"num_hidden_layers", "n_layer"},
    {"num_attention_heads", "n_head"},
    {"num_key_value_heads", "multi_query"},  // derived: 1 with multi_query, else the heads
    {"head_dim", "n_head"},                  // derived: n_embd / n_head
    {"max_position_embeddings", "n_positions"},
    {"hidden_act", "activation_function"},
    {"norm_eps", "layer_norm_epsilon"},
    {"attention_multiplier", "scale_attn_weights"},
    {"embd_dropout", "embd_pdrop"},
    {"attention_dropout", "attn_pdrop"},
    {"resid_dropout", "resid_pdrop"},
};

}  // namespace
}  // namespace models

// Megatron's split with transformers' module names; the output layer is tied to wte, both laid
// out by vocabulary rows. c_attn is one column-parallel projection, split evenly on its output
// features (no fused_parts):
//  * without multi_query its rows are per head, [q k v] of head 0, then of head 1, ...: a plain
//    split hands each rank whole heads with their own q, k and v (GPT-NeoX's query_key_value);
//  * with multi_query they are [q (n_embd); k (d); v (d)], parts of unequal width that no
//    placement splits by head (fused_parts takes equal parts). BigCode's Megatron-LM, which
//    trained StarCoder, splits q by heads and keeps the one k/v head whole on every rank. The even
//    split gives each rank (n_embd + 2 d) / tp rows where Megatron's holds n_embd / tp + 2 d:
//    the attention core is the same (each rank's query heads against the one key/value head),
//    and the k/v GEMM columns and weights that every rank repeats are priced once across the
//    group. StarCoder at tp 8: 800 rows of 6,144 for 1,024, 2.8% of a rank's parameters. The
//    rotary families with fewer key/value heads than ranks (k_proj, v_proj colwise) are priced
//    the same way. Leaving c_attn out of the plan instead would replicate its output, and so the
//    whole attention core, on every rank: tp times the work, which is further from either.
constexpr TensorParallelRule kGptBigCodeTpPlan[] = {{"transformer.wte", "rowwise"},
                                                    {"transformer.h.*.attn.c_attn", "colwise"},
                                                    {"transformer.h.*.attn.c_proj", "rowwise"},
                                                    {"transformer.h.*.mlp.c_fc", "colwise"},
                                                    {"transformer.h.*.mlp.c_proj", "rowwise"},
                                                    {"lm_head", "colwise"}};

// GPTBigCodePreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), biases zero, LayerNorm weight one and bias zero), then the
// c_proj.weight of every GPTBigCodeAttention and GPTBigCodeMLP redrawn from normal(0,
// initializer_range / sqrt(2 n_layer)), GPT-2's residual scaling (Radford et al. 2019 §2.3). That
// rule comes first because the first matching rule applies; nn.Embedding has no padding_idx here.
constexpr InitRule kGptBigCodeInitRules[] = {
    {"Linear", "c_proj.weight", InitFill::kNormalDepthScaled},
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormal},
    {"LayerNorm", "weight", InitFill::kOnes},
    {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kGptBigCodeFamily;  // listed in family_registry.cpp
const ModelFamily kGptBigCodeFamily{
    .model_type = "gpt_bigcode",
    .hf_class_prefix = "GPTBigCode",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = true,
    .fused_qkv = true,
    .tp_plan = kGptBigCodeTpPlan,
    .init_rules = kGptBigCodeInitRules,
};

}  // namespace shardplan::tensor
