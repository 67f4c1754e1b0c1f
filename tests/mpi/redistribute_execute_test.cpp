// Redistribution executed over MPI (collectives/redistribute_execute.h) on 1, 2, 4 and 8 ranks:
// for every pair of placements from {S0, S1, R, P} on a 1-d and a 2-d mesh (and strided FSDP x TP
// layouts), on tensors whose shards are uneven or empty, every rank ends with exactly its shard
// of the target, element for element; and the collectives issued are the plan's, in count and in
// padded bytes per rank.
#include "collectives/redistribute_execute.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/mpi/mpi_test_support.h"

namespace shardplan::collectives {
namespace {

using ::shardplan::testing::g_mpi;

// Global element g holds the value g. A layout with Partial dims holds shares of it: of the N
// ranks spanning the source's Partial dims, the one at coordinate 0 on all of them holds g - (N -
// 1) and the others 1 each, so they add up to g (exact in float32 at these sizes). After a
// redistribution that reduces some of those dims (P -> R or S) and keeps others (P -> P), a rank
// holds the sum of the shares over the reduced dims: (g - (N - 1)) + (M - 1) when its coordinates
// on the kept dims are 0 (M ranks span the reduced dims), else M.
std::vector<float> local_values(const mesh::ShardSpec& spec, std::span<const int64_t> coord,
                                const mesh::ShardSpec& source) {
  const std::vector<std::vector<mesh::IndexRange>> ranges = mesh::global_index_ranges(spec, coord);
  const DimVector shape = mesh::local_shape(spec, coord);
  int64_t n = 1;  // ranks spanning the source's Partial dims
  int64_t m = 1;  // of those, the ranks spanning the dims this layout has reduced
  bool kept_at_zero = true;
  for (size_t d = 0; d < source.placements.size(); ++d) {
    if (!source.placements[d].is_partial()) continue;
    n *= source.mesh.shape()[d];
    if (spec.placements[d].is_partial()) {
      kept_at_zero = kept_at_zero && coord[d] == 0;
    } else {
      m *= source.mesh.shape()[d];
    }
  }
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * spec.shape[d];
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  std::vector<float> out(static_cast<size_t>(numel));
  std::vector<int64_t> i(shape.size(), 0);
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t g = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t pos = i[d];
      for (const mesh::IndexRange& r : ranges[d]) {
        if (pos < r.size()) {
          g += (r.begin + pos) * strides[d];
          break;
        }
        pos -= r.size();
      }
    }
    out[static_cast<size_t>(flat)] = static_cast<float>(kept_at_zero ? g - (n - 1) + (m - 1) : m);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++i[d] < shape[d]) break;
      i[d] = 0;
    }
  }
  return out;
}

// Runs source -> target on every rank; returns false when the plan refuses the pair.
bool run_pair(const mesh::ShardSpec& source, const std::vector<mesh::Placement>& target,
              MeshCommunicators& comms, std::span<const int64_t> coord) {
  RedistributePlan plan;
  try {
    plan = plan_redistribute(source, target);
  } catch (const Error&) {
    return false;  // a refused transition (R -> P, S -> P, ...): every rank agrees
  }
  const std::string what = to_string(source) + " -> " + mesh::to_string(target);
  const std::vector<float> in = local_values(source, coord, source);
  LocalData local{std::vector<std::byte>(in.size() * sizeof(float)),
                  mesh::local_shape(source, coord)};
  if (!in.empty()) std::memcpy(local.bytes.data(), in.data(), local.bytes.size());
  const std::vector<IssuedCollective> issued = execute_redistribute(plan, coord, comms, local);

  const std::vector<float> want = local_values(plan.target, coord, source);
  EXPECT_EQ(local.shape, mesh::local_shape(plan.target, coord)) << what;
  EXPECT_EQ(local.bytes.size(), want.size() * sizeof(float)) << what;
  if (!want.empty() && local.bytes.size() == want.size() * sizeof(float)) {  // empty: no data
    EXPECT_EQ(std::memcmp(local.bytes.data(), want.data(), local.bytes.size()), 0) << what;
  }
  // The collectives: as many as the plan runs, each with the plan's padded bytes on the rank
  // where its buffer is largest.
  EXPECT_EQ(static_cast<int64_t>(issued.size()), plan.num_collectives()) << what;
  std::vector<int64_t> bytes;
  std::vector<int64_t> expected;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (!plan.steps[s].communicates()) continue;
    int64_t mine = 0;
    for (const IssuedCollective& c : issued) {
      if (c.step == s) mine = c.bytes_per_rank;
    }
    bytes.push_back(mine);
    expected.push_back(plan.steps[s].bytes_per_rank);
  }
  comms.world->all_reduce(bytes.data(), bytes.size(), ReduceElement::kInt64, ReduceOp::kMax);
  EXPECT_EQ(bytes, expected) << what;
  return true;
}

std::vector<std::string> placement_set(size_t mesh_dims) {
  const std::vector<std::string> one = {"S0", "S1", "R", "P"};
  if (mesh_dims == 1) return one;
  std::vector<std::string> out;
  for (const std::string& a : one) {
    for (const std::string& b : one) out.push_back(a + "," + b);
  }
  out.push_back("SS0:2,S0");  // FSDP over a TP-split dim (docs/semantics.md §2.5)
  out.push_back("S1,SS1:2");
  return out;
}

void all_pairs(const std::vector<int64_t>& mesh_shape, const std::vector<int64_t>& shape) {
  const mesh::DeviceMesh dm(mesh_shape);
  MeshCommunicators comms = mpi_mesh_communicators(*g_mpi, dm);
  const mesh::MeshCoord c = *dm.coordinate_of(g_mpi->world_rank());
  const std::vector<int64_t> coord(c.begin(), c.end());
  int64_t ran = 0;
  for (const std::string& from : placement_set(mesh_shape.size())) {
    const mesh::ShardSpec source =
        mesh::make_shard_spec(shape, tensor::DType::kFloat32, dm, mesh::parse_placements(from));
    for (const std::string& to : placement_set(mesh_shape.size())) {
      ran += run_pair(source, mesh::parse_placements(to), comms, coord) ? 1 : 0;
    }
  }
  EXPECT_GT(ran, 0);
}

TEST(RedistributeExecute, OneDimMeshAllPairs) {
  const int64_t n = g_mpi->world_size();
  all_pairs({n}, {7, 5});          // uneven rows and columns; empty columns from 8 ranks on
  all_pairs({n}, {n + 1, 2 * n});  // the last rank's rows uneven
}

TEST(RedistributeExecute, TwoDimMeshAllPairs) {
  const int64_t n = g_mpi->world_size();
  const std::vector<int64_t> mesh_shape =
      n >= 4 ? std::vector<int64_t>{2, n / 2} : std::vector<int64_t>{n, 1};
  all_pairs(mesh_shape, {7, 5});
  all_pairs(mesh_shape, {3, 2});  // more ranks than rows: empty shards
}

}  // namespace
}  // namespace shardplan::collectives
