#include "base/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace shardplan {

namespace {
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time.
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string> candidates) {
  // Names typed on a command line are short; a longer one (a pasted document) is no typo.
  if (name.empty() || name.size() > 256) return std::nullopt;
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, std::span<const std::string> candidates) {
  const std::optional<std::string> best = nearest_name(name, candidates);
  if (best) return " (did you mean '" + *best + "'?)";
  // A part of a longer name ("h100" for "dgx-h100"): the names that contain it, at most three.
  if (name.size() < 3) return "";
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string needle = lower(name);
  std::vector<std::string> found;
  for (const std::string& c : candidates) {
    if (lower(c).find(needle) != std::string::npos) found.push_back(c);
  }
  if (found.empty() || found.size() > 3) return "";
  std::string s = found.size() == 1 ? " (did you mean '" : " (did you mean one of '";
  for (size_t i = 0; i < found.size(); ++i) s += (i ? "', '" : "") + found[i];
  return s + "'?)";
}

}  // namespace shardplan
