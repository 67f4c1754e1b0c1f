// step3p5 (StepFun's Step 3.5 Flash, and the language model of the multimodal Step 3.7 Flash):
// transformers' Step3p7TextConfig (model_type "step3p5"; vocab 128815, hidden 4096, dense MLP
// 11264, 45 layers, 64 heads and 8 key-value heads of 128, max positions 128000, rms_norm_eps
// 1e-5, untied, pad_token_id 1; 288 experts of 1280, top 8, one shared expert of 1280; layers 0-2
// dense; every layer full attention unless layer_types says otherwise, no default window) and
// modeling_step3p7.py's text model. transformers has no causal LM over that text model
// (Step3p7ForConditionalGeneration holds it as model.language_model): shardplan builds one,
// named as the Hub checkpoints and StepFun's own Step3p5ForCausalLM name it:
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight   q [H_l d, h], k/v [K d, h], o [h, H_l d]
//   model.layers.N.self_attn.{q,k}_norm.weight       [d] (a (1 + w) RMSNorm per head, before RoPE)
//   model.layers.N.self_attn.g_proj.weight           [H_l, h]: one output gate per head
//   model.layers.N.mlp.{gate,up,down}_proj.weight    the dense layers' MLP (intermediate_size)
//   model.layers.N.mlp.gate.weight                   [E, h]   (sparse layers: the router, then
//   model.layers.N.mlp.experts.gate_up_proj          [E, 2F, h] the fused experts, then the
//   model.layers.N.mlp.experts.down_proj             [E, h, F]  shared expert)
//   model.layers.N.mlp.shared_experts.*_proj.weight  as the dense MLP's, share_expert_dim wide
//   model.layers.N.{input,post_attention}_layernorm.weight, model.norm.weight, lm_head.weight
// H_l is the layer's query heads: the sliding layers have their own count (Step 3.5 Flash: 96
// beside the full layers' 64; num_sliding_attention_heads, the legacy attention_other_setting, or
// a per_layer_config of num_attention_heads overrides), ModelConfig::sliding_num_attention_heads.
// The attention output is gated per head, o_proj(out * sigmoid(g_proj(x))) in the model's dtype.
// Every norm is Gemma's (1 + weight), its weight starting at zero. RoPE is keyed by layer type:
// from per-layer lists (rope_theta, partial_rotary_factors; the released files rotate half of each
// full layer's head at base 5e6, with a llama3 rope_scaling, and all of each sliding layer's at
// 1e4) or a saved rope_parameters per type. The router's scores are sigmoid(x W^T) in float32,
// its e_score_correction_bias [E] a buffer (not counted; it only picks the top k), the k scores
// renormalized; the routed output times moe_router_scaling_factor, plus the shared expert.
// The checkpoints' num_nextn_predict_layers prediction layers (model.layers.45-47 in Step 3.5
// Flash) are not built, as transformers builds none. The layer is built here from the shared
// pieces (tensor/models/model_shell.h, blocks.h, GroupedExperts), as Laguna's is.
#include <algorithm>
#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/limits.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_shell.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/models/typed_rotary_model.h"

