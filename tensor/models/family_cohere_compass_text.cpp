// cohere_compass_text: the language model of Cohere's North vision-language models (model_type
// cohere_compass, whose text_config it is: Note [Multimodal configs]; the Qwen3-VL vision tower
// is not built). transformers' CohereCompassTextConfig (a Cohere2Config: vocab 256000, max
// positions 8192, layer_norm_eps 1e-5, tied embeddings, pad_token_id 0, biases on q, k, v and o
// by attention_bias, a window of 4096) and modeling_cohere_compass.py: Cohere2's parallel layer,
// x + attn(n) + mlp(n) with n the weight-only CohereCompassLayerNorm of x, no q/k norms. What
// differs from cohere2:
//  * every layer is full_attention when the file lists no layer_types (no sliding_window_pattern
//    rule: that key stays an attribute nobody reads);
//  * rope_parameters is keyed by layer type and decides which layers rotate: a type whose entry
//    is null takes no position encoding (NoPE), whatever its window. The North checkpoints rotate
//    their sliding layers only, and the transformers tests the full ones only. The model indexes
//    rope_parameters[type] for every type in use, so a missing entry is refused. A top-level
//    rope_theta is an inert attribute (the override of convert_rope_params_to_dict leaves it in
//    kwargs), and a top-level rope_scaling *replaces* rope_parameters (PreTrainedConfig's
//    rope_scaling property setter), which then no longer holds the per-type entries: refused;
//  * q and k rotate by rotate_half in the activations' dtype (Qwen3's apply_rotary_pos_emb), with
//    no float32 round trip as Cohere and Cohere2 have;
//  * logit_scale absent or null is 1.0 (CohereCompassForCausalLM multiplies by it all the same).
// The M-RoPE sections (mrope_section) only choose which of the three position axes feeds each
// channel: text tokens have one position on every axis, and the table is as wide and as costly
// as plain RoPE. The forward builds the sliding mask whatever the layer types, and
// create_sliding_window_causal_mask raises without a window: a null sliding_window is refused.
// transformers names the inner model CohereCompassTextModel; this builds <prefix>Model =
// CohereCompassModel, as Gemma 3's text family builds Gemma3Model for Gemma3TextModel.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensor/models/blocks.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kCohereCompassTextFamily;  // listed in family_registry.cpp

namespace {

// The base a config without any rotating layer type keeps (it rotates nothing): the RoPE mixin's
// default_theta.
constexpr double kUnusedTheta = 10000;

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<models::WeightOnlyLayerNorm>("CohereCompassLayerNorm", 0, dim, eps, o);
}

AttentionType every_layer_full(const ModelConfig&, int64_t) { return AttentionType::kFull; }

// One layer type's rope_parameters entry: null (NoPE) or an object whose rope_theta is the base
// (required: standardization fills a missing one with None, on which the RoPE fails) and whose
// rope_type is "default" (the whole head_dim) or one of transformers' scalings.
struct TypeRope {
  bool rotates = false;
  double theta = kUnusedTheta;
  std::optional<RopeScaling> scaling;
};

TypeRope parse_type_rope(const ConfigFields& f, const nlohmann::json& r, AttentionType t) {
  const std::string name(to_string(t));
  if (!r.contains(name)) {
    f.fail("rope_parameters", r.dump().substr(0, 80) +
                                  ": CohereCompassRotaryEmbedding reads an entry for every layer "
                                  "type in use; expected \"" +
                                  name + "\" (an object, or null for no RoPE)");
  }
  const nlohmann::json& set = r.at(name);
  TypeRope out;
  if (set.is_null()) return out;  // NoPE
  const std::string where = "rope_parameters." + name;
  if (!set.is_object()) {
    f.fail("rope_parameters",
           where + " is " + set.dump().substr(0, 40) + ", expected an object or null (no RoPE)");
  }
  const ConfigFields s(set, f.source());
  if (!s.has("rope_theta")) {
    f.fail("rope_parameters", where +
                                  " has no rope_theta; CohereCompassRotaryEmbedding takes its base "
                                  "from the entry (the top-level rope_theta is not read)");
  }
  out.rotates = true;
  out.theta = s.number("rope_theta", kUnusedTheta);
  if (!(out.theta > 0)) {
    f.fail("rope_parameters",
           where + ".rope_theta " + std::to_string(out.theta) + ", expected > 0");
  }
  const std::string kind =
      s.has("rope_type") ? s.string("rope_type", "default") : s.string("type", "default");
  if (kind != "default") {
    out.scaling = parse_rope_scaling(set, f, "rope_parameters");
    // The scaled tables honour partial_rotary_factor, and a narrower table than head_dim fails in
    // apply_rotary_pos_emb; "default" ignores it (the whole head_dim).
    if (s.has("partial_rotary_factor") && s.number("partial_rotary_factor", 1) != 1) {
      f.fail("rope_parameters",
             where +
                 ".partial_rotary_factor: CohereCompass rotates the whole "
                 "head_dim (a narrower table fails in its attention); expected 1");
    }
  }
  return out;
}

