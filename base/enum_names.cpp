#include "base/enum_names.h"

namespace shardplan::detail {

bool names_equal(std::string_view a, std::string_view b, NameCase c) {
  if (a.size() != b.size()) return false;
  if (c == NameCase::kExact) return a == b;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? char(ch - 'A' + 'a') : ch; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace shardplan::detail
