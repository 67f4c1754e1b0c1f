#include "collectives/redistribute_step.h"

#include <algorithm>
#include <sstream>

#include "base/checked.h"
#include "base/enum_names.h"
#include "base/error.h"
#include "base/json_fields.h"
#include "tensor/dtype.h"

namespace shardplan::collectives {

using ::shardplan::operator<<;
using mesh::Placement;
using shardplan::DimVector;

// Note [Uneven shard padding]
// Collectives move equal-sized pieces, so uneven torch.chunk shards are padded (docs/semantics.md
// §3.1):
//  * all_gather along d: every rank pads its shard to c = ceil(n/k) (the size coordinate 0 of the
//    group holds), the gathered buffer is c*k, then narrowed to n. A strided shard pads to its
//    group's largest piece (again its first rank's) and reorders after the gather.
//  * reduce_scatter to S(d): the full tensor is cut into k pieces, each padded to c, so the input
//    is c*k along d; each rank unpads its own piece.
//  * all_to_all S(d) -> S(e): dim d padded to c_d and dim e to c_e*k before, both unpadded after.
// n is the dim's size at this mesh level: the global size after the outer levels (§3.2). Since the
// step's level is the innermost one on the dims it touches, that is the local shape with this
// level left out.

namespace {
constexpr EnumName<StepOp> kStepOpNames[] = {{"noop", StepOp::kNoop},
                                             {"local_chunk", StepOp::kLocalChunk},
                                             {"all_gather", StepOp::kAllGather},
                                             {"reduce_scatter", StepOp::kReduceScatter},
                                             {"all_reduce", StepOp::kAllReduce},
                                             {"all_to_all", StepOp::kAllToAll}};
}  // namespace

std::string_view to_string(StepOp op) { return enum_name(op, kStepOpNames); }

StepOp parse_step_op(std::string_view s) {
  return parse_enum_name(s, kStepOpNames, "redistribute op");
}

std::optional<CollectiveKind> collective_kind(StepOp op) {
  switch (op) {
    case StepOp::kAllGather:
      return CollectiveKind::kAllGather;
    case StepOp::kReduceScatter:
      return CollectiveKind::kReduceScatter;
    case StepOp::kAllReduce:
      return CollectiveKind::kAllReduce;
    case StepOp::kAllToAll:
      return CollectiveKind::kAllToAll;
    case StepOp::kNoop:
    case StepOp::kLocalChunk:
      return std::nullopt;
  }
  SP_ASSERT(false, "bad StepOp");
}

std::ostream& operator<<(std::ostream& os, const RedistributeStep& s) {
  return os << "mesh dim " << s.mesh_dim << ' ' << to_string(s.src) << "->" << to_string(s.dst)
            << ' ' << to_string(s.op) << "(n=" << s.group_size << ", " << s.bytes_per_rank << " B) "
            << s.local_shape_before << "->" << s.local_shape_after;
}

nlohmann::ordered_json to_json(const RedistributeStep& s) {
  nlohmann::ordered_json j;
  j["mesh_dim"] = s.mesh_dim;
  j["op"] = to_string(s.op);
  j["from"] = to_string(s.src);
  j["to"] = to_string(s.dst);
  j["group_size"] = s.group_size;
  j["bytes_per_rank"] = s.bytes_per_rank;
  j["local_shape_before"] = s.local_shape_before.vec();
  j["local_shape_after"] = s.local_shape_after.vec();
  return j;
}

RedistributeStep redistribute_step_from_json(const nlohmann::json& j, std::string_view origin,
                                             std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  RedistributeStep s;
  s.mesh_dim = f.integer("mesh_dim", 0);
  s.op = f.parsed("op", parse_step_op);
  s.src = mesh::placement_from_json(f.get("from"), origin, f.join("from"));
  s.dst = mesh::placement_from_json(f.get("to"), origin, f.join("to"));
  s.group_size = f.integer("group_size", 1);
  s.bytes_per_rank = f.integer("bytes_per_rank", 0);
  s.local_shape_before = f.integers("local_shape_before", 0);
  s.local_shape_after = f.integers("local_shape_after", 0);
  // What `shardplan redistribute --json` adds to a step (--mesh-names, --cluster): checked, unused.
  if (f.has("mesh_dim_name")) (void)f.str("mesh_dim_name");
  if (f.has("time_s") && f.number("time_s") < 0) {
    f.fail("time_s", "expected a number >= 0, got " + json_excerpt(f.get("time_s")));
  }
  f.done();
  return s;
}

std::optional<std::string> refused_transition(const Placement& src, const Placement& dst) {
  if (!dst.is_partial() || src == dst) return std::nullopt;
  const std::string head = "cannot redistribute " + to_string(src) + " -> " + to_string(dst) + ": ";
  if (src.is_any_shard()) {
    return head +
           "a shard holds whole values of part of the tensor, not summands of a reduction "
           "(Shard -> Partial is refused)";
  }
  if (src.is_partial()) {
    return head + "the pending " + std::string(mesh::reduce_op_name(src.reduce_op())) +
           " reduction is not a " + std::string(mesh::reduce_op_name(dst.reduce_op())) +
           " reduction (Partial(a) -> Partial(b) is refused)";
  }
  return head +
         "a target Partial is only accepted where the source already is that Partial "
         "(Replicate -> Partial is refused, as DTensor.redistribute does)";
}

namespace {

// Coordinate 0's size of a dim of n elements after one level `p` over k ranks (docs/semantics.md
// §2.2, §2.5): the largest piece of that level.
int64_t first_piece(int64_t n, const Placement& p, int64_t k) {
  if (p.is_shard()) return mesh::chunk_piece(n, k, 0).size;
  int64_t size = 0;
  for (int64_t j = 0; j < p.split_factor(); ++j) {
    size += mesh::chunk_piece(mesh::chunk_piece(n, p.split_factor(), j).size, k, 0).size;
  }
  return size;
}

// Coordinate 0's local shape with every level applied except mesh dim `skip` (size-1 dims split
// nothing).
DimVector shape_without_level(std::span<const int64_t> shape, std::span<const int64_t> mesh_shape,
                              std::span<const Placement> placements, int64_t skip) {
  DimVector out(shape);
  for (size_t md = 0; md < placements.size(); ++md) {
    const Placement& p = placements[md];
    if (static_cast<int64_t>(md) == skip || !p.is_any_shard() || mesh_shape[md] == 1) continue;
    const size_t d = static_cast<size_t>(p.shard_dim());
    out[d] = first_piece(out[d], p, mesh_shape[md]);
  }
  return out;
}

// A later mesh dim (size > 1) that also shards tensor dim d, or -1: while one exists, the level of
// `mesh_dim` is not the innermost split of d and cannot be gathered or re-split alone.
int64_t inner_level_on(std::span<const int64_t> mesh_shape, std::span<const Placement> placements,
                       int64_t mesh_dim, int64_t d) {
  for (size_t j = static_cast<size_t>(mesh_dim) + 1; j < placements.size(); ++j) {
    const Placement& p = placements[j];
    if (mesh_shape[j] > 1 && p.is_any_shard() && p.shard_dim() == d) return static_cast<int64_t>(j);
  }
  return -1;
}

// The padded piece of Note [Uneven shard padding] in the group where it is largest: `base` (the
// shape without this level) with the dims of a sharded source or target cut to their largest
// piece. With plain shards that is coordinate 0's group: torch.chunk's first piece, ceil(n/k),
// grows with n and outer levels give coordinate 0 the largest n. A strided shard breaks the second
// part
// ([S(0), SS(0,3)] on 7 rows over (2,3): the 4-row half gives rank 0 two rows, the 3-row half
// three), so then every size a dim can have at this level is tried.
DimVector largest_buffer(std::span<const int64_t> shape, std::span<const int64_t> mesh_shape,
                         std::span<const Placement> placements, int64_t mesh_dim,
                         const Placement& dst, const DimVector& base) {
  const Placement& src = placements[static_cast<size_t>(mesh_dim)];
  const int64_t k = mesh_shape[static_cast<size_t>(mesh_dim)];
  const bool strided = src.is_strided_shard() || dst.is_strided_shard() ||
                       std::any_of(placements.begin(), placements.end(),
                                   [](const Placement& p) { return p.is_strided_shard(); });
  DimVector out = base;
  if (!strided) {
    for (const Placement* p : {&src, &dst}) {
      if (p->is_any_shard()) {
        const size_t d = static_cast<size_t>(p->shard_dim());
        out[d] = first_piece(base[d], *p, k);
      }
    }
    return out;
  }
  // Every size each tensor dim takes over the mesh, levels applied as in shape_without_level.
  std::vector<std::vector<int64_t>> sizes(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) sizes[d] = {shape[d]};
  for (size_t md = 0; md < placements.size(); ++md) {
    const Placement& p = placements[md];
    if (static_cast<int64_t>(md) == mesh_dim || !p.is_any_shard() || mesh_shape[md] == 1) continue;
    std::vector<int64_t>& set = sizes[static_cast<size_t>(p.shard_dim())];
    std::vector<int64_t> next;
    for (int64_t n : set) {
      for (int64_t r = 0; r < mesh_shape[md]; ++r) {
        int64_t size = 0;
        for (int64_t j = 0; j < p.split_factor(); ++j) {
          size +=
              mesh::chunk_piece(mesh::chunk_piece(n, p.split_factor(), j).size, mesh_shape[md], r)
                  .size;
        }
        next.push_back(size);
      }
    }
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    set = std::move(next);
  }
  for (size_t d = 0; d < shape.size(); ++d) out[d] = sizes[d].back();
  for (const Placement* p : {&src, &dst}) {
    if (!p->is_any_shard()) continue;
    const size_t d = static_cast<size_t>(p->shard_dim());
    out[d] = 0;
    for (int64_t n : sizes[d]) out[d] = std::max(out[d], first_piece(n, *p, k));
  }
  return out;
}

int64_t buffer_bytes(std::span<const int64_t> shape, int64_t itemsize, int64_t copies) {
  int64_t n = itemsize;
  bool overflow = !mul_into(n, copies, n);
  for (int64_t s : shape) overflow |= !mul_into(n, s, n);
  SP_CHECK(!overflow, "redistribute: a padded buffer of ", copies, " x ", shape, " elements of ",
           itemsize, " bytes exceeds 2^63 bytes");
  return n;
}

}  // namespace

namespace detail {

std::optional<RedistributeStep> step_on(std::span<const int64_t> shape, int64_t itemsize,
                                        std::span<const int64_t> mesh_shape,
                                        std::span<const Placement> placements, int64_t mesh_dim,
                                        const Placement& dst, OnRefusal on_refusal) {
  // `why` builds the message only when it is thrown.
  auto fail = [&](auto&& why) -> std::optional<RedistributeStep> {
    if (on_refusal == OnRefusal::kSkip) return std::nullopt;
    throw Error("mesh dim " + std::to_string(mesh_dim) + ": " + why());
  };
  SP_CHECK(mesh_dim >= 0 && mesh_dim < static_cast<int64_t>(placements.size()),
           "redistribute: mesh dim ", mesh_dim, " out of range for a ", placements.size(),
           "-d mesh");
  if (dst.is_any_shard()) {
    SP_CHECK(dst.shard_dim() >= 0 && dst.shard_dim() < static_cast<int64_t>(shape.size()),
             "redistribute: target ", to_string(dst), " on mesh dim ", mesh_dim,
             " shards a dim the ", shape.size(), "-d tensor lacks");
  }
  const Placement& src = placements[static_cast<size_t>(mesh_dim)];
  if (dst.is_partial() && src != dst) {
    return fail([&] { return *refused_transition(src, dst); });
  }

  const int64_t k = mesh_shape[static_cast<size_t>(mesh_dim)];
  RedistributeStep step;
  step.mesh_dim = mesh_dim;
  step.src = src;
  step.dst = dst;
  step.group_size = k;
  const DimVector base = shape_without_level(shape, mesh_shape, placements, mesh_dim);
  // `base` with this level `p` applied on its tensor dim (p may be R or P: unchanged).
  auto with_level = [&](const Placement& p) {
    DimVector out = base;
    if (p.is_any_shard() && k > 1) {
      const size_t d = static_cast<size_t>(p.shard_dim());
      out[d] = first_piece(base[d], p, k);
    }
    return out;
  };
  step.local_shape_before = with_level(src);
  step.local_shape_after = with_level(dst);
  // docs/semantics.md §3.1: nothing to do for an unchanged placement or over a single rank (a chunk
  // into one piece is the whole, a Partial over one rank is already the value).
  if (src == dst || k == 1) return step;

  for (const Placement* p : {&src, &dst}) {
    if (!p->is_any_shard()) continue;
    const int64_t inner = inner_level_on(mesh_shape, placements, mesh_dim, p->shard_dim());
    if (inner >= 0) {
      return fail([&] {
        return "cannot change " + to_string(src) + " -> " + to_string(dst) +
               " in one step: mesh dim " + std::to_string(inner) + " (" +
               to_string(placements[static_cast<size_t>(inner)]) + ") splits tensor dim " +
               std::to_string(p->shard_dim()) + " further; change that mesh dim first";
      });
    }
  }

  // The rules of docs/semantics.md §3.1, one per (source kind, target kind), and how many padded
  // pieces of the largest rank's shard the buffer holds.
  int64_t copies = k;
  if (src.is_any_shard() && dst.is_replicate()) {
    step.op = StepOp::kAllGather;
  } else if (src.is_replicate() && dst.is_any_shard()) {
    step.op = StepOp::kLocalChunk;
    copies = 1;
  } else if (src.is_partial() && dst.is_replicate()) {
    step.op = StepOp::kAllReduce;
    copies = 1;
  } else if (src.is_partial() && dst.is_any_shard()) {
    step.op = StepOp::kReduceScatter;
  } else if (src.is_shard() && dst.is_shard()) {
    step.op = StepOp::kAllToAll;  // c_d along d, c_e * k along e
  } else {
    // A strided shard's pieces are interleaved: all_to_all cannot re-split them in place.
    return fail([&] {
      return "cannot change " + to_string(src) + " -> " + to_string(dst) +
             " in one step: a strided shard goes through Replicate";
    });
  }
  step.bytes_per_rank = buffer_bytes(
      largest_buffer(shape, mesh_shape, placements, mesh_dim, dst, base), itemsize, copies);
  return step;
}

}  // namespace detail

RedistributeStep make_step(const mesh::ShardSpec& current, int64_t mesh_dim, const Placement& dst) {
  return *detail::step_on(current.shape, tensor::itemsize(current.dtype), current.mesh.shape(),
                          current.placements, mesh_dim, dst, detail::OnRefusal::kThrow);
}

}  // namespace shardplan::collectives