namespace shardplan::tensor {

extern const ModelFamily kStep3p5Family;  // listed in family_registry.cpp

namespace {

using nlohmann::json;

constexpr const char* kFamily = "Step3p7TextConfig";
// Step3p7TextConfig.default_theta: the RoPE base of a type the file gives none.
constexpr double kDefaultTheta = 10000;

// ---- config ----------------------------------------------------------------------------------

using models::types_in_use;  // tensor/models/typed_rotary_model.h
using models::uses;

// The first layer of type `t`, -1 when none: Step3p7TextConfig takes each type's RoPE settings
// from that layer's entries.
int64_t first_of(const std::vector<AttentionType>& types, AttentionType t) {
  const auto it = std::find(types.begin(), types.end(), t);
  return it == types.end() ? -1 : static_cast<int64_t>(it - types.begin());
}

// A key of Step3p7TextConfig's attribute_map (num_attention_groups, moe_num_experts, moe_top_k,
// share_expert_dims): an extra kwarg PreTrainedConfig sets after the dataclass fields, so it wins
// over the field it aliases; else the field, else the class's default.
int64_t aliased(const ConfigFields& f, const char* alias, const char* field, int64_t dflt) {
  const int64_t value = f.integer(field, dflt);  // read even when the alias wins
  return f.has(alias) ? f.integer(alias) : value;
}

// A per-layer list as Step3p7TextConfig.__post_init__ takes it: one entry per layer, or the
// legacy files' list padded with one entry per prediction layer (`mtp`), whose tail it splits
// off. Returns the first num_hidden_layers entries.
json per_layer_list(const ConfigFields& f, const char* key, int64_t layers, int64_t mtp) {
  const json& v = f.raw(key);
  const auto n = static_cast<int64_t>(v.is_array() ? v.size() : 0);
  if (!v.is_array() || (n != layers && (mtp == 0 || n != layers + mtp))) {
    f.fail(key, "expected a list of num_hidden_layers = " + std::to_string(layers) + " entries" +
                    (mtp > 0 ? " (or " + std::to_string(layers + mtp) +
                                   ", with the num_nextn_predict_layers prediction layers' after)"
                             : std::string()) +
                    ", got " + v.dump().substr(0, 60));
  }
  return json(std::vector<json>(v.begin(), v.begin() + layers));
}

// layer_types: "full_attention" or "sliding_attention" (absent: every layer full). Step3p7TextModel
// makes masks for these two only; any other type has none (a KeyError in its forward).
std::vector<AttentionType> parse_layer_types(const ConfigFields& f, int64_t layers, int64_t mtp) {
  std::vector<AttentionType> out(static_cast<size_t>(layers), AttentionType::kFull);
  if (!f.has("layer_types")) return out;
  const json v = per_layer_list(f, "layer_types", layers, mtp);
  for (int64_t i = 0; i < layers; ++i) {
    const json& e = v[static_cast<size_t>(i)];
    if (e == "sliding_attention") {
      out[static_cast<size_t>(i)] = AttentionType::kSliding;
    } else if (e != "full_attention") {
      f.fail("layer_types", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                ": Step3p7TextModel makes masks for full and sliding layers only; "
                                "expected \"full_attention\" or \"sliding_attention\"");
    }
  }
  return out;
}

// moe_layers_enum, the legacy spelling of the sparse layers: "3,4,5" or [3, 4, 5] (int() of
// each entry, blanks skipped). Indices past the model (the prediction layers') are not layers.
std::set<int64_t> parse_moe_layers_enum(const ConfigFields& f) {
  const json& v = f.raw("moe_layers_enum");
  std::vector<std::string> items;
  if (v.is_string()) {
    std::string item;
    for (const char ch : v.get<std::string>() + ",") {
      if (ch != ',') {
        item += ch;
        continue;
      }
      items.push_back(item);
      item.clear();
    }
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (e.is_number_integer()) {
        items.push_back(std::to_string(e.get<int64_t>()));
      } else if (e.is_string()) {
        items.push_back(e.get<std::string>());
      } else {
        f.fail("moe_layers_enum", "entry " + e.dump().substr(0, 40) + ", expected a layer index");
      }
    }
  } else {
    f.fail("moe_layers_enum", v.dump().substr(0, 60) +
                                  ", expected the sparse layers' indices: \"3,4,5\" or [3, 4, 5]");
  }
  std::set<int64_t> out;
  for (std::string item : items) {
    const auto blank = [](unsigned char ch) { return std::isspace(ch) != 0; };
    item.erase(item.begin(), std::find_if_not(item.begin(), item.end(), blank));
    item.erase(std::find_if_not(item.rbegin(), item.rend(), blank).base(), item.end());
    if (item.empty()) continue;
    const bool digits =
        item.size() <= 9 && std::all_of(item.begin(), item.end(),
                                        [](unsigned char ch) { return std::isdigit(ch) != 0; });
    if (!digits) {
      f.fail("moe_layers_enum",
             "entry '" + item.substr(0, 20) + "' is not a layer index (a non-negative integer)");
    }
    out.insert(std::stoll(item));
  }
  return out;
}

// Which layers are dense: mlp_layer_types ("sparse" builds experts, anything else Step3p7MLP; a
// word other than "dense" is refused rather than read as dense), else moe_layers_enum, else
// layers 3 onwards sparse.
void parse_mlp_layer_types(const ConfigFields& f, ModelConfig& c, int64_t mtp) {
  const int64_t layers = c.num_hidden_layers;
  if (f.has("mlp_layer_types")) {
    const json v = per_layer_list(f, "mlp_layer_types", layers, mtp);
    for (int64_t i = 0; i < layers; ++i) {
      const json& e = v[static_cast<size_t>(i)];
      if (e == "dense") {
        c.dense_layers.push_back(i);
      } else if (e != "sparse") {
        f.fail("mlp_layer_types", "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                                      ", expected \"dense\" or \"sparse\"");
      }
    }
    return;
  }
  const std::optional<std::set<int64_t>> sparse =
      f.has("moe_layers_enum") ? std::optional(parse_moe_layers_enum(f)) : std::nullopt;
  for (int64_t i = 0; i < layers; ++i) {
    if (sparse ? sparse->count(i) == 0 : i < 3) c.dense_layers.push_back(i);
  }
}

// The query heads of each layer type. Step3p7TextConfig gives the sliding layers
// num_sliding_attention_heads (else the legacy attention_other_setting's num_attention_heads,
// else num_attention_heads) through a per_layer_config of num_attention_heads overrides, which a
// saved file holds itself (and which then decides). ModelConfig holds one count per type.
void parse_heads(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types) {
  const int64_t layers = c.num_hidden_layers, kv = c.num_key_value_heads;
  int64_t sliding = c.num_attention_heads;
  if (f.has("attention_other_setting")) {
    // StepFun's own setting of the sliding layers: transformers takes their query heads from it
    // and nothing else, so the rest must be what transformers builds.
    const json& a = f.raw("attention_other_setting");
    if (!a.is_object()) {
      f.fail("attention_other_setting", a.dump().substr(0, 60) + ", expected an object");
    }
    const ConfigFields s(a, f.source());
    if (!a.empty() && !f.has("num_sliding_attention_heads")) {
      sliding = s.integer("num_attention_heads", c.num_attention_heads);
    }
    const std::pair<const char*, int64_t> built[] = {
        {"num_attention_groups", kv}, {"head_dim", c.head_dim}, {"true_head_dim", c.head_dim}};
    for (const auto& [key, value] : built) {
      if (s.has(key) && s.integer(key) != value) {
        f.fail(
            "attention_other_setting",
            std::string(key) + " " + std::to_string(s.integer(key)) +
                ": transformers' Step3p7Attention builds the sliding layers with the model's " +
                (key == std::string_view("num_attention_groups") ? "key-value heads" : "head_dim") +
                "; expected " + std::to_string(value));
      }
    }
    if (s.has("attention_type") && s.raw("attention_type") != "sliding_attention") {
      f.fail("attention_other_setting",
             "attention_type " + s.raw("attention_type").dump().substr(0, 40) +
                 ": transformers applies the setting to the sliding layers; expected "
                 "\"sliding_attention\"");
    }
  }
  if (f.has("num_sliding_attention_heads")) sliding = f.integer("num_sliding_attention_heads");
  std::vector<int64_t> heads(static_cast<size_t>(layers), c.num_attention_heads);
  if (f.has("per_layer_config")) {
    const json& p = f.raw("per_layer_config");
    if (!p.is_object()) {
      f.fail("per_layer_config",
             p.dump().substr(0, 60) + ", expected an object of layer index -> overrides");
    }
    for (const auto& [index, overrides] : p.items()) {
      const bool digits = !index.empty() && index.size() <= 9 &&
                          std::all_of(index.begin(), index.end(),
                                      [](unsigned char ch) { return std::isdigit(ch) != 0; });
      if (!digits || std::stoll(index) >= layers) {
        f.fail("per_layer_config", "key '" + index.substr(0, 20) + "' is not a layer in 0.." +
                                       std::to_string(layers - 1));
      }
      if (!overrides.is_object()) {
        f.fail("per_layer_config", "layer " + index + ": expected an object of overrides");
      }
      for (const auto& [key, value] : overrides.items()) {
        if (key != "num_attention_heads") {
          f.fail("per_layer_config",
                 "layer " + index + " overrides '" + key.substr(0, 40) +
                     "': shardplan builds per-layer query head counts only; expected "
                     "num_attention_heads");
        }
        heads[static_cast<size_t>(std::stoll(index))] =
            value.is_number_integer() ? value.get<int64_t>() : 0;
      }
    }
  } else {
    for (int64_t i = 0; i < layers; ++i) {
      if (types[static_cast<size_t>(i)] == AttentionType::kSliding) {
        heads[static_cast<size_t>(i)] = sliding;
      }
    }
  }
  std::optional<int64_t> full_heads, sliding_heads;
  for (int64_t i = 0; i < layers; ++i) {
    const AttentionType t = types[static_cast<size_t>(i)];
    const int64_t n = heads[static_cast<size_t>(i)];
    // The key the count came from, for the error.
    const char* key = f.has("per_layer_config")              ? "per_layer_config"
                      : t != AttentionType::kSliding         ? "num_attention_heads"
                      : f.has("num_sliding_attention_heads") ? "num_sliding_attention_heads"
                      : f.has("attention_other_setting")     ? "attention_other_setting"
                                                             : "num_attention_heads";
    if (n <= 0 || kv <= 0 || n % kv != 0) {
      f.fail(key, "layer " + std::to_string(i) + " has " + std::to_string(n) +
                      " query heads, expected a positive multiple of the " + std::to_string(kv) +
                      " key-value heads");
    }
    std::optional<int64_t>& seen = t == AttentionType::kSliding ? sliding_heads : full_heads;
    if (seen && *seen != n) {
      f.fail(key, "layer " + std::to_string(i) + " (" + std::string(to_string(t)) + ") has " +
                      std::to_string(n) + " heads where an earlier layer of its type has " +
                      std::to_string(*seen) +
                      "; shardplan builds one head count per layer type (as every released Step "
                      "3.5 does), expected equal counts within a type");
    }
    seen = n;
  }
  if (full_heads) c.num_attention_heads = *full_heads;
  if (sliding_heads && *sliding_heads != c.num_attention_heads) {
    c.sliding_num_attention_heads = *sliding_heads;
  }
}

// One layer type's RoPE: base, scaling (none for rope_type "default") and the rotated share.
struct TypeRope {
  double theta = kDefaultTheta;
  std::optional<RopeScaling> scaling;
  double share = 1;
};

// A saved file's rope_parameters entry for `t`, as Step3p7RotaryEmbedding reads it: rope_type and
// rope_theta required (read by key), partial_rotary_factor 1.0 when absent (a .get default).
TypeRope parse_type_entry(const ConfigFields& f, const json& r, AttentionType t) {
  const std::string name(to_string(t));
  const json& set = r.at(name);
  const ConfigFields s(set, f.source());
  for (const char* key : {"rope_type", "rope_theta"}) {
    if (!s.has(key)) {
      f.fail("rope_parameters", "rope_parameters." + name + " has no " + key +
                                    ", which Step3p7RotaryEmbedding reads from the entry");
    }
  }
  TypeRope out{s.number("rope_theta", kDefaultTheta), std::nullopt,
               s.number("partial_rotary_factor", 1.0)};
  if (s.string("rope_type", "default") != "default") {
    out.scaling = parse_rope_scaling(set, f, "rope_parameters");
  }
  return out;
}

// A number of a per-layer list or a scalar, checked positive.
double positive_entry(const ConfigFields& f, const char* key, const json& e, int64_t layer) {
  if (!e.is_number() || !(e.get<double>() > 0)) {
    f.fail(key, "entry " + std::to_string(layer) + " is " + e.dump().substr(0, 40) +
                    ", expected a positive number");
  }
  return e.get<double>();
}

// Step3p7TextConfig.__post_init__'s RoPE. A rope_parameters holding an object for every layer
// type in use (a file transformers saved) is kept as it is; otherwise each type's settings come
// from its first layer's entries of rope_theta (a scalar for every layer or a per-layer list;
// absent: 1e4) and partial_rotary_factors (absent or empty: the whole head), and a rope_scaling
// (StepFun's yarn_only_types: the full layers') scales the full type; any other rope_parameters is
// then dropped, as transformers rebuilds it. ModelConfig keeps the full type's base, scaling and
// share (the model's, as in Laguna's family); the sliding layers' base and scaling change no shape
// (read and checked, not kept) and their share must be 1.
void parse_rope(const ConfigFields& f, ModelConfig& c, const std::vector<AttentionType>& types,
                int64_t mtp) {
  std::optional<TypeRope> full, sliding;
  const bool has_full = uses(types, AttentionType::kFull);
  const bool has_sliding = uses(types, AttentionType::kSliding);
  bool keyed = false;
  if (f.has("rope_parameters")) {
    const json& r = f.raw("rope_parameters");
    if (!r.is_object()) {
      f.fail("rope_parameters", r.dump().substr(0, 60) + ", expected an object");
    }
    keyed = true;
    for (const AttentionType t : {AttentionType::kFull, AttentionType::kSliding}) {
      const auto it = r.find(std::string(to_string(t)));
      if (uses(types, t) && (it == r.end() || !it->is_object())) keyed = false;
    }
    if (keyed) {
      // The full entry is kept even when no layer is full (the model ignores it): it reads back.
      if (has_full || r.contains("full_attention")) {
        full = parse_type_entry(f, r, AttentionType::kFull);
      }
      if (has_sliding) sliding = parse_type_entry(f, r, AttentionType::kSliding);
    }
  }
  if (!keyed) {
    std::vector<double> thetas(static_cast<size_t>(c.num_hidden_layers), kDefaultTheta);
    if (f.has("rope_theta") && f.raw("rope_theta").is_array()) {
      const json v = per_layer_list(f, "rope_theta", c.num_hidden_layers, mtp);
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        thetas[static_cast<size_t>(i)] =
            positive_entry(f, "rope_theta", v[static_cast<size_t>(i)], i);
      }
    } else if (f.has("rope_theta")) {
      thetas.assign(thetas.size(), positive_entry(f, "rope_theta", f.raw("rope_theta"), 0));
    }
    std::vector<double> shares(static_cast<size_t>(c.num_hidden_layers), 1.0);
    if (f.has("partial_rotary_factors") && !f.raw("partial_rotary_factors").empty()) {
      const json v = per_layer_list(f, "partial_rotary_factors", c.num_hidden_layers, mtp);
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        shares[static_cast<size_t>(i)] =
            positive_entry(f, "partial_rotary_factors", v[static_cast<size_t>(i)], i);
      }
    }
    const auto entry = [&](AttentionType t) {
      const auto i = static_cast<size_t>(first_of(types, t));
      return TypeRope{thetas[i], std::nullopt, shares[i]};
    };
    if (has_full) full = entry(AttentionType::kFull);
    if (has_sliding) sliding = entry(AttentionType::kSliding);
    if (f.has("rope_scaling")) {
      const json& s = f.raw("rope_scaling");
      if (!s.is_object()) {
        f.fail("rope_scaling", s.dump().substr(0, 60) + ", expected an object or null");
      }
      // An empty one scales nothing (it is falsy); otherwise it updates the full type's entry,
      // {"rope_type": "default", ...}, so only its own rope_type (not the legacy "type") scales.
      if (!s.empty() && full) {
        const ConfigFields sf(s, f.source());
        if (sf.string("rope_type", "default") != "default") {
          full->scaling = parse_rope_scaling(f);
          // StepFun's yarn_only_types names the types its own code scales; transformers scales
          // the full layers alone.
          models::require_built_value(f, "yarn_only_types", json::array({"full_attention"}),
                                      kFamily, "the rope_scaling on the full layers alone");
        }
        full->theta = sf.number("rope_theta", full->theta);
        full->share = sf.number("partial_rotary_factor", full->share);
      }
    }
  }
  if (sliding) {
    if (!(sliding->theta > 0)) {
      f.fail("rope_parameters",
             "the sliding layers' rope_theta " + std::to_string(sliding->theta) + ", expected > 0");
    }
    if (sliding->share != 1) {
      f.fail(keyed ? "rope_parameters" : "partial_rotary_factors",
             "the sliding layers rotate " + std::to_string(sliding->share) +
                 " of each head: shardplan rotates Step 3.5's sliding layers over the whole head "
                 "(every released Step 3.5 does); expected 1");
    }
  }
  const TypeRope model = full.value_or(TypeRope{});
  c.rope_theta = model.theta;
  c.rope_scaling = model.scaling;
  c.partial_rotary_factor = model.share;
}

