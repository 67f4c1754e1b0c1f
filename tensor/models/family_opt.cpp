// opt: Meta's OPT (Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models") as
// transformers' OPTConfig and modeling_opt.py (OPTForCausalLM): learned positions in a table of
// max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding looks position p up at row p + 2,
// fairseq's offset past its padding index), separate q, k, v and out projections, a ReLU MLP of
// fc1 and fc2 sitting in the layer itself, LayerNorms before each half (do_layer_norm_before; after
// each residual add and no final norm when false, as OPT-350m), biases by enable_bias, and an
// output layer tied to the token embeddings. d = word_embed_proj_dim (hidden_size unless given):
//   model.decoder.embed_tokens.weight [vocab, d], embed_positions.weight [positions + 2, hidden]
//   model.decoder.project_out.weight [d, hidden], project_in.weight [hidden, d] (only when d !=
//   hidden, and registered in that order), model.decoder.final_layer_norm.{weight,bias} [hidden]
//   (pre-norm only), all registered before the layers:
//   model.decoder.layers.N.self_attn.{k,v,q,out}_proj.{weight [hidden, hidden], bias [hidden]}
//   model.decoder.layers.N.self_attn_layer_norm.{weight,bias} [hidden]
//   model.decoder.layers.N.fc1.{weight [ffn, hidden], bias}, fc2.{weight [hidden, ffn], bias}
//   model.decoder.layers.N.final_layer_norm.{weight,bias} [hidden]
//   lm_head.weight [vocab, d] (tied to embed_tokens unless tie_word_embeddings is false)
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// OPTLearnedPositionalEmbedding's offset: rows 0 and 1 are never looked up.
constexpr int64_t kPositionOffset = 2;

ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps,
                                     c.norm_elementwise_affine, true, o);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("OPTAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size;
    // OPTAttention's order: k, v, q, then out (named_parameters follows it).
    for (const char* name : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
      register_module(name, std::make_shared<Linear>(h, h, c.qkv_bias, o));
    }
  }
  Tensor forward(const Tensor& x) override {
    // OPT scales q by head_dim^-0.5 right after its projection (as fairseq did) and attends with
    // scale 1: one elementwise product on q, the same attention.
    const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim_));
    const Tensor q = split_heads(mul(child("q_proj")->call(x), scaling), heads_, head_dim_);
    const Tensor k = split_heads(child("k_proj")->call(x), heads_, head_dim_);
    const Tensor v = split_heads(child("v_proj")->call(x), heads_, head_dim_);
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, 1.0);
    return child("out_proj")->call(merge_heads(out));
  }

 private:
  int64_t heads_, head_dim_;
  double dropout_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class DecoderLayer : public Module {
 public:
  DecoderLayer() : Module("OPTDecoderLayer") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    hidden_ = c.hidden_size;
    after_ = c.norm_after_residual;
    act_ = c.hidden_act;
    dropout_ = c.resid_dropout;
    training_ = training;
    register_module("self_attn", std::make_shared<Attention>(c, o, training));
    register_module("self_attn_layer_norm", make_norm(c, o));
    register_module("fc1",
                    std::make_shared<Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias, o));
    register_module("fc2",
                    std::make_shared<Linear>(c.intermediate_size, c.hidden_size, c.mlp_bias, o));
    register_module("final_layer_norm", make_norm(c, o));
  }
  Tensor forward(const Tensor& x) override {
    Module& ln1 = *child("self_attn_layer_norm");
    Module& ln2 = *child("final_layer_norm");
    Tensor h = child("self_attn")->call(after_ ? x : ln1.call(x));
    h = add(x, maybe_dropout(h, dropout_, training_));
    if (after_) h = ln1.call(h);
    // The MLP half runs on the tokens flattened to [B S, hidden] (OPTDecoderLayer's reshape),
    // viewed back to [B, S, hidden] after its residual add.
    const DimVector shape = h.sizes();
    const Tensor flat = reshape(h, {-1, hidden_});
    Tensor m = child("fc1")->call(after_ ? flat : ln2.call(flat));
    m = maybe_dropout(child("fc2")->call(activation(act_, m)), dropout_, training_);
    h = view(add(flat, m), shape);
    return after_ ? ln2.call(h) : h;
  }

 private:
  int64_t hidden_ = 0;
  bool after_ = false;
  std::string act_;
  double dropout_ = 0;
  bool training_ = false;
};

