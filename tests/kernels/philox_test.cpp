// Philox4x32-10 against the published known-answer vectors.
// Source: Random123 (D. E. Shaw Research), file tests/kat_vectors, the three "philox4x32 10" lines;
// each line is counter[4] key[2] -> result[4], hex (split here to fit the column limit):
//   ctr 00000000 00000000 00000000 00000000 key 00000000 00000000
//     -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   ctr ffffffff ffffffff ffffffff ffffffff key ffffffff ffffffff
//     -> 408f276d 41c83b0e a20bc7c6 6d5451fd
//   ctr 243f6a88 85a308d3 13198a2e 03707344 key a4093822 299f31d0
//     -> d16cfe09 94fdcceb 5001e420 24126ea1
#include "kernels/philox.h"

#include <gtest/gtest.h>

namespace shardplan::kernels {
namespace {

constexpr Uint4x32 kZeroOut = philox4x32_10({{0, 0, 0, 0}}, {{0, 0}});
// constexpr evaluation: the generator is usable at compile time.
static_assert(kZeroOut == Uint4x32{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});

TEST(Philox4x32_10, KnownAnswerAllZero) {
  const Uint4x32 out = philox4x32_10({{0, 0, 0, 0}}, {{0, 0}});
  EXPECT_EQ(out, (Uint4x32{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}));
}

TEST(Philox4x32_10, KnownAnswerAllOnes) {
  const Uint4x32 out = philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                                     {{0xffffffffu, 0xffffffffu}});
  EXPECT_EQ(out, (Uint4x32{{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}));
}

TEST(Philox4x32_10, KnownAnswerPiDigits) {
  const Uint4x32 out = philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                                     {{0xa4093822u, 0x299f31d0u}});
  EXPECT_EQ(out, (Uint4x32{{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}));
}

TEST(Philox4x32_10, NeighbouringCountersDiffer) {
  const Uint4x32 a = philox4x32_10({{0, 0, 0, 0}}, {{7, 0}});
  const Uint4x32 b = philox4x32_10({{1, 0, 0, 0}}, {{7, 0}});
  for (int i = 0; i < 4; ++i) EXPECT_NE(a.x[i], b.x[i]) << "word " << i;
}

}  // namespace
}  // namespace shardplan::kernels
