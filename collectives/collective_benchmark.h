// Timing a collective through a Communicator the way nccl-tests' all_reduce_perf does, so that
// `shardplan calibrate --mpi` fits a cluster file from the job's own measurements with the same
// code as from nccl-tests logs (collectives/calibration.h).
//   NcclTestsLog log = benchmark_all_reduce(*world, {}, /*nodes=*/2, /*ranks_per_node=*/8, "mpi");
//   calibrate(cluster, {{log, CalibratedLink::kInter}});
//
// Note [Measuring like nccl-tests]
// Per size: a few warm-up operations, then `iterations` timed ones between two barriers; a rank's
// time is the average per operation, and the log keeps the slowest rank's (nccl-tests reports the
// average over its timed loop, and the slowest rank bounds a collective). Every rank gives r + 1
// in every element (float32), so each result must be n (n + 1) / 2 exactly; a wrong element fails
// the run, as nccl-tests' "#wrong" column would. Sizes are bytes per rank (nccl-tests' "size").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/nccl_tests_log.h"

namespace shardplan::collectives {

struct BenchmarkOptions {
  // Bytes per rank, multiples of 4 (float32). Default: 8 B to 64 MiB. The small sizes start at
  // 8 B as nccl-tests' default (-b 8) does: only rows whose time is mostly latency pin the
  // per-step latency. Without them a host whose mid sizes run from cache faster per byte than
  // 64 MiB does fits a negative latency (seen on a CI host: -0.87 us), which calibrate refuses.
  std::vector<int64_t> sizes = {8,         128,       2 << 10, 8 << 10, 32 << 10, 128 << 10,
                                512 << 10, 2 << 20, 8 << 20, 32 << 20, 64 << 20};
  int warmup = 3;
  int iterations = 20;  // halved for sizes of 16 MiB and more
};

// All-reduce (sum, float32) over `comm` at each size. `nodes` and `ranks_per_node` describe the
// group for the fit. Collective over `comm`; throws RuntimeFailure naming the size and the element
// when a result is wrong.
NcclTestsLog benchmark_all_reduce(Communicator& comm, const BenchmarkOptions& options,
                                  int64_t nodes, int64_t ranks_per_node, std::string origin);

// The same on a buffer of the caller's of at least the largest size, in the memory `comm` works
// on (device memory for NCCL). Its contents are the caller's to fill; the results are not checked
// (a device buffer is not readable here), and each row's time is this rank's: the caller takes
// the slowest rank's over a communicator of host memory (an NCCL one moves device buffers only).
// The window ends at the last operation's return, not at a closing barrier (NCCL's allocates and
// synchronizes). The job's backend blocks in every call (the NCCL communicator synchronizes its
// stream), where nccl-tests queues its loop and synchronizes once: small sizes carry that host
// synchronization, so a latency fitted to them is an upper bound. `shardplan rehearse` times a
// job's own backend with it.
NcclTestsLog benchmark_all_reduce_in(Communicator& comm, const BenchmarkOptions& options,
                                     void* buffer, int64_t buffer_bytes, int64_t nodes,
                                     int64_t ranks_per_node, std::string origin);

}  // namespace shardplan::collectives
