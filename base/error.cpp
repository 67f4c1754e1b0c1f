#include "base/error.h"

#include <cstring>
#include <string>

namespace shardplan {

std::ostream& operator<<(std::ostream& os, std::span<const int64_t> dims) {
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  return os << ']';
}

std::string os_error_message(std::string_view what, std::string_view path, int errno_value) {
  return detail::concat(what, " '", path, "': ", std::strerror(errno_value));
}

namespace detail {

void internal_error(const char* expr, const char* file, int line, const std::string& msg) {
  // A bug, not bad input: thrown (not abort()) so that main() can print one line and exit 1, and an
  // MPI launcher then sees a failed rank and tears the job down. The message carries file:line.
  throw InternalError(concat(file, ":", line, ": ", expr, msg.empty() ? "" : ": ", msg));
}

}  // namespace detail
}  // namespace shardplan
