// Hostile-input properties of the op set: random layouts (0-dim, zero-size, expanded, transposed,
// offset) and random, often invalid, arguments. Every call must either return well-formed tensors
// or throw shardplan::Error — never crash, never build a tensor that addresses memory outside its
// storage. Deterministic (fixed seed) so a failure reproduces.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "base/error.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace {

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int64_t i(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool coin() { return i(0, 1) == 1; }

  // A tensor with a random layout over a storage exactly as large as PyTorch would need.
  Tensor tensor(DType dtype = DType::kFloat32) {
    const int64_t nd = i(0, 4);
    DimVector sizes(nd);
    for (auto& s : sizes) s = i(0, 4) == 0 ? i(0, 1) : i(1, 5);
    Tensor base = empty(sizes, {dtype});
    switch (i(0, 4)) {
      case 0:
        return base;
      case 1:
        return nd >= 2 ? transpose(base, 0, nd - 1) : base;
      case 2: {  // broadcast a size-1 dim
        DimVector one = sizes;
        if (nd == 0) return base;
        const int64_t d = i(0, nd - 1);
        one[d] = 1;
        DimVector target = sizes;
        target[d] = i(1, 4);
        return expand(empty(one, {dtype}), target);
      }
      case 3: {  // a strided slice with an offset
        if (nd == 0 || sizes[0] == 0) return base;
        return slice(base, 0, i(0, sizes[0] - 1), {}, i(1, 2));
      }
      default:
        return nd >= 1 ? unsqueeze(base, i(0, nd)) : base;
    }
  }

  int64_t dim(const Tensor& t) { return i(-t.dim() - 1, t.dim()); }  // sometimes out of range
  DimVector shape_like(const Tensor& t) {
    DimVector s = t.sizes();
    if (coin() && !s.empty()) s[i(0, s.size() - 1)] = i(-1, 6);
    if (i(0, 3) == 0) s.push_back(i(1, 3));
    // Now and then sizes whose product overflows int64: must be an Error, never wrap around.
    if (i(0, 9) == 0) s.push_back(int64_t{1} << 40);
    if (i(0, 9) == 0) s.push_back(int64_t{1} << 40);
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

void check_well_formed(const Tensor& out) {
  ASSERT_TRUE(out.defined());
  ASSERT_EQ(out.sizes().size(), out.strides().size());
  int64_t numel = 1;
  for (int64_t s : out.sizes()) {
    ASSERT_GE(s, 0);
    numel *= s;
  }
  ASSERT_EQ(out.numel(), numel);
  for (int64_t st : out.strides()) ASSERT_GE(st, 0);
  const int64_t need =
      required_storage_elements(out.sizes(), out.strides(), out.storage_offset(), "check");
  ASSERT_LE(need * out.itemsize(), out.storage()->nbytes()) << describe(out);
}

TEST(OpsProperty, RandomCallsReturnWellFormedTensorsOrThrowError) {
  Gen g(20261122);
  using Call = std::function<std::vector<Tensor>(Gen&)>;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"view",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{view(x, g.shape_like(x))};
       }},
      {"reshape",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{reshape(x, g.shape_like(x))};
       }},
      {"expand",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{expand(x, g.shape_like(x))};
       }},
      {"transpose",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{transpose(x, g.dim(x), g.dim(x))};
       }},
      {"permute",
       [](Gen& g) {
         Tensor x = g.tensor();
         DimVector p;
         for (int64_t d = 0; d < x.dim(); ++d) p.push_back(g.i(-x.dim(), x.dim()));
         return std::vector{permute(x, p)};
       }},
      {"squeeze",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{squeeze(x, g.dim(x))};
       }},
      {"unsqueeze",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{unsqueeze(x, g.dim(x))};
       }},
      {"flatten",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{flatten(x, g.dim(x), g.dim(x))};
       }},
      {"narrow",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{narrow(x, g.dim(x), g.i(-3, 5), g.i(-1, 5))};
       }},
      {"slice",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{slice(x, g.dim(x), g.i(-6, 6), g.i(-6, 6), g.i(-1, 3))};
       }},
      {"select",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{select(x, g.dim(x), g.i(-5, 5))};
       }},
      {"chunk",
       [](Gen& g) {
         Tensor x = g.tensor();
         return chunk(x, g.i(-1, 5), g.dim(x));
       }},
      {"split",
       [](Gen& g) {
         Tensor x = g.tensor();
         return split(x, g.i(-1, 4), g.dim(x));
       }},
      {"unbind",
       [](Gen& g) {
         Tensor x = g.tensor();
         return unbind(x, g.dim(x));
       }},
      {"as_strided",
       [](Gen& g) {
         Tensor x = g.tensor();
         DimVector s = g.shape_like(x), st(s.size());
         for (auto& v : st) v = g.i(-1, 8);
         return std::vector{as_strided(x, s, st, g.i(-1, 4))};
       }},
      {"add", [](Gen& g) { return std::vector{add(g.tensor(), g.tensor())}; }},
      {"add_",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{add_(x, g.tensor())};
       }},
      {"where",
       [](Gen& g) {
         return std::vector{where(g.tensor(DType::kBool), g.tensor(), g.tensor(DType::kFloat16))};
       }},
      {"sum",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{sum(x, {g.dim(x)}, g.coin())};
       }},
      {"amax",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{amax(x, {g.dim(x)}, g.coin())};
       }},
      {"matmul", [](Gen& g) { return std::vector{matmul(g.tensor(), g.tensor())}; }},
      {"cat",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{cat({x, g.tensor(), x}, g.dim(x))};
       }},
      {"stack",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{stack({x, x}, g.dim(x))};
       }},
      {"softmax",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{softmax(x, g.dim(x))};
       }},
      {"layer_norm",
       [](Gen& g) {
         Tensor x = g.tensor();
         return std::vector{layer_norm(x, g.shape_like(x))};
       }},
  };
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const auto& [name, call] = calls[g.i(0, calls.size() - 1)];
    std::vector<Tensor> outs;
    try {
      outs = call(g);
    } catch (const Error&) {
      ++rejected;
      continue;
    }
    ++ok;
    for (const Tensor& t : outs) {
      check_well_formed(t);
      if (HasFatalFailure()) {
        ADD_FAILURE() << "op " << name << " at iteration " << iter;
        return;
      }
    }
  }
  // Both outcomes must actually occur, or the generator is not exercising anything.
  EXPECT_GT(ok, 5000);
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace shardplan::tensor
