// zamba2's tensor-parallel plan (tensor/models/family_zamba2.cpp) applied: what a TP rank holds,
// counted by hand on a tiny config, the placements of the shared block's fused gate_up_proj and
// of its adapters, and the traced hybrid layer's splits by dataflow (Note [Tracing one block at
// full width]).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

// tests/tensor/models/zamba2_models_test.cpp's tiny config: 6 layers, hybrid at 1, 3 and 4
// (blocks 0, 1, 0), h 32, V 128, 4 heads of 16 over 2h = 64, I 48, adapters of rank 8 on q, k,
// v and gate_up, Mamba-2 4 heads of 16 in 2 groups of state 8, 4 taps.
tensor::ModelConfig tiny() {
  const nlohmann::json j = {
      {"model_type", "zamba2"},
      {"vocab_size", 128},
      {"hidden_size", 32},
      {"num_hidden_layers", 6},
      {"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
      {"num_attention_heads", 4},
      {"intermediate_size", 48},
      {"num_mem_blocks", 2},
      {"adapter_rank", 8},
      {"use_shared_attention_adapter", true},
      {"use_mem_rope", true},
      {"n_mamba_heads", 4},
      {"mamba_ngroups", 2},
      {"mamba_d_state", 8},
      {"torch_dtype", "bfloat16"}};
  return tensor::parse_model_config(j, "tiny.json");
}

// Rank 0 of 2:
//   embed_tokens (lm_head tied) by vocabulary rows: 64 x 32 = 2,048; final_layernorm 32
//   each of the 6 mixers: in_proj [164, 32] by rows 82 x 32 = 2,624, out_proj [32, 64] by
//     columns 32 x 32 = 1,024, conv1d 96 x 4 + 96, dt_bias, A_log, D 12 and norm 64 replicated;
//     its layer's input_layernorm 32: 4,236, six of them 25,416
//   each hybrid layer's linear [32, 32] replicated: 3 x 1,024 = 3,072
//   each of the 2 blocks: q, k, v [64, 64] by rows 3 x 32 x 64 = 6,144; o_proj [32, 64] by
//     columns 1,024; gate_up [96, 32] by rows (each half split) 1,536; down [32, 48] by columns
//     768; norms 64 + 32 replicated: 9,568, two of them 19,136
//   each of the 3 adapter slots: q, k, v's first Linear [8, 64] replicated and second [64, 8] by
//     rows 3 x (512 + 256) = 2,304; gate_up's [8, 32] replicated and [96, 8] by rows 256 + 384:
//     2,944, three of them 8,832
//   2,048 + 32 + 25,416 + 3,072 + 19,136 + 8,832 = 58,536
TEST(Zamba2TensorParallel, TinyOnTwoRanks) {
  const tensor::ModelConfig c = tiny();
  EXPECT_EQ(tp_rank_parameters(c, 2), 58'536);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 58'536);  // even splits
  EXPECT_EQ(tp_rank_parameters(c, 1), 104'872);    // the whole model, each tied tensor once
}

// gate_up_proj's rows are [gate; up]: with fused_parts 2 each rank holds its share of both halves
// (_StridedShard(0, 2)), and its adapter's second Linear, added to it, the same rows; the
// adapters' first Linear stays whole on every rank.
TEST(Zamba2TensorParallel, PlacementsOfTheBlockAndItsAdapters) {
  const tensor::ModelConfig c = tiny();
  const tensor::ModulePtr m = tensor::build_model(c);
  const std::vector<mesh::StyleRule> rules = tensor_parallel_rules(tensor::family_of(c), *m);
  mesh::ParallelizeConfig pc;
  pc.tp_dim = "tp";
  const mesh::DeviceMesh dm({2}, {"tp"});
  std::map<std::string, mesh::ParameterSharding> ps;
  for (const mesh::ParameterSharding& p : mesh::parallelize_module(*m, dm, rules, pc)) {
    ps.emplace(p.fqn, p);
  }
  const auto placement = [&](const std::string& fqn) { return ps.at(fqn).spec.placements[0]; };
  const std::string b = "model.layers.3.shared_transformer.";
  EXPECT_EQ(placement(b + "feed_forward.gate_up_proj.weight"),
            mesh::Placement(mesh::StridedShard{0, 2}));
  EXPECT_EQ(placement(b + "feed_forward.gate_up_proj_adapter_list.1.1.weight"),
            mesh::Placement(mesh::StridedShard{0, 2}));
  EXPECT_EQ(placement(b + "feed_forward.gate_up_proj_adapter_list.1.0.weight"),
            mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement(b + "feed_forward.down_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement(b + "self_attn.k_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(b + "self_attn.linear_k_adapter_list.1.1.weight"),
            mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(b + "self_attn.linear_k_adapter_list.1.0.weight"),
            mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement(b + "self_attn.o_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("model.layers.3.linear.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("model.layers.3.mamba_decoder.mamba.in_proj.weight"),
            mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("model.layers.0.mamba.out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("model.embed_tokens.weight"), mesh::Placement(mesh::Shard{0}));
  // The tied block of layer 4 is layer 1's tensors, sharded once.
  EXPECT_EQ(ps.count("model.layers.4.shared_transformer.self_attn.q_proj.weight"), 0u);
}

// The traced hybrid layer (one layer of that kind, Note [Tracing one block at full width]): the
// block's projections and the Mamba-2 mixer split as the plan says, the adapters' first GEMM
// replicated and their second split with the projection it joins, the layer's `linear`
// replicated; its keys and values are 4 heads x (16 + 16) channels of 2 bytes a token.
TEST(Zamba2TensorParallel, TracedHybridLayerSplits) {
  const tensor::ModelConfig c = tiny();
  const TraceKey key{.micro_batch = 1, .seq = 64, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 1), key);
  EXPECT_EQ(t.kv_bytes, 64 * 4 * (16 + 16) * 2);
  std::map<std::string, OpSplit> split;  // by the call's FQN, one GEMM each
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_TRUE(t.score_op[i]);
    }
    if (op.op != "linear" || op.call < 0) continue;
    split[t.step.calls[static_cast<size_t>(op.call)].fqn] = t.split[i];
  }
  const std::string b = "model.layers.0.shared_transformer.";
  const std::map<std::string, OpSplit> want = {
      {"model.layers.0.linear", OpSplit::kReplicated},
      {"model.layers.0.mamba_decoder.mamba.in_proj", OpSplit::kColumn},
      {"model.layers.0.mamba_decoder.mamba.out_proj", OpSplit::kRow},
      {b + "self_attn.q_proj", OpSplit::kColumn},
      {b + "self_attn.k_proj", OpSplit::kColumn},
      {b + "self_attn.v_proj", OpSplit::kColumn},
      {b + "self_attn.linear_q_adapter_list.0.0", OpSplit::kReplicated},
      {b + "self_attn.linear_q_adapter_list.0.1", OpSplit::kColumn},
      {b + "self_attn.linear_k_adapter_list.0.0", OpSplit::kReplicated},
      {b + "self_attn.linear_k_adapter_list.0.1", OpSplit::kColumn},
      {b + "self_attn.linear_v_adapter_list.0.0", OpSplit::kReplicated},
      {b + "self_attn.linear_v_adapter_list.0.1", OpSplit::kColumn},
      {b + "self_attn.o_proj", OpSplit::kRow},
      {b + "feed_forward.gate_up_proj", OpSplit::kColumn},
      {b + "feed_forward.gate_up_proj_adapter_list.0.0", OpSplit::kReplicated},
      {b + "feed_forward.gate_up_proj_adapter_list.0.1", OpSplit::kColumn},
      {b + "feed_forward.down_proj", OpSplit::kRow},
      {"lm_head", OpSplit::kColumn}};
  EXPECT_EQ(split, want);
  // A Mamba-2 layer keeps no keys.
  EXPECT_EQ(trace_one_block(c, tensor::layer_kind(c, 0), key).kv_bytes, 0);
}

}  // namespace
}  // namespace shardplan::planner
