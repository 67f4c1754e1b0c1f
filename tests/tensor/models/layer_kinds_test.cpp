// A model as a stack of layer kinds (tensor/models/layer_kinds.h): the kinds of a mixed MoE stack
// (dense layers before routed ones, as DeepSeek-V3's first_k_dense_replace makes them), the model
// each builds, and the configs that are refused.
#include "tensor/models/layer_kinds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/error.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::tensor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A small Mixtral whose layers 0 and 2 keep a dense MLP of width 96.
ModelConfig mixed_moe() {
  ModelConfig c;
  c.model_type = "mixtral";
  c.vocab_size = 100;
  c.hidden_size = 16;
  c.intermediate_size = 24;  // per expert
  c.num_hidden_layers = 5;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.max_position_embeddings = 64;
  c.hidden_act = "silu";
  c.num_local_experts = 4;
  c.num_experts_per_tok = 2;
  c.dense_layers = {0, 2};
  c.dense_intermediate_size = 96;
  return c;
}

TEST(LayerKinds, AMixedStackListsItsKindsInOrder) {
  const LayerStack s = layer_stack(mixed_moe());
  ASSERT_EQ(s.kinds.size(), 2U);
  EXPECT_EQ(describe(s.kinds[0]), "dense");
  EXPECT_EQ(describe(s.kinds[1]), "moe");
  EXPECT_THAT(s.kind_of_layer, ElementsAre(0, 1, 0, 1, 1));
  EXPECT_FALSE(s.uniform());
  EXPECT_EQ(s.first_layer(1), 1);
  EXPECT_EQ(s.count(0), 2);
  EXPECT_EQ(s.count(1), 3);
  ModelConfig llama = mixed_moe();
  llama.model_type = "llama";
  llama.num_local_experts = llama.num_experts_per_tok = 0;
  llama.dense_layers.clear();
  llama.dense_intermediate_size = 0;
  EXPECT_TRUE(layer_stack(llama).uniform());
}

TEST(LayerKinds, EachLayerIsBuiltAsItsKind) {
  const ModulePtr m = build_model(mixed_moe());
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t total = 0;
  for (const NamedTensor& p : m->named_parameters()) {
    shapes[p.name] = std::vector<int64_t>(p.tensor.sizes().begin(), p.tensor.sizes().end());
    total += p.tensor.numel();
  }
  EXPECT_THAT(shapes.at("model.layers.0.mlp.gate_proj.weight"), ElementsAre(96, 16));
  EXPECT_THAT(shapes.at("model.layers.2.mlp.down_proj.weight"), ElementsAre(16, 96));
  EXPECT_THAT(shapes.at("model.layers.1.mlp.experts.gate_up_proj"), ElementsAre(4, 48, 16));
  EXPECT_THAT(shapes.at("model.layers.1.mlp.experts.down_proj"), ElementsAre(4, 16, 24));
  EXPECT_EQ(shapes.count("model.layers.0.mlp.gate.weight"), 0U);
  // By hand: embedding and lm_head 2 x 100 x 16; per layer attention q, o 16 x 16 each and k, v
  // 8 x 16 each (2 heads of 4), two norms of 16; dense MLP 3 x 16 x 96; MoE router 4 x 16 and 4
  // experts of 3 x 16 x 24; final norm 16.
  const int64_t attention = 2 * 16 * 16 + 2 * 8 * 16 + 2 * 16;
  const int64_t dense = 3 * 16 * 96, moe = 4 * 16 + 4 * 3 * 16 * 24;
  EXPECT_EQ(total, 2 * 100 * 16 + 5 * attention + 2 * dense + 3 * moe + 16);
  // A token passes through 2 of the 4 experts of each of the 3 MoE layers.
  const int64_t experts = 3 * 4 * 3 * 16 * 24;
  EXPECT_EQ(active_parameters(*m, mixed_moe()), total - experts + experts / 4 * 2);
}

TEST(LayerKinds, AUniformConfigOfEachKindBuildsThatKind) {
  const ModelConfig c = mixed_moe();
  const LayerStack s = layer_stack(c);
  const ModelConfig dense = uniform_config(c, s.kinds[0], 3);
  EXPECT_EQ(dense.num_hidden_layers, 3);
  EXPECT_THAT(dense.dense_layers, ElementsAre(0, 1, 2));
  EXPECT_TRUE(layer_stack(dense).uniform());
  const ModelConfig moe = uniform_config(c, s.kinds[1]);
  EXPECT_TRUE(moe.dense_layers.empty());
  EXPECT_EQ(layer_kind(moe, 0).ffn, FfnKind::kMoe);
}

TEST(LayerKinds, DenseLayersOutsideAnMoeModelOrOutOfOrderAreRefused) {
  ModelConfig c = mixed_moe();
  c.dense_layers = {2, 0};
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr("field 'dense_layers': layer 0 out of order")));
  c.dense_layers = {5};
  EXPECT_THAT([&] { validate(c); },
              ThrowsMessage<Error>(HasSubstr("expected increasing layers in 0..4")));
  c = mixed_moe();
  c.model_type = "llama";
  c.num_local_experts = c.num_experts_per_tok = 0;
  EXPECT_THAT([&] { validate(c); }, ThrowsMessage<Error>(HasSubstr("expected an MoE model")));
  EXPECT_THAT([&] { (void)layer_kind(mixed_moe(), 5); },
              ThrowsMessage<Error>(HasSubstr("layer 5, expected one of 0..4")));
}

}  // namespace
}  // namespace shardplan::tensor
