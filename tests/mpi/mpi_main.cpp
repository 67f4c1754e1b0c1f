// main() of the mpi-labelled tests: run under a launcher (tests/mpi/mpirun.sh -np N
// shardplan_mpi_tests), every rank runs every test; only rank 0 prints GoogleTest's report, and
// the job fails if any rank saw a failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include "tests/mpi/mpi_test_support.h"

namespace shardplan::testing {
const collectives::MpiSession* g_mpi = nullptr;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  shardplan::collectives::MpiSession session;
  shardplan::testing::g_mpi = &session;
  if (session.world_rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0 && session.world_rank() == 0) {
    std::fprintf(stderr, "a test failed on at least one of %lld ranks\n",
                 static_cast<long long>(session.world_size()));
  }
  return failed;
}
