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

json parse_strict_json(std::string_view text, std::string_view source, int max_depth,
                       std::string_view expected) {
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    SP_CHECK(depth <= max_depth, "JSON nested deeper than ", max_depth, " levels, expected ",
             expected);
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string& k = parsed.get_ref<const std::string&>();
      SP_CHECK(keys.back().insert(k).second, "duplicate key ", quote_json(k),
               " in one object, expected ", expected);
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::parse_error& e) {
    SP_FAIL(source, ": not valid JSON (at byte ", e.byte, "): ", json_parser_message(e));
  } catch (const json::exception& e) {  // out_of_range: a number like 1e999
    SP_FAIL(source, ": not valid JSON: ", json_parser_message(e));
  } catch (const Error& e) {
    SP_FAIL(source, ": ", e.what());
  }
}

}  // namespace shardplan
