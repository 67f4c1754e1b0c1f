#include "planner/materialize/rehearsal.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/error.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {
namespace {

// The dims a collective labelled with this dim may span (Note [Rehearsal]).
std::vector<size_t> family_of(size_t dim) {
  if (dim == static_cast<size_t>(kDpDim)) return {kDpDim, kEpDim, kCpDim};
  if (dim == static_cast<size_t>(kEpDim)) return {kEpDim, kCpDim, kTpDim};
  return {dim};
}

double elapsed_s(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int64_t rehearsal_buffer_bytes(const BillCollective& c) {
  // group_size is at most the plan's ranks (read_plan_file bounds it), bytes the device memory.
  return std::max<int64_t>(c.bytes, 4 * std::max<int64_t>(c.group_size, 1));
}

namespace {

// One call of `c` on `group` (Note [Rehearsal]); `call` numbers the calls for send_recv's
// direction.
void run_call(const BillCollective& c, collectives::Communicator& group, std::byte* in,
              std::byte* out, int64_t call) {
  using collectives::CollectiveKind;
  const int64_t n = group.size();
  const auto bytes = static_cast<size_t>(c.bytes);
  const size_t floats = std::max<size_t>(1, bytes / 4);
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      group.all_reduce(in, floats, collectives::ReduceElement::kFloat32,
                       collectives::ReduceOp::kSum);
      return;
    case CollectiveKind::kAllGather:
      group.all_gather(in, out, std::max<size_t>(1, bytes / static_cast<size_t>(n)));
      return;
    case CollectiveKind::kReduceScatter:
      group.reduce_scatter(in, out, std::max<size_t>(1, floats / static_cast<size_t>(n)),
                           collectives::ReduceElement::kFloat32, collectives::ReduceOp::kSum);
      return;
    case CollectiveKind::kAllToAll:
      group.all_to_all(in, out, std::max<size_t>(1, bytes / static_cast<size_t>(n)));
      return;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      group.broadcast(in, std::max<size_t>(1, bytes), 0);
      return;
    case CollectiveKind::kSendRecv: {
      const int64_t r = group.rank();
      const bool down = call % 2 == 0;
      const int64_t from = down ? r - 1 : r + 1, to = down ? r + 1 : r - 1;
      if (from >= 0 && from < n) group.recv(out, bytes, from, 0);
      if (to >= 0 && to < n) group.send(in, bytes, to, 0);
      return;
    }
  }
}

}  // namespace

std::vector<size_t> group_dims(const std::vector<int64_t>& shape, const BillCollective& c) {
  const std::vector<std::string>& names = mesh_names();
  const auto it = std::find(names.begin(), names.end(), c.mesh_dim);
  SP_CHECK(it != names.end(), "plan.json: collective '", c.what, "' is on mesh dim '", c.mesh_dim,
           "', expected one of the plan's mesh dims");
  const auto self = static_cast<size_t>(it - names.begin());
  if (shape[self] == c.group_size) return {self};
  // The other dims of the family with more than one rank, tried in subsets of growing size.
  std::vector<size_t> others;
  for (const size_t d : family_of(self)) {
    if (d != self && shape[d] > 1) others.push_back(d);
  }
  std::vector<size_t> best;
  size_t best_count = others.size() + 2;
  for (uint32_t mask = 0; mask < (1u << others.size()); ++mask) {
    std::vector<size_t> dims{self};
    int64_t size = shape[self];
    for (size_t i = 0; i < others.size(); ++i) {
      if ((mask >> i) & 1u) {
        dims.push_back(others[i]);
        size *= shape[others[i]];
      }
    }
    if (size == c.group_size && dims.size() < best_count) {
      std::sort(dims.begin(), dims.end());
      best = dims;
      best_count = dims.size();
    }
  }
  SP_CHECK(!best.empty(), "plan.json: collective '", c.what, "' spans ", c.group_size,
           " ranks on '", c.mesh_dim, "', expected a group of the plan's mesh dims of that size");
  return best;
}

std::vector<std::vector<size_t>> rehearsal_groups(const PlanFile& plan) {
  std::vector<std::vector<size_t>> groups;
  const std::vector<int64_t> shape = plan.mesh_shape();
  for (const BillCollective& c : plan.collectives) {
    std::vector<size_t> dims = group_dims(shape, c);
    if (std::find(groups.begin(), groups.end(), dims) == groups.end()) {
      groups.push_back(std::move(dims));
    }
  }
  return groups;
}

Rehearsal rehearse(const PlanFile& plan, collectives::Communicator& world,
                   const std::vector<std::unique_ptr<collectives::Communicator>>& groups,
                   ShardMemory& memory, const RehearsalOptions& options) {
  SP_CHECK(!plan.collectives.empty(),
           "plan.json has no collectives to rehearse (prediction.collectives): a plan written "
           "before rehearse, or one whose step communicates nothing; expected a plan from "
           "'shardplan plan --out' with more than one rank");
  const std::vector<std::vector<size_t>> dims_of = rehearsal_groups(plan);
  SP_ASSERT(dims_of.size() == groups.size(), "one communicator per rehearsal group");
  const std::vector<int64_t> shape = plan.mesh_shape();
  Rehearsal r;
  for (const BillCollective& c : plan.collectives) {
    RehearsedCollective x;
    x.planned = c;
    x.dims = group_dims(shape, c);
    const auto g =
        static_cast<size_t>(std::find(dims_of.begin(), dims_of.end(), x.dims) - dims_of.begin());
    collectives::Communicator& group = *groups[g];
    SP_ASSERT(group.size() == c.group_size, "group of '", c.what, "' has ", group.size(),
              " ranks, the bill ", c.group_size);
    const ZeroedBuffer in(memory, rehearsal_buffer_bytes(c));
    const ZeroedBuffer out(memory, rehearsal_buffer_bytes(c));
    for (int w = 0; w < options.warmup; ++w) run_call(c, group, in.data(), out.data(), w);
    x.calls_run = std::max<int64_t>(
        1, options.max_calls > 0 ? std::min(c.calls, options.max_calls) : c.calls);
    group.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < x.calls_run; ++i) run_call(c, group, in.data(), out.data(), i);
    double per_call = elapsed_s(t0) / static_cast<double>(x.calls_run);
    world.all_reduce(&per_call, 1, collectives::ReduceElement::kFloat64,
                     collectives::ReduceOp::kMax);
    x.per_call_s = per_call;
    x.measured_s = per_call * static_cast<double>(c.calls);
    x.measured_exposed_s = c.seconds > 0 ? x.measured_s * (c.exposed_s / c.seconds) : 0;
    r.predicted_s += c.seconds;
    r.measured_s += x.measured_s;
    r.predicted_exposed_s += c.exposed_s;
    r.measured_exposed_s += x.measured_exposed_s;
    r.collectives.push_back(std::move(x));
  }
  return r;
}

}  // namespace shardplan::planner
