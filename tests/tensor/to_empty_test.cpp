// to_empty (PyTorch's Module.to_empty: uninitialized memory, ties and views kept, tensors
// re-pointed in place) and initialization (reset_parameters touches only a module's own tensors,
// values keyed on the FQN so a shard equals the slice of the whole).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "base/error.h"
#include "tensor/init.h"
#include "tensor/layers.h"
#include "tensor/module.h"
#include "tensor/ops.h"
#include "tests/tensor/test_models.h"

#if SHARDPLAN_HAVE_CUDA
#include "kernels/device_memory.h"
#endif

namespace shardplan::tensor {
namespace {

const TensorOptions kCpuFloat{DType::kFloat32, Device::cpu()};

std::vector<float> values(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data_ptr(), v.size() * sizeof(float));
  return v;
}

bool all_equal(const Tensor& t, float x) {
  for (float v : values(t)) {
    if (v != x) return false;
  }
  return true;
}

// ---- to_empty ----

TEST(ToEmpty, AllocatesEveryTensorOnCpuAndKeepsTies) {
  test::TinyLM lm;
  to_empty(lm, Device::cpu());
  std::set<const void*> pointers;
  std::set<int64_t> storages;
  for (const NamedTensor& p : lm.named_parameters()) {
    EXPECT_TRUE(p.tensor.device().is_cpu()) << p.name;
    EXPECT_NE(p.tensor.data_ptr(), nullptr) << p.name;
    pointers.insert(p.tensor.data_ptr());
    storages.insert(p.tensor.storage()->id());
  }
  // 24 distinct parameters, 24 distinct storages and addresses.
  EXPECT_EQ(lm.named_parameters().size(), 24u);
  EXPECT_EQ(pointers.size(), 24u);
  EXPECT_EQ(storages.size(), 24u);
  // The tie survives: one tensor, one storage.
  EXPECT_TRUE(lm.lm_head->weight().is_same(lm.embed->weight()));
  EXPECT_TRUE(lm.lm_head->weight().shares_storage(lm.embed->weight()));
  EXPECT_EQ(lm.lm_head->weight().data_ptr(), lm.embed->weight().data_ptr());
  EXPECT_EQ(lm.parameters_numel(), 28320);
}

TEST(ToEmpty, KeepsIdentityAndFlags) {
  Linear lin(4, 3);
  const Tensor before = lin.weight();  // a handle taken before, as a Python reference would be
  ASSERT_TRUE(before.is_meta());
  to_empty(lin, Device::cpu());
  // Re-pointed in place: the old handle is the module's tensor and sees the new memory.
  EXPECT_TRUE(before.is_same(lin.weight()));
  EXPECT_TRUE(before.device().is_cpu());
  EXPECT_NE(before.data_ptr(), nullptr);
  for (const NamedTensor& p : lin.named_parameters()) {
    EXPECT_TRUE(p.tensor.is_parameter()) << p.name;
    EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    EXPECT_TRUE(p.tensor.is_leaf()) << p.name;
  }
  EXPECT_EQ(lin.weight().sizes(), (DimVector{3, 4}));
  EXPECT_EQ(lin.weight().strides(), (DimVector{4, 1}));
  EXPECT_EQ(lin.weight().storage()->nbytes(), 3 * 4 * 4);
}

TEST(ToEmpty, AllocatesBuffersIncludingNonPersistent) {
  Module m("M");
  m.register_buffer("mask", empty({4, 4}, {.dtype = DType::kBool}));
  m.register_buffer("inv_freq", empty({8}), /*persistent=*/false);
  to_empty(m, Device::cpu());
  EXPECT_NE(m.buffer("mask").data_ptr(), nullptr);
  EXPECT_NE(m.buffer("inv_freq").data_ptr(), nullptr);
  EXPECT_EQ(m.buffer("mask").dtype(), DType::kBool);
  EXPECT_FALSE(m.buffer("inv_freq").requires_grad());
}

TEST(ToEmpty, ViewsOfOneStorageStayViewsAtTheSameOffsets) {
  Module m("FusedQKV");
  Tensor fused = empty({24, 8});
  m.register_parameter("q", narrow(fused, 0, 0, 8));
  m.register_parameter("k", narrow(fused, 0, 8, 8));
  m.register_parameter("v", narrow(fused, 0, 16, 8));
  to_empty(m, Device::cpu());
  const Tensor &q = m.parameter("q"), &k = m.parameter("k"), &v = m.parameter("v");
  EXPECT_TRUE(q.shares_storage(k));
  EXPECT_TRUE(q.shares_storage(v));
  EXPECT_TRUE(q.is_view());
  EXPECT_EQ(k.storage_offset(), 64);
  EXPECT_EQ(v.storage_offset(), 128);
  // 8 rows of 8 floats = 256 bytes apart.
  EXPECT_EQ(static_cast<char*>(k.data_ptr()) - static_cast<char*>(q.data_ptr()), 256);
  EXPECT_EQ(static_cast<char*>(v.data_ptr()) - static_cast<char*>(q.data_ptr()), 512);
  EXPECT_EQ(q.storage()->nbytes(), 24 * 8 * 4);
  // The unregistered base moved with its views.
  EXPECT_TRUE(fused.shares_storage(q));
  EXPECT_TRUE(fused.device().is_cpu());
}

TEST(ToEmpty, LoneTensorsGetPreserveFormatStrides) {
  Module m("M");
  // Column-major and dense: strides kept.
  m.register_parameter("col", empty_strided({4, 8}, {1, 4}));
  // Not dense (gaps between rows): dense strides in the same memory order, as empty_like.
  m.register_parameter("gappy", empty_strided({2, 3}, {6, 2}));
  to_empty(m, Device::cpu());
  EXPECT_EQ(m.parameter("col").strides(), (DimVector{1, 4}));
  EXPECT_EQ(m.parameter("gappy").strides(), (DimVector{3, 1}));
  EXPECT_EQ(m.parameter("gappy").storage()->nbytes(), 6 * 4);
}

TEST(ToEmpty, CudaNeedsACudaBuildAndAGpu) {
  Linear lin(4, 3);
#if SHARDPLAN_HAVE_CUDA
  if (kernels::cuda_device_count() > 0) {
    to_empty(lin, Device::cuda(0));
    EXPECT_TRUE(lin.weight().device().is_cuda());
    EXPECT_NE(lin.weight().data_ptr(), nullptr);
    EXPECT_NE(lin.weight().data_ptr(), lin.bias().data_ptr());
    return;
  }
#endif
  EXPECT_THROW(to_empty(lin, Device::cuda(0)), Error);
  EXPECT_TRUE(lin.weight().is_meta());  // nothing changed
}

// ---- Initialization ----

TEST(ModuleInit, MetaTensorsAreSkipped) {
  test::TinyLM lm;
  EXPECT_NO_THROW(init_weights(lm, 1));
  EXPECT_TRUE(lm.embed->weight().is_meta());
}

TEST(ModuleInit, LinearWithinKaimingUniformBound) {
  Linear lin(64, 32);
  to_empty(lin, Device::cpu());
  init_weights(lin, 7);
  const float bound = 1.0f / 8.0f;  // 1 / sqrt(64)
  float lo = 1, hi = -1;
  for (float v : values(lin.weight())) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  // 2048 draws from U(-1/8, 1/8) reach both ends closely.
  EXPECT_LT(lo, -0.9f * bound);
  EXPECT_GT(hi, 0.9f * bound);
  for (float v : values(lin.bias())) EXPECT_LE(std::fabs(v), bound);
}

TEST(ModuleInit, ValuesAreKeyedOnTheFullyQualifiedName) {
  auto mlp = test::make_mlp(6, 8, 6);
  to_empty(*mlp, Device::cpu());
  init_weights(*mlp, 42);
  Tensor expected = empty({8, 6}, kCpuFloat);
  const double bound = 1.0 / std::sqrt(6.0);
  init_uniform(expected, InitKey{42, "0.weight"}, -bound, bound);
  EXPECT_EQ(values(mlp->get_parameter("0.weight")), values(expected));
  // Another name or seed gives other values.
  init_uniform(expected, InitKey{42, "2.weight"}, -bound, bound);
  EXPECT_NE(values(mlp->get_parameter("0.weight")), values(expected));
}

TEST(ModuleInit, NormsAndEmbedding) {
  test::TinyLM lm(/*tie=*/false);
  to_empty(lm, Device::cpu());
  init_weights(lm, 3);
  auto& block = dynamic_cast<test::Block&>((*lm.layers)[0]);
  EXPECT_TRUE(all_equal(block.attn_norm->weight(), 1.0f));
  EXPECT_TRUE(all_equal(block.attn_norm->bias(), 0.0f));
  EXPECT_TRUE(all_equal(block.mlp_norm->weight(), 1.0f));
  // N(0, 1) over 3200 draws: mean near 0, variance near 1.
  double sum = 0, sq = 0;
  for (float v : values(lm.embed->weight())) {
    sum += v;
    sq += double(v) * v;
  }
  const double n = 3200, mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.1);
}