// The keys of StepFun's own files that transformers' classes do not read, each stating the
// model transformers builds: a file saying otherwise describes another model.
void require_stepfun_keys(const ConfigFields& f) {
  using models::require_built_value;
  require_built_value(f, "use_head_wise_attn_gate", true, kFamily, "a gate per head (g_proj)");
  require_built_value(f, "use_qk_norm", true, kFamily, "q_norm and k_norm on every layer");
  require_built_value(f, "zero_centered", true, kFamily, "(1 + weight) RMSNorms");
  require_built_value(f, "moe_router_activation", "sigmoid", kFamily, "a sigmoid router");
  require_built_value(f, "norm_expert_weight", true, kFamily, "top-k weights renormalized");
  require_built_value(f, "att_impl_type", "GQA", kFamily, "grouped-query attention");
  require_built_value(f, "sink", false, kFamily, "attention without sinks");
  require_built_value(f, "use_moe", true, kFamily, "routed experts on the sparse layers");
  // use_rope_layers: StepFun's per-layer switch of RoPE (empty: every layer rotates).
  if (f.has("use_rope_layers")) {
    const json& v = f.raw("use_rope_layers");
    if (!v.is_array() || std::any_of(v.begin(), v.end(), [](const json& e) { return e != true; })) {
      f.fail("use_rope_layers", v.dump().substr(0, 60) + ": transformers' " + kFamily +
                                    " rotates q and k on every layer; expected [] or every "
                                    "entry true");
    }
  }
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size", 128815);
  c.hidden_size = f.integer("hidden_size", 4096);
  const int64_t dense_width = f.integer("intermediate_size", 11264);
  c.num_hidden_layers = f.integer("num_hidden_layers", 45);
  // Bounded before anything is made per layer: validate() would refuse it only afterwards.
  if (c.num_hidden_layers <= 0 || c.num_hidden_layers > kMaxLayers) {
    f.fail("num_hidden_layers", std::to_string(c.num_hidden_layers) + ", expected 1.." +
                                    std::to_string(kMaxLayers) +
                                    " (docs/user-guide.md \"Limits\")");
  }
  c.num_attention_heads = f.integer("num_attention_heads", 64);
  c.num_key_value_heads = aliased(f, "num_attention_groups", "num_key_value_heads", 8);
  c.head_dim = f.integer("head_dim", 128);  // the class's default, whatever hidden / heads is
  c.max_position_embeddings = f.integer("max_position_embeddings", 128000);
  // __post_init__ sets hidden_act to silu whatever the file says (Step 3.7's says "swigluoai").
  (void)f.string("hidden_act", "silu");
  c.hidden_act = "silu";
  c.norm_eps = f.number("rms_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);  // g_proj never has one
  c.mlp_bias = f.boolean("mlp_bias", false);  // the dense MLP and the shared expert's
  models::pad_token_id_or(f, c, 1);
  // The experts: num_local_experts is a field that attribute_map sends to n_routed_experts before
  // n_routed_experts itself is set, so a file's num_local_experts never decides (read, inert).
  (void)f.has("num_local_experts");
  c.num_local_experts = aliased(f, "moe_num_experts", "n_routed_experts", 288);
  c.num_experts_per_tok = aliased(f, "moe_top_k", "num_experts_per_tok", 8);
  c.intermediate_size = f.integer("moe_intermediate_size", 1280);
  c.dense_intermediate_size = dense_width;
  if (dense_width <= 0) {
    f.fail("intermediate_size",
           std::to_string(dense_width) + ", expected a positive width of the dense layers' MLP");
  }
  c.shared_expert_intermediate_size = aliased(f, "share_expert_dims", "share_expert_dim", 1280);
  if (c.shared_expert_intermediate_size <= 0) {
    f.fail("share_expert_dim", std::to_string(c.shared_expert_intermediate_size) +
                                   ": Step3p7SparseMoeBlock always builds its shared expert; "
                                   "expected a positive width");
  }
  // The prediction layers are not built; their count says how long the legacy lists are.
  const int64_t mtp = f.integer("num_nextn_predict_layers", 0);
  if (mtp < 0 || mtp > kMaxLayers) {
    f.fail("num_nextn_predict_layers",
           std::to_string(mtp) + ", expected 0.." + std::to_string(kMaxLayers));
  }
  const std::vector<AttentionType> types = parse_layer_types(f, c.num_hidden_layers, mtp);
  // create_sliding_window_causal_mask needs a window when a layer slides (the class has none).
  if (!f.has("sliding_window") && uses(types, AttentionType::kSliding)) {
    f.fail("sliding_window",
           "absent or null, but layer_types has sliding_attention layers and transformers' mask "
           "needs a window; expected a positive window");
  }
  c.sliding_window = f.opt_integer("sliding_window");
  if (c.sliding_window && *c.sliding_window <= 0) {
    if (uses(types, AttentionType::kSliding)) {
      f.fail("sliding_window", std::to_string(*c.sliding_window) + ", expected > 0");
    }
    c.sliding_window.reset();  // a window no layer uses: none
  }
  c.layer_types = types;
  parse_mlp_layer_types(f, c, mtp);
  parse_heads(f, c, types);
  parse_rope(f, c, types, mtp);
  // Step3p7Attention.gate_per_head = gating is True or gating == "per-head" (a class attribute a
  // file may override). The per-element gate, g_proj [H d, h], is built but its forward broadcasts
  // it per head and fails: refused.
  if (f.has("gating") && f.raw("gating") != true && f.raw("gating") != "per-head") {
    f.fail("gating", f.raw("gating").dump().substr(0, 40) +
                         ": Step3p7Attention multiplies the gate per head, which a per-element "
                         "g_proj [heads x head_dim, hidden] does not fit (its forward fails); "
                         "expected true or \"per-head\"");
  }
  c.attention_gate_per_head = true;
  if (f.boolean("use_bidirectional_attention", false)) {
    f.fail("use_bidirectional_attention",
           "true: every layer would attend both ways; shardplan builds causal decoders, "
           "expected false");
  }
  // sparse_attention_config's indexer settings become attributes Step3p7Attention never reads (it
  // builds no lightning indexer): a file asking for one describes another model.
  if (f.has("sparse_attention_config") && !f.raw("sparse_attention_config").empty()) {
    f.fail("sparse_attention_config",
           "transformers' Step3p7Attention builds no lightning indexer; expected null or {}");
  }
  // The SwiGLU clamps (per layer; null or 0 none) change no shape: checked, not kept.
  for (const char* key : {"swiglu_limits", "swiglu_limits_shared"}) {
    if (!f.has(key) || f.raw(key).empty()) continue;
    const json v = per_layer_list(f, key, c.num_hidden_layers, mtp);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const json& e = v[static_cast<size_t>(i)];
      if (!e.is_null() && !e.is_number()) {
        f.fail(key, "entry " + std::to_string(i) + " is " + e.dump().substr(0, 40) +
                        ", expected a number or null");
      }
    }
  }
  // query_pre_attn_scalar (absent: head_dim) sets the softmax scale to its inverse square root,
  // and moe_router_scaling_factor multiplies the routed output: no shape, read and not kept.
  if (f.has("query_pre_attn_scalar") && !(f.number("query_pre_attn_scalar", 1) > 0)) {
    f.fail("query_pre_attn_scalar", f.raw("query_pre_attn_scalar").dump() + ", expected > 0");
  }
  (void)f.number("moe_router_scaling_factor", 1.0);
  // Popped by __post_init__ and never used once mlp_layer_types is set (it always is by then);
  // num_experts and shared_expert_intermediate_size are attributes the class never reads.
  for (const char* key : {"moe_layer_freq", "num_experts", "shared_expert_intermediate_size"}) {
    (void)f.has(key);
  }
  require_stepfun_keys(f);
}

