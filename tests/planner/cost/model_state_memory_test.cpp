// Model-state memory against ZeRO's published numbers (Rajbhandari et al. SC20, Fig. 1 / §5) and
// Megatron-LM's distributed-optimizer table (docs/user-guide/features/dist_optimizer.md).
#include "planner/cost/model_state_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace shardplan::planner {
namespace {

// ZeRO's worked example: Psi = 7.5B parameters, N_d = 64, K = 12. Expected per-rank bytes, from the
// paper's formulas (ZeRO §3.1 table), written out:
//   baseline   (2 + 2 + K) Psi        = 16 * 7.5e9            = 120 GB
//   P_os       4 Psi + K Psi / N_d    = 30e9 + 12 * 7.5e9/64   = 31.40625 GB  (paper: 31.4)
//   P_os+g     2 Psi + 14 Psi / N_d   = 15e9 + 14 * 7.5e9/64   = 16.640625 GB (paper: 16.6)
//   P_os+g+p   16 Psi / N_d           = 16 * 7.5e9/64          = 1.875 GB     (paper: 1.9)
constexpr uint64_t kPsi = 7'500'000'000;

TEST(ModelStateMemory, ZeroPaperSevenPointFiveBillionOn64Ranks) {
  const MixedPrecision mp;  // 2 + 2 + 12
  EXPECT_EQ(model_state_memory(kPsi, mp, 0, 64).total_bytes(), 120'000'000'000u);
  EXPECT_EQ(model_state_memory(kPsi, mp, 1, 64).total_bytes(), 31'406'250'000u);
  EXPECT_EQ(model_state_memory(kPsi, mp, 2, 64).total_bytes(), 16'640'625'000u);
  EXPECT_EQ(model_state_memory(kPsi, mp, 3, 64).total_bytes(), 1'875'000'000u);
  // The figures as the paper prints them (GB = 1e9 bytes, one decimal).
  auto gb1 = [](uint64_t b) { return std::round(static_cast<double>(b) / 1e8) / 10; };
  EXPECT_DOUBLE_EQ(gb1(model_state_memory(kPsi, mp, 1, 64).total_bytes()), 31.4);
  EXPECT_DOUBLE_EQ(gb1(model_state_memory(kPsi, mp, 2, 64).total_bytes()), 16.6);
  EXPECT_DOUBLE_EQ(gb1(model_state_memory(kPsi, mp, 3, 64).total_bytes()), 1.9);
}

TEST(ModelStateMemory, ComponentsPerStage) {
  const ModelStateMemory s2 = model_state_memory(kPsi, MixedPrecision{}, 2, 64);
  EXPECT_EQ(s2.param_bytes, 2 * kPsi);            // replicated 16-bit weights
  EXPECT_EQ(s2.grad_bytes, 2 * kPsi / 64);        // partitioned gradients
  EXPECT_EQ(s2.optimizer_bytes, 12 * kPsi / 64);  // partitioned master + moments
  EXPECT_EQ(s2.zero_stage, 2);
  EXPECT_EQ(s2.dp, 64);
}

// Megatron-LM dist_optimizer.md, bytes per parameter (d = DP size): bf16 params + fp32 grads
// 18 -> 6 + 12/d; fp32 params + fp32 grads 16 -> 8 + 8/d (ZeRO-1-like: grads not sharded).
TEST(ModelStateMemory, MegatronDistributedOptimizerTable) {
  const uint64_t n = 1'000'000 * 8;  // divisible by d = 8
  const MixedPrecision bf16 = MixedPrecision::adam_bf16_fp32_grads();
  EXPECT_EQ(model_state_memory(n, bf16, 0, 8).total_bytes(), 18 * n);
  EXPECT_EQ(model_state_memory(n, bf16, 1, 8).total_bytes(), 6 * n + 12 * n / 8);
  const MixedPrecision fp32 = MixedPrecision::adam_fp32();
  EXPECT_EQ(model_state_memory(n, fp32, 0, 8).total_bytes(), 16 * n);
  EXPECT_EQ(model_state_memory(n, fp32, 1, 8).total_bytes(), 8 * n + 8 * n / 8);
}

TEST(ModelStateMemory, UnevenPartitionRoundsUp) {
  // 10 parameters over 4 ranks: each rank holds ceil(10/4) = 3 of every partitioned component.
  const ModelStateMemory m = model_state_memory(10, MixedPrecision{}, 3, 4);
  EXPECT_EQ(m.param_bytes, 3u * 2);
  EXPECT_EQ(m.grad_bytes, 3u * 2);
  EXPECT_EQ(m.optimizer_bytes, 3u * 12);
  EXPECT_EQ(model_state_memory(10, MixedPrecision{}, 0, 1).total_bytes(), 160u);
}

TEST(ModelStateMemory, BadInputIsOneClearError) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { model_state_memory(1, MixedPrecision{}, 4, 1); }).find("zero_stage"),
            std::string::npos);
  EXPECT_NE(message([] { model_state_memory(1, MixedPrecision{}, 1, 0); }).find("got 0"),
            std::string::npos);
  EXPECT_NE(message([] {
              model_state_memory(1, MixedPrecision{-1, 2, 4, 8}, 0, 1);
            }).find("param_bytes"),
            std::string::npos);
  // 2^62 parameters x 16 bytes overflows uint64: an error, never a wrapped value.
  EXPECT_NE(message([] {
              model_state_memory(uint64_t{1} << 62, MixedPrecision{}, 0, 1);
            }).find("overflows"),
            std::string::npos);
}

TEST(ModelStateMemory, ValueSemanticsAndJsonRoundTrip) {
  const ModelStateMemory m = model_state_memory(kPsi, MixedPrecision{}, 1, 64);
  const nlohmann::json j = m;
  EXPECT_EQ(j.at("total_bytes").get<uint64_t>(), 31'406'250'000u);
  EXPECT_EQ(j.get<ModelStateMemory>(), m);
  const MixedPrecision mp = MixedPrecision::adam_bf16_fp32_grads();
  EXPECT_EQ(nlohmann::json(mp).get<MixedPrecision>(), mp);
  EXPECT_NE(std::hash<MixedPrecision>{}(mp), std::hash<MixedPrecision>{}(MixedPrecision{}));
  std::ostringstream os;
  os << m;
  EXPECT_NE(os.str().find("total=31406250000"), std::string::npos);
}

}  // namespace
}  // namespace shardplan::planner
