#include "mesh/placement.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"

namespace shardplan::mesh {

// Shapes print as [2, 3] (base/error.h); this namespace's own operator<< would hide it.
using ::shardplan::operator<<;

namespace {
constexpr EnumName<ReduceOp> kReduceOpNames[] = {{"sum", ReduceOp::kSum},
                                                 {"avg", ReduceOp::kAvg},
                                                 {"max", ReduceOp::kMax},
                                                 {"min", ReduceOp::kMin},
                                                 {"prod", ReduceOp::kProd}};
}  // namespace

std::string_view reduce_op_name(ReduceOp op) { return enum_name(op, kReduceOpNames); }

int64_t Placement::shard_dim() const {
  if (const auto* s = std::get_if<Shard>(&v_)) return s->dim;
  const auto* ss = std::get_if<StridedShard>(&v_);
  SP_ASSERT(ss != nullptr, "shard_dim() of ", to_string(*this));
  return ss->dim;
}

int64_t Placement::split_factor() const {
  if (is_shard()) return 1;
  const auto* ss = std::get_if<StridedShard>(&v_);
  SP_ASSERT(ss != nullptr, "split_factor() of ", to_string(*this));
  return ss->split_factor;
}

ReduceOp Placement::reduce_op() const {
  const auto* p = std::get_if<Partial>(&v_);
  SP_ASSERT(p != nullptr, "reduce_op() of ", to_string(*this));
  return p->op;
}

std::string to_string(const Placement& p) {
  struct Visitor {
    std::string operator()(const Shard& s) const { return "S" + std::to_string(s.dim); }
    std::string operator()(const Replicate&) const { return "R"; }
    // Partial(sum) is the default reduce op, printed as plain "P" like the notation of
    // docs/semantics.md.
    std::string operator()(const Partial& q) const {
      return q.op == ReduceOp::kSum ? "P" : "P" + std::string(reduce_op_name(q.op));
    }
    std::string operator()(const StridedShard& s) const {
      return "SS" + std::to_string(s.dim) + ":" + std::to_string(s.split_factor);
    }
  };
  return std::visit(Visitor{}, p.variant());
}

std::string to_string(const std::vector<Placement>& ps) {
  std::string out;
  for (size_t i = 0; i < ps.size(); ++i) out += (i ? "," : "") + to_string(ps[i]);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << to_string(p); }
std::ostream& operator<<(std::ostream& os, const std::vector<Placement>& ps) {
  return os << "[" << to_string(ps) << "]";
}

namespace {

constexpr const char* kAccepted =
    "expected S<dim> (e.g. S0, S-1), R, P, Psum, Pavg, Pmax, Pmin, Pprod or SS<dim>:<split_factor> "
    "(e.g. SS0:2)";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A whole-string integer (optional leading '-'), or false.
bool parse_int(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

Placement parse_placement(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "R") return Replicate{};
  if (t == "P") return Partial{ReduceOp::kSum};
  if (t.size() > 1 && t[0] == 'P') {
    if (std::optional<ReduceOp> op = find_enum_name(t.substr(1), kReduceOpNames))
      return Partial{*op};
  }
  if (t.starts_with("SS")) {
    const std::string_view body = t.substr(2);
    const size_t colon = body.find(':');
    int64_t dim = 0, factor = 0;
    SP_CHECK(colon != std::string_view::npos && parse_int(body.substr(0, colon), &dim) &&
                 parse_int(body.substr(colon + 1), &factor),
             "placement '", t, "' is not valid: ", kAccepted);
    SP_CHECK(factor >= 1, "placement '", t, "': split_factor must be >= 1, got ", factor);
    return StridedShard{dim, factor};
  }
  int64_t dim = 0;
  if (t.size() > 1 && t[0] == 'S' && parse_int(t.substr(1), &dim)) return Shard{dim};
  SP_FAIL("placement '", t, "' is not valid: ", kAccepted);
}

std::vector<Placement> parse_placements(std::string_view text) {
  SP_CHECK(!trim(text).empty(),
           "placements: empty list, expected one placement per mesh dim such as "
           "'S0,R'");
  std::vector<Placement> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    SP_CHECK(!trim(item).empty(), "placements '", text, "': empty entry at position ", out.size(),
             ", expected one placement per mesh dim such as 'S0,R'");
    out.push_back(parse_placement(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

size_t hash_value(const Placement& p) {
  // Mix the alternative index with its fields (boost::hash_combine's constant).
  auto mix = [](size_t seed, size_t v) {
    return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  };
  size_t h = mix(0, p.variant().index());
  if (p.is_any_shard()) {
    h = mix(h, std::hash<int64_t>{}(p.shard_dim()));
    h = mix(h, std::hash<int64_t>{}(p.split_factor()));
  } else if (p.is_partial()) {
    h = mix(h, static_cast<size_t>(p.reduce_op()));
  }
  return h;
}

size_t hash_value(const std::vector<Placement>& ps) {
  size_t h = ps.size();
  for (const Placement& p : ps) h ^= hash_value(p) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

void to_json(nlohmann::json& j, const Placement& p) { j = to_string(p); }

Placement placement_from_json(const nlohmann::json& j, std::string_view origin,
                              std::string_view path) {
  if (!j.is_string()) {
    fail_json_field(origin, path,
                    "expected a placement string such as \"S0\", got " + json_excerpt(j));
  }
  try {
    return parse_placement(j.get_ref<const std::string&>());
  } catch (const Error& e) {
    fail_json_field(origin, path, e.what());
  }
}

std::vector<Placement> placements_from_json(const nlohmann::json& j, std::string_view origin,
                                            std::string_view path) {
  if (!j.is_array()) {
    fail_json_field(
        origin, path,
        "expected an array of placements such as [\"S0\", \"R\"], got " + json_excerpt(j));
  }
  std::vector<Placement> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    out.push_back(
        placement_from_json(j[i], origin, std::string(path) + "[" + std::to_string(i) + "]"));
  }
  return out;
}

void from_json(const nlohmann::json& j, Placement& p) { p = placement_from_json(j); }

}  // namespace shardplan::mesh
