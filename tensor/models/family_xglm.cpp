// xglm: Meta's XGLM (Lin et al. 2021, "Few-shot Learning with Multilingual Language Models";
// xglm-564M to xglm-7.5B) as transformers' XGLMConfig and modeling_xglm.py (XGLMForCausalLM):
// fairseq's pre-norm decoder under fairseq's key names (d_model, ffn_dim, num_layers,
// attention_heads). The token embeddings times sqrt(d_model) (scale_embedding), plus fixed
// sinusoidal positions (Note [XGLM's sinusoidal positions]: a buffer, no parameters); separate q,
// k, v and out projections and an fc1/fc2 MLP in the layer itself, every one with a bias; a
// LayerNorm before each half and a final one; the output layer tied to the token embeddings:
//   model.embed_tokens.weight [vocab, d_model]
//   model.embed_positions.weights [max_position_embeddings + 2, d_model] (non-persistent buffer)
//   model.layers.N.self_attn.{k,v,q,out}_proj.{weight [d, d], bias [d]} (in that order)
//   model.layers.N.self_attn_layer_norm.{weight,bias} [d]
//   model.layers.N.fc1.{weight [ffn, d], bias [ffn]}, fc2.{weight [d, ffn], bias [d]}
//   model.layers.N.final_layer_norm.{weight,bias} [d]
//   model.layer_norm.{weight,bias} [d] (registered after the layers)
//   lm_head.weight [vocab, d] (tied to embed_tokens unless tie_word_embeddings is false)
//
// Note [XGLM's sinusoidal positions]
// XGLMSinusoidalPositionalEmbedding (Vaswani et al. 2017 §3.5, in tensor2tensor's layout: the sines
// of all frequencies, then their cosines) holds a table of max_position_embeddings + 2 rows as a
// non-persistent buffer `weights` in the model's dtype: fairseq's offset past its padding index,
// so position p is row p + 2 (the padding row is zeroed and never looked up). Its forward adds the
// offset to the int64 position ids, gathers their rows and adds them to the scaled token
// embeddings: traced as that int64 add on [1, S], one gather of [S, d] rows from the buffer and one
// broadcast add, all outside the layers. No parameter, so no gradient and nothing to shard: the
// table is whole on every tensor-parallel rank, as Megatron-LM keeps its position embeddings.
// transformers regrows the table when S + 2 exceeds its rows (make_weights, once per such forward),
// so no length is refused; that regrowth (arange, exp, sin, cos over [S + 2, d]) is not traced, and
// the planner builds a longer plan's table that long in the first place (docs/models.md, "What the
// models leave out").
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/fairseq_layer.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace models {
namespace {

// XGLMSinusoidalPositionalEmbedding's offset: rows 0 and 1 are never looked up.
constexpr int64_t kPositionOffset = 2;

// nn.LayerNorm's default epsilon: XGLMConfig has no key for it.
constexpr double kLayerNormEps = 1e-5;

ModulePtr make_norm(const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps, true, true, o);
}

// Note [XGLM's sinusoidal positions].
class SinusoidalPositions : public Module {
 public:
  SinusoidalPositions(const ModelConfig& c, const TensorOptions& o)
      : Module("XGLMSinusoidalPositionalEmbedding") {
    // Made in the default dtype, which from_pretrained sets to the model's while it builds.
    register_buffer("weights",
                    empty({c.max_position_embeddings + kPositionOffset, c.hidden_size}, o),
                    /*persistent=*/false);
  }
  // position ids [1, S] (int64) -> [1, S, d].
  Tensor forward(const Tensor& position_ids) override {
    return embedding(buffer("weights"), add(position_ids, kPositionOffset));
  }
};

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("XGLMAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size;
    // XGLMAttention's order: k, v, q, then out (named_parameters follows it).
    for (const char* name : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
      register_module(name, std::make_shared<Linear>(h, h, true, o));
    }
  }
  Tensor forward(const Tensor& x) override {
    // fairseq scales q by head_dim^-0.5 right after its projection and attends with scale 1: one
    // elementwise product on q, the same attention. transformers runs XGLM's attention eager only
    // (scores materialized, the causal mask added); the planner prices the fused kernel unless
    // the file says attn_implementation eager (docs/models.md, "What the models leave out").
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

using DecoderLayer = models::FairseqDecoderLayer<Attention>;  // fairseq_layer.h

class XglmModel : public Module {
 public:
  XglmModel(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("XGLMModel"),
        embed_scale_(c.scale_embeddings ? std::sqrt(static_cast<double>(c.hidden_size)) : 1.0),
        dropout_(training ? c.embd_dropout : 0.0) {
    // nn.Embedding with padding_idx = pad_token_id (XGLMScaledWordEmbedding); its product by
    // embed_scale runs in forward.
    register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    register_module("embed_positions", std::make_shared<SinusoidalPositions>(c, o));
    auto layers = register_module("layers", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<DecoderLayer>> empty_layers;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty_layers.push_back(layers->push_back(std::make_shared<DecoderLayer>("XGLMDecoderLayer")));
    }
    register_module("layer_norm", make_norm(c, o));
    for (const auto& layer : empty_layers) layer->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    // XGLMScaledWordEmbedding multiplies by embed_scale always, by 1.0 when scale_embedding is
    // false: one elementwise product either way.
    Tensor h = mul(child("embed_tokens")->call(ids), embed_scale_);
    // The free int64 position ids (Note [What the traced forward counts], models.h).
    h = add(h, child("embed_positions")->call(position_ids(ids.size(1))));
    h = maybe_dropout(h, dropout_, dropout_ > 0);
    for (const auto& [name, layer] : child("layers")->named_children()) h = layer->call(h);
    return child("layer_norm")->call(h);
  }

 private:
  double embed_scale_;
  double dropout_;
};

// The key that sets `field`: its attribute_map alias (hidden_size, num_hidden_layers,
// num_attention_heads) when the file holds it, since PreTrainedConfig sets the keyword arguments
// that are not dataclass fields after the fields, through the alias; a null one would set the
// field to None, which XGLMModel cannot build.
const char* key_for(const ConfigFields& f, const char* field, const char* alias) {
  if (f.is_null(alias)) {
    f.fail(alias, std::string("is null, which sets ") + field +
                      " to None; expected a positive integer or no key");
  }
  return f.has(alias) ? alias : field;
}

// A probability of XGLMConfig that only 0 builds what shardplan traces.
void refuse_nonzero(const ConfigFields& f, const char* key, const std::string& what) {
  const double p = f.number(key, 0.0);
  if (p != 0) f.fail(key, std::to_string(p) + " " + what + "; expected 0");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // Required although XGLMConfig has defaults (those of xglm-564M): they fix the parameter shapes
  // (Note [Strict config parsing]). max_position_embeddings only sizes the buffer: the class's.
  const char* hidden_key = key_for(f, "d_model", "hidden_size");
  const char* layers_key = key_for(f, "num_layers", "num_hidden_layers");
  const char* heads_key = key_for(f, "attention_heads", "num_attention_heads");
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer(hidden_key);
  c.intermediate_size = f.integer("ffn_dim");
  c.num_hidden_layers = f.integer(layers_key);
  c.num_attention_heads = f.integer(heads_key);
  c.num_key_value_heads = c.num_attention_heads;
  // XGLMAttention raises unless the heads split d_model evenly.
  head_dim_from_hidden(f, c, heads_key, hidden_key);
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.hidden_act = f.string("activation_function", "gelu");
  c.norm_eps = kLayerNormEps;
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // every nn.Linear but lm_head has a bias
  c.partial_rotary_factor = 0;                // sinusoidal positions, no rotary
  c.scale_embeddings = f.boolean("scale_embedding", true);
  // One `dropout` drops out the embeddings (after the positions join them) and each half's output.
  c.resid_dropout = c.embd_dropout = f.number("dropout", 0.1);
  c.attention_dropout = f.number("attention_dropout", 0.1);
  refuse_nonzero(f, "activation_dropout",
                 "drops out the MLP's activations in training, which shardplan does not trace");
  // LayerDrop (Fan et al. 2019) skips whole layers at random in training; the trace runs them all.
  refuse_nonzero(f, "layerdrop",
                 "skips layers at random in training, which shardplan does not model");
  if (f.boolean("add_cross_attention", false)) {
    f.fail("add_cross_attention",
           "true adds encoder_attn and encoder_attn_layer_norm to every layer, a cross-attention "
           "over an encoder's states that a causal language model does not run and shardplan does "
           "not build; expected false");
  }
  // PreTrainedModel._init_weights draws from init_std (XGLMConfig has no initializer_range); a
  // file's own initializer_range still wins, as it does there (parse_model_config reads it after).
  c.initializer_range = f.number("init_std", 0.02);
  pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["d_model"] = c.hidden_size;
  j["ffn_dim"] = c.intermediate_size;
  j["num_layers"] = c.num_hidden_layers;
  j["attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["activation_function"] = c.hidden_act;
  j["scale_embedding"] = c.scale_embeddings;
  j["dropout"] = c.resid_dropout;
  j["attention_dropout"] = c.attention_dropout;
  j["init_std"] = c.initializer_range;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<XglmModel>>("XGLMForCausalLM", c, o, training, "model",
                                                  "model.embed_tokens.weight");
}

// XGLMConfig's names for ModelConfig's fields, so that errors name the key in the file (parse's
// own errors name an attribute_map alias when the file used one).
constexpr FieldRename kRenamed[] = {
    {"hidden_size", "d_model"},
    {"intermediate_size", "ffn_dim"},
    {"num_hidden_layers", "num_layers"},
    {"num_attention_heads", "attention_heads"},
    {"num_key_value_heads", "attention_heads"},  // derived: kv heads = heads
    {"head_dim", "attention_heads"},             // derived: d_model / heads
    {"hidden_act", "activation_function"},
    {"scale_embeddings", "scale_embedding"},
    {"resid_dropout", "dropout"},
    {"embd_dropout", "dropout"},
};

}  // namespace
}  // namespace models

// Megatron's split (Shoeybi et al. 2019, §3) with XGLM's names: q, k and v column-parallel (whole
// heads per rank), out_proj row-parallel; fc1 column-parallel, fc2 row-parallel; the token
// embedding by vocabulary rows and lm_head by vocabulary, which lay the tied weight out alike. The
// sinusoid table (a buffer) and the LayerNorms stay replicated.
constexpr TensorParallelRule kXglmTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                              {"model.layers.*.self_attn.q_proj", "colwise"},
                                              {"model.layers.*.self_attn.k_proj", "colwise"},
                                              {"model.layers.*.self_attn.v_proj", "colwise"},
                                              {"model.layers.*.self_attn.out_proj", "rowwise"},
                                              {"model.layers.*.fc1", "colwise"},
                                              {"model.layers.*.fc2", "rowwise"},
                                              {"lm_head", "colwise"}};

// XGLMPreTrainedModel._init_weights: PreTrainedModel's with std = init_std (Linear weights and
// Embedding rows normal(0, std), biases zero, LayerNorm weight one and bias zero; embed_tokens's
// pad_token_id row zero, its padding_idx), then the sinusoid buffer recomputed, which is no
// parameter (materialize leaves it to the loader).
constexpr InitRule kXglmInitRules[] = {{"Embedding", "weight", InitFill::kNormalPaddingRowZero},
                                       {"Linear", "weight", InitFill::kNormal},
                                       {"Linear", "bias", InitFill::kZeros},
                                       {"LayerNorm", "weight", InitFill::kOnes},
                                       {"LayerNorm", "bias", InitFill::kZeros}};

extern const ModelFamily kXglmFamily;  // listed in family_registry.cpp
const ModelFamily kXglmFamily{
    .model_type = "xglm",
    .hf_class_prefix = "XGLM",
    .layers_path = "model.layers",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = false,  // fixed sinusoids that transformers extends past any length
    .tp_plan = kXglmTpPlan,
    .init_rules = kXglmInitRules,
};

}  // namespace shardplan::tensor