TEST(ModuleInit, TiedTensorTakesTheValuesOfItsFirstName) {
  test::TinyLM lm;
  to_empty(lm, Device::cpu());
  init_weights(lm, 5);
  Tensor expected = empty({100, 32}, kCpuFloat);
  init_normal(expected, InitKey{5, "embed.weight"}, 0.0, 1.0);
  EXPECT_EQ(values(lm.get_parameter("lm_head.weight")), values(expected));
}

// A module with a tensor of its own and a child: reset_parameters must not cross that boundary.
class Scaled : public Module {
 public:
  Scaled() : Module("Scaled") {
    register_parameter("scale", empty({4}));
    proj = register_module("proj", std::make_shared<Linear>(4, 4));
  }
  void reset_parameters(uint64_t) override { init_member_constant("scale", Scalar(1.0)); }
  std::shared_ptr<Linear> proj;
};

TEST(ModuleInit, ResetParametersTouchesOnlyTheModulesOwnTensors) {
  constexpr float kSentinel = 7.0f;
  Scaled m;
  to_empty(m, Device::cpu());
  for (const NamedTensor& p : m.named_parameters())
    fill_constant(p.tensor, Scalar(double{kSentinel}));

  m.proj->reset_parameters(11);  // the child: its weight and bias change, the parent's scale not
  EXPECT_TRUE(all_equal(m.parameter("scale"), kSentinel));
  EXPECT_FALSE(all_equal(m.proj->weight(), kSentinel));
  EXPECT_FALSE(all_equal(m.proj->bias(), kSentinel));

  fill_constant(m.proj->weight(), Scalar(double{kSentinel}));
  fill_constant(m.proj->bias(), Scalar(double{kSentinel}));
  m.reset_parameters(11);  // the parent: scale only
  EXPECT_TRUE(all_equal(m.parameter("scale"), 1.0f));
  EXPECT_TRUE(all_equal(m.proj->weight(), kSentinel));
  EXPECT_TRUE(all_equal(m.proj->bias(), kSentinel));
}

