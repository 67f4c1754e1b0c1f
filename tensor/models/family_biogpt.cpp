// biogpt: Microsoft's BioGPT (Luo et al. 2022, "BioGPT: generative pre-trained transformer for
// biomedical text generation and mining"; microsoft/biogpt 347M, microsoft/BioGPT-Large 1.5B) as
// transformers' BioGptConfig and modeling_biogpt.py (BioGptForCausalLM): fairseq's pre-norm
// decoder with BERT-style key names (hidden_size, intermediate_size, hidden_dropout_prob,
// attention_probs_dropout_prob). The token embeddings times sqrt(hidden_size) (scale_embedding),
// plus learned positions from a table of max_position_embeddings + 2 rows (Note [BioGPT's learned
// positions]); separate q, k, v and out projections and an fc1/fc2 MLP in the layer itself, every
// one with a bias; a LayerNorm before each half and a final one; the output layer, named
// output_projection, tied to the token embeddings:
//   biogpt.embed_tokens.weight [vocab, hidden]
//   biogpt.embed_positions.weight [max_position_embeddings + 2, hidden]
//   biogpt.layers.N.self_attn.{k,v,q,out}_proj.{weight [h, h], bias [h]} (in that order)
//   biogpt.layers.N.self_attn_layer_norm.{weight,bias} [h]
//   biogpt.layers.N.fc1.{weight [ffn, h], bias [ffn]}, fc2.{weight [h, ffn], bias [h]}
//   biogpt.layers.N.final_layer_norm.{weight,bias} [h]
//   biogpt.layer_norm.{weight,bias} [h] (registered after the layers)
//   output_projection.weight [vocab, h] (tied to embed_tokens unless tie_word_embeddings is false)
//
// Note [BioGPT's learned positions]
// BioGptLearnedPositionalEmbedding is OPT's: an nn.Embedding of max_position_embeddings + 2 rows
// (fairseq's offset past its padding index) that looks position p up at row p + 2. BioGptModel
// hands it arange(S) as position ids, so its forward is one int64 add of the offset on [1, S] and
// one gather of [S, h] rows, then the add to the scaled token embeddings: traced so, the add of
// the offset under `biogpt` (the ids are the free arange: Note [What the traced forward counts],
// models.h). A sequence longer than max_position_embeddings would index past the table, which
// PyTorch refuses: the trace refuses it, and the planner refuses such a --seq (learned_positions).
// The table has no padding_idx, so _init_weights draws all of it; under tensor parallelism it is
// whole on every rank, as Megatron-LM keeps its position embeddings.
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/fairseq_layer.h"
#include "tensor/models/family.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace models {
namespace {

// BioGptLearnedPositionalEmbedding's offset: rows 0 and 1 are never looked up.
constexpr int64_t kPositionOffset = 2;

// BioGPT builds every LayerNorm as nn.LayerNorm(hidden_size), with PyTorch's default epsilon:
// BioGptConfig's layer_norm_eps (1e-12) reaches none of them.
constexpr double kLayerNormEps = 1e-5;

ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("BioGptAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size;
    // BioGptAttention's order: k, v, q, then out (named_parameters follows it).
    for (const char* name : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
      register_module(name, std::make_shared<Linear>(h, h, true, o));
    }
  }
  Tensor forward(const Tensor& x) override {
    // transformers 5 hands head_dim^-0.5 to the attention function as its scale (q is not scaled
    // on its own), which is the fused kernel's default: one causal attention, no extra product.
    // BioGPT supports SDPA and FlashAttention, so the planner's fused kernel is what runs.
    const Tensor q = split_heads(child("q_proj")->call(x), heads_, head_dim_);
    const Tensor k = split_heads(child("k_proj")->call(x), heads_, head_dim_);
    const Tensor v = split_heads(child("v_proj")->call(x), heads_, head_dim_);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true);
    return child("out_proj")->call(merge_heads(out));
  }

 private:
  int64_t heads_, head_dim_;
  double dropout_;
};

using DecoderLayer = models::FairseqDecoderLayer<Attention>;  // fairseq_layer.h

