// Persimmon's tensor-parallel plan (tensor/models/family_persimmon.cpp) applied: what a TP rank
// holds of Persimmon-8B, counted by hand (Megatron's split: query_key_value, dense_h_to_4h and the
// vocabulary divided by tp; the row-parallel biases, the q/k LayerNorms and the layer norms
// replicated), and where the per-head fused query_key_value puts each rank's rows.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// Persimmon-8B on 4 ranks (h 4,096, 64 heads of 64: 16 whole heads a rank; F 16,384; 36 layers;
// V 262,144 untied):
//   embed_tokens by vocabulary rows: 65,536 x 4,096 = 268,435,456; lm_head the same
//   per layer: query_key_value (3h x h + 3h) / 4 = 12,585,984; dense h x h / 4 = 4,194,304 plus
//              its bias 4,096 (row-parallel: replicated); q_layernorm and k_layernorm 256;
//              dense_h_to_4h (F x h + F) / 4 = 16,781,312; dense_4h_to_h h x F / 4 = 16,777,216
//              plus its bias 4,096; two LayerNorms 16,384
//              = 50,363,648
//   36 x 50,363,648 + final_layernorm 8,192 + 2 x 268,435,456 = 2,349,970,432
// On 2 ranks the same way: 100,702,464 a layer, 4,699,038,720 in all.
TEST(PersimmonTensorParallel, Persimmon8BOnFourAndTwoRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("persimmon-8b-base");
  const int64_t layer =
      12'585'984 + 4'194'304 + 4'096 + 256 + 16'781'312 + 16'777'216 + 4'096 + 16'384;
  EXPECT_EQ(layer, 50'363'648);
  EXPECT_EQ(tp_rank_parameters(c, 4), 36 * layer + 8'192 + 2 * int64_t{268'435'456});
  EXPECT_EQ(tp_rank_parameters(c, 4), 2'349'970'432);
  EXPECT_EQ(tp_rank_parameters(c, 4, 3), 2'349'970'432);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 4'699'038'720);
  EXPECT_EQ(tp_rank_parameters(c, 1), 9'397'175'296);  // the whole model
}

// query_key_value's rows are [heads, 3, head_dim]: a contiguous split (Shard(0), no fused_parts)
// hands rank r of 4 the rows of heads [16 r, 16 r + 16), their q, k and v, and dense's input
// columns of the same heads (Shard(1)); the q/k LayerNorms, over head_dim, stay whole.
TEST(PersimmonTensorParallel, EachRankHoldsWholeHeads) {
  tensor::ModelConfig c = tensor::find_model_config("persimmon-8b-base");
  c.num_hidden_layers = 1;
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  ASSERT_EQ(rules.size(), 6u);
  for (const mesh::StyleRule& r : rules) EXPECT_EQ(r.fused_parts, 1) << r.pattern;
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const auto placement = [&](const std::string& fqn) { return ps.at(fqn).spec.placements[0]; };
  const std::string attn = "model.layers.0.self_attn.";
  EXPECT_EQ(placement(attn + "query_key_value.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(attn + "query_key_value.bias"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(mesh::local_shape(ps.at(attn + "query_key_value.weight").spec, std::vector<int64_t>{1}),
            (DimVector{3 * 4096 / 4, 4096}));
  EXPECT_EQ(placement(attn + "dense.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement(attn + "dense.bias"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement(attn + "q_layernorm.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement(attn + "k_layernorm.bias"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("model.layers.0.mlp.dense_h_to_4h.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("model.layers.0.mlp.dense_4h_to_h.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("model.layers.0.input_layernorm.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("model.embed_tokens.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("lm_head.weight"), mesh::Placement(mesh::Shard{0}));
}

}  // namespace
}  // namespace shardplan::planner
