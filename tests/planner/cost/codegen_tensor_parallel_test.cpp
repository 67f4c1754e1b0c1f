// CodeGen's tensor-parallel plan (tensor/models/family_codegen.cpp) applied: what a TP rank holds
// of CodeGen-16B, counted by hand; which tp keeps q, k and v of the same heads on a rank given
// qkv_proj's 4 blocks of [q; v; k] (Note [CodeGen's qkv layout]), worked out row by row from
// transformers' CodeGenAttention.forward and checked against the planner's rule; and how the
// planner splits one traced block (Note [Tracing one block at full width]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/parallel_style.h"
#include "mesh/shard_spec.h"
#include "planner/candidate/parallel_config.h"
#include "planner/candidate/parallel_dims.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;

// CodeGen-16B on 4 ranks (h 6,144, 24 heads of 256: one block of 6 a rank, F 24,576, V 51,200
// untied, 34 layers; q/k/v and out_proj without biases):
//   wte by vocabulary rows: 12,800 x 6,144 = 78,643,200
//   lm_head: the same rows 78,643,200 plus its bias split with them, 12,800: 78,656,000
//   per layer: qkv_proj 3 x 6,144^2 / 4 = 28,311,552; out_proj 6,144^2 / 4 = 9,437,184;
//              fc_in (F x h + F) / 4 = 37,754,880; fc_out h x F / 4 = 37,748,736 plus its bias
//              6,144 (row-parallel: replicated); ln_1 12,288
//              = 113,270,784
//   34 x 113,270,784 + ln_f 12,288 + 78,643,200 + 78,656,000 = 4,008,518,144
// On 2 ranks the same way: 226,523,136 a layer, 8,016,397,312 in all.
TEST(CodegenTensorParallel, Codegen16BOnFourAndTwoRanks) {
  const tensor::ModelConfig c = tensor::find_model_config("codegen-16b-mono");
  const int64_t layer = 28'311'552 + 9'437'184 + 37'754'880 + 37'748'736 + 6'144 + 12'288;
  EXPECT_EQ(layer, 113'270'784);
  EXPECT_EQ(tp_rank_parameters(c, 4), 34 * layer + 12'288 + 78'643'200 + 78'656'000);
  EXPECT_EQ(tp_rank_parameters(c, 4), 4'008'518'144);
  EXPECT_EQ(tp_rank_parameters(c, 4, 3), 4'008'518'144);  // even splits: every rank alike
  EXPECT_EQ(tp_rank_parameters(c, 2), 8'016'397'312);
  EXPECT_EQ(tp_rank_parameters(c, 1), 16'032'155'648);  // the whole model
}

// qkv_proj splits by contiguous rows (Shard(0), no fused_parts): at tp 4 a rank holds 4,608 rows,
// one block (q, v and k of 6 heads of 256), and out_proj's 1,536 input columns of those 6 heads.
TEST(CodegenTensorParallel, EachRankHoldsOneWholeBlockAtTpFour) {
  tensor::ModelConfig c = tensor::find_model_config("codegen-16b-mono");
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
  const std::string attn = "transformer.h.0.attn.";
  EXPECT_EQ(placement(attn + "qkv_proj.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(mesh::local_shape(ps.at(attn + "qkv_proj.weight").spec, std::vector<int64_t>{2}),
            (DimVector{3 * 6 * 256, 6144}));
  EXPECT_EQ(placement(attn + "out_proj.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(mesh::local_shape(ps.at(attn + "out_proj.weight").spec, std::vector<int64_t>{2}),
            (DimVector{6144, 6 * 256}));
  EXPECT_EQ(placement("transformer.h.0.mlp.fc_in.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("transformer.h.0.mlp.fc_out.weight"), mesh::Placement(mesh::Shard{1}));
  EXPECT_EQ(placement("transformer.h.0.ln_1.weight"), mesh::Placement(mesh::Replicate{}));
  EXPECT_EQ(placement("transformer.wte.weight"), mesh::Placement(mesh::Shard{0}));
  EXPECT_EQ(placement("lm_head.bias"), mesh::Placement(mesh::Shard{0}));
}

// Whether a contiguous split of qkv_proj's rows and of out_proj's input columns over tp ranks
// gives every rank q, k and v of exactly the heads whose out_proj columns it holds, worked out
// row by row from transformers' forward: the output reshaped to [4, 3 h / 4], each block split
// into q, v, k of h / 4 channels, the block's H / 4 heads following block m's m H / 4 earlier
// ones, and the merged heads (out_proj's input) in head order.
bool splits_by_whole_heads(int64_t heads, int64_t head_dim, int64_t tp) {
  const int64_t h = heads * head_dim, rows = 3 * h, block = rows / 4, local = h / 4;
  if (rows % tp != 0 || h % tp != 0) return false;  // no even split
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = r / block, off = r % block % local;
    const int64_t head = m * (heads / 4) + off / head_dim;
    const int64_t column = head * head_dim + off % head_dim;  // the same for q, v and k rows
    if (r / (rows / tp) != column / (h / tp)) return false;
  }
  return true;
}

TEST(CodegenTensorParallel, TpMustDivideTheFourBlocks) {
  const tensor::ModelConfig c = tensor::find_model_config("codegen-16b-mono");
  const TrainingSetup s{.gpus = 64, .seq = 2048, .global_batch = 64};
  // The row-by-row check finds exactly the divisors of 4 among 1..48 for 24 heads of 256, and
  // the planner's rule (heads, then the blocks) agrees at every degree.
  std::vector<int64_t> whole;
  for (int64_t tp = 1; tp <= 48; ++tp) {
    SCOPED_TRACE(tp);
    const bool ok = splits_by_whole_heads(24, 256, tp);
    if (ok) whole.push_back(tp);
    EXPECT_EQ(dim(kTpDim).refuses(c, s, tp).empty(), ok) << dim(kTpDim).refuses(c, s, tp);
  }
  EXPECT_EQ(whole, (std::vector<int64_t>{1, 2, 4}));
  // tp 8 divides the 24 heads but cuts each block between its q and v: refused, naming why.
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8),
            "--tp 8 does not divide the 4 blocks of codegen's fused qkv projection, expected a "
            "divisor of 4 (each block holds q, k and v of 6 heads, which a column split must keep "
            "on one rank)");
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 3), HasSubstr("the 4 blocks of codegen's"));
  EXPECT_THAT(dim(kTpDim).refuses(c, s, 5), HasSubstr("24 attention heads"));
  // The same rule at CodeGen-350M's 16 heads of 64 and a tiny 8 heads of 8: 1, 2, 4 only.
  for (const auto& [heads, d] : {std::pair<int64_t, int64_t>{16, 64}, {8, 8}}) {
    for (int64_t tp = 1; tp <= 2 * heads; ++tp) {
      EXPECT_EQ(splits_by_whole_heads(heads, d, tp), tp == 1 || tp == 2 || tp == 4)
          << heads << " heads, tp " << tp;
    }
  }
}

// One traced block of a tiny CodeGen (h 64, 8 heads of 8, F 96) at tp 4: qkv_proj column-parallel
// (192 output features, 48 a rank), the attention core on a quarter of the (batch x heads),
// out_proj and fc_out row-parallel (64 and 96 input features, 16 and 24 a rank).
TEST(CodegenTensorParallel, TracedBlockSplitsTheBlockedProjectionByColumns) {
  const nlohmann::json j = {{"model_type", "codegen"},
                            {"vocab_size", 128},
                            {"n_embd", 64},
                            {"n_layer", 2},
                            {"n_head", 8},
                            {"n_positions", 32},
                            {"n_inner", 96},
                            {"rotary_dim", 4}};
  const tensor::ModelConfig c = tensor::parse_model_config(j, "tiny-codegen");
  const TracedModel t = trace_one_block(c, {.micro_batch = 2, .seq = 16});
  const RankSplit split{.tp = 4};
  int seen = 0;
  std::vector<OpSplit> copies;  // the attention's copying reshapes, in trace order
  for (size_t i = 0; i < t.step.ops.size(); ++i) {
    const tensor::TrainingOp& op = t.step.ops[i];
    const std::string fqn = op.call >= 0 ? t.step.calls[static_cast<size_t>(op.call)].fqn : "";
    SCOPED_TRACE(fqn + " " + op.op);
    if (op.op == "reshape" && !op.is_view && fqn == "transformer.h.0.attn") {
      copies.push_back(t.split[i]);
    }
    if (op.matmul_flops <= 0 || op.call < 0) continue;
    const GemmShape g = local_gemm_shape(t, i, split);
    if (fqn == "transformer.h.0.attn.qkv_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 48);
      ++seen;
    } else if (fqn == "transformer.h.0.attn.out_proj") {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      EXPECT_EQ(g.k, 16);
      ++seen;
    } else if (fqn == "transformer.h.0.mlp.fc_in") {
      EXPECT_EQ(t.split[i], OpSplit::kColumn);
      EXPECT_EQ(g.n, 24);
      ++seen;
    } else if (fqn == "transformer.h.0.mlp.fc_out") {
      EXPECT_EQ(t.split[i], OpSplit::kRow);
      EXPECT_EQ(g.k, 24);
      ++seen;
    } else if (op.op == "scaled_dot_product_attention") {
      EXPECT_EQ(t.split[i], OpSplit::kSharded);
      EXPECT_EQ(g.batch, 2 * 8 / 4);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 5);
  // The folds of q, k and v into heads read the column-parallel output (1 / tp of the copy a
  // rank); the repeated sin and cos of k and q read the replicated table; merge_heads reads the
  // sharded attention output.
  const OpSplit S = OpSplit::kSharded, R = OpSplit::kReplicated;
  EXPECT_EQ(copies, (std::vector<OpSplit>{S, S, S, R, R, R, R, S}));
  // The keys and values a context-parallel ring passes: 8 heads of 8 + 8 channels, bf16.
  EXPECT_EQ(t.kv_bytes, 2 * 16 * 8 * (8 + 8) * 2);
}

}  // namespace
}  // namespace shardplan::planner
