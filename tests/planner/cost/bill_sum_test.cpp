// The bill is the sum (Note [Step model parts] in planner/cost/step_model.cpp): for random
// candidates of every kind the planner prices (pipelined, interleaved, ZeRO 3, context and expert
// parallel, partial recomputation), the bill's time parts add up to the step time, and the exposed
// seconds of its collectives add up to its two communication parts.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/search/planner.h"

namespace shardplan::planner {
namespace {

struct Seen {
  int pipelined = 0, interleaved = 0, zero3 = 0, cp = 0, ep = 0, partial = 0, priced = 0;
};

void price_random_candidates(const tensor::ModelConfig& cfg, const std::string& model,
                             TrainingSetup setup, int tries, Seen& seen) {
  Planner p(cfg, collectives::load_cluster(collectives::resolve_cluster("dgx-h100")), setup, {});
  std::mt19937_64 rng(20261126);
  auto pick = [&rng](std::initializer_list<int64_t> values) {
    std::uniform_int_distribution<size_t> d(0, values.size() - 1);
    return *(values.begin() + d(rng));
  };
  for (int i = 0; i < tries; ++i) {
    ParallelConfig c;
    c.tp = pick({1, 2, 4, 8});
    c.cp = pick({1, 1, 2, 4});
    c.pp = pick({1, 2, 4, 8});
    if (setup.gpus % (c.tp * c.cp * c.pp) != 0) continue;
    c.dp = setup.gpus / (c.tp * c.cp * c.pp);
    c.ep = pick({1, 2, 4, 8});
    c.zero = static_cast<int>(pick({0, 1, 2, 3}));
    c.micro_batch = pick({1, 2});
    c.recompute = static_cast<tensor::RecomputePolicy>(pick({0, 1, 2}));
    if (c.recompute == tensor::RecomputePolicy::kFull) c.recompute_layers = pick({0, 0, 1, 3});
    c.virtual_stages = pick({1, 1, 2, 4});
    c.sequence_parallel = c.tp > 1 && pick({0, 1}) == 1;
    Bill bill;
    PlanResult r;
    try {
      r = p.estimate(c, DimOrder::kTpInner, &bill);
    } catch (const Error&) {
      continue;  // not a runnable configuration of this job
    }
    SCOPED_TRACE(model + ": tp " + std::to_string(c.tp) + " cp " + std::to_string(c.cp) + " pp " +
                 std::to_string(c.pp) + " dp " + std::to_string(c.dp) + " ep " +
                 std::to_string(c.ep) + " zero " + std::to_string(c.zero) + " v " +
                 std::to_string(c.virtual_stages));
    double sum = 0;
    for (const BillTimePart& t : time_parts(bill)) {
      EXPECT_GE(t.seconds, 0) << t.name;
      sum += t.seconds;
    }
    EXPECT_NEAR(sum, r.step_time_s, 1e-12 * r.step_time_s);
    double exposed = 0;
    for (const BillCollective& bc : bill.collectives) exposed += bc.exposed_s;
    EXPECT_NEAR(exposed, bill.stage_comm_s + bill.dp_sync_s, 1e-9 * r.step_time_s);
    ++seen.priced;
    seen.pipelined += c.pp > 1;
    seen.interleaved += c.virtual_stages > 1;
    seen.zero3 += c.zero == 3 && c.dp > 1;
    seen.cp += c.cp > 1;
    seen.ep += c.ep > 1;
    seen.partial += c.recompute_layers > 0;
  }
}

void price_random_candidates(const std::string& model, TrainingSetup setup, int tries, Seen& seen) {
  price_random_candidates(tensor::find_model_config(model), model, setup, tries, seen);
}

TEST(BillSum, TimePartsAddUpToTheStepTime) {
  Seen seen;
  price_random_candidates("llama3-70b", {.gpus = 64, .seq = 8192, .global_batch = 256}, 400, seen);
  price_random_candidates("mixtral-8x7b", {.gpus = 64, .seq = 4096, .global_batch = 256}, 400,
                          seen);
  price_random_candidates("llama3-8b", {.gpus = 32, .seq = 8192, .global_batch = 64}, 300, seen);
  // A stack of two layer kinds (Note [Stack of layer kinds]): Mixtral with its first three
  // layers dense.
  tensor::ModelConfig mixed = tensor::find_model_config("mixtral-8x7b");
  mixed.dense_layers = {0, 1, 2};
  mixed.dense_intermediate_size = 28672;
  price_random_candidates(mixed, "mixtral-8x7b, 3 dense layers",
                          {.gpus = 64, .seq = 4096, .global_batch = 256}, 300, seen);
  // The sample covers every kind the issue names, many times over.
  EXPECT_GE(seen.priced, 200);
  EXPECT_GE(seen.pipelined, 50);
  EXPECT_GE(seen.interleaved, 20);
  EXPECT_GE(seen.zero3, 20);
  EXPECT_GE(seen.cp, 20);
  EXPECT_GE(seen.ep, 20);
  EXPECT_GE(seen.partial, 10);
}

}  // namespace
}  // namespace shardplan::planner
