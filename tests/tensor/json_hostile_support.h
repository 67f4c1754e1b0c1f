// Hostile input for the JSON readers (from_json and *_from_json of every layer): whatever document
// a user hands in, a reader either accepts it or throws shardplan::Error naming the field; never a
// library exception (nlohmann's type_error or out_of_range), which main() would report as an
// internal error. Shared by tests/tensor, tests/mesh and tests/collectives.
//   const test::Reader r{"device mesh", [](const json& j) { (void)device_mesh_from_json(j); },
//                        json::parse(R"({"shape":[2,4]})")};
//   test::expect_errors(r, {{R"({"shape":[0]})", {"field 'shape': element 0"}}});
//   test::sweep_fields(r);       // every field replaced by every kind of value, removed, and more
//   test::fuzz(r, 300, 1234);    // mutated copies of the valid document
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "base/error.h"

namespace shardplan::test {

using nlohmann::json;

struct Reader {
  std::string name;
  std::function<void(const json&)> read;
  json valid;  // a document `read` accepts
  // Paths ("files[0].metadata") of objects whose keys are data (any key is fine), and of values
  // that may hold any JSON at all.
  std::set<std::string> free_keys = {};
  std::set<std::string> any_value = {};
};

// For messages: a document as text, invalid UTF-8 replaced (dump() would throw on it).
inline std::string shown(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

enum class Outcome { kAccepted, kError, kForeign };

// Runs the reader: accepted, a shardplan::Error (its message in `message`), or any other exception
// (a test failure, reported with the document).
inline Outcome run(const Reader& r, const json& doc, std::string* message = nullptr) {
  try {
    r.read(doc);
    return Outcome::kAccepted;
  } catch (const Error& e) {
    if (message) *message = e.what();
    return Outcome::kError;
  } catch (const std::exception& e) {
    ADD_FAILURE() << r.name << ": " << typeid(e).name()
                  << " escaped instead of shardplan::Error: " << e.what()
                  << "\n  document: " << shown(doc);
    return Outcome::kForeign;
  }
}

// The message of the shardplan::Error the reader throws for `doc`; a test failure otherwise.
inline std::string error_of(const Reader& r, const json& doc) {
  std::string message;
  const Outcome o = run(r, doc, &message);
  if (o == Outcome::kAccepted) ADD_FAILURE() << r.name << ": accepted " << shown(doc);
  return message;
}

struct BadDoc {
  std::string text;                  // the document, JSON text
  std::vector<std::string> needles;  // substrings of the message (the field, the reason)
};

inline void expect_errors(const Reader& r, const std::vector<BadDoc>& table) {
  for (const BadDoc& bad : table) {
    SCOPED_TRACE(r.name + ": " + bad.text);
    const std::string message = error_of(r, json::parse(bad.text));
    for (const std::string& needle : bad.needles) {
      EXPECT_THAT(message, ::testing::HasSubstr(needle));
    }
  }
}

// One value of every JSON kind, with the hostile numbers: beyond int64 (as an unsigned and as a
// float), negative, fractional, integral floats, and a string that is not UTF-8.
inline std::vector<json> hostile_values() {
  return {nullptr,
          true,
          0,
          -1,
          7,
          int64_t{-9223372036854775807 - 1},
          json::parse("9223372036854775808"),   // int64 max + 1: an unsigned
          json::parse("18446744073709551615"),  // uint64 max
          json::parse("1e30"),                  // beyond every integer type: a float
          json::parse("-9223372036854775809"),  // below int64: a float
          2.0,
          2.5,
          -0.5,
          "",
          "x",
          "S0",
          std::string("\xff\xfe"),
          json::array(),
          json::array({1, 2}),
          json::array({"S0", "R"}),
          json::array({json::array()}),
          json::object(),
          json::object({{"shape", json::array({2})}})};
}

// The kind of a value as readers distinguish them: an integer field refuses a float, a number
// field takes both.
inline std::string kind_of(const json& v) {
  if (v.is_number_integer()) return "integer";  // signed or unsigned
  return v.type_name();                         // "number" (float), "string", ...
}

inline bool same_kind(const json& valid, const json& other) {
  if (valid.is_number_float()) return other.is_number();
  return kind_of(valid) == kind_of(other);
}

inline std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// "field '<path>" opens every bad-field message of the value at `path` (an array element adds
// ": element i" or "[i]").
inline void expect_names_field(const std::string& message, const std::string& path) {
  EXPECT_THAT(message, ::testing::HasSubstr("field '" + path)) << "the message names the field";
}

namespace detail {

// Calls `visit(path, pointer)` for every value under `j` (objects by key, arrays by index).
inline void walk(const json& j, const std::string& path, const json::json_pointer& ptr,
                 const std::function<void(const std::string&, const json::json_pointer&)>& visit) {
  visit(path, ptr);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      walk(*it, join_path(path, it.key()), ptr / it.key(), visit);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      walk(j[i], path + "[" + std::to_string(i) + "]", ptr / i, visit);
    }
  }
}

// "placements[1]" -> "placements": a message about an integer array's element names the array.
inline std::string array_of(const std::string& path) { return path.substr(0, path.find('[')); }

}  // namespace detail

