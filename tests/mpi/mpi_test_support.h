// The MPI session of the mpi-labelled tests (created by tests/mpi/mpi_main.cpp).
#pragma once

#include "collectives/mpi/mpi_communicator.h"

namespace shardplan::testing {
extern const collectives::MpiSession* g_mpi;
}
