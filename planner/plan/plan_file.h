// plan.json: what `shardplan plan --out` writes and `materialize` reads (docs/user-guide.md
// "plan.json"). Self-contained: the model (its name and full config) and the cluster (its name and
// every fact of its file) are embedded, each with a SHA-256 over its name and content, so a plan
// reads the same on any machine and an edited or swapped model or cluster is refused naming both.
// Then the job, a top-level "mesh": {"shape": [pp, dp/ep, ep, cp, tp], "names": the dimensions'
// names in that order (Note [Parallel dimensions])}, the configuration, the placement of every
// parameter on that mesh, the init seed and the predictions (for people to read: checked to be
// numbers, not against the hardware).
//   PlanFile f = plan_file(planner, best, "llama3-8b");
//   write_file_atomically("plan.json", plan_to_json(f).dump(2));
//   PlanFile g = read_plan_file("plan.json");   // g == f; bad input: one line naming the field
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/placement.h"
#include "planner/cost/model_state_memory.h"
#include "planner/search/planner.h"
#include "tensor/dtype.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {

inline constexpr std::string_view kPlanFormat = "shardplan.plan";
// 2: stage_layers and config.recompute_layers (a version-1 plan lacks them).
// 3: the cluster embedded ({"name", "facts", "sha256"}, was a name) and model.sha256.
inline constexpr int64_t kPlanVersion = 3;
inline constexpr int64_t kDefaultInitSeed = 0;

struct PlanParameter {
  std::string name;            // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // global
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<mesh::Placement> placements;  // one per mesh dim (pp, dp, ep, cp, tp)
  std::string style;                        // the TP style that placed it ("" if none)
  int64_t stage = 0;                        // the pipeline stage that holds it
  bool operator==(const PlanParameter&) const = default;
};

struct PlanFile {
  std::string model_name;  // as given to --model
  tensor::ModelConfig model;
  collectives::Cluster cluster;  // the facts planned with (one node, as load_cluster gives it)
  TrainingSetup setup;
  std::string stack = "megatron";  // the software stack planned for (Note [Stack profiles])
  DimOrder order = DimOrder::kTpInner;
  ParallelConfig config;
  // Layers of each pipeline stage, first to last (Note [Stage partition]); sums to the model's.
  std::vector<int64_t> stage_layers;
  int64_t seed = kDefaultInitSeed;
  std::vector<PlanParameter> parameters;
  double step_time_s = 0;
  double mfu = 0;
  double tokens_per_s = 0;
  int64_t memory_per_gpu_bytes = 0;
  // Each stage's predicted model state per rank (parameters, gradients, optimizer), first to
  // last: what `materialize --state model` measures against. Empty in plans written before it.
  std::vector<StageStateBytes> stage_states;
  // The bill's collectives, as priced (what `rehearse` runs and times). Empty in plans written
  // before it.
  std::vector<BillCollective> collectives;
  // Bytes per parameter of the model state the prediction priced (working weights, gradients,
  // master weights, optimizer moments): what `materialize --state model` allocates. Absent in
  // plans written before it (training_recipe of the plan's cluster then).
  std::optional<MixedPrecision> recipe;
  // [pp, dp / ep, ep, cp, tp] and the names of Note [Candidate mesh dims].
  std::vector<int64_t> mesh_shape() const;
  bool operator==(const PlanFile&) const = default;
};

// plan.json's "config": the degrees (Note [Parallel dimensions]) and the other choices.
nlohmann::ordered_json config_json(const ParallelConfig& c);

// The plan `r` of `p`, every parameter placed (TP styles on "tp", FSDP's dim-0 shard on "dp" at
// ZeRO-3, whole layers per stage).
PlanFile plan_file(Planner& p, const PlanResult& r, std::string_view model_name,
                   int64_t seed = kDefaultInitSeed);

nlohmann::ordered_json plan_to_json(const PlanFile& f);

// Reads what plan_to_json writes. Every field is required and checked; unknown keys are refused;
// the mesh must be the configuration's and hold --gpus ranks, the configuration must run the
// model (check_parallel_config), and the parameters must be the model's, in order, with the
// placements the configuration gives them. Errors are one shardplan::Error line naming the field
// ("plan.json: field 'config.tp': ...").
// The model and the cluster are refused when their sha256 does not match their name and content.
PlanFile plan_from_json(const nlohmann::json& j, std::string_view origin = "plan");
PlanFile read_plan_file(const std::filesystem::path& path);

// The hashes plan_to_json records: SHA-256 of {"name": ..., "config" | "facts": ...} as compact
// JSON with sorted keys, so they depend on the values, not on how a file orders or spaces them.
std::string model_sha256(const std::string& name, const nlohmann::json& config);
std::string cluster_sha256(const std::string& name, const nlohmann::json& facts);

// Throws shardplan::Error, naming both, when `given` (a --model or --cluster named at materialize
// time) is not what the plan was made for: "--cluster hgx-h200 is not the plan's cluster dgx-h100:
// accelerator.memory_gb.value is 141 there, 80 in the plan".
void check_same_model(const PlanFile& f, const tensor::ModelConfig& given, std::string_view label);
void check_same_cluster(const PlanFile& f, const collectives::Cluster& given,
                        std::string_view label);

}  // namespace shardplan::planner
