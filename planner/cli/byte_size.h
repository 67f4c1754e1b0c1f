// Byte counts on the command line: "123", "123B", SI "512MB" / "4kB" (powers of 1000), IEC
// "1GiB" / "64KiB" (powers of 1024), and nccl-tests' one-letter "128M" / "8G" (powers of 1024, as
// its -b/-e options read them). A fraction is allowed when the result is a whole number of bytes.
//   int64_t b = parse_byte_size("1GiB", "--bytes");   // 1073741824
//   std::string s = format_byte_size(b);              // "1 GiB"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shardplan::cli {

// Throws shardplan::Error naming `option`, the text and the accepted forms: an unknown unit, a
// negative or non-integral byte count, or one beyond int64.
int64_t parse_byte_size(std::string_view text, std::string_view option);

// The largest IEC unit that divides `bytes` exactly ("1 GiB", "1536 MiB", "123 B").
std::string format_byte_size(int64_t bytes);

}  // namespace shardplan::cli
