#include "tensor/models/config_fields.h"

#include <cmath>

#include "base/error.h"

namespace shardplan::tensor {

using nlohmann::json;

void ConfigFields::fail(std::string_view field, const std::string& what) const {
  SP_FAIL(source_, ": field '", field, "': ", what);
}

int64_t ConfigFields::integer(const char* f) const {
  if (!has(f)) fail(f, "missing; it is required for this model_type");
  return as_int(f, j_.at(f));
}

double ConfigFields::number(const char* f, double dflt) const {
  if (!has(f)) return dflt;
  const json& v = j_.at(f);
  if (!v.is_number()) fail(f, "expected a number, got " + v.dump());
  return v.get<double>();
}

bool ConfigFields::boolean(const char* f, bool dflt) const {
  if (!has(f)) return dflt;
  const json& v = j_.at(f);
  if (!v.is_boolean()) fail(f, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string ConfigFields::string(const char* f, std::string dflt) const {
  if (!has(f)) return dflt;
  const json& v = j_.at(f);
  if (!v.is_string()) fail(f, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

int64_t ConfigFields::as_int(std::string_view f, const json& v) const {
  // 4096.0 is accepted (some exporters write floats); 4096.5 and "4096" are not.
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  fail(f, "expected an integer, got " + v.dump());
}

RopeScaling parse_rope_scaling(const ConfigFields& top) {
  const json& r = top.raw("rope_scaling");
  if (!r.is_object()) top.fail("rope_scaling", "expected an object or null, got " + r.dump());
  return parse_rope_scaling(r, top, "rope_scaling");
}

RopeScaling parse_rope_scaling(const json& r, const ConfigFields& top, const char* key) {
  const ConfigFields f(r, top.source());
  RopeScaling s;
  // transformers reads "rope_type" and, for old configs, "type".
  s.rope_type = f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "");
  auto bad = [&](const std::string& what) { top.fail(key, what); };
  if (s.rope_type.empty()) bad("missing 'rope_type' (or 'type')");
  if (s.rope_type != "linear" && s.rope_type != "dynamic" && s.rope_type != "yarn" &&
      s.rope_type != "longrope" && s.rope_type != "llama3") {
    bad("rope_type '" + s.rope_type +
        "' is not supported; expected one of linear, dynamic, yarn, longrope, llama3");
  }
  if (s.rope_type != "longrope" && !f.has("factor")) bad("missing 'factor'");
  s.factor = f.number("factor", 1.0);
  if (!(s.factor >= 1.0)) bad("factor must be >= 1, got " + std::to_string(s.factor));
  s.original_max_position_embeddings = f.opt_integer("original_max_position_embeddings");
  if (s.rope_type == "llama3") {
    // transformers' _validate_llama3_parameters.
    for (const char* k :
         {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!f.has(k)) bad(std::string("rope_type llama3 needs '") + k + "'");
    }
    s.low_freq_factor = f.number("low_freq_factor", 0);
    s.high_freq_factor = f.number("high_freq_factor", 0);
    // Positive factors; transformers only warns when high_freq_factor <= low_freq_factor (its
    // medium band is then empty), and Llama 4 Scout ships both at 1.0.
    if (!(*s.low_freq_factor > 0 && *s.high_freq_factor > 0 && std::isfinite(*s.low_freq_factor) &&
          std::isfinite(*s.high_freq_factor))) {
      bad("llama3 needs positive low_freq_factor and high_freq_factor, got " +
          std::to_string(*s.low_freq_factor) + " and " + std::to_string(*s.high_freq_factor));
    }
  }
  if (s.original_max_position_embeddings && *s.original_max_position_embeddings <= 0) {
    bad("original_max_position_embeddings must be positive");
  }
  return s;
}

// Note [rope_parameters]
// transformers 5 keeps a model's RoPE settings in one "rope_parameters" object, in place of the
// top-level rope_theta and rope_scaling (and with partial_rotary_factor): {"rope_type": "llama3",
// "rope_theta": 500000.0, "factor": 8.0, ...}; rope_type "default" is no scaling. Files saved by
// transformers 5 have it alone. Read as transformers 5's convert_rope_params_to_dict reads a file
// (configuration_deepseek_v3.py and its siblings): a legacy rope_scaling that is set wins for the
// scaling; otherwise rope_parameters gives it; rope_parameters' own rope_theta wins over the
// top-level one (setdefault), which stays the fallback. A model whose layer types rotate
// differently (Gemma 3's global and sliding layers) keys it by layer type: the full-attention
// set is the model's rope_theta and scaling, as the legacy rope_theta and rope_scaling were (the
// sliding layers' base was rope_local_base_freq, which changes no shape), and a legacy
// rope_scaling updates that set. Keys only inference uses (mrope_section) pass.
void parse_rope_parameters(const ConfigFields& top, ModelConfig& c) {
  const json& r = top.raw("rope_parameters");
  if (!r.is_object()) top.fail("rope_parameters", "expected an object or null, got " + r.dump());
  const json* set = &r;
  for (const char* type : {"full_attention", "sliding_attention", "chunked_attention"}) {
    if (!r.contains(type)) continue;
    if (!r.contains("full_attention") || !r.at("full_attention").is_object()) {
      top.fail("rope_parameters", "keyed by layer type without a 'full_attention' object, got " +
                                      r.dump().substr(0, 120));
    }
    set = &r.at("full_attention");
    break;
  }
  const ConfigFields f(*set, top.source());
  if (f.has("rope_theta")) {
    c.rope_theta = f.number("rope_theta", c.rope_theta);
    if (!(c.rope_theta > 0)) {
      top.fail("rope_parameters",
               "rope_theta must be positive, got " + std::to_string(c.rope_theta));
    }
  }
  if (f.has("partial_rotary_factor")) {
    c.partial_rotary_factor = f.number("partial_rotary_factor", c.partial_rotary_factor);
  }
  if (top.has("rope_scaling")) return;  // the legacy scaling, parsed by the family, wins
  const std::string type =
      f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "default");
  c.rope_scaling.reset();
  if (type != "default") c.rope_scaling = parse_rope_scaling(*set, top, "rope_parameters");
}

json rope_scaling_json(const std::optional<RopeScaling>& scaling) {
  if (!scaling) return json(nullptr);
  const RopeScaling& s = *scaling;
  json r = {{"rope_type", s.rope_type}, {"factor", s.factor}};
  if (s.low_freq_factor) r["low_freq_factor"] = *s.low_freq_factor;
  if (s.high_freq_factor) r["high_freq_factor"] = *s.high_freq_factor;
  if (s.original_max_position_embeddings) {
    r["original_max_position_embeddings"] = *s.original_max_position_embeddings;
  }
  return r;
}

void head_dim_from_hidden(const ConfigFields& f, ModelConfig& c, const char* heads_key,
                          const char* hidden_key, const std::string& why) {
  const int64_t heads = c.num_attention_heads;
  if (heads > 0 && c.hidden_size % heads != 0) {
    f.fail(heads_key, std::to_string(heads) + " does not divide " + hidden_key + " " +
                          std::to_string(c.hidden_size) + why);
  }
  c.head_dim = heads > 0 ? c.hidden_size / heads : 0;
}

}  // namespace shardplan::tensor
