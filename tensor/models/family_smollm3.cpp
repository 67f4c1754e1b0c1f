// smollm3 (SmolLM3-3B): transformers' SmolLM3Config (vocab 128256, max positions 32768,
// rms_norm_eps 1e-6, rope_theta 2e6, tied embeddings, pad_token_id 128004) and
// modeling_smollm3.py: Llama's layer, in which the layers no_rope_layers marks 0 (default: every
// no_rope_layer_interval-th, 4th) rotate neither q nor k (NoPE). With use_sliding_window and a
// sliding_window, the NoPE layers attend within the window, or the layers layer_types says;
// without use_sliding_window every layer attends in full, whatever layer_types says:
// SmolLM3Attention passes a window only then, which is what the flash-attention kernels training
// runs use read (transformers' sdpa and eager paths build their masks from layer_types alone and
// would slide those layers anyway).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "tensor/models/class_defaults.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kSmolLM3Family;  // listed in family_registry.cpp

namespace {

AttentionType nope_layers_slide(const ModelConfig& c, int64_t layer) {
  const bool nope = std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), layer);
  return c.sliding_window && nope ? AttentionType::kSliding : AttentionType::kFull;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 32768,
                                .rms_norm_eps = 1e-6,
                                .rope_theta = 2000000.0,
                                .tie_word_embeddings = true});
  // The class's num_key_value_heads when the file has none (a null one: the head count).
  models::key_value_heads_or(f, c, 4);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  models::pad_token_id_or(f, c, 128004);
  // SmolLM3Config derives the list only when there is none: an empty one is a list of no entry.
  if (f.has("no_rope_layers") && f.raw("no_rope_layers").is_array() &&
      f.raw("no_rope_layers").empty() && c.num_hidden_layers > 0) {
    f.fail("no_rope_layers", "is empty; expected at least num_hidden_layers = " +
                                 std::to_string(c.num_hidden_layers) +
                                 " entries, 1 (RoPE) or 0 (none), or no key");
  }
  c.nope_layers = models::parse_no_rope_layers(f, c.num_hidden_layers, /*longer_ok=*/true);
  const bool use_window = f.boolean("use_sliding_window", false);
  const std::optional<int64_t> window = f.opt_integer("sliding_window");
  if (use_window && window) c.sliding_window = window;
  std::vector<AttentionType> types =
      models::parse_layer_types(f, c.num_hidden_layers, nope_layers_slide, c);
  if (!c.sliding_window) return;  // no window: every layer attends in full
  for (const AttentionType t : types) {
    if (t == AttentionType::kChunked) {
      f.fail("layer_types",
             "has chunked_attention, which SmolLM3 does not run; expected \"full_attention\" or "
             "\"sliding_attention\"");
    }
  }
  c.layer_types = std::move(types);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 128004
  j["no_rope_layers"] = models::no_rope_layers_json(c);
  j["use_sliding_window"] = c.sliding_window.has_value();
  if (!c.layer_types.empty()) j["layer_types"] = models::layer_types_json(c);
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training, {.prefix = kSmolLM3Family.hf_class_prefix});
}

}  // namespace

const ModelFamily kSmolLM3Family{
    .model_type = "smollm3",
    .hf_class_prefix = "SmolLM3",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = models::kRotaryDecoderRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
