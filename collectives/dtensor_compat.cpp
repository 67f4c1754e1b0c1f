#include "collectives/dtensor_compat.h"

#include "base/error.h"

namespace shardplan::collectives::dtensor {

std::vector<collectives::GroupLinks> dtensor_mesh_links(std::span<const int64_t> shape,
                                                 int64_t devices_per_host) {
  SP_CHECK(devices_per_host >= 1, "DTensor topology: devices per host ", devices_per_host,
           ", expected >= 1");
  std::vector<collectives::GroupLinks> dims(shape.size());
  int64_t product = 1;
  bool inter = false;
  // From the last dim to the first (MeshTopoInfo.build_from_mesh): once the running product of
  // sizes exceeds a host, this dim and all outer ones are inter-host.
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t n = shape[k];
    SP_CHECK(n >= 1 && product <= (int64_t{1} << 40) / n, "DTensor topology: mesh dim ", k,
             " has size ", n, ", expected >= 1 (and a mesh below 2^40 ranks)");
    product *= n;
    inter = inter || product > devices_per_host;
    collectives::GroupLinks& g = dims[k];
    g.library = collectives::Library::kDTensorCompat;
    g.group_size = n;
    if (inter) {
      // Every hop is an inter-host hop: one rank per "node" in our terms.
      g.link_class = collectives::LinkClass::kNetwork;
      g.nodes = n;
      g.ranks_per_node = 1;
      g.inter_bandwidth_gbps = gibps_to_gbps(kBandwidthGiBps * kInterBandwidthFactor);
      g.nic_bandwidth_gbps = g.inter_bandwidth_gbps;
      g.inter_latency_us = kInterLatencyUs;
      g.groups_sharing_nics = 1;
    } else {
      g.link_class = collectives::LinkClass::kNvlink;
      g.nodes = 1;
      g.ranks_per_node = n;
      g.intra_bandwidth_gbps = gibps_to_gbps(kBandwidthGiBps);
      g.intra_latency_us = kIntraLatencyUs;
    }
  }
  return dims;
}

}  // namespace shardplan::collectives::dtensor
