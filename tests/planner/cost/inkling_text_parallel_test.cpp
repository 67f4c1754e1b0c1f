// Inkling (tensor/models/family_inkling_text.cpp) under the planner: its tensor-parallel plan, in
// which the two shared experts of every MoE layer (three [S, F, h] tensors, GroupedExperts::shared)
// split on F as the routed experts do, while expert parallelism splits the routed experts alone;
// and the traced layer's dataflow through both. Counts written out by hand.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/inkling_text_models_test.cpp's tiny config: h 64, V 128, a full layer
// (4 heads, 2 key-value heads of 16, a bias over 32) with the dense MLP (96), two sliding layers
// (8 heads, 4 of 8, a bias over the window of 8) and a full layer with the MoE block (4 experts
// and 2 shared experts of 32, top 2); d_rel 4, convolutions of 3.
tensor::ModelConfig tiny() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "inkling_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 8,
    "sliding_window_size": 8, "d_rel": 4, "rel_extent": 32, "log_scaling_n_floor": 8,
    "conv_kernel_size": 3,
    "layer_types": ["hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid"],
    "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
    "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "n_shared_experts": 2, "logits_mup_width_multiplier": 4.0,
    "max_position_embeddings": 256, "torch_dtype": "bfloat16"
  })"),
                                    "tiny inkling_text");
}

// TP rank 0 of 2. q, k, v, r_proj and o_proj halved; the convolutions, q/k norms and the
// profiles `proj` replicated:
//   full attention     (4,096 + 2,048 + 2,048 + 1,024 + 4,096) / 2 + 192 + 32 + 128    =  7,008
//   sliding attention  (4,096 + 2,048 + 2,048 + 2,048 + 4,096) / 2 + 192 + 16 + 32     =  7,408
//   dense MLP          18,432 / 2 + global_scale 1                                     =  9,217
//   MoE block          router 384 + 1 + 4, experts 24,576 / 2, shared 12,288 / 2       = 18,821
//   each layer's two norms and two convolutions, replicated                            =    512
//   layers 16,737 + 2 x 26,741 + 26,341; embedding and lm_head 8,192 / 2 each; two norms 128
TEST(InklingTextParallel, TinyTensorParallelRankByHand) {
  const int64_t full = (4096 + 2048 + 2048 + 1024 + 4096) / 2 + 192 + 32 + 128;
  const int64_t sliding = (4096 + 2048 + 2048 + 2048 + 4096) / 2 + 192 + 16 + 32;
  const int64_t moe = 384 + 1 + 4 + 24576 / 2 + 12288 / 2;
  EXPECT_EQ(full, 7'008);
  EXPECT_EQ(sliding, 7'408);
  EXPECT_EQ(moe, 18'821);
  const int64_t layers = (full + 9217 + 512) + 2 * (sliding + moe + 512) + (full + moe + 512);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), layers + 2 * 4096 + 128);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2), 104'880);
  EXPECT_EQ(tp_rank_parameters(tiny(), 2, 1), 104'880);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(tiny(), 1), 205'232);     // the whole model
  // One MoE layer's routed experts (not the shared ones): 24,576, halved.
  EXPECT_EQ(expert_parameters_per_layer(tiny(), 2), 24576 / 2);
}

