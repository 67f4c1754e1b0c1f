// --bytes and friends: SI units are powers of 1000, IEC and nccl-tests' one-letter units powers
// of 1024 (nccl-tests' -b/-e), values checked by hand.
#include "planner/cli/byte_size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "base/error.h"

namespace shardplan::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(ByteSize, UnitsAsDocumented) {
  EXPECT_EQ(parse_byte_size("123", "--bytes"), 123);
  EXPECT_EQ(parse_byte_size("123B", "--bytes"), 123);
  EXPECT_EQ(parse_byte_size("512MB", "--bytes"), 512000000);
  EXPECT_EQ(parse_byte_size("4kB", "--bytes"), 4000);
  EXPECT_EQ(parse_byte_size("1GiB", "--bytes"), 1073741824);
  EXPECT_EQ(parse_byte_size("64 KiB", "--bytes"), 65536);
  EXPECT_EQ(parse_byte_size("128M", "--bytes"), 134217728);
  EXPECT_EQ(parse_byte_size("8G", "--bytes"), 8589934592);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--bytes"), 1610612736);
  EXPECT_EQ(parse_byte_size("0", "--bytes"), 0);
  EXPECT_EQ(format_byte_size(1073741824), "1 GiB");
  EXPECT_EQ(format_byte_size(1536 * 1024 * 1024LL), "1536 MiB");
  EXPECT_EQ(format_byte_size(123), "123 B");
}

TEST(ByteSize, BadSizesNameOptionAndText) {
  EXPECT_THAT([] { parse_byte_size("1Gb", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("--bytes '1Gb': unknown unit 'Gb'")));
  EXPECT_THAT([] { parse_byte_size("-5", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("--bytes '-5': negative")));
  EXPECT_THAT([] { parse_byte_size("-1GiB", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("--bytes '-1GiB': negative")));
  EXPECT_THAT([] { parse_byte_size("GiB", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("not a number")));
  EXPECT_THAT([] { parse_byte_size("1.5B", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr(
                  "--bytes '1.5B' is 1.5 x 1 bytes, a fraction of a byte over 1, expected a whole "
                  "number of bytes")));
  EXPECT_THAT([] { parse_byte_size("9000000TiB", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("more bytes than fit in 64 bits")));
}

TEST(ByteSize, CountsAreExactNotRoundedThroughADouble) {
  // Found by fuzz_cli_args: through a double the count came back as 123111111110555104.
  EXPECT_EQ(parse_byte_size("123111111110555096", "--bytes"), 123111111110555096);
  // The largest count fits (a double rounded it up to 2^63 and refused it).
  EXPECT_EQ(parse_byte_size("9223372036854775807B", "--bytes"), INT64_MAX);
  EXPECT_THAT([] { parse_byte_size("9223372036854775808", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("more bytes than fit in 64 bits")));
  EXPECT_THAT([] { parse_byte_size("8388608TiB", "--bytes"); },  // 2^63 exactly
              ThrowsMessage<Error>(HasSubstr("more bytes than fit in 64 bits")));
  // Decimal fractions that a double cannot hold exactly (0.067 * 1e9 = 67000000.00000001).
  EXPECT_EQ(parse_byte_size("0.067GB", "--bytes"), 67000000);
  EXPECT_EQ(parse_byte_size(".5KiB", "--bytes"), 512);
  EXPECT_EQ(parse_byte_size("0.0009765625KiB", "--bytes"), 1);
  EXPECT_THAT([] { parse_byte_size("1.000000000000000000000000000001KB", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("expected a whole number of bytes")));
  EXPECT_THAT([] { parse_byte_size("1.2.3", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("--bytes '1.2.3': not a number")));
  EXPECT_THAT([] { parse_byte_size(".", "--bytes"); },
              ThrowsMessage<Error>(HasSubstr("not a number")));
}

}  // namespace
}  // namespace shardplan::cli
