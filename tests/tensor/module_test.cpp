// The Module tree: fully qualified names, listing order and de-duplication (PyTorch's
// named_parameters / named_modules), parameter counts written out by hand, ties, registration
// errors, module FQNs at call time.
#include "tensor/module.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/ops.h"
#include "tests/tensor/test_models.h"

namespace shardplan::tensor {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> names(const std::vector<NamedTensor>& v) {
  std::vector<std::string> out;
  for (const NamedTensor& t : v) out.push_back(t.name);
  return out;
}

std::vector<std::string> names(const std::vector<NamedModule>& v) {
  std::vector<std::string> out;
  for (const NamedModule& m : v) out.push_back(m.name);
  return out;
}

int64_t numel_sum(const std::vector<NamedTensor>& v) {
  int64_t n = 0;
  for (const NamedTensor& t : v) n += t.tensor.numel();
  return n;
}

TEST(Module, MlpParameterNamesAndCount) {
  auto mlp = test::make_mlp(16, 64, 16);
  EXPECT_THAT(names(mlp->named_parameters()),
              ElementsAre("0.weight", "0.bias", "2.weight", "2.bias"));
  // 16*64 + 64 + 64*16 + 16 = 1024 + 64 + 1024 + 16.
  EXPECT_EQ(mlp->parameters_numel(), 2128);
  EXPECT_EQ(mlp->parameters_nbytes(), 2128 * 4);
  EXPECT_EQ(mlp->get_parameter("0.weight").sizes(), (DimVector{64, 16}));  // [out, in]
  EXPECT_EQ(mlp->get_parameter("2.bias").sizes(), (DimVector{16}));
  EXPECT_THAT(names(mlp->named_modules()), ElementsAre("", "0", "1", "2"));
  EXPECT_EQ(mlp->get_submodule("1").type_name(), "GELU");
  EXPECT_EQ(mlp->type_name(), "Sequential");
}

TEST(Module, TransformerParameterNamesInRegistrationOrder) {
  test::TinyLM lm;
  const std::vector<std::string> block = {
      "attn_norm.weight",   "attn_norm.bias",     "attn.q_proj.weight", "attn.k_proj.weight",
      "attn.v_proj.weight", "attn.o_proj.weight", "mlp_norm.weight",    "mlp.up.weight",
      "mlp.up.bias",        "mlp.down.weight",    "mlp.down.bias"};
  std::vector<std::string> expected = {"embed.weight"};
  for (const char* layer : {"layers.0.", "layers.1."}) {
    for (const std::string& n : block) expected.push_back(layer + n);
  }
  expected.push_back("norm.weight");
  // lm_head.weight is embed.weight: listed once, under its first name.
  EXPECT_EQ(names(lm.named_parameters()), expected);

  expected.push_back("lm_head.weight");
  EXPECT_EQ(names(lm.named_parameters({.remove_duplicate = false})), expected);
}

TEST(Module, TransformerParameterCountByHand) {
  test::TinyLM lm;
  // V=100, D=32, F=128, 2 layers, lm_head tied to the embedding.
  //   embed                         100*32           = 3200
  //   per block: attn_norm w+b      32 + 32          =   64
  //              q,k,v,o (no bias)  4 * 32*32        = 4096
  //              mlp_norm           32               =   32
  //              up   32*128 + 128                   = 4224
  //              down 128*32 + 32                    = 4128
  //              block                               = 12544
  //   2 blocks                                       = 25088
  //   norm                                           =    32
  //   lm_head (tied, counted once)                   =     0
  //   total                                          = 28320
  EXPECT_EQ(lm.parameters_numel(), 28320);
  EXPECT_EQ(numel_sum(lm.named_parameters()), 28320);
  // Listing every name counts the tied table twice: 28320 + 3200.
  EXPECT_EQ(numel_sum(lm.named_parameters({.remove_duplicate = false})), 31520);

  test::TinyLM untied(/*tie=*/false);
  EXPECT_EQ(untied.parameters_numel(), 28320 + 3200);
  EXPECT_EQ(untied.named_parameters().size(), 25u);
}

TEST(Module, TiedParameterIsOneTensor) {
  test::TinyLM lm;
  EXPECT_TRUE(lm.lm_head->weight().is_same(lm.embed->weight()));
  EXPECT_TRUE(lm.get_parameter("lm_head.weight").is_same(lm.get_parameter("embed.weight")));
  // Tying checks shapes.
  EXPECT_THROW(tie_parameters(lm, "norm.weight", "embed.weight"), Error);
}

TEST(Module, TieByRegisteringTheSameTensorTwice) {
  auto root = std::make_shared<Module>("Root");
  auto a = root->register_module("a", std::make_shared<Module>("A"));
  auto b = root->register_module("b", std::make_shared<Module>("B"));
  Tensor shared = empty({4, 4});
  a->register_parameter("w", shared);
  b->register_parameter("w", shared);
  EXPECT_THAT(names(root->named_parameters()), ElementsAre("a.w"));
  EXPECT_THAT(names(root->named_parameters({.remove_duplicate = false})),
              ElementsAre("a.w", "b.w"));
  EXPECT_EQ(root->parameters_numel(), 16);
}

TEST(Module, ParameterFlags) {
  Linear lin(3, 5);
  EXPECT_TRUE(lin.weight().is_parameter());
  EXPECT_TRUE(lin.weight().requires_grad());
  EXPECT_TRUE(lin.weight().is_leaf());
  EXPECT_TRUE(lin.weight().is_meta());
  Linear bf(3, 5, true, {.dtype = DType::kBFloat16});
  EXPECT_EQ(bf.weight().dtype(), DType::kBFloat16);
  EXPECT_EQ(bf.bias().dtype(), DType::kBFloat16);
  // An integer tensor cannot require grad, hence cannot be a parameter.
  Module m("M");
  EXPECT_THROW(m.register_parameter("idx", empty({2}, {.dtype = DType::kInt64})), Error);
  // Buffers stay plain tensors.
  m.register_buffer("steps", empty({1}, {.dtype = DType::kInt64}));
  EXPECT_FALSE(m.buffer("steps").is_parameter());
  EXPECT_FALSE(m.buffer("steps").requires_grad());
}

TEST(Module, AbsentParametersAreNotListed) {
  Linear lin(3, 5, /*bias=*/false);
  EXPECT_FALSE(lin.bias().defined());
  EXPECT_THAT(names(lin.named_parameters()), ElementsAre("weight"));
  LayerNorm ln(DimVector{8}, 1e-5, /*elementwise_affine=*/false);
  EXPECT_TRUE(ln.named_parameters().empty());
  LayerNorm no_bias(DimVector{8}, 1e-5, true, /*bias=*/false);
  EXPECT_THAT(names(no_bias.named_parameters()), ElementsAre("weight"));
}

TEST(Module, RegistrationErrorsNameTheProblem) {
  Module m("M");
  m.register_parameter("w", empty({2}));
  EXPECT_THROW(m.register_parameter("w", empty({2})), Error);
  EXPECT_THROW(m.register_buffer("w", empty({2})), Error);
  EXPECT_THROW(m.register_module("w", std::make_shared<Module>("C")), Error);
  EXPECT_THROW(m.register_parameter("a.b", empty({2})), Error);
  EXPECT_THROW(m.register_parameter("", empty({2})), Error);
  EXPECT_THROW(m.parameter("missing"), Error);
  EXPECT_THROW(m.get_submodule("x.y"), Error);
  // A non-leaf tensor (an op result of a parameter) cannot become a parameter.
  Tensor derived = mul(m.parameter("w"), 2.0);
  EXPECT_THROW(m.register_parameter("d", derived), Error);
  try {
    m.register_parameter("w", empty({2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'w' already exists"));
  }
}

TEST(Module, CyclesAreRejected) {
  auto a = std::make_shared<Module>("A");
  auto b = a->register_module("b", std::make_shared<Module>("B"));
  EXPECT_THROW(b->register_module("a", a), Error);
  EXPECT_THROW(a->register_module("self", a), Error);
}

TEST(Module, BuffersPersistentAndNot) {
  auto root = std::make_shared<Module>("Root");
  auto rope = root->register_module("rope", std::make_shared<Module>("Rope"));
  rope->register_buffer("inv_freq", empty({16}), /*persistent=*/false);
  root->register_buffer("mask", empty({4, 4}, {.dtype = DType::kBool}));
  EXPECT_THAT(names(root->named_buffers()), ElementsAre("mask", "rope.inv_freq"));
  EXPECT_THAT(names(root->named_buffers({.persistent_only = true})), ElementsAre("mask"));
  EXPECT_FALSE(rope->is_buffer_persistent("inv_freq"));
  EXPECT_TRUE(root->named_parameters().empty());
}

TEST(Module, RecurseFalseListsOwnTensorsOnly) {
  test::TinyLM lm;
  EXPECT_TRUE(lm.named_parameters({.recurse = false}).empty());
  EXPECT_THAT(names(lm.layers->get_submodule("0.attn_norm").named_parameters({.recurse = false})),
              ElementsAre("weight", "bias"));
}

TEST(Module, SharedModuleListedOnceUnlessAskedForAll) {
  auto root = std::make_shared<Module>("Root");
  auto shared = std::make_shared<Linear>(2, 2, false);
  root->register_module("first", shared);
  root->register_module("second", shared);
  EXPECT_THAT(names(root->named_modules()), ElementsAre("", "first"));
  EXPECT_THAT(names(root->named_modules(/*remove_duplicate=*/false)),
              ElementsAre("", "first", "second"));
  EXPECT_THAT(names(root->named_parameters()), ElementsAre("first.weight"));
  EXPECT_THAT(names(root->named_parameters({.remove_duplicate = false})),
              ElementsAre("first.weight", "second.weight"));
  EXPECT_EQ(shared->fqn(), "first");
}

TEST(Module, FqnsFollowRegistrationBottomUp) {
  test::TinyLM lm;
  EXPECT_EQ(lm.fqn(), "");
  EXPECT_EQ(lm.embed->fqn(), "embed");
  auto& block = dynamic_cast<test::Block&>((*lm.layers)[1]);
  EXPECT_EQ(block.fqn(), "layers.1");
  EXPECT_EQ(block.attn->q_proj->fqn(), "layers.1.attn.q_proj");
  EXPECT_EQ(block.mlp->down->fqn(), "layers.1.mlp.down");
  // Registering the whole model under a parent renames the subtree; assign_fqns on the model
  // makes it the root again.
  auto outer = std::make_shared<Module>("Wrapper");
  auto inner = outer->register_module("model", std::make_shared<test::TinyLM>());
  EXPECT_EQ(inner->lm_head->fqn(), "model.lm_head");
  inner->assign_fqns();
  EXPECT_EQ(inner->lm_head->fqn(), "lm_head");
}

TEST(Module, ForwardOnMetaGivesShapes) {
  test::TinyLM lm;
  Tensor ids = empty({2, 8}, {.dtype = DType::kInt64});
  Tensor logits = lm.call(ids);
  EXPECT_EQ(logits.sizes(), (DimVector{2, 8, test::TinyLM::kVocab}));
  EXPECT_TRUE(logits.requires_grad());
  auto mlp = test::make_mlp(16, 64, 8);
  EXPECT_EQ((*mlp)(empty({3, 16})).sizes(), (DimVector{3, 8}));
  // ModuleList has no forward of its own.
  EXPECT_THROW(lm.layers->call(empty({2, 8, 32})), Error);
}

TEST(Module, FusedViewsCountTheirStorageOnce) {
  // q, k, v as views of one fused [3*8, 8] storage (the base itself is not registered).
  Module m("FusedQKV");
  Tensor fused = empty({24, 8});
  m.register_parameter("q", narrow(fused, 0, 0, 8));
  m.register_parameter("k", narrow(fused, 0, 8, 8));
  m.register_parameter("v", narrow(fused, 0, 16, 8));
  EXPECT_EQ(m.parameters_numel(), 24 * 8);
  // Two overlapping views: the union of their spans, rows 0..11 = 96 elements.
  Module o("Overlap");
  Tensor base = empty({24, 8});
  o.register_parameter("a", narrow(base, 0, 0, 8));
  o.register_parameter("b", narrow(base, 0, 4, 8));
  EXPECT_EQ(o.parameters_numel(), 12 * 8);
}

}  // namespace
}  // namespace shardplan::tensor