class BioGptModel : public Module {
 public:
  BioGptModel(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("BioGptModel"),
        max_positions_(c.max_position_embeddings),
        embed_scale_(c.scale_embeddings ? std::sqrt(static_cast<double>(c.hidden_size)) : 1.0),
        dropout_(training ? c.embd_dropout : 0.0) {
    // BioGptScaledWordEmbedding: nn.Embedding with padding_idx = pad_token_id; its product by
    // embed_scale runs in forward.
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    // Note [BioGPT's learned positions].
    register_module("embed_positions", std::make_shared<Embedding>(max_positions_ + kPositionOffset,
                                                                   c.hidden_size, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<DecoderLayer>> empty_layers;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty_layers.push_back(
          layers->push_back(std::make_shared<DecoderLayer>("BioGptDecoderLayer")));
    }
    register_module("layer_norm", make_norm(c, o));
    for (const auto& layer : empty_layers) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    SP_CHECK(seq <= max_positions_, "biogpt: sequence length ", seq,
             " exceeds max_position_embeddings ", max_positions_);
    // BioGptScaledWordEmbedding multiplies by embed_scale always, by 1.0 when scale_embedding is
    // false: one elementwise product either way.
    Tensor h = mul(child("embed_tokens")->call(ids), embed_scale_);
    const Tensor rows = add(position_ids(seq), kPositionOffset);
    h = add(h, child("embed_positions")->call(rows));
    h = maybe_dropout(h, dropout_, dropout_ > 0);
    for (const auto& [name, layer] : child("layers")->named_children()) h = layer->call(h);
    return child("layer_norm")->call(h);
  }

 private:
  int64_t max_positions_;
  double embed_scale_;
  double dropout_;
};

// BioGptForCausalLM: the backbone `biogpt` and the output layer `output_projection` (no bias),
// tied to the token embeddings (its _tied_weights_keys) when tie_word_embeddings.
class BioGptForCausalLM : public Module {
 public:
  BioGptForCausalLM(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("BioGptForCausalLM") {
    register_module("biogpt", std::make_shared<BioGptModel>(c, o, training));
    register_module("output_projection",
                    std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, o));
    if (c.tie_word_embeddings) {
      tie_parameters(*this, "output_projection.weight", "biogpt.embed_tokens.weight");
    }
  }
  Tensor forward(const Tensor& ids) override {
    return child("output_projection")->call(child("biogpt")->call(ids));
  }
};

// A probability of BioGptConfig that only 0 builds what shardplan traces.
void refuse_nonzero(const ConfigFields& f, const char* key, const std::string& what) {
  const double p = f.number(key, 0.0);
  if (p != 0) f.fail(key, std::to_string(p) + " " + what + "; expected 0");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // Required although BioGptConfig has defaults (those of microsoft/biogpt): they fix the
  // parameter shapes, the position table's too (Note [Strict config parsing]).
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.num_key_value_heads = c.num_attention_heads;
  // BioGptAttention raises unless the heads split hidden_size evenly.
  head_dim_from_hidden(f, c, "num_attention_heads", "hidden_size");
  c.hidden_act = f.string("hidden_act", "gelu");
  c.norm_eps = kLayerNormEps;  // layer_norm_eps is not read: transformers ignores it too
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // every nn.Linear but output_projection has a bias
  c.partial_rotary_factor = 0;                // learned positions, no rotary
  c.scale_embeddings = f.boolean("scale_embedding", true);
  // hidden_dropout_prob drops out the embeddings (after the positions join them) and each half's
  // output; attention_probs_dropout_prob the attention weights.
  c.resid_dropout = c.embd_dropout = f.number("hidden_dropout_prob", 0.1);
  c.attention_dropout = f.number("attention_probs_dropout_prob", 0.1);
  refuse_nonzero(f, "activation_dropout",
                 "drops out the MLP's activations in training, which shardplan does not trace");
  // LayerDrop (Fan et al. 2019) skips whole layers at random in training; the trace runs them all.
  refuse_nonzero(f, "layerdrop",
                 "skips layers at random in training, which shardplan does not model");
  // PreTrainedModel._init_weights draws from initializer_range (parse_model_config reads it).
  pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["scale_embedding"] = c.scale_embeddings;
  j["hidden_dropout_prob"] = c.resid_dropout;
  j["attention_probs_dropout_prob"] = c.attention_dropout;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<BioGptForCausalLM>(c, o, training);
}

// BioGptConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"num_key_value_heads", "num_attention_heads"},  // derived: kv heads = heads
    {"head_dim", "num_attention_heads"},             // derived: hidden_size / heads
    {"scale_embeddings", "scale_embedding"},
    {"resid_dropout", "hidden_dropout_prob"},
    {"embd_dropout", "hidden_dropout_prob"},
    {"attention_dropout", "attention_probs_dropout_prob"},
};

}  // namespace
}  // namespace models

// Megatron's split (Shoeybi et al. 2019, §3) with BioGPT's names: q, k and v column-parallel
// (whole heads per rank), out_proj row-parallel; fc1 column-parallel, fc2 row-parallel; the token
// embedding by vocabulary rows and output_projection by vocabulary, which lay the tied weight out
// alike. The position table and the LayerNorms stay replicated, as Megatron-LM keeps its position
// embeddings.
constexpr TensorParallelRule kBioGptTpPlan[] = {{"biogpt.embed_tokens", "rowwise"},
                                                {"biogpt.layers.*.self_attn.q_proj", "colwise"},
                                                {"biogpt.layers.*.self_attn.k_proj", "colwise"},
                                                {"biogpt.layers.*.self_attn.v_proj", "colwise"},
                                                {"biogpt.layers.*.self_attn.out_proj", "rowwise"},
                                                {"biogpt.layers.*.fc1", "colwise"},
                                                {"biogpt.layers.*.fc2", "rowwise"},
                                                {"output_projection", "colwise"}};

// BioGptPreTrainedModel has no _init_weights of its own: PreTrainedModel's, with std =
// initializer_range. Linear weights and Embedding rows normal(0, std), biases zero, LayerNorm
// weight one and bias zero; embed_tokens's pad_token_id row zero (its padding_idx). The position
// table has no padding_idx: all of it normal. That rule comes first because the first matching
// rule applies.
constexpr InitRule kBioGptInitRules[] = {{"Embedding", "embed_positions.weight", InitFill::kNormal},
                                         {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                         {"Linear", "weight", InitFill::kNormal},
                                         {"Linear", "bias", InitFill::kZeros},
                                         {"LayerNorm", "weight", InitFill::kOnes},
                                         {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kBioGptFamily;  // listed in family_registry.cpp
const ModelFamily kBioGptFamily{
    .model_type = "biogpt",
    .hf_class_prefix = "BioGpt",
    .layers_path = "biogpt.layers",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = true,  // a table of max_position_embeddings (+ 2) rows
    .tp_plan = kBioGptTpPlan,
    .init_rules = kBioGptInitRules,
};

}  // namespace shardplan::tensor