// The full layers' entry: the model's base, scaling and rotated share.
json full_rope_entry(const ModelConfig& c) {
  json e = c.rope_scaling ? rope_scaling_json(c.rope_scaling) : json::object();
  if (!c.rope_scaling) e["rope_type"] = "default";
  e["rope_theta"] = c.rope_theta;
  e["partial_rotary_factor"] = c.partial_rotary_factor;
  return e;
}

void to_hf_json(const ModelConfig& c, json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] =
      c.dense_intermediate_size > 0 ? c.dense_intermediate_size : c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["num_sliding_attention_heads"] =
      c.sliding_num_attention_heads > 0 ? c.sliding_num_attention_heads : c.num_attention_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  j["attention_dropout"] = c.attention_dropout;
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["moe_intermediate_size"] = c.intermediate_size;
  j["n_routed_experts"] = c.num_local_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["share_expert_dim"] = c.shared_expert_intermediate_size;
  if (c.sliding_window) j["sliding_window"] = *c.sliding_window;
  json types = json::array(), mlp = json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerKind k = layer_kind(c, i);
    types.push_back(std::string(to_string(k.attention)));
    mlp.push_back(k.ffn == FfnKind::kMoe ? "sparse" : "dense");
  }
  j["layer_types"] = types;
  j["mlp_layer_types"] = mlp;
  // Saved per layer type, as transformers saves it (a sliding entry is written even when no layer
  // slides: transformers keeps the types in use only).
  j["rope_parameters"] = {
      {"full_attention", full_rope_entry(c)},
      {"sliding_attention",
       {{"rope_type", "default"}, {"rope_theta", kDefaultTheta}, {"partial_rotary_factor", 1.0}}}};
}

