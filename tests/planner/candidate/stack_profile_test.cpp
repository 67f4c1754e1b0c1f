#include "planner/candidate/stack_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(StackProfile, TheBuiltInDefaultIsTheMegatronFile) {
  // PlannerOptions{} (tests, benchmarks) and --stack megatron price alike.
  const StackProfile file = load_stack(resolve_stack("megatron"));
  StackProfile built_in;
  built_in.description = file.description;  // prose, not a price
  EXPECT_TRUE(file == built_in);
  // And a field differing is seen.
  built_in.fp8_current_scaling = !built_in.fp8_current_scaling;
  EXPECT_FALSE(file == built_in);
}

TEST(StackProfile, EveryShippedStackLoadsAndNamesItself) {
  for (const char* name :
       {"megatron", "megatron-2021", "torchtitan", "torchtitan-compile", "deepspeed", "pytorch",
        "automodel"}) {
    SCOPED_TRACE(name);
    const StackProfile s = load_stack(resolve_stack(name));
    EXPECT_EQ(s.name, name);
    EXPECT_GT(s.compute_efficiency, 0);
    EXPECT_LE(s.compute_efficiency, 1);
    EXPECT_FALSE(s.zero_stages.empty());
  }
}

TEST(StackProfile, RefusalsNameTheStackAndTheFlag) {
  const StackProfile titan = load_stack(resolve_stack("torchtitan"));
  // torchtitan has no ZeRO-1 (FSDP2 shards gradients and parameters too).
  EXPECT_EQ(stack_refuses(titan, {.dp = 8, .zero = 1}),
            "--zero 1 (--stack torchtitan cannot run it), expected one of 0, 2, 3");
  EXPECT_EQ(stack_refuses(titan, {.dp = 8, .zero = 3}), "");
  const StackProfile old = load_stack(resolve_stack("megatron-2021"));
  EXPECT_EQ(stack_refuses(old, {.dp = 4, .cp = 2}),
            "--cp 2 (--stack megatron-2021 cannot run it), expected 1");
  const StackProfile ds = load_stack(resolve_stack("deepspeed"));
  EXPECT_EQ(stack_refuses(ds, {.pp = 4, .virtual_stages = 2}),
            "--virtual-stages 2 (--stack deepspeed cannot run it), expected 1");
}

TEST(StackProfile, ABadFileNamesTheField) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "format": "shardplan.stack", "version": 1, "name": "x", "description": "",
    "compute_efficiency": {"value": 1.5, "source": "s"}})");
  EXPECT_THAT([&] { (void)stack_from_json(j, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("compute_efficiency")));
  j["compute_efficiency"]["value"] = 0.5;
  EXPECT_THAT([&] { (void)stack_from_json(j, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("overlap_interference")));
  // The optional ring rate is a fraction in (0, 1] with its source.
  nlohmann::json ring =
      nlohmann::json::parse(read_text_file(resolve_stack("torchtitan"), "stack file"));
  ring["ring_attention_rate"] = {{"value", 0}, {"source", "s"}};
  EXPECT_THAT([&] { (void)stack_from_json(ring, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("ring_attention_rate")));
  ring["ring_attention_rate"] = {{"value", 0.5}};
  EXPECT_THAT([&] { (void)stack_from_json(ring, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("source")));
  ring["ring_attention_rate"] = {{"value", 0.5}, {"source", "s"}};
  EXPECT_DOUBLE_EQ(stack_from_json(ring, "x.json").ring_attention_rate, 0.5);
  // So is the optional fp32 gradient reduction, a flag with its source.
  EXPECT_TRUE(load_stack(resolve_stack("torchtitan")).fp32_gradient_reduce);
  EXPECT_FALSE(load_stack(resolve_stack("megatron")).fp32_gradient_reduce);
  ring["fp32_gradient_reduce"] = {{"value", true}};
  EXPECT_THAT([&] { (void)stack_from_json(ring, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("fp32_gradient_reduce")));
  EXPECT_THAT([&] { (void)resolve_stack("no-such-stack"); },
              ThrowsMessage<Error>(HasSubstr("no-such-stack")));
}

// Note [Attention kernels]: FlashAttention-2 against cuDNN on an H100 SXM, head dim 128, 16K
// tokens (Shah et al. 2024, FlashAttention-3, Figures 5 and 6): 335 / 539 forward (causal),
// 322 / 516 backward; both round to 0.62.
TEST(StackProfile, FlashAttention2RunsAtItsPublishedShareOnHopper) {
  EXPECT_NEAR(335.0 / 539.0, 0.62, 0.005);
  EXPECT_NEAR(322.0 / 516.0, 0.62, 0.005);
  using collectives::Arch;
  EXPECT_DOUBLE_EQ(attention_kernel_rate(AttentionKernel::kFlash2, Arch::kHopper), 0.62);
  EXPECT_DOUBLE_EQ(attention_kernel_rate(AttentionKernel::kFlash2, Arch::kBlackwell), 0.62);
  // On Ampere FlashAttention-2 is the fast kernel; the fused kernel is the file's rate anywhere.
  EXPECT_DOUBLE_EQ(attention_kernel_rate(AttentionKernel::kFlash2, Arch::kAmpere), 1);
  EXPECT_DOUBLE_EQ(attention_kernel_rate(AttentionKernel::kFused, Arch::kHopper), 1);
  // torchtitan's December 2024 runs called SDPA's flash backend (cuDNN's was opt-in then);
  // today's PyTorch and Megatron's TransformerEngine call cuDNN's kernels.
  EXPECT_EQ(load_stack(resolve_stack("torchtitan")).attention_kernel, AttentionKernel::kFlash2);
  EXPECT_EQ(load_stack(resolve_stack("pytorch")).attention_kernel, AttentionKernel::kFused);
  EXPECT_EQ(load_stack(resolve_stack("megatron")).attention_kernel, AttentionKernel::kFused);
}

TEST(StackProfile, AttentionKernelIsOptionalAndChecked) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "format": "shardplan.stack", "version": 1, "name": "x", "description": "",
    "compute_efficiency": {"value": 0.5, "source": "s"},
    "overlap_interference": {"value": 0.1, "source": "s"},
    "selective_recompute": {"value": "attention_core", "source": "s"},
    "zero_stages": {"value": [0, 3], "source": "s"},
    "fp8_current_scaling": {"value": true, "source": "s"},
    "fp8_weight_cast_per_micro_batch": {"value": false, "source": "s"},
    "interleaved_pipeline": {"value": true, "source": "s"},
    "pipeline_send_overlap": {"value": false, "source": "s"},
    "context_parallel": {"value": true, "source": "s"},
    "expert_parallel": {"value": true, "source": "s"},
    "whole_experts": {"value": true, "source": "s"}})");
  // A file written before the field existed runs the fused kernel.
  EXPECT_EQ(stack_from_json(j, "x.json").attention_kernel, AttentionKernel::kFused);
  j["attention_kernel"] = {{"value", "flash2"}, {"source", "s"}};
  EXPECT_EQ(stack_from_json(j, "x.json").attention_kernel, AttentionKernel::kFlash2);
  j["attention_kernel"]["value"] = "flash9";
  EXPECT_THAT([&] { (void)stack_from_json(j, "x.json"); },
              ThrowsMessage<Error>(HasSubstr("got 'flash9', expected fused or flash2")));
}

}  // namespace
}  // namespace shardplan::planner
