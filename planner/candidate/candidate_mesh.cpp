#include "planner/candidate/candidate_mesh.h"

#include <optional>
#include <string>
#include <utility>

#include "base/checked.h"
#include "base/error.h"

namespace shardplan::planner {

CandidateMesh place_candidate(const collectives::Cluster& cluster, const ParallelConfig& c,
                              std::span<const int64_t> dim_order) {
  SP_CHECK(c.ep >= 1 && c.dp % c.ep == 0, "--ep ", c.ep, " does not divide --dp ", c.dp,
           ", expected expert parallelism within data parallelism");
  std::vector<int64_t> shape = mesh_shape_vector(c);
  const std::optional<int64_t> world = checked_product(shape);
  SP_CHECK(world.has_value(), world_product_text(c),
           " overflows int64, expected a world of at most 2^63-1 ranks");
  CandidateMesh out;
  out.placement = collectives::place_evenly(cluster, *world);
  // Mesh position r holds launch rank order[r]: the dims in dim_order, the last fastest.
  const std::vector<int64_t> order = collectives::rank_order_by_dims(shape, dim_order);
  out.devices.resize(order.size());
  for (size_t r = 0; r < order.size(); ++r) out.devices[r] = out.placement.device_of(order[r]);
  const collectives::Topology topo(collectives::cluster_for(cluster, out.placement));
  out.links = collectives::mesh_dim_links(topo, shape, out.devices);
  out.mesh = mesh::DeviceMesh::from_ranks(std::move(shape), order, mesh_names());
  return out;
}

}  // namespace shardplan::planner
