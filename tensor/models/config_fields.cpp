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
  const ConfigFields f(r, top.source());
  RopeScaling s;
  // transformers reads "rope_type" and, for old configs, "type".
  s.rope_type = f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "");
  auto bad = [&](const std::string& what) { top.fail("rope_scaling", what); };
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
    if (!(*s.low_freq_factor > 0 && *s.high_freq_factor > *s.low_freq_factor)) {
      bad("llama3 needs 0 < low_freq_factor < high_freq_factor, got " +
          std::to_string(*s.low_freq_factor) + " and " + std::to_string(*s.high_freq_factor));
    }
  }
  if (s.original_max_position_embeddings && *s.original_max_position_embeddings <= 0) {
    bad("original_max_position_embeddings must be positive");
  }
  return s;
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

}  // namespace shardplan::tensor
