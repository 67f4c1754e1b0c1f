// qwen3_5_text (Qwen3.5 dense: 0.8B to 27B, the language model of "qwen3_5" files):
// transformers' Qwen3_5TextConfig and modeling_qwen3_5.py. Qwen3-Next's hybrid stack (three
// Gated DeltaNet layers to one gated full-attention layer, Gemma 3's (1 + weight) norms) with a
// dense MLP in every layer and the linear attention's projections kept apart (in_proj_qkv,
// in_proj_z, in_proj_b, in_proj_a: tensor/models/gated_delta_net.h). Sizes default to the config
// class's (vocab 248320, hidden 4096, intermediate 12288, 32 layers, 16 heads, 4 kv heads, head_dim
// 256), as a multimodal file's text_config may lean on them; the multimodal RoPE sections
// (mrope_section) rotate the same channels for text and change no shape.
#include <nlohmann/json.hpp>

#include "tensor/models/blocks.h"
#include "tensor/models/linear_attention_config.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kQwen35TextFamily;  // listed in family_registry.cpp

namespace {

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Qwen3_5RMSNorm", dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_qwen35_text(f, c,
                            {.vocab_size = 248320,
                             .hidden_size = 4096,
                             .intermediate_size = 12288,
                             .num_hidden_layers = 32,
                             .num_attention_heads = 16,
                             .num_key_value_heads = 4});
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  models::linear_attention_to_hf_json(c, j);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training,
      {.prefix = kQwen35TextFamily.hf_class_prefix,
       .make_norm = make_norm,
       .qk_norm = true,
       .output_gate = true,
       .linear_projections = models::GatedDeltaProjections::kSeparate});
}

}  // namespace

// No init rules: A_log is drawn as log(uniform(0, 16)) (Qwen3_5PreTrainedModel._init_weights), a
// fill kernels/ does not make; materialize refuses the family.
const ModelFamily kQwen35TextFamily{
    .model_type = "qwen3_5_text",
    .hf_class_prefix = "Qwen3_5",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .linear_attention = true,
    .tp_plan = models::kLinearAttentionTpPlan,
};

}  // namespace shardplan::tensor