// Every value of the valid document (nested ones too) replaced by each hostile value: a value of
// another kind must be a shardplan::Error naming its field; one of the same kind may be accepted or
// refused (a negative size, an unknown name), but only with a shardplan::Error. Then every key
// removed (accepted if optional, else an Error), and an unknown key added to every object (an Error
// naming it).
inline void sweep_fields(const Reader& r) {
  ASSERT_EQ(run(r, r.valid), Outcome::kAccepted) << r.name << ": the valid document is refused";
  auto under_any_value = [&](const std::string& path) {
    for (const std::string& p : r.any_value) {
      if (path == p || path.starts_with(p + ".") || path.starts_with(p + "[")) return true;
    }
    return false;
  };
  detail::walk(r.valid, "", json::json_pointer(),
               [&](const std::string& path, const json::json_pointer& ptr) {
                 if (path.empty() || under_any_value(path)) return;
                 const json& original = r.valid.at(ptr);
                 for (const json& v : hostile_values()) {
                   json doc = r.valid;
                   doc[ptr] = v;
                   SCOPED_TRACE(r.name + ": '" + path + "' = " + shown(v));
                   std::string message;
                   const Outcome o = run(r, doc, &message);
                   if (same_kind(original, v)) continue;  // accepted or an Error: both fine
                   EXPECT_EQ(o, Outcome::kError) << "accepted " << shown(doc);
                   // An integer array's element is reported as "field 'shape': element 1".
                   if (o == Outcome::kError) expect_names_field(message, detail::array_of(path));
                 }
                 // Removing it (an object's key): accepted when optional, else an Error.
                 const json::json_pointer parent = ptr.parent_pointer();
                 if (r.valid.at(parent).is_object()) {
                   json doc = r.valid;
                   doc.at(parent).erase(ptr.back());
                   SCOPED_TRACE(r.name + ": without '" + path + "'");
                   (void)run(r, doc);
                 }
               });
  // An unknown key in every object (not in those whose keys are data).
  detail::walk(
      r.valid, "", json::json_pointer(),
      [&](const std::string& path, const json::json_pointer& ptr) {
        if (!r.valid.at(ptr).is_object() || r.free_keys.contains(path) || under_any_value(path)) {
          return;
        }
        json doc = r.valid;
        doc[ptr]["zz_typo"] = 1;
        SCOPED_TRACE(r.name + ": unknown key under '" + path + "'");
        std::string message;
        EXPECT_EQ(run(r, doc, &message), Outcome::kError);
        EXPECT_THAT(message, ::testing::HasSubstr("field '" + join_path(path, "zz_typo") +
                                                  "': unknown key"));
      });
  // A document of the wrong kind altogether.
  for (const json& v : hostile_values()) {
    if (same_kind(r.valid, v)) continue;
    SCOPED_TRACE(r.name + ": document " + shown(v));
    EXPECT_EQ(run(r, v), Outcome::kError);
  }
}

// `iterations` copies of the valid document, each with 1 to 4 random mutations (a value replaced by
// a hostile one or by another value of the document, a key removed or added, an array element
// removed, duplicated or appended, a number scaled or negated, a string cut): the reader accepts
// or throws shardplan::Error, nothing else. Returns how many were refused (so a caller can check
// the mutations bite).
inline int fuzz(const Reader& r, int iterations, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<json> hostile = hostile_values();
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int refused = 0;
  for (int it = 0; it < iterations; ++it) {
    json doc = r.valid;
    const size_t mutations = 1 + pick(4);
    for (size_t m = 0; m < mutations; ++m) {
      std::vector<json::json_pointer> nodes;
      detail::walk(doc, "", json::json_pointer(),
                   [&](const std::string&, const json::json_pointer& p) { nodes.push_back(p); });
      const json::json_pointer target = nodes[pick(nodes.size())];
      json& v = doc[target];
      switch (pick(8)) {
        case 0:
          v = hostile[pick(hostile.size())];
          break;
        case 1:
          v = json(doc.at(nodes[pick(nodes.size())]));  // another part of the document
          break;
        case 2:
          if (!target.empty() && doc.at(target.parent_pointer()).is_object()) {
            doc.at(target.parent_pointer()).erase(target.back());
          }
          break;
        case 3:
          if (v.is_object()) v["k" + std::to_string(pick(3))] = hostile[pick(hostile.size())];
          break;
        case 4:
          if (v.is_array() && !v.empty()) {
            v.erase(pick(v.size()));
          } else if (v.is_array()) {
            v.push_back(hostile[pick(hostile.size())]);
          }
          break;
        case 5:
          if (v.is_array() && !v.empty()) v.push_back(json(v[pick(v.size())]));
          break;
        case 6:
          if (v.is_number_integer()) {
            const int64_t x = v.get<int64_t>();
            const int64_t factors[] = {-1, 0, 2, 1000, 1'000'000'007};
            int64_t out = 0;
            const int64_t f = factors[pick(5)];
            v = __builtin_mul_overflow(x, f, &out) ? json(static_cast<double>(x) * f) : json(out);
          } else if (v.is_number_float()) {
            v = v.get<double>() * -3.5;
          }
          break;
        default:
          if (v.is_string() && !v.get_ref<const std::string&>().empty()) {
            std::string s = v.get<std::string>();
            s.resize(pick(s.size()));
            v = s;
          }
          break;
      }
    }
    SCOPED_TRACE(r.name + " mutation " + std::to_string(it));
    if (run(r, doc) == Outcome::kError) ++refused;
  }
  return refused;
}

}  // namespace shardplan::test
