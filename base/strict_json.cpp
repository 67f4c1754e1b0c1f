#include "base/strict_json.h"

#include <unordered_set>
#include <vector>

#include "base/error.h"

namespace shardplan {

using json = nlohmann::json;

std::string printable(std::string_view text, size_t max_shown) {
  std::string out;
  for (const char c : text.substr(0, max_shown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += std::string("\\x") + kHex[u >> 4] + kHex[u & 0xf];
    }
  }
  return text.size() > max_shown ? out + "..." : out;
}

std::string quote_json(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string shown(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) shown += "...";
  // replace: a cut through a UTF-8 sequence must not make dump() throw.
  return json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
}

// "[json.exception.parse_error.101] parse error at line 1, column 7: ..." -> the part after "] ".
std::string json_parser_message(const std::exception& e) {
  const std::string_view what = e.what();
  const size_t tag_end = what.find("] ");
  return printable(tag_end == std::string_view::npos ? what : what.substr(tag_end + 2));
}

namespace {

// Note [Strict JSON in two passes]
// The checks run as SAX events over the text, then a plain parse builds the tree. nlohmann's
// callback parser would do both in one pass, but after every object it closes it scans the
// enclosing container for discarded values: an array of n objects costs O(n^2) (a 62 MiB
// rehearsal file of 1.6M rows parsed for over a minute). Here both passes are linear, and the
// second sees only text the first accepted, so its nesting is already bounded.
class StrictChecker final : public json::json_sax_t {
 public:
  StrictChecker(int max_depth, std::string_view expected)
      : max_depth_(max_depth), expected_(expected) {}

  bool null() override { return value(); }
  bool boolean(bool /*b*/) override { return value(); }
  bool number_integer(number_integer_t /*v*/) override { return value(); }
  bool number_unsigned(number_unsigned_t /*v*/) override { return value(); }
  bool number_float(number_float_t /*v*/, const string_t& /*s*/) override { return value(); }
  bool string(string_t& /*s*/) override { return value(); }
  bool binary(binary_t& /*b*/) override { return value(); }
  bool start_object(std::size_t /*n*/) override {
    open();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    SP_CHECK(keys_.back().insert(k).second, "duplicate key ", quote_json(k),
             " in one object, expected ", expected_);
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*n*/) override {
    open();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) override {
    error_ = json_parser_message(e);
    error_byte_ = dynamic_cast<const json::parse_error*>(&e) != nullptr
                      ? static_cast<int64_t>(position)
                      : -1;  // out_of_range: a number like 1e999
    return false;
  }

  const std::string& error() const { return error_; }
  int64_t error_byte() const { return error_byte_; }

 private:
  // A value at the current depth; a container opens one level below it. The depths are those of
  // nlohmann's callback parser: the top-level value is at 0, its members at 1.
  bool value() const {
    SP_CHECK(depth_ <= max_depth_, "JSON nested deeper than ", max_depth_, " levels, expected ",
             expected_);
    return true;
  }
  void open() {
    (void)value();
    ++depth_;
  }

  int max_depth_;
  std::string_view expected_;
  int depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  std::string error_;
  int64_t error_byte_ = -1;
};

}  // namespace

json parse_strict_json(std::string_view text, std::string_view source, int max_depth,
                       std::string_view expected) {
  StrictChecker checker(max_depth, expected);
  bool well_formed = false;
  try {
    well_formed = json::sax_parse(text.begin(), text.end(), &checker);
  } catch (const Error& e) {  // nesting or a duplicate key
    SP_FAIL(source, ": ", e.what());
  } catch (const json::exception& e) {
    SP_FAIL(source, ": not valid JSON: ", json_parser_message(e));
  }
  if (!well_formed) {
    if (checker.error_byte() >= 0) {
      SP_FAIL(source, ": not valid JSON (at byte ", checker.error_byte(), "): ", checker.error());
    }
    SP_FAIL(source, ": not valid JSON: ", checker.error());
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // the checker accepted it: not expected
    SP_FAIL(source, ": not valid JSON: ", json_parser_message(e));
  }
}

}  // namespace shardplan
