// SHA-256 against the test vectors of FIPS 180-2 Appendix B (and NIST's CAVP short messages): the
// digests below are printed in the standard, not computed by this code.
#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace shardplan {
namespace {

TEST(Sha256, MatchesTheFipsExamples) {
  // FIPS 180-2 B.1: one block.
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // B.2: 448 bits, so the padding needs a second block.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // B.3: one million 'a', many blocks.
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EmptyAndPaddingBoundaries) {
  // The empty message (NIST CAVP SHA256ShortMsg, Len = 0).
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // 55 bytes leave room for the length in the last block, 56 do not, 64 fill a block exactly.
  // Digests from Python's hashlib: hashlib.sha256(b"x" * n).hexdigest().
  const std::pair<size_t, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"}};
  for (const auto& [n, digest] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'x')), digest) << n;
}

}  // namespace
}  // namespace shardplan
