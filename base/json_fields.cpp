#include "base/json_fields.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/strict_json.h"

namespace shardplan {

std::string json_excerpt(const nlohmann::json& v) {
  // replace: invalid UTF-8 inside a string must not make dump() throw while reporting an error.
  constexpr size_t kMaxShown = 80;
  const std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return printable(text, kMaxShown);
}

namespace {

std::optional<JsonDifference> difference_at(const nlohmann::json& a, const nlohmann::json& b,
                                            const std::string& path) {
  if (a == b) return std::nullopt;
  const auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (a.is_object() && b.is_object()) {
    // nlohmann::json keeps object keys sorted, so walking a's keys and then b's extra ones visits
    // them in order.
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto other = b.find(it.key());
      if (other == b.end()) return JsonDifference{child(it.key()), json_excerpt(*it), "absent"};
      if (auto d = difference_at(*it, *other, child(it.key()))) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) {
        return JsonDifference{child(it.key()), "absent", json_excerpt(*it)};
      }
    }
  }
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (auto d = difference_at(a[i], b[i], path + "[" + std::to_string(i) + "]")) return d;
    }
    const std::string at = path + "[" + std::to_string(std::min(a.size(), b.size())) + "]";
    return a.size() > b.size() ? JsonDifference{at, json_excerpt(a[b.size()]), "absent"}
                               : JsonDifference{at, "absent", json_excerpt(b[a.size()])};
  }
  return JsonDifference{path, json_excerpt(a), json_excerpt(b)};
}

}  // namespace

std::optional<JsonDifference> first_json_difference(const nlohmann::json& left,
                                                    const nlohmann::json& right) {
  return difference_at(left, right, "");
}

JsonFields::JsonFields(const nlohmann::json& j, std::string origin, std::string path)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
  SP_CHECK(j_.is_object(), origin_, ": field '", path_.empty() ? "<document>" : path_,
           "': expected a JSON object, got ", j_.type_name());
}

void fail_json_field(std::string_view origin, std::string_view path, std::string_view what) {
  if (path.empty()) {
    // A refusal that names the document already ("shard spec: shape ..." from make_shard_spec
    // reading a "shard spec") is not prefixed twice.
    if (what.starts_with(origin) && what.substr(origin.size()).starts_with(": ")) SP_FAIL(what);
    SP_FAIL(origin, ": ", what);
  }
  SP_FAIL(origin, ": field '", path, "': ", what);
}

void JsonFields::fail(std::string_view key, std::string_view what) const {
  fail_json_field(origin_, join(key), what);
}

void JsonFields::fail_object(std::string_view what) const { fail_json_field(origin_, path_, what); }

bool JsonFields::has(std::string_view key) const { return j_.contains(key); }

std::string JsonFields::join(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const nlohmann::json& JsonFields::get(std::string_view key) {
  seen_.insert(std::string(key));
  const auto it = j_.find(key);
  if (it == j_.end()) fail(key, "missing (required)");
  return *it;
}

std::string JsonFields::str(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_string()) fail(key, "expected a string, got " + json_excerpt(v));
  return v.get<std::string>();
}

std::string JsonFields::line(std::string_view key) {
  std::string s = str(key);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      fail(key, "'" + printable(s, 60) + "' holds a control character, expected one line of " +
                    "text (a name is printed in reports and written into exported configs)");
    }
  }
  return s;
}

bool JsonFields::boolean(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + json_excerpt(v));
  return v.get<bool>();
}

namespace {

// An integer JSON value in [min, max], or nullopt. nlohmann stores non-negative integers as
// unsigned: one above int64's range must not wrap.
std::optional<int64_t> as_integer(const nlohmann::json& v, int64_t min, int64_t max) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    return std::nullopt;
  }
  if (x < min || x > max) return std::nullopt;
  return x;
}

std::string range_text(int64_t min, int64_t max) {
  constexpr int64_t kLow = std::numeric_limits<int64_t>::min();
  constexpr int64_t kHigh = std::numeric_limits<int64_t>::max();
  if (min == kLow && max == kHigh) return "an integer";
  if (max == kHigh) return "an integer >= " + std::to_string(min);
  if (min == kLow) return "an integer <= " + std::to_string(max);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

int64_t JsonFields::integer(std::string_view key, int64_t min, int64_t max) {
  const nlohmann::json& v = get(key);
  if (std::optional<int64_t> x = as_integer(v, min, max)) return *x;
  fail(key, "expected " + range_text(min, max) + ", got " + json_excerpt(v));
}

double JsonFields::number(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    fail(key, "expected a number, got " + json_excerpt(v));
  }
  return v.get<double>();
}

std::vector<int64_t> JsonFields::integers(std::string_view key, int64_t min, int64_t max) {
  const nlohmann::json& v = get(key);
  if (!v.is_array()) fail(key, "expected an array of integers, got " + json_excerpt(v));
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    std::optional<int64_t> x = as_integer(v[i], min, max);
    if (!x) {
      fail(key, "element " + std::to_string(i) + ": expected " + range_text(min, max) + ", got " +
                    json_excerpt(v[i]));
    }
    out.push_back(*x);
  }
  return out;
}

JsonFields JsonFields::object(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_object()) fail(key, "expected a JSON object, got " + json_excerpt(v));
  return JsonFields(v, origin_, join(key));
}

const nlohmann::json& JsonFields::array(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_array()) fail(key, "expected an array, got " + json_excerpt(v));
  return v;
}

std::vector<std::string> JsonFields::strings(std::string_view key) {
  const nlohmann::json& v = get(key);
  if (!v.is_array()) fail(key, "expected an array of strings, got " + json_excerpt(v));
  std::vector<std::string> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      fail(key, "element " + std::to_string(i) + ": expected a string, got " + json_excerpt(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

void JsonFields::done() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.contains(it.key())) fail(it.key(), "unknown key");
  }
}

}  // namespace shardplan
