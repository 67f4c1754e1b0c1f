// Sharded init under mpirun on 1, 2, 4 and 8 ranks: each rank fills only its own shard of a
// parameter (planner/materialize/layout.h's boxes and kernels/ fills), for placements on 1-d and
// 2-d meshes with uneven and empty shards, every element type and fill; each shard must equal the
// slice of the whole tensor filled at once, and the shards' checksums, one copy of each, must add
// up over the job to the whole tensor's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/checksum.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/shards.h"
#include "tensor/init.h"
#include "tests/mpi/mpi_test_support.h"

namespace shardplan::planner {
namespace {

using ::shardplan::testing::g_mpi;

void check_layout(collectives::Communicator& world, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& mesh_shape, const char* placements,
                  tensor::DType dtype, const kernels::FillSpec& fill) {
  PlanParameter plan{"w", shape, dtype, {}, "", 0};
  MaterialParameter m;
  m.plan = &plan;
  m.type = tensor::kernel_element_type(dtype);
  m.fill = fill;
  m.spec = mesh::make_shard_spec(shape, dtype, mesh::DeviceMesh(mesh_shape),
                                 mesh::parse_placements(placements));
  m.numel = 1;
  for (int64_t s : shape) m.numel *= s;
  const size_t elem = kernels::element_size(m.type);
  const mesh::MeshCoord c = *m.spec.mesh.coordinate_of(world.rank());
  const std::vector<int64_t> coord(c.begin(), c.end());
  const LocalParameter part = local_part_of(m, coord);
  std::vector<std::byte> local(static_cast<size_t>(part.numel) * elem);
  uint64_t sum = 0;
  for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t offset) {
    kernels::fill_cpu(local.data() + offset * elem, m.type, region, fill);
    sum += kernels::checksum_cpu(local.data() + offset * elem, m.type, region);
  });
  // The whole tensor, filled at once on every rank, for the slice comparison and its checksum.
  std::vector<std::byte> whole(static_cast<size_t>(m.numel) * elem);
  const int64_t one = 1;
  const kernels::FillRegion flat{1, &m.numel, &one, &one, 0};
  kernels::fill_cpu(whole.data(), m.type, flat, fill);
  const uint64_t whole_sum = kernels::checksum_cpu(whole.data(), m.type, flat);
  // Counted, not ASSERTed: a rank leaving early would leave the others in the all-reduce below.
  int64_t wrong = 0;
  for (int64_t i = 0; i < part.numel; ++i) {
    const int64_t g = global_index_of(m, part, i);
    wrong += std::memcmp(local.data() + i * elem, whole.data() + g * elem, elem) != 0 ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0) << placements << ": elements differing from the whole tensor's slice";
  bool leader = true;  // one copy of each distinct shard: coordinate 0 on replicate dims
  for (size_t d = 0; d < coord.size(); ++d) {
    if (m.spec.placements[d].is_replicate() && coord[d] != 0) leader = false;
  }
  uint64_t total[2] = {leader ? sum : 0, leader ? static_cast<uint64_t>(part.numel) : 0};
  world.all_reduce(total, 2, collectives::ReduceElement::kUInt64, collectives::ReduceOp::kSum);
  EXPECT_EQ(total[0], whole_sum) << placements;
  EXPECT_EQ(total[1], static_cast<uint64_t>(m.numel)) << placements;
}

TEST(ShardedInit, EveryPlacementDtypeAndFillOverMpi) {
  const auto world = collectives::mpi_world(*g_mpi);
  const int64_t n = world->size();
  const std::vector<int64_t> two_d =
      n >= 4 ? std::vector<int64_t>{2, n / 2} : std::vector<int64_t>{n, 1};
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int64_t> mesh;
    const char* placements;
  };
  // 7 rows and 5 columns split over up to 8 ranks: uneven, and empty shards from 6 ranks on.
  const std::vector<Case> cases = {
      {{7, 5}, {n}, "S0"},         {{7, 5}, {n}, "S1"},      {{7, 5}, {n}, "R"},
      {{2 * n + 1, 3}, {n}, "S0"}, {{7, 5}, two_d, "S0,S1"}, {{7, 5}, two_d, "S1,S0"},
      {{7, 5}, two_d, "S0,S0"},    {{7, 5}, two_d, "R,S1"},  {{12, 6}, two_d, "SS0:3,S0"},
  };
  const tensor::DType dtypes[] = {tensor::DType::kFloat32,      tensor::DType::kBFloat16,
                                  tensor::DType::kFloat16,      tensor::DType::kFloat64,
                                  tensor::DType::kFloat8E4M3FN, tensor::DType::kComplex64,
                                  tensor::DType::kInt32,        tensor::DType::kBool};
  const kernels::FillKind fills[] = {
      kernels::FillKind::kConstant, kernels::FillKind::kUniform, kernels::FillKind::kNormal,
      kernels::FillKind::kTruncatedNormal, kernels::FillKind::kLogIndex};
  for (const tensor::DType dtype : dtypes) {
    const kernels::ElementType type = tensor::kernel_element_type(dtype);
    for (const kernels::FillKind kind : fills) {
      kernels::FillSpec fill{kind, kernels::is_floating(type) ? 0.5 : 0.0, 2.0, 5, 11};
      if (kind == kernels::FillKind::kTruncatedNormal) {
        fill.low = -1;
        fill.high = 2;
      }
      // log(1 + global index mod 2): b is the period, restarting the index within a row.
      if (kind == kernels::FillKind::kLogIndex) fill.a = 1;
      if (kernels::check_fill_spec(type, fill)) continue;  // the same on every rank
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.placements) + " " + std::string(tensor::dtype_name(dtype)));
        check_layout(*world, c.shape, c.mesh, c.placements, dtype, fill);
      }
    }
  }
}

}  // namespace
}  // namespace shardplan::planner
