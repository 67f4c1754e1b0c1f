#include "collectives/redistribute_execute.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"

namespace shardplan::collectives {
namespace {

using shardplan::DimVector;

// Where output position p along the remapped dim comes from: block `block` (-1: a zero of
// padding) at position `pos`.
struct Source {
  int64_t block = -1;
  int64_t pos = 0;
};

int64_t numel_of(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  return n;
}

// The output of shape `out_shape` gathered from `blocks` (each contiguous, of `block_shape`):
// along `dim` position p comes from map[p]; along every other dim position p is the block's
// position p, or padding beyond the block's size.
std::vector<std::byte> remap(const std::vector<const std::byte*>& blocks,
                             std::span<const int64_t> block_shape, size_t dim,
                             const std::vector<Source>& map, std::span<const int64_t> out_shape,
                             size_t elem) {
  const size_t n = out_shape.size();
  std::vector<std::byte> out(static_cast<size_t>(numel_of(out_shape)) * elem, std::byte{0});
  if (out.empty()) return out;
  std::vector<int64_t> block_strides(n, 1);
  for (size_t d = n; d-- > 1;) block_strides[d - 1] = block_strides[d] * block_shape[d];
  std::vector<int64_t> i(n, 0);
  for (size_t flat = 0; flat < out.size() / elem; ++flat) {
    const Source& s = map[static_cast<size_t>(i[dim])];
    bool inside = s.block >= 0;
    int64_t offset = 0;
    for (size_t d = 0; d < n && inside; ++d) {
      const int64_t at = d == dim ? s.pos : i[d];
      inside = at < block_shape[d];
      offset += at * block_strides[d];
    }
    if (inside) {
      std::memcpy(out.data() + flat * elem,
                  blocks[static_cast<size_t>(s.block)] + static_cast<size_t>(offset) * elem, elem);
    }
    for (size_t d = n; d-- > 0;) {
      if (++i[d] < out_shape[d]) break;
      i[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> indices_of(const std::vector<mesh::IndexRange>& ranges) {
  std::vector<int64_t> out;
  for (const mesh::IndexRange& r : ranges) {
    for (int64_t g = r.begin; g < r.end; ++g) out.push_back(g);
  }
  return out;
}

// The indices along tensor dim `dim` held by every member of the group of mesh dim `m` through
// `coord` (member j at coordinate j on m).
std::vector<std::vector<int64_t>> member_indices(const mesh::ShardSpec& spec,
                                                 std::span<const int64_t> coord, size_t m,
                                                 size_t dim) {
  std::vector<int64_t> c(coord.begin(), coord.end());
  std::vector<std::vector<int64_t>> out;
  for (int64_t j = 0; j < spec.mesh.shape()[m]; ++j) {
    c[m] = j;
    out.push_back(indices_of(mesh::global_index_ranges(spec, c)[dim]));
  }
  return out;
}

// Output position p along a dim holding global indices `want`, found among the members' `have`.
std::vector<Source> locate(const std::vector<int64_t>& want,
                           const std::vector<std::vector<int64_t>>& have) {
  std::vector<Source> map(want.size());
  for (size_t p = 0; p < want.size(); ++p) {
    for (size_t b = 0; b < have.size() && map[p].block < 0; ++b) {
      const auto it = std::find(have[b].begin(), have[b].end(), want[p]);
      if (it != have[b].end()) map[p] = {static_cast<int64_t>(b), it - have[b].begin()};
    }
    SP_ASSERT(map[p].block >= 0, "redistribute: global index ", want[p], " is on no rank");
  }
  return map;
}

// Positions 0 .. size-1 of one block, then padding up to `padded`.
std::vector<Source> identity(int64_t size, int64_t padded) {
  std::vector<Source> map(static_cast<size_t>(padded));
  for (int64_t p = 0; p < size; ++p) map[static_cast<size_t>(p)] = {0, p};
  return map;
}

size_t max_size(const std::vector<std::vector<int64_t>>& v) {
  size_t m = 0;
  for (const auto& x : v) m = std::max(m, x.size());
  return m;
}

ReduceElement reduce_element(tensor::DType t) {
  switch (t) {
    case tensor::DType::kFloat32:
      return ReduceElement::kFloat32;
    case tensor::DType::kFloat64:
      return ReduceElement::kFloat64;
    case tensor::DType::kBFloat16:
      return ReduceElement::kBFloat16;
    case tensor::DType::kInt64:
      return ReduceElement::kInt64;
    default:
      SP_FAIL("redistribute: cannot reduce Partial ", t,
              " tensors, expected float32, float64, bfloat16 or int64");
  }
}

}  // namespace

std::vector<IssuedCollective> execute_redistribute(const RedistributePlan& plan,
                                                   std::span<const int64_t> coord,
                                                   MeshCommunicators& comms, LocalData& local) {
  const size_t elem = static_cast<size_t>(tensor::itemsize(plan.source.dtype));
  SP_CHECK(local.shape == mesh::local_shape(plan.source, coord) &&
               local.bytes.size() == static_cast<size_t>(numel_of(local.shape)) * elem,
           "redistribute: the local tensor is not this rank's shard of the source");
  std::vector<IssuedCollective> issued;
  mesh::ShardSpec current = plan.source;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const RedistributeStep& step = plan.steps[s];
    const size_t m = static_cast<size_t>(step.mesh_dim);
    mesh::ShardSpec next = current;
    next.placements[m] = step.dst;
    const DimVector after = mesh::local_shape(next, coord);
    Communicator& group = *comms.dims[m];
    const auto k = static_cast<size_t>(group.size());
    std::vector<const std::byte*> mine = {local.bytes.data()};
    std::vector<std::byte> out;
    IssuedCollective record{s, step.op, step.mesh_dim, 0};

    switch (step.op) {
      case StepOp::kNoop:
        current = std::move(next);
        continue;
      case StepOp::kLocalChunk: {  // R -> S(i): keep my chunk
        const auto dim = static_cast<size_t>(step.dst.shard_dim());
        const std::vector<int64_t> have =
            indices_of(mesh::global_index_ranges(current, coord)[dim]);
        const std::vector<int64_t> want = indices_of(mesh::global_index_ranges(next, coord)[dim]);
        out = remap(mine, local.shape, dim, locate(want, {have}), after, elem);
        break;
      }
      case StepOp::kAllReduce:  // P -> R
        group.all_reduce(local.bytes.data(), local.bytes.size() / elem,
                         reduce_element(current.dtype), ReduceOp::kSum);
        record.bytes_per_rank = static_cast<int64_t>(local.bytes.size());
        out = std::move(local.bytes);
        break;
      case StepOp::kAllGather: {  // S(i) -> R: pad to the largest piece, gather, place
        const auto dim = static_cast<size_t>(step.src.shard_dim());
        const auto have = member_indices(current, coord, m, dim);
        DimVector padded = local.shape;
        padded[dim] = static_cast<int64_t>(max_size(have));
        const std::vector<std::byte> send =
            remap(mine, local.shape, dim, identity(local.shape[dim], padded[dim]), padded, elem);
        std::vector<std::byte> all(send.size() * k);
        group.all_gather(send.data(), all.data(), send.size());
        std::vector<const std::byte*> blocks;
        for (size_t j = 0; j < k; ++j) blocks.push_back(all.data() + j * send.size());
        const std::vector<int64_t> want = indices_of(mesh::global_index_ranges(next, coord)[dim]);
        out = remap(blocks, padded, dim, locate(want, have), after, elem);
        record.bytes_per_rank = static_cast<int64_t>(all.size());
        break;
      }
      case StepOp::kReduceScatter: {  // P -> S(i): cut into padded pieces, reduce, keep mine
        const auto dim = static_cast<size_t>(step.dst.shard_dim());
        const std::vector<int64_t> have =
            indices_of(mesh::global_index_ranges(current, coord)[dim]);
        const auto target = member_indices(next, coord, m, dim);
        DimVector piece = local.shape;
        piece[dim] = static_cast<int64_t>(max_size(target));
        std::vector<std::byte> in;
        for (size_t t = 0; t < k; ++t) {
          std::vector<Source> map = locate(target[t], {have});
          map.resize(static_cast<size_t>(piece[dim]));
          const std::vector<std::byte> block = remap(mine, local.shape, dim, map, piece, elem);
          in.insert(in.end(), block.begin(), block.end());
        }
        std::vector<std::byte> reduced(in.size() / k);
        group.reduce_scatter(in.data(), reduced.data(), reduced.size() / elem,
                             reduce_element(current.dtype), ReduceOp::kSum);
        out = remap({reduced.data()}, piece, dim, identity(after[dim], after[dim]), after, elem);
        record.bytes_per_rank = static_cast<int64_t>(in.size());
        break;
      }
      case StepOp::kAllToAll: {  // S(i) -> S(e): send each member its e-piece, pad both dims
        const auto dim_i = static_cast<size_t>(step.src.shard_dim());
        const auto dim_e = static_cast<size_t>(step.dst.shard_dim());
        const auto held_i = member_indices(current, coord, m, dim_i);
        const std::vector<int64_t> have_e =
            indices_of(mesh::global_index_ranges(current, coord)[dim_e]);
        const auto target_e = member_indices(next, coord, m, dim_e);
        DimVector block = local.shape;
        block[dim_i] = static_cast<int64_t>(max_size(held_i));
        block[dim_e] = static_cast<int64_t>(max_size(target_e));
        DimVector cut = local.shape;  // my rows of member t's piece along e, padded along e
        cut[dim_e] = block[dim_e];
        std::vector<std::byte> send;
        for (size_t t = 0; t < k; ++t) {
          std::vector<Source> map = locate(target_e[t], {have_e});
          map.resize(static_cast<size_t>(block[dim_e]));
          const std::vector<std::byte> piece = remap(mine, local.shape, dim_e, map, cut, elem);
          const std::vector<std::byte> padded =
              remap({piece.data()}, cut, dim_i, identity(cut[dim_i], block[dim_i]), block, elem);
          send.insert(send.end(), padded.begin(), padded.end());
        }
        std::vector<std::byte> recv(send.size());
        group.all_to_all(send.data(), recv.data(), send.size() / k);
        std::vector<const std::byte*> blocks;
        for (size_t j = 0; j < k; ++j) blocks.push_back(recv.data() + j * (send.size() / k));
        const std::vector<int64_t> want = indices_of(mesh::global_index_ranges(next, coord)[dim_i]);
        out = remap(blocks, block, dim_i, locate(want, held_i), after, elem);
        record.bytes_per_rank = static_cast<int64_t>(send.size());
        break;
      }
    }
    local.bytes = std::move(out);
    local.shape = after;
    if (step.communicates()) issued.push_back(record);
    current = std::move(next);
  }
  return issued;
}

}  // namespace shardplan::collectives
