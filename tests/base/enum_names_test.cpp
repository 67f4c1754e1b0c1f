// One name table per enum (base/enum_names.h): printing and parsing agree, aliases parse
// but never print, and an unknown name is one message listing the choices.
#include "base/enum_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace shardplan {
namespace {

enum class Algo { kRing, kTree, kNvls };
constexpr EnumName<Algo> kAlgoNames[] = {
    {"ring", Algo::kRing}, {"tree", Algo::kTree}, {"nvls", Algo::kNvls}, {"Ring", Algo::kRing}};

TEST(EnumNames, PrintAndParseAgree) {
  for (Algo a : {Algo::kRing, Algo::kTree, Algo::kNvls}) {
    EXPECT_EQ(parse_enum_name(enum_name(a, kAlgoNames), kAlgoNames, "algorithm"), a);
  }
  EXPECT_EQ(enum_name(Algo::kRing, kAlgoNames), "ring");  // the first name listed prints
  EXPECT_EQ(parse_enum_name("Ring", kAlgoNames, "algorithm"), Algo::kRing);  // an alias parses
}

TEST(EnumNames, UnknownNameListsEachValueOnce) {
  EXPECT_THAT([] { parse_enum_name("collnet", kAlgoNames, "algorithm"); },
              ::testing::ThrowsMessage<Error>(::testing::StrEq(
                  "unknown algorithm 'collnet', expected one of: ring, tree, nvls")));
  EXPECT_EQ(find_enum_name("RING", kAlgoNames), std::nullopt);
}

TEST(EnumNames, CaseInsensitiveWhenAsked) {
  EXPECT_EQ(find_enum_name("NVLS", kAlgoNames, NameCase::kInsensitive), Algo::kNvls);
  EXPECT_EQ(find_enum_name("nvls2", kAlgoNames, NameCase::kInsensitive), std::nullopt);
}

TEST(EnumNames, AValueWithoutANameIsABug) {
  constexpr EnumName<Algo> partial[] = {{"ring", Algo::kRing}};
  EXPECT_THROW((void)enum_name(Algo::kTree, partial), InternalError);
}

}  // namespace
}  // namespace shardplan
