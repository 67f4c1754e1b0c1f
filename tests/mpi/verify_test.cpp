// `materialize --verify` under mpirun on 1, 2, 4 and 8 ranks (planner/materialize/verify.h): over
// the data wire (the MPI communicators moving the shards' own host memory, the same code the NCCL
// communicators run over device memory) and over host copies (no data communicators), a sound
// materialization passes every check, and one flipped byte on the last rank is caught by the
// coverage checksum and by the gather, at that element.
#include "planner/materialize/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/shard_memory.h"
#include "planner/materialize/shards.h"
#include "tests/mpi/mpi_test_support.h"
#include "tests/planner/materialize/tiny_llama.h"

namespace shardplan::planner {
namespace {

using ::shardplan::testing::g_mpi;

bool any_message_has(const VerifyReport& v, const std::string& text) {
  return std::any_of(v.messages.begin(), v.messages.end(),
                     [&](const std::string& m) { return m.find(text) != std::string::npos; });
}

TEST(VerifyOverMpi, BothWiresPassAndCatchAFlippedByteWhereItIs) {
  const auto world = collectives::mpi_world(*g_mpi);
  const int64_t n = world->size();
  // TP 2 (vocabulary rows and head columns split, norms replicated) and ZeRO-3 over the rest.
  testing::PinnedPlan pin;
  pin.tp = n >= 2 ? 2 : 1;
  pin.dp = n / pin.tp;
  pin.zero = pin.dp > 1 ? 3 : 0;
  const MaterialLayout l(testing::pinned_plan(testing::tiny_llama(), "tiny-llama", pin));
  collectives::MeshCommunicators comms = collectives::mpi_mesh_communicators(*g_mpi, l.mesh());
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  RankShards s = allocate_shards(l, world->rank(), *host);
  InitSource init(l);
  init_shards(l, s, init);
  const auto params = static_cast<int64_t>(l.parameters().size());
  for (const bool data_wire : {true, false}) {
    const VerifyReport v = verify_shards(l, s, init, comms, data_wire ? &comms : nullptr);
    EXPECT_EQ(v.failures, 0) << "data wire " << data_wire << ": "
                             << (v.messages.empty() ? "" : v.messages[0]);
    EXPECT_EQ(v.covered, params);
    EXPECT_EQ(v.gathered, params);
  }

  // The last rank's first part that counts in the sums (its shard leader), element 0 of it: every
  // rank works out which parameter and global element that is from the layout alone.
  const std::vector<LocalParameter> last = l.rank_parameters(n - 1);
  const auto it = std::find_if(last.begin(), last.end(), [](const LocalParameter& p) {
    return p.shard_leader && p.numel > 0;
  });
  ASSERT_NE(it, last.end());  // the same on every rank: no rank leaves alone
  const MaterialParameter& m = l.parameters()[it->index];
  const int64_t global = global_index_of(m, *it, 0);
  if (world->rank() == n - 1) {
    s.data[static_cast<size_t>(it - last.begin())][0] ^= std::byte{1};
  }
  for (const bool data_wire : {true, false}) {
    const VerifyReport v = verify_shards(l, s, init, comms, data_wire ? &comms : nullptr);
    EXPECT_GE(v.failures, 2) << "data wire " << data_wire;
    if (world->rank() == 0) {
      EXPECT_TRUE(any_message_has(v, "'" + m.plan->name +
                                         "' gathered from its shards differs "
                                         "from the unsharded init at element " +
                                         std::to_string(global)))
          << "data wire " << data_wire << ": " << (v.messages.empty() ? "" : v.messages[0]);
      EXPECT_TRUE(any_message_has(v, "'" + m.plan->name + "': the shards hold"))
          << "data wire " << data_wire;
    }
  }
}

}  // namespace
}  // namespace shardplan::planner
