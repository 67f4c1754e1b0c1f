#include "tensor/error.h"

#include <cstdio>
#include <cstdlib>

namespace shardplan::detail {

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  // A bug, not bad input: print where and stop. abort() (not exit) so an MPI job's launcher sees a
  // signal and tears down every rank instead of leaving peers hanging in a collective.
  std::fprintf(stderr, "shardplan: internal invariant violated at %s:%d: %s%s%s\n", file, line, expr,
               msg.empty() ? "" : ": ", msg.c_str());
  std::abort();
}

}  // namespace shardplan::detail
