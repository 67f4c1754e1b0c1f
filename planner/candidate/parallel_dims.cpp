#include "planner/candidate/parallel_dims.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "tensor/models/family.h"

namespace shardplan::planner {
namespace {

using tensor::ModelConfig;

std::string tp_refuses(const ModelConfig& m, const TrainingSetup&, int64_t tp) {
  const std::string t = std::to_string(tp);
  const int64_t heads = m.num_attention_heads, kv = m.num_key_value_heads;
  if (heads % tp != 0) {
    return "--tp " + t + " does not divide the model's " + std::to_string(heads) +
           " attention heads, expected a divisor of " + std::to_string(heads);
  }
  // A fused qkv projection laid out by key-value group (GPT-2's and GPT-NeoX's per head,
  // Falcon-40B's per group of queries with their k and v) is split by a plain column split of
  // its rows, which gives each rank whole groups only when tp divides them: no placement of the
  // one weight hands a group's k and v to several ranks. A single key-value head (multi-query:
  // StarCoder's [q; k; v], Falcon-7B's) is the exception the TP plan prices approximately, as
  // Megatron-LM runs it with k and v replicated (docs/models.md, gpt_bigcode's leave-outs).
  const tensor::ModelFamily* family = tensor::find_family(m.model_type);
  if (family != nullptr && family->fused_qkv && kv > 1 && kv % tp != 0) {
    return "--tp " + t + " does not divide the model's " + std::to_string(kv) +
           " key/value heads, expected a divisor of " + std::to_string(kv) +
           " (its fused qkv projection splits by whole key-value groups)";
  }
  // A fused qkv laid out in blocks of heads (CodeGen's 4 blocks of [q; v; k],
  // ModelFamily::fused_qkv_blocks): a column split cuts a block between its parts unless tp
  // divides the blocks, and then a rank would hold some heads' q without their k and v.
  if (family != nullptr && family->fused_qkv_blocks > 0 && family->fused_qkv_blocks % tp != 0) {
    const std::string blocks = std::to_string(family->fused_qkv_blocks);
    return "--tp " + t + " does not divide the " + blocks + " blocks of " + m.model_type +
           "'s fused qkv projection, expected a divisor of " + blocks + " (each block holds q, " +
           "k and v of " + std::to_string(heads / family->fused_qkv_blocks) +
           " heads, which a column split must keep on one rank)";
  }
  // Laguna's sliding layers have their own query heads, split over the same ranks.
  const int64_t sliding = m.sliding_num_attention_heads;
  if (sliding > 0 && sliding % tp != 0) {
    return "--tp " + t + " does not divide the model's " + std::to_string(sliding) +
           " sliding-layer attention heads, expected a divisor of " + std::to_string(sliding);
  }
  const std::pair<int64_t, const char*> kv_counts[] = {
      {kv, ""},
      {m.sliding_num_key_value_heads, " sliding-layer"},
      {m.global_num_key_value_heads, " full-layer"}};
  for (const auto& [n, which] : kv_counts) {
    if (n > 0 && n % tp != 0 && tp % n != 0) {
      return "--tp " + t + " and the model's " + std::to_string(n) + which +
             " key/value heads: expected a divisor of " + std::to_string(n) +
             " or a multiple of it";
    }
  }
  // Gated DeltaNet splits by key-head groups (Note [Gated DeltaNet trace] in
  // tensor/models/gated_delta_net.h), Mamba-2 by its B/C groups (ngroups, which shardplan keeps
  // in linear_num_key_heads; Megatron-LM's MambaMixer asserts tp divides them): whole groups per
  // rank, each with its value heads. Falcon-H1's mixer beside every attention (parallel_mamba)
  // splits the same way.
  const int64_t groups = m.linear_num_key_heads;
  const bool linear =
      m.parallel_mamba || std::find(m.layer_types.begin(), m.layer_types.end(),
                                    tensor::AttentionType::kLinear) != m.layer_types.end();
  // Mamba-1 (linear_dt_rank > 0: Jamba) has no heads: it splits its d_inner channels, and the
  // row-parallel x_proj hands every rank the whole time step, B and C (Note [Mamba-1 trace] in
  // tensor/models/mamba_mixer.h), so tp must divide the channels, whatever its one group.
  if (linear && m.linear_dt_rank > 0) {
    const int64_t channels = m.linear_num_value_heads * m.linear_value_head_dim;
    if (channels % tp == 0) return "";
    return "--tp " + t + " does not divide the model's " + std::to_string(channels) +
           " Mamba channels (d_inner), expected a divisor of " + std::to_string(channels);
  }
  if (linear && groups % tp != 0) {
    return "--tp " + t + " does not divide the model's " + std::to_string(groups) +
           " linear-attention key heads (Mamba-2: groups), expected a divisor of " +
           std::to_string(groups);
  }
  return "";
}

// Note [Layers run in cycles] (tensor/models/layer_kinds.h): HRM-Text runs its two stacks in
// h_cycles x (l_cycles + 1) passes a forward, so a micro-batch would enter every pipeline stage
// once per pass, and the ring of context parallelism would turn once per attention call; the
// schedules and the ring here are priced for one pass (transformers' own pipeline plan for the
// model names no module it has).
std::string recurrence_refuses(const ModelConfig& m, const char* flag, int64_t degree) {
  if (m.h_cycles <= 0 || degree == 1) return "";
  return std::string(flag) + " " + std::to_string(degree) + " for " + m.model_type +
         ", whose two stacks run " + std::to_string(m.h_cycles) + " x (" +
         std::to_string(m.l_cycles) +
         " + 1) times a step with the same weights: a micro-batch would pass each pipeline stage "
         "(and the context-parallel ring) once per pass, which is not priced; expected " +
         flag + " 1";
}

std::string pp_refuses(const ModelConfig& m, const TrainingSetup&, int64_t pp) {
  if (std::string why = recurrence_refuses(m, "--pp", pp); !why.empty()) return why;
  const int64_t L = m.num_hidden_layers;
  if (pp <= L) return "";
  return "--pp " + std::to_string(pp) + " stages for the model's " + std::to_string(L) +
         " layers, expected at most " + std::to_string(L) + " (a layer per stage at least)";
}

std::string dp_refuses(const ModelConfig&, const TrainingSetup& s, int64_t dp) {
  if (s.global_batch % dp == 0) return "";
  return "--global-batch " + std::to_string(s.global_batch) + " is not divisible by --dp " +
         std::to_string(dp) + ", expected a multiple of the data-parallel degree";
}

std::string cp_refuses(const ModelConfig& m, const TrainingSetup& s, int64_t cp) {
  if (std::string why = recurrence_refuses(m, "--cp", cp); !why.empty()) return why;
  if (cp == 1 || (s.seq % cp == 0 && (s.seq / cp) % 2 == 0)) return "";
  return "--cp " + std::to_string(cp) + ": --seq " + std::to_string(s.seq) +
         " is not divisible by 2 x " + std::to_string(cp) +
         ", expected a multiple (each context-parallel rank takes two balanced chunks)";
}

std::string ep_refuses(const ModelConfig& m, const TrainingSetup&, int64_t ep) {
  if (ep == 1) return "";
  const int64_t experts = m.num_local_experts;
  if (experts <= 0) {
    return "--ep " + std::to_string(ep) + " on a dense model (" + m.model_type +
           "), expected --ep 1";
  }
  if (experts % ep != 0) {
    return "--ep " + std::to_string(ep) + " does not divide the model's " +
           std::to_string(experts) + " experts, expected a divisor of " + std::to_string(experts);
  }
  return "";
}

}  // namespace

int64_t expert_tp(const ParallelConfig& c) { return c.etp > 0 ? c.etp : c.tp; }

int64_t data_parallel_ranks(const ParallelConfig& c) { return c.dp * c.cp; }

int64_t ep_from_dp(const ParallelConfig& c) {
  // The ep group takes the context ranks first, then (with whole experts) the tp ranks, and the
  // rest from dp; a degree that does not fold is refused by expert_fold_refuses, and the mesh
  // then keeps ep whole on its own dim.
  const int64_t inner = c.cp * (expert_tp(c) == c.tp ? 1 : c.tp);
  return inner >= 1 && c.ep % inner == 0 ? c.ep / inner : c.ep;
}

std::string expert_fold_refuses(const tensor::ModelConfig& m, const ParallelConfig& c) {
  const int64_t etp = expert_tp(c);
  const std::string tp = std::to_string(c.tp), ep = std::to_string(c.ep), cp = std::to_string(c.cp),
                    dp = std::to_string(c.dp);
  if (etp != c.tp) {
    if (m.num_local_experts <= 0) {
      return "--etp " + std::to_string(etp) + " on a dense model (" + m.model_type +
             "), expected no --etp (it splits the experts of a MoE model)";
    }
    if (etp != 1) {
      return "--etp " + std::to_string(etp) + " with --tp " + tp +
             ", expected 1 (whole experts) or " + tp + " (experts split like the dense layers)";
    }
  }
  if (c.ep <= 1) return "";
  // Note [Expert fold]: ep = e x cp (x tp with whole experts), e dividing dp.
  const int64_t inner = c.cp * (etp == c.tp ? 1 : c.tp);
  if (c.ep % inner == 0 && c.dp % (c.ep / inner) == 0) return "";
  if (etp == c.tp && c.cp == 1) {
    return "--ep " + ep + " does not divide --dp " + dp +
           ", expected expert parallelism within data parallelism" +
           (c.tp > 1 ? " (or --etp 1: ep groups of whole tensor-parallel groups)" : "");
  }
  if (etp == c.tp) {
    return "--ep " + ep + " with --cp " + cp + " and --dp " + dp +
           ", expected a multiple of --cp dividing --cp x --dp = " + std::to_string(c.cp * c.dp) +
           " (an expert group takes the context-parallel ranks, then data-parallel ones)" +
           (c.tp > 1 ? "; or --etp 1 (groups of whole tensor-parallel groups)" : "");
  }
  if (c.cp == 1) {
    return "--ep " + ep + " with --etp 1 and --tp " + tp + ", expected a multiple of --tp " + tp +
           " dividing --tp x --dp = " + std::to_string(c.tp * c.dp) +
           " (each expert group holds whole tensor-parallel groups)";
  }
  return "--ep " + ep + " with --etp 1, --tp " + tp + " and --cp " + cp +
         ", expected a multiple of --tp x --cp = " + std::to_string(inner) +
         " dividing --tp x --cp x --dp = " + std::to_string(inner * c.dp) +
         " (an expert group of whole experts holds whole tensor- and context-parallel groups)";
}

namespace {

// tp: Megatron's column/row split of attention and MLP; pp: pipeline stages; dp: data parallel
// (ZeRO shards over it); cp: the sequence split (ring attention); ep: experts over dp's ranks.
constexpr ParallelDim kDims[] = {
    {kTpDim, "tp", "--tp", "Pin tensor parallelism", "ranks", &ParallelConfig::tp, &Pins::tp,
     std::nullopt, "", nullptr, 0, tp_refuses},
    {kPpDim, "pp", "--pp", "Pin pipeline stages", "stages", &ParallelConfig::pp, &Pins::pp,
     std::nullopt, "", nullptr, 2, pp_refuses},
    {kDpDim, "dp", "--dp", "Pin data parallelism", "ranks", &ParallelConfig::dp, &Pins::dp,
     std::nullopt, "", nullptr, 3, dp_refuses},
    {kCpDim, "cp", "--cp", "Pin context parallelism", "ranks", &ParallelConfig::cp, &Pins::cp,
     std::nullopt, "", nullptr, 1, cp_refuses},
    {kEpDim, "ep", "--ep", "Pin expert parallelism (MoE)", "ranks", &ParallelConfig::ep, &Pins::ep,
     kDpDim, "expert parallelism within context and data parallelism", ep_from_dp, 4, ep_refuses},
};

}  // namespace

std::span<const ParallelDim> parallel_dims() { return kDims; }

const ParallelDim& dim(MeshDim d) {
  for (const ParallelDim& row : kDims) {
    if (row.mesh_dim == d) return row;
  }
  SP_FAIL("no parallel dimension at mesh dim ", static_cast<int64_t>(d));
}

std::string dim_name(MeshDim d) { return std::string(dim(d).name); }

std::array<int64_t, kMeshDims> mesh_shape(const ParallelConfig& c) {
  std::array<int64_t, kMeshDims> shape{};
  for (const ParallelDim& row : kDims) shape[row.mesh_dim] = c.*row.degree;
  for (const ParallelDim& row : kDims) {
    if (!row.carved_from) continue;
    const int64_t taken =
        std::max<int64_t>(1, row.carved_ranks ? row.carved_ranks(c) : c.*row.degree);
    shape[row.mesh_dim] = taken;
    shape[*row.carved_from] /= taken;
  }
  return shape;
}

std::vector<int64_t> mesh_shape_vector(const ParallelConfig& c) {
  const std::array<int64_t, kMeshDims> s = mesh_shape(c);
  return {s.begin(), s.end()};
}

const std::vector<std::string>& mesh_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n(kMeshDims);
    for (const ParallelDim& row : kDims) n[row.mesh_dim] = std::string(row.name);
    return n;
  }();
  return names;
}

std::string world_product_text(const ParallelConfig& c) {
  std::string s;
  for (const ParallelDim& row : kDims) {
    if (row.carved_from) continue;  // inside another dimension: not a factor of the world
    s += (s.empty() ? "" : " x ") + std::string(row.flag) + " " + std::to_string(c.*row.degree);
  }
  return s;
}

}  // namespace shardplan::planner