// ---- model -----------------------------------------------------------------------------------

// Step3p7RMSNorm: Gemma's, normed in float32 and scaled by (1 + weight), the weight at zero.
ModulePtr norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
  return std::make_shared<models::OffsetRMSNorm>("Step3p7RMSNorm", dim, c.norm_eps, o);
}

// The channels of each head a layer of type `t` rotates.
int64_t rotated_width(const ModelConfig& c, AttentionType t) {
  return t == AttentionType::kSliding ? c.head_dim : models::rotary_dim(c);
}

// Step3p7RotaryEmbedding: a table per layer type, of that type's rotated width.
class Rotary : public models::TypedRotaryTables {
 public:
  explicit Rotary(const ModelConfig& c)
      : TypedRotaryTables("Step3p7RotaryEmbedding", c,
                          [&c](AttentionType t) { return rotated_width(c, t); }) {}
};

// Step3p7Attention: q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, g_proj (its __init__'s order).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o, bool training)
      : Module("Step3p7Attention"),
        heads_(attention_heads_of(c, kind)),
        kv_heads_(kv_heads_of(c, kind)),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0) {
    if (kind.window > 0) window_ = kind.window;
    const int64_t h = c.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
    register_module("q_proj", std::make_shared<Linear>(h, q, c.qkv_bias, o));
    register_module("k_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    register_module("v_proj", std::make_shared<Linear>(h, kv, c.qkv_bias, o));
    register_module("o_proj", std::make_shared<Linear>(q, h, c.o_bias, o));
    register_module("q_norm", norm(head_dim_, c, o));
    register_module("k_norm", norm(head_dim_, c, o));
    register_module("g_proj", std::make_shared<Linear>(h, heads_, /*bias=*/false, o));
  }
  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    // Normed per head over head_dim, then rotated (the first channels of the full layers' heads).
    const Tensor q = models::apply_rotary(
        child("q_norm")->call(models::split_heads(child("q_proj")->call(x), heads_, head_dim_)),
        cos_t, sin_t);
    const Tensor k = models::apply_rotary(
        child("k_norm")->call(models::split_heads(child("k_proj")->call(x), kv_heads_, head_dim_)),
        cos_t, sin_t);
    const Tensor v = models::split_heads(child("v_proj")->call(x), kv_heads_, head_dim_);
    // The sliding window bounds the keys of each query on a sliding layer; the softmax scale
    // (query_pre_attn_scalar^-1/2) changes no work.
    const Tensor out =
        scaled_dot_product_attention(q, k, v, Tensor(), dropout_, /*is_causal=*/true, std::nullopt,
                                     /*enable_gqa=*/kv_heads_ != heads_, window_);
    // [B, S, H d] viewed [B, S, H, d], times sigmoid(g_proj(x)) [B, S, H, 1] in the model's
    // dtype, viewed back.
    const Tensor merged = models::merge_heads(out);
    const int64_t b = merged.size(0), s = merged.size(1);
    const Tensor gate = sigmoid(unsqueeze(child("g_proj")->call(x), -1));
    const Tensor gated =
        view(mul(view(merged, {b, s, heads_, head_dim_}), gate), {b, s, heads_ * head_dim_});
    return child("o_proj")->call(gated);
  }

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::optional<int64_t> window_;
};

