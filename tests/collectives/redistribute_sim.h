// Simulated execution of a redistribution plan for the tests: every virtual rank holds its local
// tensor as the global element ids it owns (row-major global index, -1 for padding) and, per
// element, a 64-bit value standing for the partial sums it carries. Each step moves these arrays
// between the ranks of its mesh-dim groups the way the collective does (pad, exchange, unpad, sum),
// written from the collective semantics of docs/semantics.md §3.1, not from the planner's code.
// Summing the same contribution twice, or losing one, changes a value (random 64-bit weights,
// wrapping sums).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/redistribute_plan.h"
#include "mesh/shard_spec.h"
#include "tensor/dtype.h"

namespace shardplan::collectives::sim {

struct Local {
  std::vector<int64_t> shape;
  std::vector<int64_t> elem;  // global row-major index; -1 = padding
  std::vector<uint64_t> val;
  int64_t numel() const { return static_cast<int64_t>(elem.size()); }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// torch.chunk of n into k, piece j: [begin, begin + size), written out here (docs/semantics.md
// §2.2).
struct Piece {
  int64_t begin, size;
};
inline Piece chunk(int64_t n, int64_t k, int64_t j) {
  const int64_t c = ceil_div(n, k);
  const int64_t b = std::min(n, c * j), e = std::min(n, c * (j + 1));
  return {b, e - b};
}

// Positions along a dim that rank j of k keeps for placement p (Shard or StridedShard), out of n.
inline std::vector<int64_t> kept_positions(int64_t n, const mesh::Placement& p, int64_t k,
                                           int64_t j) {
  std::vector<int64_t> out;
  const int64_t sf = p.is_strided_shard() ? p.split_factor() : 1;
  for (int64_t s = 0; s < sf; ++s) {
    const Piece piece = chunk(n, sf, s);
    const Piece sub = chunk(piece.size, k, j);
    for (int64_t i = 0; i < sub.size; ++i) out.push_back(piece.begin + sub.begin + i);
  }
  return out;
}

// x with dim `d` replaced by the positions `idx` (-1 inserts padding).
inline Local take(const Local& x, size_t d, const std::vector<int64_t>& idx) {
  Local out;
  out.shape = x.shape;
  out.shape[d] = static_cast<int64_t>(idx.size());
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) outer *= x.shape[i];
  for (size_t i = d + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p : idx) {
      for (int64_t i = 0; i < inner; ++i) {
        if (p < 0) {
          out.elem.push_back(-1);
          out.val.push_back(0);
        } else {
          const int64_t at = (o * x.shape[d] + p) * inner + i;
          out.elem.push_back(x.elem[static_cast<size_t>(at)]);
          out.val.push_back(x.val[static_cast<size_t>(at)]);
        }
      }
    }
  }
  return out;
}

inline std::vector<int64_t> range(int64_t b, int64_t e) {
  std::vector<int64_t> v;
  for (int64_t i = b; i < e; ++i) v.push_back(i);
  return v;
}
inline Local pad_to(const Local& x, size_t d, int64_t size) {
  std::vector<int64_t> idx = range(0, x.shape[d]);
  idx.resize(static_cast<size_t>(size), -1);
  return take(x, d, idx);
}
inline Local narrow(const Local& x, size_t d, int64_t b, int64_t len) {
  return take(x, d, range(b, b + len));
}
inline Local cat(const std::vector<Local>& xs, size_t d) {
  // Concatenate along d: move d to the front by take() per piece is costly; go through positions.
  Local out;
  out.shape = xs[0].shape;
  out.shape[d] = 0;
  for (const Local& x : xs) out.shape[d] += x.shape[d];
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i) outer *= out.shape[i];
  for (size_t i = d + 1; i < out.shape.size(); ++i) inner *= out.shape[i];
  for (int64_t o = 0; o < outer; ++o) {
    for (const Local& x : xs) {
      const int64_t n = x.shape[d] * inner, at = o * n;
      out.elem.insert(out.elem.end(), x.elem.begin() + at, x.elem.begin() + at + n);
      out.val.insert(out.val.end(), x.val.begin() + at, x.val.begin() + at + n);
    }
  }
  return out;
}
inline bool has_padding(const Local& x) {
  return std::find(x.elem.begin(), x.elem.end(), -1) != x.elem.end();
}

