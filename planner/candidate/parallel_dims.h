// The one table of parallel dimensions: every dimension a candidate splits the GPUs along, with
// its name, flag, configuration field, pin, the rule that says whether a degree can split a model
// and a job, and its place in the plan's device mesh. The mesh shape and names, the links a
// dimension's groups cross (indexed by ParallelDim), pins, checks, the search's candidate values,
// plan.json's config and mesh, and the bill's rows are all read from it.
//   for (const ParallelDim& d : parallel_dims()) std::cout << d.flag << " " << c.*d.degree;
//   mesh_shape(c);                    // {pp, dp / ep, ep, cp, tp} (etp = tp)
//   dim_name(kTpDim);                 // "tp"
//   refusal(dim(kCpDim), model, setup, 3);  // "--cp 3: --seq 4096 is not divisible by ..."
//
// Note [Parallel dimensions]
// Rows are in the order users read them (flags, plan.json's "config", messages): tp, pp, dp, cp,
// ep. The mesh is [pp, dp / e, e, cp, tp] (ParallelDim, Note [Candidate mesh dims]): expert
// parallelism takes the cp ranks and is carved out of data parallelism (and of tp with etp = 1,
// Note [Expert fold]), so the ep mesh dim holds the e ranks it takes from dp and the dp mesh dim
// the rest. Adding a
// dimension is a row here, a ParallelConfig field and a Pins field, and its cost terms in
// cost/step_model.cpp (docs/architecture.md "Where to make a change").
//
// Note [Expert fold]
// A MoE layer regroups the tp x cp x dp ranks of a pipeline stage as etp x ep x edp, etp fastest,
// in the order the dense layers number them (tp fastest, then cp, then dp): Megatron-Core's MoE
// parallel folding (Liu et al. 2025, "MoE Parallel Folding", arXiv:2504.14960) and torchtitan's
// expert mesh, docs/cost-model.md §8.4. So an expert group takes the context-parallel ranks first
// (they hold other tokens, which the experts may serve), then dp ranks. The mesh [pp, dp / e, e,
// cp, tp] expresses two folds:
//   etp = tp  every expert is split over the tp group like a dense MLP; ep = e x cp, the ep mesh
//             dim holding the e = ep / cp ranks it takes from dp;
//   etp = 1   experts whole, tokens split over the tp group; ep = e x cp x tp, e = ep / (cp x tp):
//             the experts' dim 0 is split over the ep, cp and tp mesh dims (so ep may reach
//             tp x cp x dp).
// Either way the replicas of an expert shard are the dp mesh dim (edp = tp x cp x dp / (ep x
// etp) = dp / e), and dense weights replicate (or ZeRO-shard) over dp x cp, the dp, ep and cp mesh
// dims (data_parallel_ranks). Other etp values, and an ep that is not a multiple of cp (of tp x
// cp with etp = 1), would need more mesh dims than five and are refused (expert_fold_refuses).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/candidate/parallel_config.h"

namespace shardplan::planner {

// Mesh dim indices (Note [Candidate mesh dims]); DimLinks and CandidateMesh::links use them.
enum MeshDim : int64_t { kPpDim = 0, kDpDim = 1, kEpDim = 2, kCpDim = 3, kTpDim = 4 };
inline constexpr size_t kMeshDims = 5;

struct ParallelDim {
  MeshDim mesh_dim;       // its place in the plan's mesh
  std::string_view name;  // mesh dim name, plan.json key, bill rows ("tp")
  std::string_view flag;  // "--tp"
  std::string_view help;  // the CLI's help text for the pin
  std::string_view unit;  // what a degree counts, for the CLI's messages ("ranks", "stages")
  int64_t ParallelConfig::*degree;
  std::optional<int64_t> Pins::*pin;
  // The dimension this one is carved out of in the mesh (ep out of dp), or none, and what a
  // degree that does not divide it breaks.
  std::optional<MeshDim> carved_from;
  std::string_view carved_why;
  // The ranks it takes from carved_from (its mesh dim's size); null: its degree.
  int64_t (*carved_ranks)(const ParallelConfig& c);
  int family_rank;  // position in a strategy family's name ("tp+cp+pp+dp+ep")
  // Why `degree` cannot split this model and job: one line naming the flag and what was
  // expected, or "" when it can. The rules of one dimension alone; products are the caller's.
  std::string (*refuses)(const tensor::ModelConfig& model, const TrainingSetup& setup,
                         int64_t degree);
};

// Note [Expert fold]: the expert tensor-parallel degree (etp, or tp when 0), the ranks ep takes
// from dp (ep / cp with etp = tp, ep / (cp x tp) with etp = 1), and why `c` cannot fold its experts
// onto the mesh ("" when it can; one line naming the flags and what was expected).
int64_t expert_tp(const ParallelConfig& c);
int64_t ep_from_dp(const ParallelConfig& c);
// The ranks that hold the same dense weights and reduce their gradients: dp x cp (context ranks
// see other tokens of the same sequences), the group ZeRO shards the dense states over.
int64_t data_parallel_ranks(const ParallelConfig& c);
std::string expert_fold_refuses(const tensor::ModelConfig& model, const ParallelConfig& c);

// Every dimension, tp, pp, dp, cp, ep.
std::span<const ParallelDim> parallel_dims();
const ParallelDim& dim(MeshDim d);
std::string dim_name(MeshDim d);
// The plan's mesh: [pp, dp / e, e, cp, tp] for `c` (e = ep_from_dp(c)), and its names.
std::array<int64_t, kMeshDims> mesh_shape(const ParallelConfig& c);
std::vector<int64_t> mesh_shape_vector(const ParallelConfig& c);
const std::vector<std::string>& mesh_names();
// "--tp 8 x --pp 4 x --dp 2 x --cp 1": the degrees whose product is the world, as flags.
std::string world_product_text(const ParallelConfig& c);

}  // namespace shardplan::planner
