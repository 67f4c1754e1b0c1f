// The module-boundary redistributions of mesh/module_boundaries.h, planned by the greedy planner:
// each is exactly one collective on the TP mesh dim, of the kind Megatron (all_reduce) and
// Korthikanti et al. 2022 §4.2.2 (all_gather / reduce_scatter) name, with the buffer worked out by
// hand from the Llama 3 8B shapes (hidden 4096, vocab 128256, bf16 = 2 bytes) and token ids [2,
// 16].
#include <gtest/gtest.h>

#include "collectives/redistribute_plan.h"
#include "mesh/module_boundaries.h"
#include "tensor/models/models.h"

namespace shardplan::collectives {
namespace {

using enum mesh::ParallelStyle;
using mesh::Placement;

const Placement R = mesh::Replicate{};
Placement S(int64_t d) { return mesh::Shard{d}; }

tensor::ModulePtr small_llama() {
  tensor::ModelConfig cfg = tensor::find_model_config("llama3-8b");
  cfg.num_hidden_layers = 2;
  return tensor::build_model(cfg);
}

mesh::ParallelizeConfig cfg(std::string tp, std::vector<std::string> fsdp = {}) {
  mesh::ParallelizeConfig c;
  c.tp_dim = std::move(tp);
  c.fsdp_dims = std::move(fsdp);
  return c;
}

// One communicating step per boundary: its op and padded bytes per rank.
std::vector<std::pair<StepOp, int64_t>> planned(
    const mesh::DeviceMesh& mesh, const std::vector<mesh::BoundaryRedistribution>& bs) {
  std::vector<std::pair<StepOp, int64_t>> out;
  for (const auto& b : bs) {
    const RedistributePlan p =
        plan_redistribute(mesh::make_shard_spec(b.shape, b.dtype, mesh, b.from), b.to);
    EXPECT_EQ(p.num_collectives(), 1) << b.fqn;
    for (const RedistributeStep& s : p.steps) {
      if (s.communicates()) out.emplace_back(s.op, s.bytes_per_rank);
    }
  }
  return out;
}

TEST(ModuleBoundaryPlans, MegatronAllReducesTheFullHiddenState) {
  const auto lm = small_llama();
  const mesh::DeviceMesh mesh({4}, {"tp"});
  const std::vector<mesh::StyleRule> rules{{"model.embed_tokens", kRowwise, R},
                                           {"model.layers.*.self_attn.[qkv]_proj", kColwise},
                                           {"model.layers.*.self_attn.o_proj", kRowwise},
                                           {"model.layers.*.mlp.[gu]*_proj", kColwise},
                                           {"model.layers.*.mlp.down_proj", kRowwise}};
  const auto bs =
      mesh::module_boundary_redistributions(*lm, mesh, rules, cfg("tp"), tensor::token_ids(2, 16));
  // all_reduce buffer: the whole [2, 16, 4096] bf16 tensor = 262144 bytes; embed + 2 per layer.
  const std::pair<StepOp, int64_t> ar{StepOp::kAllReduce, 2 * 16 * 4096 * 2};
  EXPECT_EQ(planned(mesh, bs), (std::vector<std::pair<StepOp, int64_t>>(5, ar)));
}

TEST(ModuleBoundaryPlans, SequenceParallelGathersAndScattersOneBatchShard) {
  const auto lm = small_llama();
  const mesh::DeviceMesh mesh({2, 4}, {"dp", "tp"});
  mesh::StyleRule embed{"model.embed_tokens", kRowwise, R},
      o{"model.layers.*.self_attn.o_proj", kRowwise},
      down{"model.layers.*.mlp.down_proj", kRowwise}, head{"lm_head", kColwise, S(1)};
  embed.output_layout = o.output_layout = down.output_layout = S(1);
  head.output_layout = R;
  const std::vector<mesh::StyleRule> rules{embed,
                                           {"model.layers.*.*_layernorm", kSequence},
                                           {"model.layers.*.self_attn", kPrepareInput, S(1), R},
                                           {"model.layers.*.self_attn.[qkv]_proj", kColwise},
                                           o,
                                           {"model.layers.*.mlp", kPrepareInput, S(1), R},
                                           {"model.layers.*.mlp.[gu]*_proj", kColwise},
                                           down,
                                           {"model.norm", kSequence},
                                           head};
  const auto bs = mesh::module_boundary_redistributions(*lm, mesh, rules, cfg("tp", {"dp"}),
                                                        tensor::token_ids(2, 16));
  // dp halves the batch: each rank's full-sequence hidden state is [1, 16, 4096] bf16 = 131072
  // bytes, all_gather's output and reduce_scatter's input alike. Logits: [1, 16, 128256] bf16.
  const int64_t hidden = 1 * 16 * 4096 * 2, logits = 1 * 16 * 128256 * 2;
  using V = std::vector<std::pair<StepOp, int64_t>>;
  V expected{{StepOp::kReduceScatter, hidden}};
  for (int l = 0; l < 2; ++l) {
    for (StepOp op :
         {StepOp::kAllGather, StepOp::kReduceScatter, StepOp::kAllGather, StepOp::kReduceScatter}) {
      expected.emplace_back(op, hidden);
    }
  }
  expected.emplace_back(StepOp::kAllGather, hidden);  // lm_head input: sequence gathered
  expected.emplace_back(StepOp::kAllGather, logits);  // lm_head output: vocab gathered
  EXPECT_EQ(planned(mesh, bs), expected);
}

}  // namespace
}  // namespace shardplan::collectives
