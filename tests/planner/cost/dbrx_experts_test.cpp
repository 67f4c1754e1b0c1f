// DBRX's routed experts as the planner and the mesh see them: three 2-D tensors w1, v1, w2 of
// [E x F, h] per layer (transformers 5's DbrxExpertGLU), counted as experts, split whole over
// expert-parallel ranks, refused by the experts (feature-split) style; and no tensor-parallel plan
// (Note [DBRX has no tensor-parallel plan] in tensor/models/family_dbrx.cpp). Counts by hand from
// databricks/dbrx-base's config (h 6,144, 16 experts of 10,752).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(DbrxExperts, OneLayersExpertsByHandAndNoTensorParallelism) {
  const tensor::ModelConfig c = tensor::find_model_config("dbrx-base");
  // w1, v1 and w2, each 16 x 10,752 rows of 6,144.
  EXPECT_EQ(expert_parameters_per_layer(c, 1), int64_t{3} * 16 * 10752 * 6144);
  EXPECT_EQ(tp_rank_parameters(c, 1), 131'596'523'520);  // the whole model, "132B"
  EXPECT_THAT([&] { (void)tensor_parallel_rules(tensor::family_of(c)); },
              ThrowsMessage<Error>(HasSubstr("has no tensor-parallel plan yet")));
}

// A two-layer DBRX of 4 experts of 96 (rows of 64): w1, v1, w2 [384, 64].
tensor::ModulePtr tiny_dbrx() {
  const nlohmann::json j = {
      {"model_type", "dbrx"},
      {"vocab_size", 128},
      {"d_model", 64},
      {"n_layers", 2},
      {"n_heads", 4},
      {"attn_config", {{"kv_n_heads", 2}}},
      {"ffn_config", {{"ffn_hidden_size", 96}, {"moe_num_experts", 4}, {"moe_top_k", 2}}}};
  return tensor::build_model(tensor::parse_model_config(j, "tiny-dbrx.json"));
}

TEST(DbrxExperts, ExpertParallelismSplitsWholeExpertsRows) {
  const tensor::ModulePtr m = tiny_dbrx();
  const mesh::DeviceMesh dm({2, 2}, {"dp", "ep"});
  mesh::ParallelizeConfig pc;
  pc.ep_dims = {"ep"};
  std::map<std::string, mesh::ParameterSharding> by;
  for (const auto& p : mesh::parallelize_module(*m, dm, {}, pc)) by.emplace(p.fqn, p);
  for (const char* w : {"w1", "v1", "w2"}) {
    SCOPED_TRACE(w);
    const mesh::ShardSpec& s = by.at(std::string("transformer.blocks.1.ffn.experts.mlp.") + w).spec;
    EXPECT_EQ(s.placements, (std::vector<mesh::Placement>{mesh::Replicate{}, mesh::Shard{0}}));
    // ep rank 1 holds experts 2 and 3: rows 192 .. 383, whole.
    const mesh::MeshCoord rank{0, 1};
    EXPECT_EQ(mesh::local_shape(s, rank), (DimVector{192, 64}));
    const auto ranges = mesh::global_index_ranges(s, rank);
    ASSERT_EQ(ranges[0].size(), 1u);
    EXPECT_EQ(ranges[0][0].begin, 192);
  }
  // Dense weights are not experts: the router stays whole on every ep rank.
  EXPECT_EQ(by.at("transformer.blocks.0.ffn.router.layer.weight").spec.placements,
            (std::vector<mesh::Placement>{mesh::Replicate{}, mesh::Replicate{}}));
}

TEST(DbrxExperts, TheExpertsStyleDoesNotSplitStackedRows) {
  const tensor::ModulePtr m = tiny_dbrx();
  const mesh::DeviceMesh dm({2}, {"tp"});
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const std::vector<mesh::StyleRule> rules = {
      {"transformer.blocks.*.ffn.experts.mlp", mesh::ParallelStyle::kExperts}};
  EXPECT_THAT([&] { (void)mesh::parallelize_module(*m, dm, rules, pc); },
              ThrowsMessage<Error>(HasSubstr("stacks its experts' rows in 2-D tensors")));
}

}  // namespace
}  // namespace shardplan::planner