class Decoder : public Module {
 public:
  Decoder(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("OPTDecoder"), max_positions_(c.max_position_embeddings) {
    const int64_t d = c.word_embed_proj_dim > 0 ? c.word_embed_proj_dim : c.hidden_size;
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, d, o));
    register_module("embed_positions", std::make_shared<Embedding>(max_positions_ + kPositionOffset,
                                                                   c.hidden_size, o));
    if (d != c.hidden_size) {
      // OPTDecoder registers project_out before project_in.
      project_out_ =
          register_module("project_out", std::make_shared<Linear>(c.hidden_size, d, false, o));
      project_in_ =
          register_module("project_in", std::make_shared<Linear>(d, c.hidden_size, false, o));
    }
    if (!c.norm_after_residual) final_norm_ = register_module("final_layer_norm", make_norm(c, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<DecoderLayer>> empty;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty.push_back(layers->push_back(std::make_shared<DecoderLayer>()));
    }
    for (const auto& layer : empty) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    const int64_t seq = ids.size(1);
    // The table has rows for max_position_embeddings positions past the offset (HF fails with an
    // index error beyond).
    SP_CHECK(seq <= max_positions_, "opt: sequence length ", seq,
             " exceeds max_position_embeddings ", max_positions_);
    Tensor h = child("embed_tokens")->call(ids);
    // Positions p + 2 of the free int64 ids (Note [What the traced forward counts], models.h).
    const Tensor pos = child("embed_positions")->call(position_ids(seq));
    if (project_in_) h = project_in_->call(h);
    h = add(h, pos);  // OPT drops out no embedding
    for (const auto& [name, layer] : child("layers")->named_children()) h = layer->call(h);
    if (final_norm_) h = final_norm_->call(h);
    if (project_out_) h = project_out_->call(h);
    return h;
  }

 private:
  int64_t max_positions_;
  ModulePtr project_in_, project_out_, final_norm_;  // null when the config has none
};

class OptModel : public Module {
 public:
  OptModel(const ModelConfig& c, const TensorOptions& o, bool training) : Module("OPTModel") {
    register_module("decoder", std::make_shared<Decoder>(c, o, training));
  }
  Tensor forward(const Tensor& ids) override { return child("decoder")->call(ids); }
};

