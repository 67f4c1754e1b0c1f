// The options of the planning verbs (plan, estimate, compare): the model, where it trains, the
// job, the pins, and the planner's options; and the JSON of a plan and its bill.
//   auto args = std::make_shared<PlanArgs>();
//   add_plan_options(cmd, *args);                 // in register_<verb>
//   planner::Planner p = args->planner();         // in the callback
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/cli/placement_args.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan::cli {

struct PlanArgs {
  std::string model;         // --model
  PlacementArgs where;       // --cluster, --gpus
  int64_t seq = 0;           // --seq
  int64_t global_batch = 0;  // --global-batch, or --global-batch-tokens / --seq
  int64_t global_batch_tokens = 0;  // --global-batch-tokens (0: not given)
  // Pins as given (0 / "" = searched); degrees[i] pins planner::parallel_dims()[i].
  std::array<int64_t, planner::kMeshDims> degrees{};
  int64_t micro_batch = 0, virtual_stages = 0;
  int64_t etp = 0;               // --etp: expert tensor parallelism, 1 or tp (0: searched)
  int64_t recompute_layers = 0;  // 0: not pinned
  int zero = -1;
  std::string recompute, sequence_parallel, precision = "bf16", attention;
  double moe_imbalance = 1;  // --moe-imbalance
  std::string stack;         // --stack NAME|PATH ("" = megatron)
  std::string memory_headroom;  // --memory-headroom SIZE ("" = 0)
  bool rope_scaling = false;    // --rope-scaling: --seq beyond the config's positions
  // compare's sweep: --clusters A,B and --gpus N1,N2 (where holds the first of each).
  std::vector<std::string> clusters;
  std::vector<int64_t> gpus_list;
  bool clusters_given = false;  // --clusters, even of one
  bool sweeps() const { return clusters_given || gpus_list.size() > 1; }

  planner::Pins pins() const;
  // --attention, or what the model's config states (attn_implementation "eager": math), else
  // flash.
  std::string attention_for(const tensor::ModelConfig& model) const;
  std::unique_ptr<planner::Planner> planner() const;
  // Whether planner() printed the multimodal note (tensor::multimodal_note) yet.
  mutable bool noted_multimodal_ = false;
};

// --model, --cluster, --gpus, --seq, --global-batch, the pins and --precision / --attention.
// `sweep` (compare): --cluster or --clusters A,B,C, and --gpus takes a comma list.
void add_plan_options(CLI::App& cmd, PlanArgs& args, bool sweep = false);

// The setup echo: model, cluster, gpus, seq, global_batch, precision, attention (as resolved);
// with `nodes` and `gpus_per_node` when the GPUs fill no whole nodes (Note [Even nodes] in
// collectives/rank_placement.h).
nlohmann::ordered_json setup_json(const PlanArgs& a, const planner::Planner& p);

// "12 x H100 SXM 80 GB, 2 nodes x 6 of their 8 GPUs": the job's GPUs as text,
// naming the nodes when they are not filled in order.
std::string gpus_text(const PlanArgs& a, const planner::Planner& p);

}  // namespace shardplan::cli