// Step3p7TopKRouter: weight [E, h]; its e_score_correction_bias [E] is a buffer, counted aside
// (ModelFamily::router_score_bias) and not built. Returns the routing weights [T, k] of tokens
// `flat` [T, h] in their dtype.
class Router : public Module {
 public:
  Router(const ModelConfig& c, const TensorOptions& o)
      : Module("Step3p7TopKRouter"), top_k_(c.num_experts_per_tok) {
    register_parameter("weight", empty({c.num_local_experts, c.hidden_size}, o));
  }
  Tensor forward(const Tensor& flat) override {
    // F.linear(x, weight).float(), then sigmoid scores; the bias joins them for the top-k choice
    // only, and narrow stands in for topk's gather (Note [Expected-load MoE] in models.h).
    const Tensor scores = sigmoid(to(linear(flat, parameter("weight")), DType::kFloat32));
    Tensor w = narrow(scores, 1, 0, top_k_);
    w = div(w, sum(w, {-1}, /*keepdim=*/true));
    return to(w, flat.dtype());
  }

 private:
  int64_t top_k_;
};

// Step3p7SparseMoeBlock: gate, experts, shared_experts. Its forward runs the shared expert first,
// then the router and the routed experts, their output times moe_router_scaling_factor (traced as
// a multiply by 1: the factor changes no shape or count and is not kept), plus the shared output.
class SparseMoe : public Module {
 public:
  SparseMoe(const ModelConfig& c, const TensorOptions& o) : Module("Step3p7SparseMoeBlock") {
    const std::string act = c.hidden_act;
    register_module("gate", std::make_shared<Router>(c, o));
    experts_ = register_module(
        "experts", std::make_shared<GroupedExperts>(
                       "Step3p7Experts", c.num_local_experts, c.hidden_size, c.intermediate_size,
                       GroupedExperts::Layout::kOutIn, false,
                       [act](const Tensor& x) { return models::activation(act, x); }, o));
    register_module("shared_experts", std::make_shared<models::GatedMlp>(
                                          "Step3p7MLP", c.hidden_size,
                                          c.shared_expert_intermediate_size, c.mlp_bias, act, o));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), h = x.size(2);
    const Tensor flat = reshape(x, {b * s, h});
    const Tensor shared = child("shared_experts")->call(flat);
    const Tensor routed = models::expected_load_experts(*experts_, flat, child("gate")->call(flat));
    return view(add(mul(routed, 1.0), shared), {b, s, h});
  }

 private:
  std::shared_ptr<GroupedExperts> experts_;
};

