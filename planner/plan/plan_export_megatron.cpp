// Megatron-LM pretrain_gpt.py arguments for a plan (Note [Export is exact or refused] in
// plan_export.h; the names are those of tests/data/frameworks/megatron_lm_args.txt).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "base/error.h"
#include "planner/plan/plan_export.h"
#include "tensor/training.h"

namespace shardplan::planner {
namespace {

// One "--flag value" or "--flag" per line.
class Args {
 public:
  Args& add(const std::string& flag) {
    os_ << flag << "\n";
    return *this;
  }
  template <typename T>
  Args& add(const std::string& flag, const T& value) {
    if constexpr (std::is_floating_point_v<T>) {
      // The shortest text that reads back as the same double (an ostream keeps 6 digits).
      char buf[32];
      const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
      os_ << flag << " " << std::string_view(buf, static_cast<size_t>(end - buf)) << "\n";
    } else {
      os_ << flag << " " << value << "\n";
    }
    return *this;
  }
  void comment(const std::string& text) { os_ << "# " << text << "\n"; }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

// Megatron's --rotary-base is an integer flag: a rope_theta it cannot hold is refused, not cast
// (a cast made 1e19 into -9223372036854775808 and 0.5 into 0).
int64_t rotary_base(const tensor::ModelConfig& m) {
  constexpr double kLimit = 9007199254740992.0;  // 2^53: every integer below it is a double
  SP_CHECK(m.rope_theta >= 1 && m.rope_theta <= kLimit && std::floor(m.rope_theta) == m.rope_theta,
           "rope_theta ", m.rope_theta,
           ": Megatron's --rotary-base takes a whole number from 1 to ",
           "2^53, expected such a rope_theta (or export to torchtitan)");
  return static_cast<int64_t>(m.rope_theta);
}

// The Llama-shaped families (rotary positions, RMSNorm, a SwiGLU MLP), whose shape Megatron's
// GPT model takes from flags alone.
bool llama_shaped(const tensor::ModelConfig& m) {
  for (const char* t :
       {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe"}) {
    if (m.model_type == t) return m.hidden_act == "silu" && m.kv_lora_rank == 0;
  }
  return false;
}

void model_flags(const PlanFile& p, Args& a) {
  const tensor::ModelConfig& m = p.model;
  if (!llama_shaped(m)) {
    a.comment("model: " + m.model_type +
              " is not a family shardplan writes Megatron model flags for; add its shape (" +
              std::to_string(m.num_hidden_layers) + " layers, hidden " +
              std::to_string(m.hidden_size) + ") yourself");
    a.add("--num-layers", m.num_hidden_layers);
    return;
  }
  a.add("--num-layers", m.num_hidden_layers)
      .add("--hidden-size", m.hidden_size)
      .add("--num-attention-heads", m.num_attention_heads)
      .add("--kv-channels", m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads);
  if (m.num_key_value_heads != m.num_attention_heads) {
    a.add("--group-query-attention").add("--num-query-groups", m.num_key_value_heads);
  }
  a.add("--ffn-hidden-size", m.num_local_experts > 0 && m.dense_intermediate_size > 0
                                 ? m.dense_intermediate_size
                                 : m.intermediate_size)
      .add("--normalization", "RMSNorm")
      .add("--norm-epsilon", m.norm_eps)
      .add("--swiglu")
      .add("--position-embedding-type", "rope")
      .add("--rotary-base", rotary_base(m))
      .add("--vocab-size", m.vocab_size);
  if (!m.tie_word_embeddings) a.add("--untie-embeddings-and-output-weights");
  if (!m.o_bias && !m.mlp_bias) a.add("--disable-bias-linear");
  if (m.qkv_bias) a.add("--add-qkv-bias");
  if (m.model_type == "qwen3" || m.model_type == "qwen3_moe") a.add("--qk-layernorm");
  if (m.num_local_experts > 0) {
    a.add("--num-experts", m.num_local_experts)
        .add("--moe-router-topk", m.num_experts_per_tok)
        .add("--moe-ffn-hidden-size", m.intermediate_size)
        .add("--moe-grouped-gemm")
        .add("--moe-token-dispatcher-type", "alltoall");
    if (m.shared_expert_intermediate_size > 0) {
      a.add("--moe-shared-expert-intermediate-size", m.shared_expert_intermediate_size);
    }
  }
}

// The layer split: nothing when every virtual stage holds the same count (Megatron's default
// split), else the whole layout, stage by stage in virtual-stage order.
void pipeline_flags(const PlanFile& p, Args& a) {
  const ParallelConfig& c = p.config;
  a.add("--pipeline-model-parallel-size", c.pp);
  if (c.pp == 1) return;
  const std::vector<int64_t> chunks = virtual_stage_layers(p);
  const bool uniform =
      std::all_of(chunks.begin(), chunks.end(), [&](int64_t n) { return n == chunks.front(); });
  if (uniform && p.model.mtp_layers == 0) {
    if (c.virtual_stages > 1) a.add("--num-virtual-stages-per-pipeline-rank", c.virtual_stages);
    return;
  }
  std::string layout;
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (k > 0) layout += "|";
    if (k == 0) layout += "E";
    layout += std::string(static_cast<size_t>(chunks[k]), 't');
    if (k + 1 == chunks.size()) {
      layout += std::string(static_cast<size_t>(p.model.mtp_layers), 'm') + "L";
    }
  }
  a.add("--pipeline-model-parallel-layout", layout);
}

}  // namespace

FrameworkExport export_megatron(const PlanFile& p, const ExportOptions& o) {
  const ParallelConfig& c = p.config;
  Args a;
  FrameworkExport e;
  e.launch = launch_line(p, o.launcher, "pretrain_gpt.py $(grep -v '^#' " + o.config_path + ")");
  a.comment("Megatron-LM pretrain_gpt.py arguments for " + p.model_name + " on " +
            std::to_string(p.setup.gpus) + " x " + p.cluster.accelerator.model + " (" +
            p.cluster.name + "), written by shardplan export from a plan for the " + p.stack +
            " stack");
  a.comment("launch: " + e.launch);
  e.notes.push_back(
      "add your data and tokenizer: --data-path ... --tokenizer-type "
      "HuggingFaceTokenizer --tokenizer-model <the model's repository>");
  a.comment(e.notes.back());
  model_flags(p, a);
  a.add("--seq-length", p.setup.seq)
      .add("--max-position-embeddings", std::max(p.setup.seq, p.model.max_position_embeddings))
      .add("--micro-batch-size", c.micro_batch)
      .add("--global-batch-size", p.setup.global_batch)
      .add("--tensor-model-parallel-size", c.tp);
  pipeline_flags(p, a);
  if (p.model.mtp_layers > 0) a.add("--mtp-num-layers", p.model.mtp_layers);
  if (c.cp > 1) a.add("--context-parallel-size", c.cp);
  if (c.ep > 1) a.add("--expert-model-parallel-size", c.ep);
  if (c.etp > 0 && p.model.num_local_experts > 0) a.add("--expert-tensor-parallel-size", c.etp);
  if (c.sequence_parallel && c.tp > 1) a.add("--sequence-parallel");
  // ZeRO: the distributed optimizer shards the optimizer states (1; Megatron keeps the whole
  // gradient buffer, so 2 is priced for a memory it does not save); Megatron-FSDP shards
  // parameters, gradients and states (3).
  if (c.zero == 1 || c.zero == 2) a.add("--use-distributed-optimizer");
  if (c.zero == 3) {
    a.add("--use-megatron-fsdp")
        .add("--data-parallel-sharding-strategy", "optim_grads_params")
        .add("--ckpt-format", "fsdp_dtensor");
  }
  switch (c.recompute) {
    case tensor::RecomputePolicy::kNone:
      break;
    case tensor::RecomputePolicy::kSelective:
      a.add("--recompute-granularity", "selective");
      break;
    case tensor::RecomputePolicy::kFull:
      // The first N layers of each model chunk (Note [Partial recomputation]), or all of them.
      a.add("--recompute-granularity", "full")
          .add("--recompute-method", c.recompute_layers > 0 ? "block" : "uniform")
          .add("--recompute-num-layers", c.recompute_layers > 0 ? c.recompute_layers : 1);
      break;
  }
  a.add("--bf16");
  if (c.precision == Precision::kFp8) {
    a.add("--fp8-format", "hybrid").add("--fp8-recipe", "tensorwise");
  }
  if (c.zero == 2) {
    e.notes.push_back(
        "ZeRO 2 planned: Megatron's distributed optimizer keeps the whole gradient "
        "buffer, so each rank holds more gradient memory than the plan priced");
    a.comment(e.notes.back());
  }
  e.config = a.str();
  return e;
}

}  // namespace shardplan::planner
