// Errors of shardplan, in three tiers (docs/architecture.md "Errors and exit codes"):
//   SP_CHECK(cond, "msg", value, ...) / SP_FAIL(...)  bad input the user can cause (a shape, a dim,
//   a
//       malformed, truncated or inconsistent file): throws shardplan::Error; exit code 2.
//   throw RuntimeFailure(...)                          the world failed, not the input: the
//   operating
//       system reports an error while reading or writing (EIO and the like), a backend fails at run
//       time; exit code 1.
//   SP_ASSERT(cond, ...)                               a broken invariant, i.e. a bug: throws
//       InternalError carrying file:line; exit code 1 with "internal error at file:line".
// Only main() turns them into exit codes; library code never calls exit().
// Example: SP_CHECK(dim < ndim, "transpose: dim ", dim, " out of range for a ", ndim, "-d tensor");
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>

namespace shardplan {

// Bad input: a shape, a dim, a config value the user gave. Library code throws it; main() reports
// it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure that is neither the user's input nor a bug: the OS failed a read or a write, a backend
// failed at run time. The message names the file or call and the OS's own error text.
class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken invariant. what() is "<file>:<line>: <expression>[: <message>]".
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Prints a shape like PyTorch: [2, 3, 4]. Declared here so error messages can name shapes.
std::ostream& operator<<(std::ostream& os, std::span<const int64_t> dims);

// "<what> '<path>': <strerror(errno_value)>", the one spelling of an OS error in messages.
std::string os_error_message(std::string_view what, std::string_view path, int errno_value);

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void internal_error(const char* expr, const char* file, int line,
                                 const std::string& msg);
}  // namespace detail

}  // namespace shardplan

#define SP_CHECK(cond, ...)                                               \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      throw ::shardplan::Error(::shardplan::detail::concat(__VA_ARGS__)); \
  } while (0)

#define SP_FAIL(...) throw ::shardplan::Error(::shardplan::detail::concat(__VA_ARGS__))

#define SP_ASSERT(cond, ...)                                                                      \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::shardplan::detail::internal_error(                                                        \
          #cond, __FILE__, __LINE__, ::shardplan::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