void parse_rope(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types) {
  if (f.has("rope_scaling") || f.is_null("rope_scaling")) {
    f.fail("rope_scaling",
           "CohereCompassTextConfig's rope_scaling is its rope_parameters (PreTrainedConfig's "
           "property), and this one would replace the per-layer-type rope_parameters the model "
           "reads; expected rope_parameters alone");
  }
  c.rope_scaling.reset();  // parse_rotary_decoder's legacy reading does not apply
  c.partial_rotary_factor = 1;
  if (!f.has("rope_parameters") || !f.raw("rope_parameters").is_object()) {
    f.fail("rope_parameters",
           "missing or not an object; CohereCompassRotaryEmbedding reads rope_parameters keyed by "
           "layer type (an object per type, or null for no RoPE)");
  }
  const nlohmann::json& r = f.raw("rope_parameters");
  std::optional<TypeRope> base;  // the full type's when it rotates, else the sliding type's
  for (const AttentionType t : {AttentionType::kFull, AttentionType::kSliding}) {
    if (std::find(types.begin(), types.end(), t) == types.end()) continue;
    const TypeRope tr = parse_type_rope(f, r, t);
    if (!tr.rotates) {
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        if (types[static_cast<size_t>(i)] == t) c.nope_layers.push_back(i);
      }
    } else if (!base) {
      base = tr;
    }
  }
  std::sort(c.nope_layers.begin(), c.nope_layers.end());
  if (base) {
    c.rope_theta = base->theta;
    c.rope_scaling = base->scaling;
    return;
  }
  // No type rotates: the base is inert; the dict's own top-level rope_theta when it has one.
  const ConfigFields top(r, f.source());
  c.rope_theta = top.number("rope_theta", kUnusedTheta);
  if (!(c.rope_theta > 0)) c.rope_theta = kUnusedTheta;
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c,
                               {.max_position_embeddings = 8192, .tie_word_embeddings = true});
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  f.has("use_qk_norm");                          // an attribute CohereCompassAttention never reads
  f.has("sliding_window_pattern");               // likewise: layer_types, else every layer full
  c.logit_scale = f.number("logit_scale", 1.0);  // None: 1.0 (CohereCompassForCausalLM)
  models::pad_token_id_or(f, c, 0);
  if (f.has("is_causal") && !f.boolean("is_causal", true)) {
    f.fail("is_causal",
           "false makes every CohereCompass mask bidirectional (its reranker and embedding use), "
           "which is not a causal language model; expected true");
  }
  if (f.is_null("sliding_window")) {
    f.fail("sliding_window",
           "null, but CohereCompassTextModel builds the sliding-window mask on every forward and "
           "transformers raises without a window; expected a positive window");
  }
  c.sliding_window = models::sliding_window_or(f, 4096);
  const std::vector<AttentionType> types =
      models::parse_layer_types(f, c.num_hidden_layers, every_layer_full, c);
  for (const AttentionType t : types) {
    if (t == AttentionType::kChunked) {
      f.fail("layer_types",
             "has chunked_attention, which CohereCompass has no mask for; expected "
             "\"full_attention\" or \"sliding_attention\"");
    }
  }
  parse_rope(f, c, types);
  c.layer_types = types;
}

// The entry of a layer type: null where its layers take no RoPE (ModelConfig::nope_layers), else
// the model's base and scaling.
nlohmann::json rope_entry(const ModelConfig& c) {
  nlohmann::json e = c.rope_scaling ? rope_scaling_json(c.rope_scaling) : nlohmann::json::object();
  if (!c.rope_scaling) e["rope_type"] = "default";
  e["rope_theta"] = c.rope_theta;
  return e;
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);  // with sliding_window when set
  j.erase("rms_norm_eps");
  j.erase("rope_theta");    // inert in CohereCompassTextConfig
  j.erase("rope_scaling");  // would replace rope_parameters
  j["layer_norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["logit_scale"] = c.logit_scale;
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;      // none, not the class's 0
  if (!c.sliding_window) j["sliding_window"] = nullptr;  // refused on reading, as transformers
  nlohmann::json types = nlohmann::json::array();
  nlohmann::json rope = nlohmann::json::object();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const AttentionType t =
        c.layer_types.empty() ? AttentionType::kFull : c.layer_types[static_cast<size_t>(i)];
    const std::string name(to_string(t));
    types.push_back(name);
    if (rope.contains(name)) continue;  // a type's first layer speaks for all of them
    const bool nope = std::binary_search(c.nope_layers.begin(), c.nope_layers.end(), i);
    rope[name] = nope ? nlohmann::json(nullptr) : rope_entry(c);
  }
  // Every type NoPE: keep the (inert) base beside the entries so that it reads back.
  if (static_cast<int64_t>(c.nope_layers.size()) == c.num_hidden_layers) {
    rope["rope_theta"] = c.rope_theta;
  }
  j["layer_types"] = types;
  j["rope_parameters"] = rope;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kCohereCompassTextFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .norms = models::NormPlacement::kParallel,
                                       .logit_scale = true});
}

constexpr FieldRename kCohereCompassTextRenames[] = {{"norm_eps", "layer_norm_eps"},
                                                     {"qkv_bias", "attention_bias"},
                                                     {"o_bias", "attention_bias"},
                                                     {"rope_theta", "rope_parameters"},
                                                     {"nope_layers", "rope_parameters"}};

// The generic PreTrainedModel._init_weights (CohereCompassPreTrainedModel adds only the rotary
// buffers): Linear weights and Embedding rows normal(0, initializer_range), the pad_token_id row
// zero, biases zero, the LayerNorms' weights one.
constexpr InitRule kCohereCompassTextInitRules[] = {
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero},
    {"CohereCompassLayerNorm", "weight", InitFill::kOnes}};

}  // namespace

const ModelFamily kCohereCompassTextFamily{
    .model_type = "cohere_compass_text",
    .hf_class_prefix = "CohereCompass",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kCohereCompassTextRenames,
    .rope_parameters_by_layer_type = true,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kCohereCompassTextInitRules,
};

}  // namespace shardplan::tensor
