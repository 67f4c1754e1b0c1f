// Reading a JSON object from a user's file field by field, so that every malformed value is one
// named bad-input line ("cluster.json: field 'network.latency_us.value': expected a number, got
// \"fast\"") and never a library exception surfacing as an internal error. Keys are recorded as
// they are read; done() refuses the keys nobody read (a typo must not silently fall back to a
// default).
//   JsonFields doc(j, "plan.json");
//   std::string name = doc.str("name");
//   JsonFields mesh = doc.object("mesh");
//   int64_t n = mesh.integer("size", /*min=*/1);
//   mesh.done(); doc.done();
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/enum_names.h"

namespace shardplan {

class JsonFields {
 public:
  // `origin` names the document (a file path); `path` is the dotted path of `j` inside it ("" for
  // the document). Throws shardplan::Error when `j` is not an object.
  JsonFields(const nlohmann::json& j, std::string origin, std::string path = "");

  [[noreturn]] void fail(std::string_view key, std::string_view what) const;
  // An error about the object as a whole (a check across its fields, a constructor's refusal):
  // "<origin>: field '<path>': <what>", or "<origin>: <what>" for the document.
  [[noreturn]] void fail_object(std::string_view what) const;
  bool has(std::string_view key) const;

  // The raw value of a required key (marked as read); missing is an error.
  const nlohmann::json& get(std::string_view key);
  std::string str(std::string_view key);
  // A string without control characters (newline, ESC, NUL): a name that reports print and
  // exports write into comment lines, where a newline would start a line of its own.
  std::string line(std::string_view key);
  bool boolean(std::string_view key);
  // A JSON integer in [min, max] (a float such as 2.0 or 2.5 is refused: counts are exact).
  int64_t integer(std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max());
  // A finite JSON number.
  double number(std::string_view key);
  // An array of integers, each in [min, max].
  std::vector<int64_t> integers(std::string_view key,
                                int64_t min = std::numeric_limits<int64_t>::min(),
                                int64_t max = std::numeric_limits<int64_t>::max());
  JsonFields object(std::string_view key);
  // A JSON array; its elements are the caller's to read (name them join(key) + "[i]").
  const nlohmann::json& array(std::string_view key);
  // An array of strings.
  std::vector<std::string> strings(std::string_view key);
  // The string at `key` passed through `parse` (a parse_* function that throws shardplan::Error);
  // its error becomes this field's: "<origin>: field 'dtype': unknown dtype 'x', expected ...".
  template <typename Parse>
  auto parsed(std::string_view key, Parse&& parse)
      -> decltype(parse(std::declval<std::string&>())) {
    std::string s = str(key);
    try {
      return parse(s);
    } catch (const Error& e) {
      fail(key, e.what());
    }
  }
  // A string naming one of the table's values ("unknown value 'x', expected one of: ...").
  template <typename E, size_t N>
  E enumeration(std::string_view key, const EnumName<E> (&table)[N]) {
    const std::string s = str(key);
    if (std::optional<E> v = find_enum_name(s, table)) return *v;
    fail(key, "unknown value '" + s + "', expected one of: " + enum_names_list(table));
  }

  // Every key of the object must have been read.
  void done() const;
  const nlohmann::json& json() const { return j_; }
  // "<path>.<key>" (or "<key>" at the top).
  std::string join(std::string_view key) const;
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json& j_;
  std::string origin_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
};

// A short rendering of a JSON value for messages (long values cut with "...").
std::string json_excerpt(const nlohmann::json& v);

// Where two JSON documents first differ (keys in sorted order, arrays by index): the dotted path
// ("accelerator.memory_gb.value", "layers[3]"; "" for the documents themselves) and an excerpt of
// each side ("absent" for a missing key); nullopt when they are equal. For messages that name both
// sides of a mismatch.
struct JsonDifference {
  std::string path;
  std::string left, right;
};
std::optional<JsonDifference> first_json_difference(const nlohmann::json& left,
                                                    const nlohmann::json& right);

// Throws the bad-field error JsonFields throws, "<origin>: field '<path>': <what>" ("<origin>:
// <what>" when `path` is empty, or `what` alone when it starts with "<origin>: " already), for
// readers of values that are not objects (a placement string at "placements[1]").
[[noreturn]] void fail_json_field(std::string_view origin, std::string_view path,
                                  std::string_view what);

}  // namespace shardplan