// The element ids a rank should hold under `spec` (from mesh's global_index_ranges).
inline Local expected_layout(const mesh::ShardSpec& spec, std::span<const int64_t> coord) {
  const auto ranges = mesh::global_index_ranges(spec, coord);
  std::vector<std::vector<int64_t>> idx(ranges.size());
  Local out;
  for (size_t d = 0; d < ranges.size(); ++d) {
    for (const mesh::IndexRange& r : ranges[d]) {
      for (int64_t i = r.begin; i < r.end; ++i) idx[d].push_back(i);
    }
    out.shape.push_back(static_cast<int64_t>(idx[d].size()));
  }
  const int64_t n =
      std::accumulate(out.shape.begin(), out.shape.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> pos(ranges.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    int64_t g = 0;
    for (size_t d = 0; d < ranges.size(); ++d)
      g = g * spec.shape[d] + idx[d][static_cast<size_t>(pos[d])];
    out.elem.push_back(g);
    out.val.push_back(0);
    for (size_t d = ranges.size(); d-- > 0;) {
      if (++pos[d] < out.shape[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

// SplitMix64: the weight of contribution `q` to global element `e`.
inline uint64_t weight(int64_t e, int64_t q) {
  uint64_t z = static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(q) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Runs `plan` over every rank of the (row-major) mesh and checks, with gtest assertions: each
// step's bytes_per_rank against the largest buffer any group used (padding included),
// its local shapes, the layout after every step, and at the end the target layout element for
// element with the right sums of partial contributions.
class Simulator {
 public:
  explicit Simulator(const RedistributePlan& plan) : plan_(plan), mesh_(plan.source.mesh) {
    itemsize_ = tensor::itemsize(plan.source.dtype);
    for (int64_t r = 0; r < mesh_.size(); ++r) coords_.push_back(*mesh_.coordinate_of(r));
    // Partial contributions: one per coordinate over the source's Partial mesh dims.
    for (size_t md = 0; md < plan.source.placements.size(); ++md) {
      if (plan.source.placements[md].is_partial()) partial_dims_.push_back(md);
    }
    for (int64_t r = 0; r < mesh_.size(); ++r) {
      Local x = expected_layout(plan.source, coords_[static_cast<size_t>(r)]);
      const int64_t q = contribution_of(coords_[static_cast<size_t>(r)]);
      for (size_t i = 0; i < x.elem.size(); ++i) x.val[i] = weight(x.elem[i], q);
      ranks_.push_back(std::move(x));
    }
  }

  void run() {
    std::vector<mesh::Placement> state = plan_.source.placements;
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      const RedistributeStep& step = plan_.steps[s];
      SCOPED_TRACE(::testing::Message() << "step " << s << ": " << step);
      ASSERT_EQ(step.src, state[static_cast<size_t>(step.mesh_dim)]);
      const std::vector<int64_t> before0 = ranks_[0].shape;
      apply(step);
      if (::testing::Test::HasFatalFailure()) return;
      state[static_cast<size_t>(step.mesh_dim)] = step.dst;
      EXPECT_EQ(step.local_shape_before.vec(), before0);
      EXPECT_EQ(step.local_shape_after.vec(), ranks_[0].shape);
      const mesh::ShardSpec now =
          mesh::make_shard_spec(plan_.source.shape, plan_.source.dtype, mesh_, state);
      for (int64_t r = 0; r < mesh_.size(); ++r) {
        const Local want = expected_layout(now, coords_[static_cast<size_t>(r)]);
        ASSERT_EQ(ranks_[static_cast<size_t>(r)].shape, want.shape) << "rank " << r;
        ASSERT_EQ(ranks_[static_cast<size_t>(r)].elem, want.elem) << "rank " << r;
      }
    }
    ASSERT_EQ(state, plan_.target.placements);
    check_values();
  }

 private:
  // The contribution a coordinate starts with: row-major index over the source's Partial dims.
  int64_t contribution_of(const mesh::MeshCoord& coord) const {
    int64_t q = 0;
    for (size_t md : partial_dims_) q = q * mesh_.shape()[md] + coord[md];
    return q;
  }

  void check_values() {
    const auto& tgt = plan_.target.placements;
    for (int64_t r = 0; r < mesh_.size(); ++r) {
      const mesh::MeshCoord& c = coords_[static_cast<size_t>(r)];
      const Local& x = ranks_[static_cast<size_t>(r)];
      // Contributions summed into this rank: every coordinate over the source's Partial dims that
      // agrees with the rank on the dims still Partial in the target.
      std::vector<int64_t> qs;
      mesh::MeshCoord q = c;
      std::function<void(size_t)> walk = [&](size_t i) {
        if (i == partial_dims_.size()) {
          qs.push_back(contribution_of(q));
          return;
        }
        const size_t md = partial_dims_[i];
        if (tgt[md].is_partial()) return walk(i + 1);
        for (int64_t v = 0; v < mesh_.shape()[md]; ++v) {
          q[md] = v;
          walk(i + 1);
        }
        q[md] = c[md];
      };
      walk(0);
      for (size_t i = 0; i < x.elem.size(); ++i) {
        uint64_t want = 0;
        for (int64_t qq : qs) want += weight(x.elem[i], qq);
        ASSERT_EQ(x.val[i], want) << "rank " << r << " element " << x.elem[i];
      }
    }
  }

  // Records the buffer one group used; apply() compares the largest with bytes_per_rank.
  void check_bytes(int64_t numel) { max_bytes_ = std::max(max_bytes_, numel * itemsize_); }

  void apply(const RedistributeStep& step) {
    const size_t md = static_cast<size_t>(step.mesh_dim);
    const int64_t k = mesh_.shape()[md];
    ASSERT_EQ(step.group_size, k);
    if (step.op == StepOp::kNoop) {
      EXPECT_TRUE(k == 1 || step.src == step.dst);
      EXPECT_EQ(step.bytes_per_rank, 0);
      return;
    }
    max_bytes_ = 0;
    for (int64_t g = 0; g < mesh_.num_groups(static_cast<int64_t>(md)); ++g) {
      const std::vector<int64_t> group = mesh_.group_ranks_by_index(static_cast<int64_t>(md), g);
      std::vector<Local> in;
      for (int64_t r : group) in.push_back(ranks_[static_cast<size_t>(r)]);
      std::vector<Local> out = run_collective(step, in);
      if (::testing::Test::HasFatalFailure()) return;
      for (size_t j = 0; j < group.size(); ++j) {
        ASSERT_FALSE(has_padding(out[j])) << "padding left on rank " << group[j];
        ranks_[static_cast<size_t>(group[j])] = std::move(out[j]);
      }
    }
    EXPECT_EQ(step.bytes_per_rank, max_bytes_) << "the largest group's buffer";
  }

  std::vector<Local> run_collective(const RedistributeStep& step, const std::vector<Local>& in) {
    const int64_t k = static_cast<int64_t>(in.size());
    std::vector<Local> out(in.size());
    switch (step.op) {
      case StepOp::kLocalChunk: {  // R -> S/SS: keep my chunk, no traffic
        const size_t e = static_cast<size_t>(step.dst.shard_dim());
        for (int64_t j = 0; j < k; ++j) {
          const Local& x = in[static_cast<size_t>(j)];
          out[static_cast<size_t>(j)] = take(x, e, kept_positions(x.shape[e], step.dst, k, j));
        }
        for (const Local& o : out) check_bytes(o.numel());
        break;
      }
      case StepOp::kAllGather: {  // S/SS -> R: pad to the largest piece, gather, unpad
        const size_t d = static_cast<size_t>(step.src.shard_dim());
        int64_t c = 0, n = 0;
        for (const Local& x : in) {
          c = std::max(c, x.shape[d]);
          n += x.shape[d];
        }
        std::vector<Local> padded;
        for (const Local& x : in) padded.push_back(pad_to(x, d, c));
        const Local gathered = cat(padded, d);
        check_bytes(gathered.numel());
        Local full;
        if (step.src.is_shard() || gathered.numel() == 0) {
          full = narrow(gathered, d, 0, n);  // torch.chunk pads only at the end
        } else {
          // A strided shard's pieces interleave: drop padding, order by global index along d.
          std::vector<std::pair<int64_t, int64_t>> key;  // (global index along d, position)
          const int64_t stride = global_stride(d);
          const int64_t inner = inner_size(gathered, d);
          for (int64_t p = 0; p < gathered.shape[d]; ++p) {
            const int64_t id = gathered.elem[static_cast<size_t>(p * inner)];
            if (id >= 0) key.push_back({(id / stride) % plan_.source.shape[d], p});
          }
          std::sort(key.begin(), key.end());
          std::vector<int64_t> order;
          for (const auto& kp : key) order.push_back(kp.second);
          full = take(gathered, d, order);
        }
        for (auto& o : out) o = full;
        break;
      }
      case StepOp::kAllReduce: {
        Local sum = in[0];
        for (size_t j = 1; j < in.size(); ++j) {
          EXPECT_EQ(in[j].elem, sum.elem) << "all_reduce over different elements";
          for (size_t i = 0; i < sum.val.size(); ++i) sum.val[i] += in[j].val[i];
        }
        check_bytes(sum.numel());
        for (auto& o : out) o = sum;
        break;
      }
      case StepOp::kReduceScatter: {  // P -> S/SS: cut into k pieces, pad each, reduce, keep mine
        const size_t e = static_cast<size_t>(step.dst.shard_dim());
        const int64_t n = in[0].shape[e];
        std::vector<std::vector<int64_t>> pieces;
        int64_t c = 0;
        for (int64_t j = 0; j < k; ++j) {
          pieces.push_back(kept_positions(n, step.dst, k, j));
          c = std::max(c, static_cast<int64_t>(pieces.back().size()));
        }
        std::vector<int64_t> layout;  // the padded input buffer along e
        for (auto p : pieces) {
          p.resize(static_cast<size_t>(c), -1);
          layout.insert(layout.end(), p.begin(), p.end());
        }
        Local sum = take(in[0], e, layout);
        check_bytes(sum.numel());
        for (size_t j = 1; j < in.size(); ++j) {
          const Local b = take(in[j], e, layout);
          EXPECT_EQ(b.elem, sum.elem) << "reduce_scatter over different elements";
          for (size_t i = 0; i < sum.val.size(); ++i) sum.val[i] += b.val[i];
        }
        for (int64_t j = 0; j < k; ++j) {
          const int64_t own = static_cast<int64_t>(pieces[static_cast<size_t>(j)].size());
          out[static_cast<size_t>(j)] = narrow(sum, e, j * c, own);
        }
        break;
      }
      case StepOp::kAllToAll: {  // S(d) -> S(e): pad d to c_d, e to c_e*k, exchange, unpad
        const size_t d = static_cast<size_t>(step.src.shard_dim());
        const size_t e = static_cast<size_t>(step.dst.shard_dim());
        int64_t cd = 0, nd = 0;
        const int64_t ne = in[0].shape[e], ce = ceil_div(ne, k);
        for (const Local& x : in) {
          cd = std::max(cd, x.shape[d]);
          nd += x.shape[d];
          EXPECT_EQ(x.shape[e], ne) << "all_to_all members disagree on the size of dim " << e;
        }
        std::vector<Local> sendbuf;
        for (const Local& x : in) sendbuf.push_back(pad_to(pad_to(x, d, cd), e, ce * k));
        check_bytes(sendbuf[0].numel());
        for (int64_t j = 0; j < k; ++j) {
          std::vector<Local> recv;
          for (const Local& b : sendbuf) recv.push_back(narrow(b, e, j * ce, ce));
          const Local got = narrow(cat(recv, d), d, 0, nd);
          out[static_cast<size_t>(j)] = narrow(got, e, 0, chunk(ne, k, j).size);
        }
        break;
      }
      case StepOp::kNoop:
        break;
    }
    return out;
  }

  int64_t global_stride(size_t d) const {
    int64_t s = 1;
    for (size_t i = d + 1; i < plan_.source.shape.size(); ++i) s *= plan_.source.shape[i];
    return s;
  }
  static int64_t inner_size(const Local& x, size_t d) {
    int64_t s = 1;
    for (size_t i = d + 1; i < x.shape.size(); ++i) s *= x.shape[i];
    return s;
  }

  const RedistributePlan& plan_;
  mesh::DeviceMesh mesh_;
  int64_t itemsize_ = 1;
  int64_t max_bytes_ = 0;
  std::vector<mesh::MeshCoord> coords_;
  std::vector<size_t> partial_dims_;
  std::vector<Local> ranks_;
};

}  // namespace shardplan::collectives::sim
