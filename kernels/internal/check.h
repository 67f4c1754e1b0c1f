// Always-on invariant check for kernels/: a failure is a bug in the caller or here, so it reports
// the expression, a message and file:line on stderr and aborts (the internal-bug tier of
// docs/architecture.md §4.1).
//   SHARDPLAN_KERNELS_CHECK(region.ndim >= 0, "negative ndim");
#pragma once

#include <cstdio>
#include <cstdlib>

namespace shardplan::kernels::internal {

[[noreturn]] inline void check_failed(const char* expr, const char* message, const char* file,
                                      int line) {
  std::fprintf(stderr, "%s:%d: shardplan kernels invariant failed: %s (%s)\n", file, line, expr,
               message);
  std::abort();
}

}  // namespace shardplan::kernels::internal

#define SHARDPLAN_KERNELS_CHECK(cond, message)                                            \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::shardplan::kernels::internal::check_failed(#cond, (message), __FILE__, __LINE__); \
  } while (0)
