// One table per enum gives both directions of its names, so printing and parsing cannot disagree
// and every unknown name gets the same message ("unknown link class 'x', expected one of: a, b,
// c").
//   constexpr EnumName<Fabric> kFabricNames[] = {{"nvlink", Fabric::kNvlink},
//                                                {"shared_memory", Fabric::kSharedMemory}};
//   std::string_view s = enum_name(f, kFabricNames);                 // "nvlink"
//   Fabric f = parse_enum_name("nvlink", kFabricNames, "fabric");   // throws shardplan::Error
// A value may have several names (aliases): the first listed for it is the one printed; parsing
// accepts any. Tables are small (a handful of names), so lookups are linear scans.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/nearest_name.h"

namespace shardplan {

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

enum class NameCase { kExact, kInsensitive };

namespace detail {
bool names_equal(std::string_view a, std::string_view b, NameCase c);
}  // namespace detail

// The printed name of `value` (the first listed for it). A value missing from its table is a bug.
template <typename E>
std::string_view enum_name(E value, std::span<const EnumName<E>> table) {
  for (const EnumName<E>& n : table) {
    if (n.value == value) return n.name;
  }
  SP_ASSERT(false, "enum value ", static_cast<long long>(value), " has no name in its table");
  return {};
}

// "a, b, c": the printed names, each value once, in table order.
template <typename E>
std::string enum_names_list(std::span<const EnumName<E>> table) {
  std::string out;
  for (size_t i = 0; i < table.size(); ++i) {
    bool first_for_value = true;
    for (size_t k = 0; k < i; ++k) first_for_value &= !(table[k].value == table[i].value);
    if (first_for_value) out += (out.empty() ? "" : ", ") + std::string(table[i].name);
  }
  return out;
}

template <typename E>
std::optional<E> find_enum_name(std::string_view name, std::span<const EnumName<E>> table,
                                NameCase c = NameCase::kExact) {
  for (const EnumName<E>& n : table) {
    if (detail::names_equal(n.name, name, c)) return n.value;
  }
  return std::nullopt;
}

// The value named `name`; throws shardplan::Error "unknown <what> '<name>' (did you mean 'x'?),
// expected one of: ..." (the hint only when a name is close: base/nearest_name.h).
template <typename E>
E parse_enum_name(std::string_view name, std::span<const EnumName<E>> table, std::string_view what,
                  NameCase c = NameCase::kExact) {
  if (std::optional<E> v = find_enum_name(name, table, c)) return *v;
  std::vector<std::string> names;
  for (const EnumName<E>& n : table) names.emplace_back(n.name);
  SP_FAIL("unknown ", what, " '", name, "'", did_you_mean(name, names),
          ", expected one of: ", enum_names_list(table));
}

// The same for a table written as a C array (template deduction does not see through the
// array-to-span conversion).
template <typename E, size_t N>
std::string_view enum_name(E value, const EnumName<E> (&table)[N]) {
  return enum_name(value, std::span<const EnumName<E>>(table));
}
template <typename E, size_t N>
std::string enum_names_list(const EnumName<E> (&table)[N]) {
  return enum_names_list(std::span<const EnumName<E>>(table));
}
template <typename E, size_t N>
std::optional<E> find_enum_name(std::string_view name, const EnumName<E> (&table)[N],
                                NameCase c = NameCase::kExact) {
  return find_enum_name(name, std::span<const EnumName<E>>(table), c);
}
template <typename E, size_t N>
E parse_enum_name(std::string_view name, const EnumName<E> (&table)[N], std::string_view what,
                  NameCase c = NameCase::kExact) {
  return parse_enum_name(name, std::span<const EnumName<E>>(table), what, c);
}

}  // namespace shardplan
