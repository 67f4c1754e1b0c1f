#include "planner/candidate/stack_profile.h"

#include <algorithm>

#include "base/config_paths.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/strict_json.h"
#include "planner/candidate/parallel_dims.h"

namespace shardplan::planner {

namespace {

constexpr std::string_view kFormat = "shardplan.stack";

// {"value": x, "source": "..."}: a sourced number in (0, max].
double sourced_number(JsonFields& doc, std::string_view key, double max) {
  JsonFields q = doc.object(key);
  const double v = q.number("value");
  if (q.str("source").empty()) q.fail("source", "expected a non-empty source for the number");
  if (!(v > 0 && v <= max)) {
    q.fail("value", "got " + std::to_string(v) + ", expected a number in (0, " +
                        std::to_string(static_cast<int>(max)) + "]");
  }
  q.done();
  return v;
}

bool sourced_flag(JsonFields& doc, std::string_view key) {
  JsonFields q = doc.object(key);
  const bool v = q.boolean("value");
  if (q.str("source").empty()) q.fail("source", "expected a non-empty source for the flag");
  q.done();
  return v;
}

}  // namespace

double attention_kernel_rate(AttentionKernel k, collectives::Arch arch) {
  if (k == AttentionKernel::kFused) return 1;
  // Note [Attention kernels]: FlashAttention-2 against cuDNN on an H100, 335 / 539 forward and
  // 322 / 516 backward.
  constexpr double kFlash2OnHopper = 0.62;
  return arch == collectives::Arch::kHopper || arch == collectives::Arch::kBlackwell
             ? kFlash2OnHopper
             : 1.0;
}

std::filesystem::path resolve_stack(std::string_view name_or_path) {
  return find_config("stacks", name_or_path);
}

StackProfile stack_from_json(const nlohmann::json& j, const std::string& origin) {
  JsonFields doc(j, origin);
  if (doc.str("format") != kFormat) {
    doc.fail("format", "expected '" + std::string(kFormat) + "' (a shardplan stack file)");
  }
  doc.integer("version", 1, 1);
  StackProfile s;
  s.name = doc.str("name");
  if (s.name.empty()) doc.fail("name", "expected a non-empty name");
  s.description = doc.str("description");
  s.compute_efficiency = sourced_number(doc, "compute_efficiency", 1);
  if (doc.has("gemm_efficiency")) s.gemm_efficiency = sourced_number(doc, "gemm_efficiency", 1);
  if (doc.has("ring_attention_rate")) {
    s.ring_attention_rate = sourced_number(doc, "ring_attention_rate", 1);
  }
  s.overlap_interference = sourced_number(doc, "overlap_interference", 1);
  {
    JsonFields q = doc.object("selective_recompute");
    const std::string v = q.str("value");
    if (v == "attention_core") {
      s.selective = tensor::SelectiveRecompute::kAttentionCore;
    } else if (v == "every_other_matmul") {
      s.selective = tensor::SelectiveRecompute::kEveryOtherMatmul;
    } else {
      q.fail("value", "got '" + v + "', expected attention_core or every_other_matmul");
    }
    if (q.str("source").empty()) q.fail("source", "expected a non-empty source");
    q.done();
  }
  // Optional (files written before it existed run the fused kernel).
  if (doc.has("attention_kernel")) {
    JsonFields q = doc.object("attention_kernel");
    const std::string v = q.str("value");
    if (v == "fused") {
      s.attention_kernel = AttentionKernel::kFused;
    } else if (v == "flash2") {
      s.attention_kernel = AttentionKernel::kFlash2;
    } else {
      q.fail("value", "got '" + v + "', expected fused or flash2");
    }
    if (q.str("source").empty()) q.fail("source", "expected a non-empty source");
    q.done();
  }
  {
    JsonFields z = doc.object("zero_stages");
    s.zero_stages.clear();
    for (int64_t stage : z.integers("value", 0, 3))
      s.zero_stages.push_back(static_cast<int>(stage));
    if (s.zero_stages.empty()) z.fail("value", "expected at least one ZeRO stage (0-3)");
    if (z.str("source").empty()) z.fail("source", "expected a non-empty source");
    z.done();
  }
  s.fp8_current_scaling = sourced_flag(doc, "fp8_current_scaling");
  s.fp8_weight_casts = sourced_flag(doc, "fp8_weight_cast_per_micro_batch");
  s.interleaved_pipeline = sourced_flag(doc, "interleaved_pipeline");
  s.pp_overlap_interleaved = sourced_flag(doc, "pipeline_send_overlap");
  if (doc.has("fp32_gradient_reduce")) {
    s.fp32_gradient_reduce = sourced_flag(doc, "fp32_gradient_reduce");
  }
  s.context_parallel = sourced_flag(doc, "context_parallel");
  s.expert_parallel = sourced_flag(doc, "expert_parallel");
  s.whole_experts = sourced_flag(doc, "whole_experts");
  doc.done();
  return s;
}

StackProfile load_stack(const std::filesystem::path& path) {
  constexpr int kMaxDepth = 4;
  const nlohmann::json j = parse_strict_json(read_text_file(path, "stack file"), path.string(),
                                             kMaxDepth, "a shardplan stack file");
  return stack_from_json(j, path.string());
}

StackProfile default_stack() {
  std::filesystem::path path;
  try {
    path = resolve_stack("megatron");
  } catch (const Error&) {
    return StackProfile{};  // no configs folder: the built-in values, which the file states
  }
  return load_stack(path);  // a shipped file that does not parse is an error, not a fallback
}

bool stack_runs(const StackProfile& s, const ParallelConfig& c) {
  return std::find(s.zero_stages.begin(), s.zero_stages.end(), c.zero) != s.zero_stages.end() &&
         (c.virtual_stages <= 1 || s.interleaved_pipeline) && (c.cp <= 1 || s.context_parallel) &&
         (c.ep <= 1 || s.expert_parallel) && (c.ep <= 1 || expert_tp(c) == c.tp || s.whole_experts);
}

std::string stack_refuses(const StackProfile& s, const ParallelConfig& c) {
  if (stack_runs(s, c)) return "";
  const std::string by = " (--stack " + s.name + " cannot run it)";
  if (std::find(s.zero_stages.begin(), s.zero_stages.end(), c.zero) == s.zero_stages.end()) {
    std::string stages;
    for (int z : s.zero_stages) stages += (stages.empty() ? "" : ", ") + std::to_string(z);
    return "--zero " + std::to_string(c.zero) + by + ", expected one of " + stages;
  }
  if (c.virtual_stages > 1 && !s.interleaved_pipeline) {
    return "--virtual-stages " + std::to_string(c.virtual_stages) + by + ", expected 1";
  }
  if (c.cp > 1 && !s.context_parallel) return "--cp " + std::to_string(c.cp) + by + ", expected 1";
  if (c.ep > 1 && !s.expert_parallel) return "--ep " + std::to_string(c.ep) + by + ", expected 1";
  if (c.ep > 1 && expert_tp(c) != c.tp && !s.whole_experts) {
    return "--etp " + std::to_string(expert_tp(c)) + by + ", expected --etp " +
           std::to_string(c.tp);
  }
  return "";
}

}  // namespace shardplan::planner
