// phi3 (Phi-3 and Phi-3.5 mini/medium, Phi-4): transformers' Phi3Config (vocab 32064, max positions
// 4096, rms_norm_eps 1e-5, num_key_value_heads = heads when absent, a sliding window on every layer
// when sliding_window is set) and modeling_phi3.py: the rotary decoder with one qkv_proj ([q; k; v]
// rows, registered after o_proj) and one gate_up_proj ([gate; up]).
// No tensor-parallel plan: a fused [q; k; v] of grouped-query heads has unequal parts, which no
// single placement splits head-aligned (a _StridedShard needs equal parts), so the planner keeps
// Phi-3 at tp = 1 (data, pipeline and context parallelism still apply).
#include <nlohmann/json.hpp>

#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kPhi3Family;  // listed in family_registry.cpp

namespace {

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096, .rms_norm_eps = 1e-5});
  c.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
  c.sliding_window = f.opt_integer("sliding_window");
  if (c.sliding_window) {
    c.layer_types =
        models::parse_layer_types(f, c.num_hidden_layers, models::every_layer_sliding, c);
  }
  c.resid_dropout = f.number("resid_pdrop", 0.0);
  f.number("embd_pdrop", 0.0);  // read, not kept: Phi3Model (transformers 5) drops nothing there
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["resid_pdrop"] = c.resid_dropout;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(
      c, o, training, {.prefix = kPhi3Family.hf_class_prefix, .fused_projections = true});
}

}  // namespace

const ModelFamily kPhi3Family{
    .model_type = "phi3",
    .hf_class_prefix = "Phi3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
