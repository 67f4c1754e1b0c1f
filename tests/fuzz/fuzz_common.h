// What every harness in tests/fuzz/ shares. A parser of user input may only ever answer bad input
// with shardplan::Error (base/error.h): that is the expected outcome and the harness goes
// on. Anything else is a bug and must crash the harness so libFuzzer keeps the input:
// shardplan::InternalError (a broken invariant), RuntimeFailure (no I/O happens here), a nlohmann
// exception (an unchecked .at() / get<>() on untrusted JSON), std::bad_alloc, ... as well as a
// property a harness checks (a round trip that does not come back equal).
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     fuzz::run([&] { parse_something(fuzz::as_text(data, size)); });
//     return 0;
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "base/error.h"

namespace shardplan::fuzz {

// The fuzzer's bytes as text, without a copy: ASan sees a read one past the end.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Reports a bug and aborts (libFuzzer saves the input as a crash artifact).
[[noreturn]] inline void bug(const char* what, const char* detail = "") {
  std::fprintf(stderr, "\n==fuzz== BUG: %s%s%s\n", what, *detail ? ": " : "", detail);
  std::fflush(stderr);
  std::abort();
}

// A property the harness checks on a successful parse.
#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) ::shardplan::fuzz::bug("property failed", #cond);          \
  } while (0)

// Runs `body`: shardplan::Error is the expected answer to bad input and returns false; any other
// exception is a bug. Returns true when `body` finished without throwing.
template <typename Body>
bool run(Body&& body) {
  try {
    body();
    return true;
  } catch (const shardplan::Error&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\n==fuzz== %s escaped (expected shardplan::Error for bad input)\n",
                 typeid(e).name());
    bug("exception other than shardplan::Error", e.what());
  } catch (...) {
    bug("exception of unknown type (expected shardplan::Error for bad input)");
  }
}

// Splits `text` at each `sep`, keeping empty parts; at most `max_parts` (the last takes the rest).
inline std::vector<std::string_view> split(std::string_view text, std::string_view sep,
                                           size_t max_parts) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_parts) {
    const size_t at = text.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(text.substr(0, at));
    text.remove_prefix(at + sep.size());
  }
  out.push_back(text);
  return out;
}

}  // namespace shardplan::fuzz