// Step3p7TextModel and its decoder layers (tensor/models/typed_rotary_model.h): embed_tokens
// (padding_idx = pad_token_id), layers, norm, rotary_emb with a table per layer type.
struct ModelParts {
  static constexpr const char* kName = "Step3p7TextModel";
  static constexpr const char* kLayerName = "Step3p7DecoderLayer";
  static constexpr const char* kMlpName = "Step3p7MLP";
  using Attn = Attention;
  using Moe = SparseMoe;
  using Tables = Rotary;
  static ModulePtr make_norm(int64_t dim, const ModelConfig& c, const TensorOptions& o) {
    return norm(dim, c, o);
  }
  static bool mlp_bias(const ModelConfig& c) { return c.mlp_bias; }
};
using Model = models::TypedRotaryModel<ModelParts>;

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<models::CausalLm<Model>>("Step3p7ForCausalLM", c, o, training,
                                                   "model.embed_tokens.weight");
}

constexpr FieldRename kStep3p5Renames[] = {
    {"norm_eps", "rms_norm_eps"},
    {"num_local_experts", "n_routed_experts"},
    {"intermediate_size", "moe_intermediate_size"},
    {"dense_intermediate_size", "intermediate_size"},
    {"dense_layers", "mlp_layer_types"},
    {"shared_expert_intermediate_size", "share_expert_dim"},
    {"qkv_bias", "attention_bias"},
    {"o_bias", "attention_bias"},
    {"rope_theta", "rope_parameters"},
    {"partial_rotary_factor", "rope_parameters"},
    {"sliding_num_attention_heads", "num_sliding_attention_heads"},
    {"attention_gate_per_head", "gating"}};

