#include "tensor/models/single_rope.h"

#include <nlohmann/json.hpp>
#include <string>

namespace shardplan::tensor::models {

SingleRope find_single_rope(const ConfigFields& f, std::string_view rotary_class) {
  SingleRope r;
  r.key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  r.params = f.has(r.key) ? &f.raw(r.key) : nullptr;
  if (r.params && !r.params->is_object()) {
    f.fail(r.key, "expected an object or null, got " + r.params->dump().substr(0, 60));
  }
  if (r.params &&
      (r.params->contains("full_attention") || r.params->contains("linear_attention"))) {
    f.fail(r.key, "is keyed by layer type; " + std::string(rotary_class) +
                      " reads one rope_type and rope_theta, expected {\"rope_type\": ..., "
                      "\"rope_theta\": ...}");
  }
  r.theta_key = r.key;
  if (r.params && r.params->contains("rope_theta")) {
    r.theta = &r.params->at("rope_theta");
  } else if (f.has("rope_theta") || f.is_null("rope_theta")) {
    r.theta = &f.raw("rope_theta");
    r.theta_key = "rope_theta";
  }
  return r;
}

void read_full_width_scaling(const ConfigFields& f, ModelConfig& c, const SingleRope& r,
                             std::string_view whose) {
  c.rope_scaling.reset();
  c.partial_rotary_factor = 1;
  if (!r.params) return;
  const ConfigFields p(*r.params, f.source());
  const std::string type = p.has("rope_type") ? p.string("rope_type", "") : p.string("type", "");
  if (!type.empty() && type != "default") c.rope_scaling = parse_rope_scaling(*r.params, f, r.key);
  const double factor = p.has("partial_rotary_factor") ? p.number("partial_rotary_factor", 1.0)
                                                       : f.number("partial_rotary_factor", 1.0);
  if (c.rope_scaling && factor != 1) {
    f.fail(r.key, "partial_rotary_factor " + nlohmann::json(factor).dump() + " with rope type '" +
                      c.rope_scaling->rope_type + "': " + std::string(whose) +
                      " attention rotates all of head_dim, which that narrower table does not "
                      "cover; expected 1");
  }
}

}  // namespace shardplan::tensor::models
