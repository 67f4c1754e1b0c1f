#include "collectives/collective_benchmark.h"

#include <chrono>
#include <vector>

#include "base/error.h"

namespace shardplan::collectives {

NcclTestsLog benchmark_all_reduce(Communicator& comm, const BenchmarkOptions& options,
                                  int64_t nodes, int64_t ranks_per_node, std::string origin) {
  NcclTestsLog log;
  log.origin = std::move(origin);
  log.kind = CollectiveKind::kAllReduce;
  log.ranks = comm.size();
  log.nodes = nodes;
  log.ranks_per_node = ranks_per_node;
  const float mine = static_cast<float>(comm.rank() + 1);
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  for (const int64_t bytes : options.sizes) {
    SP_CHECK(bytes > 0 && bytes % 4 == 0, "benchmark size ", bytes,
             ", expected a positive multiple of 4 bytes");
    const size_t count = static_cast<size_t>(bytes / 4);
    std::vector<float> buffer(count);
    const int iterations =
        bytes >= (16 << 20) ? std::max(1, options.iterations / 2) : options.iterations;
    auto run_once = [&] {
      std::fill(buffer.begin(), buffer.end(), mine);
      comm.all_reduce(buffer.data(), count, ReduceElement::kFloat32, ReduceOp::kSum);
    };
    for (int i = 0; i < options.warmup; ++i) run_once();
    for (size_t i = 0; i < count; ++i) {
      if (buffer[i] != want) {
        throw RuntimeFailure(comm.who() + ": all_reduce of " + std::to_string(bytes) +
                             " bytes: element " + std::to_string(i) + " is " +
                             std::to_string(buffer[i]) + ", expected " + std::to_string(want));
      }
    }
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    // In place and without a refill, as nccl-tests times it: the sums grow (to infinity for large
    // groups), which costs float additions nothing; the results were checked above.
    for (int i = 0; i < iterations; ++i) {
      comm.all_reduce(buffer.data(), count, ReduceElement::kFloat32, ReduceOp::kSum);
    }
    comm.barrier();
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iterations;
    comm.all_reduce(&us, 1, ReduceElement::kFloat64, ReduceOp::kMax);
    NcclTestsRow row;
    row.bytes = bytes;
    row.count = static_cast<int64_t>(count);
    row.out_of_place_us = us;
    log.rows.push_back(row);
  }
  return log;
}

}  // namespace shardplan::collectives
