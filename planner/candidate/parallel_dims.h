// The one table of parallel dimensions: every dimension a candidate splits the GPUs along, with
// its name, flag, configuration field, pin, the rule that says whether a degree can split a model
// and a job, and its place in the plan's device mesh. The mesh shape and names, the links a
// dimension's groups cross (indexed by ParallelDim), pins, checks, the search's candidate values,
// plan.json's config and mesh, and the bill's rows are all read from it.
//   for (const ParallelDim& d : parallel_dims()) std::cout << d.flag << " " << c.*d.degree;
//   mesh_shape(c);                    // {pp, dp / ep, ep, cp, tp}
//   dim_name(kTpDim);                 // "tp"
//   refusal(dim(kCpDim), model, setup, 3);  // "--cp 3: --seq 4096 is not divisible by ..."
//
// Note [Parallel dimensions]
// Rows are in the order users read them (flags, plan.json's "config", messages): tp, pp, dp, cp,
// ep. The mesh is [pp, dp / ep, ep, cp, tp] (ParallelDim, Note [Candidate mesh dims]): expert
// parallelism is carved out of data parallelism, so the dp mesh dim holds dp / ep ranks. Adding a
// dimension is a row here, a ParallelConfig field and a Pins field, and its cost terms in
// cost/step_model.cpp (docs/architecture.md "Where to make a change").
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
  int family_rank;  // position in a strategy family's name ("tp+cp+pp+dp+ep")
  // Why `degree` cannot split this model and job: one line naming the flag and what was
  // expected, or "" when it can. The rules of one dimension alone; products are the caller's.
  std::string (*refuses)(const tensor::ModelConfig& model, const TrainingSetup& setup,
                         int64_t degree);
};

// Every dimension, tp, pp, dp, cp, ep.
std::span<const ParallelDim> parallel_dims();
const ParallelDim& dim(MeshDim d);
std::string dim_name(MeshDim d);
// The plan's mesh: [pp, dp / ep, ep, cp, tp] for `c`, and its names.
std::array<int64_t, kMeshDims> mesh_shape(const ParallelConfig& c);
std::vector<int64_t> mesh_shape_vector(const ParallelConfig& c);
const std::vector<std::string>& mesh_names();
// "--tp 8 x --pp 4 x --dp 2 x --cp 1": the degrees whose product is the world, as flags.
std::string world_product_text(const ParallelConfig& c);

}  // namespace shardplan::planner
