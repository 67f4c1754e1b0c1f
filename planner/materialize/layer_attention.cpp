#include "planner/materialize/layer_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "planner/cost/block_cost.h"
#include "planner/cost/compute_cost.h"
#include "tensor/models/layer_kinds.h"

namespace shardplan::planner {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The dimension `from_end` places before the last of a traced tensor ([b, h, L, E]: 1 is L).
int64_t dim_from_end(const tensor::StepTensor& t, size_t from_end) {
  SP_CHECK(t.sizes.size() > from_end, "layer_attention: a ", t.sizes.size(),
           "-D attention operand, expected [batch, heads, tokens, channels]");
  return t.sizes[t.sizes.size() - 1 - from_end];
}

}  // namespace

std::vector<AttentionCall> layer_attention(const PlanFile& plan, AttentionKernel kernel) {
  const ParallelConfig& c = plan.config;
  // The planner's attention rate (Search's compute model): the cluster's, times the kernel's.
  ComputeModel rate = compute_model(plan.cluster, c.precision);
  rate.attention_matmul_efficiency *= attention_kernel_rate(kernel, plan.cluster.accelerator.arch);
  const ComputeModel attn = attention_compute(rate);
  const tensor::LayerStack stack = tensor::layer_stack(plan.model);
  std::vector<AttentionCall> out;
  for (const tensor::LayerKind& kind : stack.kinds) {
    const TracedModel t = trace_one_block(
        plan.model, kind, {.micro_batch = c.micro_batch, .seq = plan.setup.seq / c.cp});
    for (size_t i = 0; i < t.step.ops.size(); ++i) {
      const tensor::TrainingOp& op = t.step.ops[i];
      // The lightning indexer's scoring runs DeepSeek's own kernel, which PyTorch has not: it
      // is priced, not rehearsed (Note [Rehearsed attention]).
      if (t.part[i] != Part::kBlock || op.skipped || op.op != "scaled_dot_product_attention" ||
          op.inputs.size() < 3 || indexer_attention(t, i)) {
        continue;
      }
      const auto& tensors = t.step.tensors;
      const tensor::StepTensor& q = tensors[static_cast<size_t>(op.inputs[0])];
      const tensor::StepTensor& k = tensors[static_cast<size_t>(op.inputs[1])];
      const tensor::StepTensor& v = tensors[static_cast<size_t>(op.inputs[2])];
      AttentionCall call;
      call.layer = tensor::describe(kind);
      call.batch = dim_from_end(q, 3);
      // A replicated attention (the lightning indexer) runs all its heads on every rank.
      const int64_t split = t.split[i] == OpSplit::kReplicated ? 1 : c.tp;
      call.heads = ceil_div(dim_from_end(q, 2), split);
      call.kv_heads = ceil_div(dim_from_end(k, 2), split);
      call.head_dim = dim_from_end(q, 0);
      call.value_dim = dim_from_end(v, 0);
      // A replicated attention under sequence parallelism runs the rank's 1 / tp of the
      // queries against every key, as the cost model prices it (rank_work's share).
      const bool sp_share = split == 1 && c.sequence_parallel && c.tp > 1;
      const int64_t queries = sp_share ? ceil_div(dim_from_end(q, 1), c.tp) : dim_from_end(q, 1);
      const int64_t all_keys = dim_from_end(k, 1) * c.cp;
      const int64_t keys =
          windowed_attention(t, i) ? std::min(all_keys, t.attention_window) : all_keys;
      if (t.sliding && keys < all_keys) {
        call.stands_for = "a sliding window: each of " + std::to_string(queries) +
                          " queries against its " + std::to_string(keys) + " keys";
        call.queries = queries;
        call.keys = keys;
        call.causal = false;
      } else if (keys == queries) {
        call.stands_for = "a causal square";
        call.queries = call.keys = queries;
      } else if (c.cp == 1 && keys < queries && queries % keys == 0) {
        call.stands_for = std::to_string(queries / keys) + " chunks of " + std::to_string(keys) +
                          ", each a causal square";
        call.batch *= queries / keys;
        call.queries = call.keys = keys;
      } else {
        call.stands_for = "the rank's " + std::to_string(queries) + " queries against half of " +
                          std::to_string(keys) + " keys (what a causal mask leaves" +
                          (c.cp > 1 ? ", over the context-parallel ring)" : ")");
        call.queries = queries;
        call.keys = ceil_div(keys, 2);
        call.causal = false;
      }
      const OpSeconds s = fused_attention_seconds(attn, {.batch_heads = call.batch * call.heads,
                                                         .queries = call.queries,
                                                         .keys = call.keys,
                                                         .head_dim = call.head_dim,
                                                         .value_dim = call.value_dim,
                                                         .causal = call.causal});
      call.predicted_forward_s = s.forward;
      call.predicted_backward_s = s.backward + s.recompute;
      out.push_back(call);
    }
  }
  return out;
}

nlohmann::ordered_json attention_calls_json(const std::vector<AttentionCall>& calls) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AttentionCall& c : calls) {
    rows.push_back({{"layer", c.layer},
                    {"stands_for", c.stands_for},
                    {"batch", c.batch},
                    {"heads", c.heads},
                    {"kv_heads", c.kv_heads},
                    {"seq", c.queries},
                    {"keys", c.keys},
                    {"head_dim", c.head_dim},
                    {"value_dim", c.value_dim},
                    {"causal", c.causal},
                    {"predicted_forward_s", c.predicted_forward_s},
                    {"predicted_backward_s", c.predicted_backward_s}});
  }
  return rows;
}

}  // namespace shardplan::planner