TEST(ModuleInit, RowShardEqualsTheSliceOfTheWhole) {
  // Rows 5..7 of an [8, 6] weight initialized alone, placed by a GlobalBox, equal the same rows of
  // the whole tensor initialized at once.
  const InitKey key{9, "layers.0.mlp.up.weight"};
  Tensor whole = empty({8, 6}, kCpuFloat);
  init_uniform(whole, key, -0.5, 0.5);
  Tensor shard = empty({3, 6}, kCpuFloat);
  const int64_t global_sizes[] = {8, 6};
  const int64_t global_offset[] = {5, 0};
  const GlobalBox box{global_sizes, global_offset};
  init_uniform(shard, key, -0.5, 0.5, &box);
  EXPECT_EQ(std::memcmp(shard.data_ptr(), static_cast<const char*>(whole.data_ptr()) + 5 * 6 * 4,
                        3 * 6 * 4),
            0);
}

TEST(ModuleInit, ValuesDoNotDependOnTheLayout) {
  // The same Linear with a column-major weight: element (i, j) gets the same value.
  Linear row(6, 4), col(6, 4);
  col.set_parameter("weight", empty_strided({4, 6}, {1, 4}));
  to_empty(row, Device::cpu());
  to_empty(col, Device::cpu());
  init_weights(row, 1);
  init_weights(col, 1);
  const float* r = static_cast<const float*>(row.weight().data_ptr());
  const float* c = static_cast<const float*>(col.weight().data_ptr());
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) EXPECT_EQ(r[i * 6 + j], c[j * 4 + i]) << i << "," << j;
  }
}

}  // namespace
}  // namespace shardplan::tensor
