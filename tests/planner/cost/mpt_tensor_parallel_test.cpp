// MPT's tensor-parallel plan (tensor/models/family_mpt.cpp) applied: what a TP rank holds, against
// counts written out by hand from MPT-30B's config, and the fused Wqkv split as three parts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// MPT-30B on 8 ranks (h 7,168, MLP 4h = 28,672, vocabulary 50,432, 48 layers, no biases, lm_head
// tied to wte):
//   wte (and the tied lm_head, once) by vocabulary rows: 50,432 x 7,168 / 8 = 45,187,072
//   per layer: Wqkv 3 x 7,168^2 / 8 = 19,267,584 (q, k and v each split); out_proj 7,168^2 / 8 =
//              6,422,528; up_proj and down_proj 4 x 7,168^2 / 8 = 25,690,112 each; norm_1,
//              norm_2 14,336 (replicated)
//   48 x 77,084,672 + norm_f 7,168 + 45,187,072 = 3,745,258,496
TEST(MptTensorParallel, ThirtyBOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("mpt-30b");
  EXPECT_EQ(tp_rank_parameters(c, 8), 3'745'258'496);
  EXPECT_EQ(tp_rank_parameters(c, 8, 7), 3'745'258'496);  // 64 heads, 50,432 rows: even splits
  EXPECT_EQ(tp_rank_parameters(c, 1), 29'957'200'896);    // the whole model
}

// Wqkv's rows are [q; k; v], each h of whole heads: with fused_parts 3 rank r of 4 holds rows
// [r h/4, (r+1) h/4) of each of the three (_StridedShard(0, 3)), so the same heads of q, k and v;
// out_proj splits its input columns (Shard(1)) over those heads.
TEST(MptTensorParallel, FusedQkvSplitsEachPart) {
  tensor::ModelConfig c = tensor::find_model_config("mpt-7b");
  c.num_hidden_layers = 1;
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  ASSERT_EQ(rules.size(), 6u);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({4}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const auto placement = [&](const std::string& fqn) { return ps.at(fqn).spec.placements[0]; };
  EXPECT_EQ(placement("transformer.blocks.0.attn.Wqkv.weight"),
            mesh::Placement(mesh::StridedShard{0, 3}));
  EXPECT_EQ(mesh::local_shape(ps.at("transformer.blocks.0.attn.Wqkv.weight").spec,
                              std::vector<int64_t>{2}),
            (DimVector{3 * 4096 / 4, 4096}));
  EXPECT_EQ(placement("transformer.blocks.0.attn.out_proj.weight"),
            mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("transformer.blocks.0.ffn.up_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("transformer.blocks.0.ffn.down_proj.weight"),
            mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("transformer.blocks.0.norm_1.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("transformer.wte.weight"), mesh::Placement(mesh::Shard{0}));
}

}  // namespace
}  // namespace shardplan::planner