// Megatron's split (family.h): q, k, v and the output gate g_proj column-parallel by heads (the
// gate [H_l, h] has one row per head, so a contiguous split of its rows keeps each rank's gates
// beside its heads), o_proj row-parallel; the dense MLP and the shared expert as Llama's MLP,
// each routed expert split on its width (style "experts"); the router, the q/k norms (one [d]
// weight for every head) and the layer norms replicated. Every projection is unfused, its rows
// in head order, so no rule splits parts (fused_parts 1).
constexpr TensorParallelRule kStep3p5TpPlan[] = {
    {"model.embed_tokens", "rowwise"},
    {"model.layers.*.self_attn.q_proj", "colwise"},
    {"model.layers.*.self_attn.k_proj", "colwise"},
    {"model.layers.*.self_attn.v_proj", "colwise"},
    {"model.layers.*.self_attn.g_proj", "colwise"},
    {"model.layers.*.self_attn.o_proj", "rowwise"},
    {"model.layers.*.mlp.gate_proj", "colwise"},
    {"model.layers.*.mlp.up_proj", "colwise"},
    {"model.layers.*.mlp.down_proj", "rowwise"},
    {"model.layers.*.mlp.experts", "experts"},
    {"model.layers.*.mlp.shared_experts.gate_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.up_proj", "colwise"},
    {"model.layers.*.mlp.shared_experts.down_proj", "rowwise"},
    {"lm_head", "colwise"}};

// Step3p7PreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), the pad_token_id row zero, biases zero), then its own: the fused
// experts and the router's weight normal, every Step3p7RMSNorm weight zero (it scales by 1 + w).
constexpr InitRule kStep3p5InitRules[] = {{"Step3p7RMSNorm", "weight", InitFill::kZeros},
                                          {"Step3p7TopKRouter", "weight", InitFill::kNormal},
                                          {"Linear", "weight", InitFill::kNormal},
                                          {"Linear", "bias", InitFill::kZeros},
                                          {"Step3p7Experts", "gate_up_proj", InitFill::kNormal},
                                          {"Step3p7Experts", "down_proj", InitFill::kNormal},
                                          {"Embedding", "weight", InitFill::kNormalPaddingRowZero}};

}  // namespace

const ModelFamily kStep3p5Family{
    .model_type = "step3p5",
    .hf_class_prefix = "Step3p7",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kStep3p5Renames,
    .rope_parameters_by_layer_type = true,
    .moe = true,
    .experts_class = "Step3p7Experts",
    .router_score_bias = ModelFamily::RouterBias::kOnRouter,
    .tp_plan = kStep3p5TpPlan,
    .init_rules = kStep3p5InitRules,
};

}  // namespace shardplan::tensor
