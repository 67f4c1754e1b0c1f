// zamba's tensor-parallel plan (tensor/models/family_zamba.cpp) applied: what a TP rank holds,
// counted by hand on a tiny config, the placements of the mixer's and the shared block's
// parameters, and the traced hybrid layer's splits by dataflow (Note [Tracing one block at full
// width]).
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

// tests/tensor/models/zamba_models_test.cpp's tiny config: 6 layers, hybrid at 1, 3 and 4 (one
// block, held by layer 1), h 32, V 128, 4 heads and 2 key-value heads of 16 over 2h = 64, I 48,
// the mixer 2 heads of 32 channels (D 64), state 8, time-step rank 4, 4 taps.
tensor::ModelConfig tiny() {
  const nlohmann::json j = {
      {"model_type", "zamba"},
      {"vocab_size", 128},
      {"hidden_size", 32},
      {"num_hidden_layers", 6},
      {"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"intermediate_size", 48},
      {"n_mamba_heads", 2},
      {"mamba_d_state", 8},
      {"mamba_dt_rank", 4},
      {"torch_dtype", "bfloat16"}};
  return tensor::parse_model_config(j, "tiny.json");
}

// Rank 0 of 2:
//   embed_tokens (lm_head tied) by vocabulary rows: 64 x 32 = 2,048; final_layernorm 32
//   each of the 6 mixers: in_proj [128, 32] by rows 64 x 32 = 2,048, out_proj [32, 64] by
//     columns 32 x 32 = 1,024, conv1d 64 x 4 + 64, x_proj_weight 2 x 20 x 32, dt_proj_weight
//     2 x 32 x 4, dt_proj_bias 64, A_log 2 x 32 x 8 and D 64 replicated (2,496); its layer's
//     input_layernorm 32: 5,600, six of them 33,600
//   each hybrid layer's linear [32, 32] replicated: 3 x 1,024 = 3,072
//   the block: q [64, 64] by rows 32 x 64 = 2,048; k, v [32, 64] by rows 16 x 64 = 1,024 each;
//     o_proj [32, 64] by columns 1,024; gate, up [48, 32] by rows 768 each; down [32, 48] by
//     columns 768; norms 64 + 32 replicated: 7,520
//   2,048 + 32 + 33,600 + 3,072 + 7,520 = 46,272
TEST(ZambaTensorParallel, TinyOnTwoRanks) {
  const tensor::ModelConfig c = tiny();
  EXPECT_EQ(tp_rank_parameters(c, 2), 46'272);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 46'272);  // even splits
  EXPECT_EQ(tp_rank_parameters(c, 1), 74'176);     // the whole model, each tied tensor once
}

// in_proj's rows interleave x and the gate channel by channel: a plain Shard(0) gives each rank
// whole channels. The per-head tensors are held whole, as the block's norms and `linear`.
TEST(ZambaTensorParallel, PlacementsOfTheMixerAndTheBlock) {
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
  const std::string x = "model.layers.0.mamba.";
  EXPECT_EQ(placement(x + "in_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(x + "out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  for (const char* p : {"x_proj_weight", "dt_proj_weight", "dt_proj_bias", "A_log", "D",
                        "conv1d.weight", "conv1d.bias"}) {
    EXPECT_EQ(placement(x + p), mesh::Placement(mesh::Replicate{})) << p;
  }
  EXPECT_EQ(placement("model.layers.3.mamba_decoder.mamba.in_proj.weight"),
            mesh::Placement(mesh::Shard{0}));
  const std::string b = "model.layers.1.shared_transf.";
  EXPECT_EQ(placement(b + "self_attn.q_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(b + "self_attn.k_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(b + "self_attn.o_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement(b + "feed_forward.up_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement(b + "feed_forward.down_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement(b + "input_layernorm.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("model.layers.1.linear.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("model.embed_tokens.weight"), mesh::Placement(mesh::Shard{0}));
  // The tied blocks of layers 3 and 4 are layer 1's tensors, sharded once.
  EXPECT_EQ(ps.count("model.layers.3.shared_transf.self_attn.q_proj.weight"), 0u);
}

// The traced hybrid layer (one layer of that kind): the block's projections and the mixer split as
// the plan says, the layer's `linear` replicated, the mixer's per-head products and scans reading
// the rank's channels; its keys and values are 2 heads x (16 + 16) channels of 2 bytes a token.
TEST(ZambaTensorParallel, TracedHybridLayerSplits) {
  const tensor::ModelConfig c = tiny();
  const TraceKey key{.micro_batch = 1, .seq = 64, .dtype = tensor::DType::kBFloat16};
  const TracedModel t = trace_one_block(c, tensor::layer_kind(c, 1), key);
  EXPECT_EQ(t.kv_bytes, 64 * 2 * (16 + 16) * 2);
  std::map<std::string, OpSplit> split;  // by the call's FQN, one GEMM each
  int scans = 0, products = 0;
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_TRUE(t.score_op[i]);
    }
    if (op.op == "selective_scan_fn" || op.op == "matmul") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded) << op.op;
      scans += op.op == "selective_scan_fn";
      products += op.op == "matmul";
    }
    if (op.op != "linear" || op.call < 0) continue;
    split[t.step.calls[static_cast<size_t>(op.call)].fqn] = t.split[i];
  }
  EXPECT_EQ(scans, 2);     // one per head
  EXPECT_EQ(products, 2);  // x_proj's and dt_proj's per-head products
  const std::string b = "model.layers.0.shared_transf.";
  const std::map<std::string, OpSplit> want = {
      {"model.layers.0.linear", OpSplit::kReplicated},
      {"model.layers.0.mamba_decoder.mamba.in_proj", OpSplit::kColumn},
      {"model.layers.0.mamba_decoder.mamba.out_proj", OpSplit::kRow},
      {b + "self_attn.q_proj", OpSplit::kColumn},
      {b + "self_attn.k_proj", OpSplit::kColumn},
      {b + "self_attn.v_proj", OpSplit::kColumn},
      {b + "self_attn.o_proj", OpSplit::kRow},
      {b + "feed_forward.gate_proj", OpSplit::kColumn},
      {b + "feed_forward.up_proj", OpSplit::kColumn},
      {b + "feed_forward.down_proj", OpSplit::kRow},
      {"lm_head", OpSplit::kColumn}};
  EXPECT_EQ(split, want);
  // A Mamba layer keeps no keys.
  EXPECT_EQ(trace_one_block(c, tensor::layer_kind(c, 0), key).kv_bytes, 0);
}

}  // namespace
}  // namespace shardplan::planner
