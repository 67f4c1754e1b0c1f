// Suggestions for a misspelt name: the closest valid name by edit distance, ignoring case.
//   nearest_name("lama3-8b", {"llama3-8b", "gpt2"}) == "llama3-8b"
//   did_you_mean("--placement", flags) == " (did you mean '--placements'?)"
//   did_you_mean("zzz", flags) == ""                                    // nothing close enough
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shardplan {

// Levenshtein distance between `a` and `b` with ASCII letters compared case-insensitively.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, when it is close enough to be a typo of it: at most
// max(2, |name| / 3) single-character edits away (ties: the first listed). nullopt otherwise.
std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string> candidates);

// " (did you mean 'x'?)" for the nearest candidate; else, for a name of 3 characters or more, the
// one to three candidates that contain it ("h100": " (did you mean 'dgx-h100'?)"); else "".
// Appended to an "unknown ..." error.
std::string did_you_mean(std::string_view name, std::span<const std::string> candidates);

}  // namespace shardplan
