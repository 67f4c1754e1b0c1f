// Errors of shardplan: the bad-input and internal-bug tiers of docs/architecture.md §4.1.
//   SP_CHECK(cond, "msg", value, ...)  -> bad input the user can cause: throws shardplan::Error, which
//                                        only main() turns into exit code 2.
//   SP_ASSERT(cond)                    -> a broken invariant (a bug): aborts with file:line.
// Example: SP_CHECK(dim < ndim, "transpose: dim ", dim, " out of range for a ", ndim, "-d tensor");
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>

namespace shardplan {

// Bad input: a shape, a dim, a config value the user gave. Library code throws it; main() reports it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Prints a shape like PyTorch: [2, 3, 4]. Declared here so error messages can name shapes.
std::ostream& operator<<(std::ostream& os, std::span<const int64_t> dims);

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace shardplan

#define SP_CHECK(cond, ...)                                             \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      throw ::shardplan::Error(::shardplan::detail::concat(__VA_ARGS__)); \
  } while (0)

#define SP_FAIL(...) throw ::shardplan::Error(::shardplan::detail::concat(__VA_ARGS__))

#define SP_ASSERT(cond, ...)                                                                \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::shardplan::detail::assert_fail(#cond, __FILE__, __LINE__,                           \
                                       ::shardplan::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
