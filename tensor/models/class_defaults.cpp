#include "tensor/models/class_defaults.h"

namespace shardplan::tensor::models {

void key_value_heads_or(const ConfigFields& f, ModelConfig& c, int64_t absent) {
  if (!f.has("num_key_value_heads") && !f.is_null("num_key_value_heads")) {
    c.num_key_value_heads = absent;
  }
}

}  // namespace shardplan::tensor::models