void parse(const ConfigFields& f, ModelConfig& c) {
  // Required although OPTConfig has defaults (those of a 125m model): they fix the shapes, the
  // position table's too (Note [Strict config parsing]).
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("ffn_dim");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.max_position_embeddings = f.integer("max_position_embeddings");
  c.num_key_value_heads = c.num_attention_heads;
  // OPTAttention raises unless the heads split hidden_size evenly.
  head_dim_from_hidden(f, c, "num_attention_heads", "hidden_size");
  c.hidden_act = f.string("activation_function", "relu");
  c.norm_eps = 1e-5;  // nn.LayerNorm's default: OPTConfig has no epsilon
  c.norm_elementwise_affine = f.boolean("layer_norm_elementwise_affine", true);
  c.norm_after_residual = !f.boolean("do_layer_norm_before", true);
  // Kept only for checkpoints fine-tuned before transformers 4.20.1 (metaseq PR 164): a pre-norm
  // model without its final norm, which shardplan does not build. Post-norm has none anyway.
  if (f.boolean("_remove_final_layer_norm", false) && !c.norm_after_residual) {
    f.fail("_remove_final_layer_norm",
           "true drops the final LayerNorm of a pre-norm model, which shardplan does not build; "
           "expected false (or do_layer_norm_before false)");
  }
  const int64_t d = f.integer("word_embed_proj_dim", c.hidden_size);
  if (d <= 0) {
    f.fail("word_embed_proj_dim",
           "must be a positive integer (null: hidden_size), got " + std::to_string(d));
  }
  c.word_embed_proj_dim = d == c.hidden_size ? 0 : d;
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("enable_bias", true);
  c.partial_rotary_factor = 0;  // learned positions, no rotary
  c.resid_dropout = f.number("dropout", 0.1);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  // LayerDrop (Fan et al. 2019) skips whole layers at random in training; the trace runs them all.
  const double layerdrop = f.number("layerdrop", 0.0);
  if (layerdrop != 0) {
    f.fail("layerdrop", std::to_string(layerdrop) +
                            " skips layers at random in training, which shardplan does not model; "
                            "expected 0");
  }
  // PreTrainedModel._init_weights draws from init_std (OPTConfig has no initializer_range); a
  // file's own initializer_range still wins, as it does there (parse_model_config reads it after).
  c.initializer_range = f.number("init_std", 0.02);
  pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["hidden_size"] = c.hidden_size;
  j["ffn_dim"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["activation_function"] = c.hidden_act;
  j["do_layer_norm_before"] = !c.norm_after_residual;
  j["layer_norm_elementwise_affine"] = c.norm_elementwise_affine;
  j["word_embed_proj_dim"] = c.word_embed_proj_dim > 0 ? c.word_embed_proj_dim : c.hidden_size;
  j["enable_bias"] = c.qkv_bias;
  j["dropout"] = c.resid_dropout;
  j["attention_dropout"] = c.attention_dropout;
  j["init_std"] = c.initializer_range;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<OptModel>>("OPTForCausalLM", c, o, training, "model",
                                                 "model.decoder.embed_tokens.weight",
                                                 c.word_embed_proj_dim);
}

// OPTConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"intermediate_size", "ffn_dim"},
    {"num_key_value_heads", "num_attention_heads"},  // derived: kv heads = heads
    {"head_dim", "num_attention_heads"},             // derived: hidden_size / heads
    {"hidden_act", "activation_function"},
    {"qkv_bias", "enable_bias"},
    {"o_bias", "enable_bias"},
    {"mlp_bias", "enable_bias"},
    {"resid_dropout", "dropout"},
    {"norm_after_residual", "do_layer_norm_before"},
    {"norm_elementwise_affine", "layer_norm_elementwise_affine"},
};

}  // namespace
}  // namespace models

// Megatron's split (Shoeybi et al. 2019, §3) with OPT's names: q, k and v column-parallel (whole
// heads per rank), out_proj row-parallel; fc1 column-parallel, fc2 row-parallel; the token
// embedding by vocabulary rows and lm_head by vocabulary, which lay the tied weight out alike.
// The position table, project_in / project_out (OPT-350m) and the LayerNorms stay replicated, as
// Megatron-LM keeps its position embeddings.
constexpr TensorParallelRule kOptTpPlan[] = {
    {"model.decoder.embed_tokens", "rowwise"},
    {"model.decoder.layers.*.self_attn.q_proj", "colwise"},
    {"model.decoder.layers.*.self_attn.k_proj", "colwise"},
    {"model.decoder.layers.*.self_attn.v_proj", "colwise"},
    {"model.decoder.layers.*.self_attn.out_proj", "rowwise"},
    {"model.decoder.layers.*.fc1", "colwise"},
    {"model.decoder.layers.*.fc2", "rowwise"},
    {"lm_head", "colwise"}};

// OPTPreTrainedModel has no _init_weights of its own: PreTrainedModel's, with std = init_std.
// Linear weights and Embedding rows normal(0, std), biases zero, LayerNorm weight one and bias
// zero; embed_tokens's pad_token_id row zero (its padding_idx). The position table is an
// nn.Embedding without padding_idx: all of it normal. That rule comes first because the first
// matching rule applies.
constexpr InitRule kOptInitRules[] = {{"Embedding", "embed_positions.weight", InitFill::kNormal},
                                      {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                      {"Linear", "weight", InitFill::kNormal},
                                      {"Linear", "bias", InitFill::kZeros},
                                      {"LayerNorm", "weight", InitFill::kOnes},
                                      {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kOptFamily;  // listed in family_registry.cpp
const ModelFamily kOptFamily{
    .model_type = "opt",
    .hf_class_prefix = "OPT",
    .layers_path = "model.decoder.layers",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = true,
    .tp_plan = kOptTpPlan,
    .init_rules = kOptInitRules,
};

}  // namespace shardplan::tensor
