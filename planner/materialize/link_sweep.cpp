#include "planner/materialize/link_sweep.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/json_fields.h"
#include "base/limits.h"
#include "base/strict_json.h"
#include "collectives/collective_benchmark.h"
#include "collectives/collective_call.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/materialize/rehearsal.h"

namespace shardplan::planner {
namespace {

constexpr int64_t kMinSweepBytes = int64_t{1} << 20;
constexpr int64_t kMaxSweepBytes = int64_t{64} << 20;

// The world ranks of the group over `dims` that holds rank 0: every coordinate off `dims` is 0
// (row-major mesh order).
std::vector<int64_t> group_of_rank0(const std::vector<int64_t>& shape,
                                    const std::vector<size_t>& dims) {
  std::vector<int64_t> ranks = {0};
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      std::vector<int64_t> grown;
      for (int64_t i = 0; i < shape[d]; ++i) {
        for (const int64_t r : ranks) grown.push_back(r + i * stride);
      }
      ranks = std::move(grown);
    }
    stride *= shape[d];
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::string dims_text(const std::vector<size_t>& dims) {
  std::string out;
  for (const size_t d : dims) out += (out.empty() ? "" : "x") + mesh_names()[d];
  return out;
}

// The largest bill size on a group, clamped to the sweep's range, as a multiple of 4.
int64_t sweep_cap(const PlanFile& plan, const std::vector<size_t>& dims) {
  int64_t largest = 0;
  const std::vector<int64_t> shape = plan.mesh_shape();
  for (const BillCollective& c : plan.collectives) {
    if (group_dims(shape, c) == dims) largest = std::max(largest, c.bytes);
  }
  return std::clamp(largest, kMinSweepBytes, kMaxSweepBytes) / 4 * 4;
}

}  // namespace

std::vector<LinkSweep> link_sweep_groups(const PlanFile& plan, int64_t ranks_per_node) {
  SP_CHECK(ranks_per_node >= 1, "ranks per node ", ranks_per_node, ", expected at least 1");
  const std::vector<int64_t> shape = plan.mesh_shape();
  std::optional<LinkSweep> intra, inter;
  for (const std::vector<size_t>& dims : rehearsal_groups(plan)) {
    const std::vector<int64_t> ranks = group_of_rank0(shape, dims);
    std::map<int64_t, int64_t> per_node;
    for (const int64_t r : ranks) ++per_node[r / ranks_per_node];
    int64_t most = 0, fewest = ranks_per_node + 1;
    for (const auto& [node, n] : per_node) {
      most = std::max(most, n);
      fewest = std::min(fewest, n);
    }
    LinkSweep s;
    s.dims = dims;
    s.log.kind = collectives::CollectiveKind::kAllReduce;
    s.log.ranks = static_cast<int64_t>(ranks.size());
    s.log.nodes = static_cast<int64_t>(per_node.size());
    s.log.ranks_per_node = most;
    s.log.same_ranks_per_node = most == fewest;
    if (s.log.ranks < 2) continue;
    if (s.log.nodes == 1) {
      s.intra = true;
      if (!intra || s.log.ranks > intra->log.ranks) intra = s;
    } else if (s.log.same_ranks_per_node) {
      s.intra = false;
      if (!inter || s.log.ranks_per_node < inter->log.ranks_per_node ||
          (s.log.ranks_per_node == inter->log.ranks_per_node && s.log.nodes > inter->log.nodes)) {
        inter = s;
      }
    }
  }
  std::vector<LinkSweep> out;
  for (std::optional<LinkSweep>* s : {&intra, &inter}) {
    if (!*s) continue;
    (*s)->log.origin = "rehearsal all_reduce on " + dims_text((*s)->dims) + " (" +
                       std::to_string((*s)->log.ranks) + " ranks on " +
                       std::to_string((*s)->log.nodes) +
                       ((*s)->log.nodes == 1 ? " node)" : " nodes)");
    out.push_back(**s);
  }
  return out;
}

std::vector<LinkSweep> sweep_links(
    const PlanFile& plan, collectives::Communicator& world,
    const std::vector<std::unique_ptr<collectives::Communicator>>& groups, ShardMemory& memory,
    int64_t ranks_per_node) {
  std::vector<LinkSweep> sweeps = link_sweep_groups(plan, ranks_per_node);
  const std::vector<std::vector<size_t>> all = rehearsal_groups(plan);
  SP_ASSERT(all.size() == groups.size(), "one communicator per rehearsal group");
  for (LinkSweep& s : sweeps) {
    // Every rank knows the sizes (from the plan), so every rank joins the one all-reduce of the
    // times below; ranks outside rank 0's group give 0.
    collectives::BenchmarkOptions bench;
    const int64_t cap = sweep_cap(plan, s.dims);
    std::erase_if(bench.sizes, [&](int64_t b) { return b > cap; });
    if (bench.sizes.back() != cap) bench.sizes.push_back(cap);
    std::vector<double> us(bench.sizes.size(), 0.0);
    const std::vector<int64_t> members = group_of_rank0(plan.mesh_shape(), s.dims);
    if (std::binary_search(members.begin(), members.end(), world.rank())) {
      const auto g = static_cast<size_t>(std::find(all.begin(), all.end(), s.dims) - all.begin());
      const ZeroedBuffer buffer(memory, cap);
      const collectives::NcclTestsLog mine = collectives::benchmark_all_reduce_in(
          *groups[g], bench, buffer.data(), cap, s.log.nodes, s.log.ranks_per_node, s.log.origin);
      for (size_t i = 0; i < us.size(); ++i) us[i] = mine.rows[i].out_of_place_us;
    }
    // The slowest rank's time per size, over the world (host memory: MPI's, whatever moved the
    // buffers).
    world.all_reduce(us.data(), us.size(), collectives::ReduceElement::kFloat64,
                     collectives::ReduceOp::kMax);
    for (size_t i = 0; i < us.size(); ++i) {
      collectives::NcclTestsRow row;
      row.line = static_cast<int64_t>(i) + 1;
      row.bytes = bench.sizes[i];
      row.count = bench.sizes[i] / 4;
      row.out_of_place_us = us[i];
      s.log.rows.push_back(row);
    }
  }
  return sweeps;
}

std::vector<collectives::CalibrationInput> rehearsal_link_inputs(const nlohmann::json& doc,
                                                                 const std::string& origin,
                                                                 collectives::Library library) {
  JsonFields d(doc, origin);
  if (d.str("format") != "shardplan.rehearsal") {
    d.fail("format",
           "expected 'shardplan.rehearsal' (a file written by 'shardplan rehearse --out')");
  }
  const std::string backend = d.str("backend");
  const std::string want = library == collectives::Library::kMpi ? "mpi" : "nccl";
  if (backend != want) {
    d.fail("backend", "the rehearsal ran through '" + backend + "', expected '" + want +
                          "', the library the cluster file prices (" +
                          std::string(collectives::to_string(library)) + ")");
  }
  const nlohmann::json& links = d.array("links");
  std::vector<collectives::CalibrationInput> out;
  for (size_t i = 0; i < links.size(); ++i) {
    JsonFields l(links[i], origin, "links[" + std::to_string(i) + "]");
    collectives::CalibrationInput in;
    const std::string link = l.str("link");
    if (link != "intra" && link != "inter")
      l.fail("link", "got '" + link + "', expected intra or inter");
    in.link =
        link == "intra" ? collectives::CalibratedLink::kIntra : collectives::CalibratedLink::kInter;
    // rehearse sweeps one group inside a node and one across nodes (Note [Link sweeps]): a
    // second sweep of one link would be merged into its fit unseen.
    for (const collectives::CalibrationInput& earlier : out) {
      if (earlier.link == in.link) {
        l.fail("link", "a second " + link + " sweep, expected one per link (rehearse --out)");
      }
    }
    const std::vector<std::string> dims = l.strings("group_dims");
    if (dims.empty()) l.fail("group_dims", "expected the mesh dims of the swept group");
    const std::vector<std::string>& names = mesh_names();
    std::string dims_text;
    for (const std::string& x : dims) {
      if (std::find(names.begin(), names.end(), x) == names.end()) {
        std::string all;
        for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
        l.fail("group_dims",
               "'" + printable(x, 20) + "' is not a mesh dim, expected some of " + all);
      }
      dims_text += (dims_text.empty() ? "" : "x") + x;
    }
    in.log.origin = origin + ": " + link + " sweep on " + dims_text;
    in.log.kind = l.parsed("kind", [](const std::string& k) {
      const collectives::CollectiveKind kind = collectives::parse_collective_kind(k);
      SP_CHECK(kind == collectives::CollectiveKind::kAllReduce, "got '", k,
               "', expected all_reduce (what rehearse sweeps)");
      return kind;
    });
    in.log.ranks = l.integer("ranks", 2, kMaxRanks);
    in.log.nodes = l.integer("nodes", 1, in.log.ranks);
    in.log.ranks_per_node = l.integer("ranks_per_node", 1, in.log.ranks);
    in.log.same_ranks_per_node = in.log.ranks_per_node * in.log.nodes == in.log.ranks;
    const nlohmann::json& rows = l.array("rows");
    for (size_t k = 0; k < rows.size(); ++k) {
      JsonFields r(rows[k], origin,
                   "links[" + std::to_string(i) + "].rows[" + std::to_string(k) + "]");
      collectives::NcclTestsRow row;
      row.line = static_cast<int64_t>(k) + 1;
      constexpr int64_t kMaxBytes = int64_t{1} << 50;
      row.bytes = r.integer("bytes", 4, kMaxBytes);
      if (row.bytes % 4 != 0) r.fail("bytes", "expected a multiple of 4 (float32 elements)");
      row.count = row.bytes / 4;
      const double t = r.number("time_s");
      // A nanosecond is below any collective's time (and keeps the fit's 1 / t^2 weights finite).
      if (!(t >= 1e-9 && t < 1e6)) r.fail("time_s", "expected a time in seconds, 1e-9 to 1e6");
      row.out_of_place_us = t * 1e6;
      r.done();
      in.log.rows.push_back(row);
    }
    if (in.log.rows.size() < 2)
      l.fail("rows", "expected at least two sizes to fit a latency and a bandwidth");
    l.done();
    out.push_back(std::move(in));
  }
  if (out.empty()) {
    d.fail("links",
           "no link sweeps (the job had no group of two ranks or more, or ran with "
           "--no-links), expected at least one");
  }
  return out;
}

}  // namespace shardplan::planner
