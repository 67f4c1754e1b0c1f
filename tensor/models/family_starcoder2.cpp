// starcoder2 (BigCode's StarCoder2 3B, 7B, 15B): transformers' Starcoder2Config (vocab 49152, max
// positions 4096, norm_epsilon 1e-5, hidden_act gelu_pytorch_tanh, use_bias true, tied embeddings,
// initializer_range 0.018042, no window unless sliding_window is set, then on every layer) and
// modeling_starcoder2.py: Llama's pre-norm layer with nn.LayerNorm (weight and bias) for its
// norms and the final one, q/k/v/o biases by use_bias, and an MLP without a gate,
// c_proj(act(c_fc(x))) with biases by use_bias. Training drops out the embeddings
// (embedding_dropout) and each half's output (residual_dropout, after o_proj and c_proj).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kStarcoder2Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 4096,
                                .tie_word_embeddings = true,
                                .hidden_act = "gelu_pytorch_tanh"});
  c.norm_eps = f.number("norm_epsilon", 1e-5);
  c.initializer_range = 0.018042;  // the class's; parse_model_config reads a file's
  c.qkv_bias = c.o_bias = c.mlp_bias = f.boolean("use_bias", true);
  c.embd_dropout = f.number("embedding_dropout", 0.0);
  c.resid_dropout = f.number("residual_dropout", 0.0);
  // Every layer attends within sliding_window when it is set (Starcoder2Attention passes it to
  // each layer); none by default.
  c.sliding_window = f.opt_integer("sliding_window");
  if (c.sliding_window) {
    c.layer_types.assign(static_cast<size_t>(c.num_hidden_layers), AttentionType::kSliding);
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  j.erase("rms_norm_eps");
  j["norm_epsilon"] = c.norm_eps;
  j["use_bias"] = c.qkv_bias;
  j["embedding_dropout"] = c.embd_dropout;
  j["residual_dropout"] = c.resid_dropout;
}

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, true, true, o);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kStarcoder2Family.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .ungated_mlp = true,
                                       .ungated_in_name = "c_fc",
                                       .ungated_out_name = "c_proj"});
}

constexpr FieldRename kStarcoder2Renames[] = {{"norm_eps", "norm_epsilon"},
                                              {"qkv_bias", "use_bias"},
                                              {"o_bias", "use_bias"},
                                              {"mlp_bias", "use_bias"},
                                              {"embd_dropout", "embedding_dropout"},
                                              {"resid_dropout", "residual_dropout"}};

// Megatron-LM's split: q, k, v and c_fc column-parallel, o_proj and c_proj row-parallel.
constexpr TensorParallelRule kTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                          {"model.layers.*.self_attn.q_proj", "colwise"},
                                          {"model.layers.*.self_attn.k_proj", "colwise"},
                                          {"model.layers.*.self_attn.v_proj", "colwise"},
                                          {"model.layers.*.self_attn.o_proj", "rowwise"},
                                          {"model.layers.*.mlp.c_fc", "colwise"},
                                          {"model.layers.*.mlp.c_proj", "rowwise"},
                                          {"lm_head", "colwise"}};

}  // namespace

const ModelFamily kStarcoder2Family{
    .model_type = "starcoder2",
    .hf_class_prefix = "Starcoder2",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kStarcoder2Renames,
    .tp_plan = kTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
