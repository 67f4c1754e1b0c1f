// Every plan the planner writes is accepted back: for every shipped model, every shipped cluster
// and each precision the cluster states a peak for, the best plan of a job that fits goes through
// plan.json (text, parsed strictly, read back) and the dry run of materialize, as
// `shardplan plan ... --out p.json && shardplan materialize --plan p.json --dry-run` does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "base/config_paths.h"
#include "base/error.h"
#include "base/strict_json.h"
#include "collectives/cluster.h"
#include "planner/materialize/dry_run.h"
#include "planner/materialize/layout.h"
#include "planner/plan/plan_file.h"
#include "planner/search/planner.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// The jobs of the hardening issue: 64 GPUs, sequences of 2,048, 256 per step (more GPUs where a
// model needs them); on the CPU cluster 4 ranks, 512 tokens, 8 sequences.
// Under AddressSanitizer (the asan-ubsan preset, a Debug build) a search is some 30 times slower:
// there the test crosses instead of multiplying, every model on dgx-h100 in bf16 and gpt2 on
// every cluster and precision; the default build runs the whole product.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

bool in_run(const std::string& model, const std::string& cluster, Precision p) {
  return !kSanitized || model == "gpt2" || (cluster == "dgx-h100" && p == Precision::kBf16);
}

std::vector<TrainingSetup> jobs_for(const collectives::Cluster& c) {
  if (c.accelerator.arch == collectives::Arch::kCpu)
    return {{.gpus = 4, .seq = 512, .global_batch = 8}};
  return {{.gpus = 64, .seq = 2048, .global_batch = 256},
          {.gpus = 512, .seq = 2048, .global_batch = 512},
          {.gpus = 4096, .seq = 2048, .global_batch = 4096}};
}

TEST(PlanRoundTrip, EveryShippedModelClusterAndPrecisionIsAcceptedBack) {
  int64_t round_trips = 0;
  std::vector<std::string> skipped;
  for (const std::string& model_name : list_configs("models")) {
    const tensor::ModelConfig model = tensor::find_model_config(model_name);
    for (const std::string& cluster_name : list_configs("clusters")) {
      const collectives::Cluster cluster =
          collectives::load_cluster(collectives::resolve_cluster(cluster_name));
      for (const Precision precision : {Precision::kBf16, Precision::kFp8}) {
        if (precision == Precision::kFp8 && !cluster.accelerator.dense_tflops.contains("fp8")) {
          continue;  // the cluster states no fp8 peak: --precision fp8 is refused there
        }
        if (!in_run(model_name, cluster_name, precision)) continue;
        SCOPED_TRACE(model_name + " on " + cluster_name + " in " +
                     std::string(to_string(precision)));
        PlannerOptions options;
        options.precision = precision;
        options.attention = model.attn_implementation == "eager" ? tensor::AttentionImpl::kMath
                                                                 : tensor::AttentionImpl::kFlash;
        bool done = false;
        std::string why;
        for (TrainingSetup job : jobs_for(cluster)) {
          // GPT-2 has 1,024 positions: its sequences are as long as it takes.
          job.seq = std::min(job.seq, model.max_position_embeddings);
          Planner p(model, cluster, job, options);
          const SearchResult r = p.search({}, 1);
          if (r.top.empty()) {  // nothing fits: a larger job
            why = std::to_string(job.gpus) + " ranks need at least " +
                  std::to_string(r.least_memory ? r.least_memory->memory_bytes >> 30 : -1) +
                  " GiB each";
            continue;
          }
          const std::string text = plan_to_json(plan_file(p, r.top[0], model_name)).dump(2);
          PlanFile back;
          ASSERT_NO_THROW(
              back = plan_from_json(parse_strict_json(text, "p.json", 16, "a plan"), "p.json"));
          const int64_t capacity =
              static_cast<int64_t>(back.cluster.accelerator.memory_gb.value * 1e9);
          if (tensor::family_of(model).init_rules.empty()) {
            // Families whose init has no fill here (the linear-attention ones' log-uniform A_log)
            // plan and round-trip, and materialize refuses them by name.
            EXPECT_THROW(
                {
                  try {
                    const MaterialLayout refused(std::move(back));
                  } catch (const Error& e) {
                    EXPECT_THAT(e.what(), ::testing::HasSubstr("family has no init rules"));
                    throw;
                  }
                },
                Error);
            ++round_trips;
            done = true;
            break;
          }
          const MaterialLayout layout(std::move(back));
          ASSERT_NO_THROW((void)dry_run(layout, capacity));
          ++round_trips;
          done = true;
          break;
        }
        if (!done) skipped.push_back(model_name + " on " + cluster_name + ": " + why);
      }
    }
  }
  // Only models too large for every job (1T parameters on 4 CPU cores) are skipped, with a reason.
  for (const std::string& s : skipped) {
    EXPECT_NE(s.find("cpu-local"), std::string::npos)
        << s << ": no plan fits even 4,096 GPUs; expected only the CPU cluster to be too small";
  }
  std::cout << round_trips << " round trips; skipped, as nothing fits:\n";
  for (const std::string& s : skipped) std::cout << "  " << s << "\n";
  EXPECT_GT(round_trips, kSanitized ? 25 : 150);
}

}  // namespace
}  // namespace shardplan::planner
