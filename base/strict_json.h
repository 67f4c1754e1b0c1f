// JSON from untrusted files (tensor descriptions, safetensors headers and indexes, config.json,
// cluster files), parsed strictly: nesting bounded while parsing (before a deep tree is built),
// duplicate keys rejected (nlohmann silently keeps the last one, so {"nbytes":8,"nbytes":8e9}
// would mean whatever the last writer wanted), and every failure one shardplan::Error line that
// names the source.
//   json doc = parse_strict_json(text, "model.json", 64, "a tensor description");
//   // "model.json: duplicate key \"id\" in one object, expected a tensor description"
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace shardplan {

// Throws shardplan::Error "<source>: ..." for invalid JSON (with the byte offset), nesting deeper
// than `max_depth`, or a key repeated within one object. `expected` ("a tensor description") ends
// the depth and duplicate-key messages.
nlohmann::json parse_strict_json(std::string_view text, std::string_view source, int max_depth,
                                 std::string_view expected);

// Untrusted text for an error message: printable ASCII kept, other bytes as \xNN, cut after
// `max_shown` characters with "...".
std::string printable(std::string_view text, size_t max_shown = 200);
// A nlohmann exception's message without its "[json.exception...] " tag, made printable.
std::string json_parser_message(const std::exception& e);
// A JSON string literal of `s` (escaped, cut after 64 characters), for naming keys and values.
std::string quote_json(std::string_view s);

}  // namespace shardplan
