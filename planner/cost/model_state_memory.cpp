#include "planner/cost/model_state_memory.h"

#include <nlohmann/json.hpp>

#include "base/checked.h"
#include "base/error.h"
#include "base/json_fields.h"

namespace shardplan::planner {
namespace {

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  SP_CHECK(mul_into(a, b, r), "model_state_memory: ", what, " = ", a, " x ", b,
           " bytes overflows uint64");
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  SP_CHECK(add_into(a, b, r), "model_state_memory: total bytes ", a, " + ", b, " overflows uint64");
  return r;
}

uint64_t bytes_per_param(int64_t b, const char* field) {
  SP_CHECK(b >= 0, "MixedPrecision: ", field, " must be >= 0 bytes per parameter, got ", b);
  return static_cast<uint64_t>(b);
}

// A JSON integer in [0, 2^64) (JsonFields::integer stops at int64's top).
uint64_t unsigned_field(JsonFields& f, std::string_view key) {
  const nlohmann::json& v = f.get(key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  f.fail(key, "expected an integer >= 0, got " + json_excerpt(v));
}

}  // namespace

uint64_t ModelStateMemory::total_bytes() const {
  return checked_add(checked_add(param_bytes, grad_bytes), optimizer_bytes);
}

ModelStateMemory model_state_memory(uint64_t num_params, const MixedPrecision& precision,
                                    int zero_stage, int64_t dp) {
  SP_CHECK(zero_stage >= 0 && zero_stage <= 3,
           "model_state_memory: zero_stage must be 0, 1, 2 "
           "or 3, got ",
           zero_stage);
  SP_CHECK(dp >= 1, "model_state_memory: the data-parallel degree must be >= 1, got ", dp);
  const uint64_t p = bytes_per_param(precision.param_bytes, "param_bytes");
  const uint64_t g = bytes_per_param(precision.grad_bytes, "grad_bytes");
  const uint64_t k =
      checked_add(bytes_per_param(precision.master_bytes, "master_bytes"),
                  bytes_per_param(precision.optimizer_state_bytes, "optimizer_state_bytes"));
  // One rank's part of a partitioned flat buffer: ceil(num_params / dp) elements.
  const uint64_t d = static_cast<uint64_t>(dp);
  const uint64_t part = num_params / d + (num_params % d != 0 ? 1 : 0);
  ModelStateMemory m;
  m.num_params = num_params;
  m.zero_stage = zero_stage;
  m.dp = dp;
  // Stage s partitions the optimizer states (s >= 1), the gradients (s >= 2), the weights (s = 3).
  m.optimizer_bytes = checked_mul(zero_stage >= 1 ? part : num_params, k, "optimizer states");
  m.grad_bytes = checked_mul(zero_stage >= 2 ? part : num_params, g, "gradients");
  m.param_bytes = checked_mul(zero_stage >= 3 ? part : num_params, p, "parameters");
  (void)m.total_bytes();  // the sum must fit too
  return m;
}

std::ostream& operator<<(std::ostream& os, const MixedPrecision& p) {
  return os << "MixedPrecision(param=" << p.param_bytes << "B, grad=" << p.grad_bytes
            << "B, master=" << p.master_bytes << "B, optimizer_state=" << p.optimizer_state_bytes
            << "B)";
}

std::ostream& operator<<(std::ostream& os, const ModelStateMemory& m) {
  return os << "ModelStateMemory(params=" << m.num_params << ", zero_stage=" << m.zero_stage
            << ", dp=" << m.dp << ": param_bytes=" << m.param_bytes
            << ", grad_bytes=" << m.grad_bytes << ", optimizer_bytes=" << m.optimizer_bytes
            << ", total=" << m.total_bytes() << ")";
}

void to_json(nlohmann::json& j, const MixedPrecision& p) {
  j = {{"param_bytes", p.param_bytes},
       {"grad_bytes", p.grad_bytes},
       {"master_bytes", p.master_bytes},
       {"optimizer_state_bytes", p.optimizer_state_bytes}};
}

void from_json(const nlohmann::json& j, MixedPrecision& p) {
  JsonFields f(j, "mixed precision");
  MixedPrecision out;
  out.param_bytes = f.integer("param_bytes", 0);
  out.grad_bytes = f.integer("grad_bytes", 0);
  out.master_bytes = f.integer("master_bytes", 0);
  out.optimizer_state_bytes = f.integer("optimizer_state_bytes", 0);
  f.done();
  p = out;
}

void to_json(nlohmann::json& j, const ModelStateMemory& m) {
  j = {{"num_params", m.num_params},
       {"zero_stage", m.zero_stage},
       {"dp", m.dp},
       {"param_bytes", m.param_bytes},
       {"grad_bytes", m.grad_bytes},
       {"optimizer_bytes", m.optimizer_bytes},
       {"total_bytes", m.total_bytes()}};
}

void from_json(const nlohmann::json& j, ModelStateMemory& m) {
  JsonFields f(j, "model state memory");
  ModelStateMemory out;
  out.num_params = unsigned_field(f, "num_params");
  out.zero_stage = static_cast<int>(f.integer("zero_stage", 0, 3));
  out.dp = f.integer("dp", 1);
  out.param_bytes = unsigned_field(f, "param_bytes");
  out.grad_bytes = unsigned_field(f, "grad_bytes");
  out.optimizer_bytes = unsigned_field(f, "optimizer_bytes");
  const uint64_t total = unsigned_field(f, "total_bytes");
  f.done();
  uint64_t sum = 0;
  const bool fits =
      add_into(out.param_bytes, out.grad_bytes, sum) && add_into(sum, out.optimizer_bytes, sum);
  if (!fits || sum != total) {
    f.fail("total_bytes", std::to_string(total) +
                              ", expected param_bytes + grad_bytes + optimizer_bytes = " +
                              (fits ? std::to_string(sum) : "more than uint64 holds"));
  }
  m = out;
}

MixedPrecision training_recipe(bool cpu) {
  return cpu ? MixedPrecision::adam_fp32() : MixedPrecision::adam_16bit();
}

}  // namespace shardplan::planner

size_t std::hash<shardplan::planner::MixedPrecision>::operator()(
    const shardplan::planner::MixedPrecision& p) const noexcept {
  size_t h = 0;
  for (int64_t v : {p.param_bytes, p.grad_bytes, p.master_bytes, p.optimizer_state_bytes}) {
    h = h * 1000003u ^ std::hash<int64_t>{}(v);
  }
  return h;
}
