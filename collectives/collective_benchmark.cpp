#include "collectives/collective_benchmark.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace shardplan::collectives {

namespace {

NcclTestsLog empty_log(const Communicator& comm, int64_t nodes, int64_t ranks_per_node,
                       std::string origin) {
  NcclTestsLog log;
  log.origin = std::move(origin);
  log.kind = CollectiveKind::kAllReduce;
  log.ranks = comm.size();
  log.nodes = nodes;
  log.ranks_per_node = ranks_per_node;
  return log;
}

size_t checked_count(int64_t bytes) {
  SP_CHECK(bytes > 0 && bytes % 4 == 0, "benchmark size ", bytes,
           ", expected a positive multiple of 4 bytes");
  return static_cast<size_t>(bytes / 4);
}

// Note [Measuring like nccl-tests]: `iterations` in-place operations after a barrier; this rank's
// average, in microseconds, up to the closing barrier (`barrier_timed`) or to its last
// operation's return. In place and without a refill, as nccl-tests times it: the sums grow (to
// infinity for large groups), which costs float additions nothing.
double local_time_us(Communicator& comm, const BenchmarkOptions& options, void* buffer,
                     int64_t bytes, bool barrier_timed) {
  const size_t count = checked_count(bytes);
  const int iterations =
      bytes >= (16 << 20) ? std::max(1, options.iterations / 2) : options.iterations;
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    comm.all_reduce(buffer, count, ReduceElement::kFloat32, ReduceOp::kSum);
  }
  if (barrier_timed) comm.barrier();
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      iterations;
  if (!barrier_timed) comm.barrier();
  return us;
}

NcclTestsRow row_of(int64_t bytes, double us) {
  NcclTestsRow row;
  row.bytes = bytes;
  row.count = bytes / 4;
  row.out_of_place_us = us;
  return row;
}

}  // namespace

NcclTestsLog benchmark_all_reduce(Communicator& comm, const BenchmarkOptions& options,
                                  int64_t nodes, int64_t ranks_per_node, std::string origin) {
  NcclTestsLog log = empty_log(comm, nodes, ranks_per_node, std::move(origin));
  const float mine = static_cast<float>(comm.rank() + 1);
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  for (const int64_t bytes : options.sizes) {
    const size_t count = checked_count(bytes);
    std::vector<float> buffer(count);
    for (int i = 0; i < options.warmup; ++i) {
      std::fill(buffer.begin(), buffer.end(), mine);
      comm.all_reduce(buffer.data(), count, ReduceElement::kFloat32, ReduceOp::kSum);
    }
    for (size_t i = 0; i < count; ++i) {
      if (buffer[i] != want) {
        throw RuntimeFailure(comm.who() + ": all_reduce of " + std::to_string(bytes) +
                             " bytes: element " + std::to_string(i) + " is " +
                             std::to_string(buffer[i]) + ", expected " + std::to_string(want));
      }
    }
    double us = local_time_us(comm, options, buffer.data(), bytes, true);
    comm.all_reduce(&us, 1, ReduceElement::kFloat64, ReduceOp::kMax);  // host memory: MPI, self
    log.rows.push_back(row_of(bytes, us));
  }
  return log;
}

NcclTestsLog benchmark_all_reduce_in(Communicator& comm, const BenchmarkOptions& options,
                                     void* buffer, int64_t buffer_bytes, int64_t nodes,
                                     int64_t ranks_per_node, std::string origin) {
  NcclTestsLog log = empty_log(comm, nodes, ranks_per_node, std::move(origin));
  for (const int64_t bytes : options.sizes) {
    SP_CHECK(bytes <= buffer_bytes, "benchmark size ", bytes, " bytes, expected at most the ",
             buffer_bytes, "-byte buffer");
    for (int i = 0; i < options.warmup; ++i) {
      comm.all_reduce(buffer, checked_count(bytes), ReduceElement::kFloat32, ReduceOp::kSum);
    }
    // The closing barrier stays out of the window: on NCCL it allocates and synchronizes.
    log.rows.push_back(row_of(bytes, local_time_us(comm, options, buffer, bytes, false)));
  }
  return log;
}

}  // namespace shardplan::collectives