// Inkling on 8 ranks (h 6,144, V 201,024; 64 heads of 128; 8 key-value heads on the 11 full
// layers, 16 on the 55 sliding ones; d_rel 16; 256 experts and 2 shared experts of 3,072):
//   full attention     (50,331,648 x 2 + 6,291,456 x 3) / 8 + 8,192 + 256 + 16,384 = 14,967,040
//   sliding attention  (50,331,648 x 2 + 12,582,912 x 2 + 6,291,456) / 8
//                      + 16,384 + 256 + 8,192                                        = 16,539,904
//   MoE block          router 1,585,409 + experts 14,495,514,624 / 8
//                      + shared 113,246,208 / 8                                   = 1,827,680,513
//   norms and convolutions 61,440; embedding and lm_head 1,235,091,456 / 8 each; 12,288
TEST(InklingTextParallel, FlagshipOnEightRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("inkling");
  const int64_t full = (int64_t{50'331'648} * 2 + 6'291'456 * 3) / 8 + 8'192 + 256 + 16'384;
  const int64_t sliding =
      (int64_t{50'331'648} * 2 + 12'582'912 * 2 + 6'291'456) / 8 + 16'384 + 256 + 8'192;
  const int64_t moe = 1'585'409 + int64_t{14'495'514'624} / 8 + 113'246'208 / 8;
  EXPECT_EQ(full, 14'967'040);
  EXPECT_EQ(sliding, 16'539'904);
  EXPECT_EQ(moe, 1'827'680'513);
  const int64_t total = 11 * (full + moe + 61'440) + 55 * (sliding + moe + 61'440) +
                        2 * int64_t{1'235'091'456} / 8 + 12'288;
  EXPECT_EQ(total, 122'014'086'210);
  EXPECT_EQ(tp_rank_parameters(c, 8), total);
  EXPECT_EQ(expert_parameters_per_layer(c, 8), int64_t{14'495'514'624} / 8);
}

std::map<std::string, mesh::ParameterSharding> placed(const tensor::Module& m,
                                                      const mesh::DeviceMesh& dm,
                                                      const std::vector<mesh::StyleRule>& rules,
                                                      const mesh::ParallelizeConfig& pc) {
  std::map<std::string, mesh::ParameterSharding> by;
  for (const auto& p : mesh::parallelize_module(m, dm, rules, pc)) by.emplace(p.fqn, p);
  return by;
}

// The experts style: the routed experts' gate_up_proj split by halves (_StridedShard), the
// shared experts' gate_proj and up_proj (tensors of their own) and both down_proj plainly.
// Expert parallelism then splits the routed experts only: every token passes through each shared
// expert, which every ep rank keeps whole.
TEST(InklingTextParallel, SharedExpertsSplitOnFeaturesNotByExpert) {
  const tensor::ModulePtr m = tensor::build_model(tiny());
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(tiny()), *m);
  {
    const mesh::DeviceMesh dm({2}, {"tp"});
    mesh::ParallelizeConfig pc;
    pc.tp_dim = "tp";
    const auto by = placed(*m, dm, rules, pc);
    const std::string b = "model.layers.1.mlp.";
    EXPECT_EQ(by.at(b + "experts.gate_up_proj").spec.placements,
              (std::vector<mesh::Placement>{mesh::StridedShard{1, 2}}));
    EXPECT_EQ(by.at(b + "experts.down_proj").spec.placements,
              (std::vector<mesh::Placement>{mesh::Shard{2}}));
    for (const char* p : {"gate_proj", "up_proj"}) {
      EXPECT_EQ(by.at(b + "shared_experts." + p).spec.placements,
                (std::vector<mesh::Placement>{mesh::Shard{1}}))
          << p;
    }
    EXPECT_EQ(by.at(b + "shared_experts.down_proj").spec.placements,
              (std::vector<mesh::Placement>{mesh::Shard{2}}));
    EXPECT_EQ(by.at(b + "gate.weight").spec.placements,
              (std::vector<mesh::Placement>{mesh::Replicate{}}));
    EXPECT_EQ(by.at("model.layers.1.self_attn.r_proj.weight").spec.placements,
              (std::vector<mesh::Placement>{mesh::Shard{0}}));
    EXPECT_EQ(by.at("model.layers.1.self_attn.rel_logits_proj.proj").spec.placements,
              (std::vector<mesh::Placement>{mesh::Replicate{}}));
  }
  const mesh::DeviceMesh dm({2, 2}, {"dp", "ep"});
  mesh::ParallelizeConfig pc;
  pc.ep_dims = {"ep"};
  const auto by = placed(*m, dm, {}, pc);
  const mesh::Placement R = mesh::Replicate{};
  EXPECT_EQ(by.at("model.layers.3.mlp.experts.gate_up_proj").spec.placements,
            (std::vector<mesh::Placement>{R, mesh::Shard{0}}));
  for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
    EXPECT_EQ(by.at(std::string("model.layers.3.mlp.shared_experts.") + p).spec.placements,
              (std::vector<mesh::Placement>{R, R}))
        << p;
  }
}

// The traced sliding MoE layer at tp 2: the shared experts' gate and up products are
// column-parallel and their down product row-parallel, as the routed experts'; only the routed
// experts' reduction vanishes when they go whole (etp 1).
TEST(InklingTextParallel, SharedExpertsKeepTheirReductionWhenRoutedExpertsGoWhole) {
  const tensor::ModelConfig c = tiny();
  const TracedModel t =
      trace_one_block(c, tensor::layer_kind(c, 1),
                      {.micro_batch = 1, .seq = 16, .dtype = tensor::DType::kBFloat16});
  int64_t column = 0, row = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.call < 0 || op.op != "bmm") continue;
    const std::string& fqn = t.step.calls[static_cast<size_t>(op.call)].fqn;
    if (fqn != "model.layers.0.mlp.shared_experts" && fqn != "model.layers.0.mlp.experts") {
      continue;
    }
    const bool shared = fqn.ends_with("shared_experts");
    EXPECT_EQ(t.expert_op[i], !shared) << fqn;
    if (t.split[i] == OpSplit::kColumn && shared) ++column;
    if (t.split[i] == OpSplit::kRow) {
      if (shared) ++row;
      EXPECT_EQ(t.expert_boundary[static_cast<size_t>(op.outputs.front())], !shared) << fqn;
    }
  }
  EXPECT_EQ(column, 2);  // gate and up
  EXPECT_EQ(row, 1);     // down
}

}  // namespace
}  // namespace shardplan::planner
