// Materialization without a launcher (planner/materialize_*.h): every rank's shards, filled alone,
// equal the slice of the unsharded fill for every placement kind (uneven, empty, strided), the dry
// run accounts for every rank, and --verify's checks catch a corrupted shard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/communicator.h"
#include "kernels/fill_reference.h"
#include "planner/candidate/candidate_mesh.h"
#include "planner/materialize/dry_run.h"
#include "planner/materialize/layout.h"
#include "planner/materialize/shards.h"
#include "planner/materialize/verify.h"
#include "tensor/init.h"
#include "tensor/models/model_config.h"
#include "tests/planner/materialize/tiny_llama.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- one parameter, placed by hand --------------------------------------------------------

struct Case {
  std::vector<int64_t> shape;
  std::vector<int64_t> mesh;
  const char* placements;
};

// The parts of every coordinate of `c` (a MaterialParameter over the whole mesh: every dim listed
// as sharding, which is exact for Replicate dims too since they leave the shard as it is).
void expect_shards_equal_slices(const Case& c, tensor::DType dtype, kernels::FillSpec fill) {
  PlanParameter plan{"w", c.shape, dtype, {}, "", 0};
  MaterialParameter m;
  m.plan = &plan;
  m.type = tensor::kernel_element_type(dtype);
  m.fill = fill;
  m.spec = mesh::make_shard_spec(c.shape, dtype, mesh::DeviceMesh(c.mesh),
                                 mesh::parse_placements(c.placements));
  m.numel = 1;
  for (int64_t s : c.shape) m.numel *= s;
  const size_t elem = kernels::element_size(m.type);
  std::vector<std::byte> whole(static_cast<size_t>(m.numel) * elem);
  const int64_t one = 1;
  const kernels::FillRegion flat{1, &m.numel, &one, &one, 0};
  kernels::fill_cpu(whole.data(), m.type, flat, fill);
  int64_t covered = 0;
  for (int64_t r = 0; r < m.spec.mesh.size(); ++r) {
    const mesh::MeshCoord coord = *m.spec.mesh.coordinate_of(r);
    const std::vector<int64_t> sub(coord.begin(), coord.end());
    const LocalParameter part = local_part_of(m, sub);
    std::vector<std::byte> local(static_cast<size_t>(part.numel) * elem + 1, std::byte{0x5A});
    for_each_box(m, part, [&](const kernels::FillRegion& region, int64_t offset) {
      kernels::fill_cpu(local.data() + offset * elem, m.type, region, fill);
    });
    for (int64_t i = 0; i < part.numel; ++i) {
      const int64_t g = global_index_of(m, part, i);
      ASSERT_EQ(std::memcmp(local.data() + i * elem, whole.data() + g * elem, elem), 0)
          << c.placements << " rank " << r << " local " << i << " global " << g;
    }
    EXPECT_EQ(local.back(), std::byte{0x5A}) << "wrote past the shard";
    bool replica = false;  // count each distinct shard once: coordinate 0 on replicate dims
    for (size_t d = 0; d < coord.size(); ++d) {
      if (m.spec.placements[d].is_replicate() && coord[d] != 0) replica = true;
    }
    if (!replica) covered += part.numel;
  }
  EXPECT_EQ(covered, m.numel) << c.placements;
}

TEST(MaterializeShards, EveryPlacementEqualsTheSliceOfTheWhole) {
  // 7 rows on 4 ranks: 2,2,2,1; 5 columns on 4: 2,2,1,0 (an empty shard); 3 on 4: 1,1,1,0;
  // StridedShard: FSDP's split of a TP-sharded dim (docs/semantics.md §2.5).
  const Case cases[] = {
      {{7, 5}, {4}, "S0"},          {{7, 5}, {4}, "S1"},
      {{3, 5}, {4}, "S0"},          {{7, 5}, {4}, "R"},
      {{12, 5}, {2}, "SS0:3"},      {{7, 5}, {2, 3}, "S0,S1"},
      {{7, 5}, {2, 3}, "S1,S0"},    {{7, 5}, {2, 3}, "S0,S0"},
      {{7, 5}, {2, 3}, "R,S1"},     {{12, 6}, {2, 3}, "SS0:3,S0"},
      {{5, 3, 4}, {2, 2}, "S2,S0"}, {{2}, {2, 3}, "S0,S0"},
  };
  // Every element type materialize can hold, with every fill its kernels accept for it.
  const tensor::DType dtypes[] = {
      tensor::DType::kFloat64,   tensor::DType::kFloat32,      tensor::DType::kFloat16,
      tensor::DType::kBFloat16,  tensor::DType::kFloat8E4M3FN, tensor::DType::kFloat8E5M2,
      tensor::DType::kComplex64, tensor::DType::kInt64,        tensor::DType::kInt32,
      tensor::DType::kInt16,     tensor::DType::kInt8,         tensor::DType::kUInt8,
      tensor::DType::kBool};
  const kernels::FillKind fills[] = {
      kernels::FillKind::kConstant, kernels::FillKind::kUniform, kernels::FillKind::kNormal,
      kernels::FillKind::kTruncatedNormal, kernels::FillKind::kLogIndex};
  int64_t combos = 0;
  for (const tensor::DType dtype : dtypes) {
    const kernels::ElementType type = tensor::kernel_element_type(dtype);
    for (const kernels::FillKind kind : fills) {
      const bool integral = !kernels::is_floating(type);
      kernels::FillSpec fill{kind, integral ? 0.0 : 0.5, integral ? 2.0 : 2.0, 42, 7};
      if (kind == kernels::FillKind::kTruncatedNormal) {
        fill.low = -1;
        fill.high = 2;
      }
      // log(1 + global index mod 2): b is the period, restarting the index within a row.
      if (kind == kernels::FillKind::kLogIndex) fill.a = 1;
      if (kernels::check_fill_spec(type, fill)) continue;  // e.g. normal integers
      ++combos;
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.placements) + " " + std::string(tensor::dtype_name(dtype)));
        expect_shards_equal_slices(c, dtype, fill);
      }
    }
  }
  // Floating types: 5 fills, but complex64 has no truncated normal or log index; integers 2.
  EXPECT_EQ(combos, 7 * 5 - 2 + 6 * 2);
}

// ---- a plan -------------------------------------------------------------------------------

using testing::tiny_llama;

PlanFile tiny_plan(int64_t tp, int64_t pp, int64_t dp, int zero) {
  return testing::pinned_plan(tiny_llama(), "tiny-llama",
                              {.tp = tp, .pp = pp, .dp = dp, .zero = zero});
}

// The world and every mesh dim's group of a one-rank job.
collectives::MeshCommunicators one_rank_communicators() {
  collectives::MeshCommunicators comms;
  comms.world = std::make_unique<collectives::SelfCommunicator>();
  for (int d = 0; d < 5; ++d) {
    comms.dims.push_back(std::make_unique<collectives::SelfCommunicator>());
  }
  return comms;
}

TEST(MaterializeLayout, InitRulesAndStreamsPerParameter) {
  const MaterialLayout l(tiny_plan(2, 1, 2, 3));
  const MaterialParameter& embed = l.parameters().at(0);
  EXPECT_EQ(embed.plan->name, "model.embed_tokens.weight");
  EXPECT_EQ(embed.fill.kind, kernels::FillKind::kNormal);
  EXPECT_DOUBLE_EQ(embed.fill.b, 0.03);  // the config's initializer_range
  EXPECT_EQ(embed.fill.seed, 99u);
  EXPECT_EQ(embed.fill.tensor_key, kernels::tensor_key_from_name("model.embed_tokens.weight"));
  for (const MaterialParameter& m : l.parameters()) {
    if (m.plan->name.ends_with("norm.weight")) {
      EXPECT_EQ(m.fill.kind, kernels::FillKind::kConstant) << m.plan->name;
      EXPECT_EQ(m.fill.a, 1.0) << m.plan->name;
    }
  }
}

TEST(MaterializeDryRun, AccountsForEveryRankAndByte) {
  const MaterialLayout l(tiny_plan(2, 2, 2, 3));
  const DryRunReport r = dry_run(l, int64_t{1} << 30);
  EXPECT_EQ(r.ranks, 8);
  int64_t ranks = 0;
  int64_t bytes = 0;
  for (const RankClass& c : r.classes) {
    ranks += c.count;
    bytes += c.count * c.bytes;
  }
  EXPECT_EQ(ranks, 8);
  // tp x dp = 4 ranks per stage hold one copy of the stage's parameters between them (ZeRO-3 and
  // TP shard every matrix; norms are replicated over tp, so they count twice): the total over all
  // 8 ranks is the model's bytes plus one extra copy of the norms (2 bytes per bf16 element).
  int64_t norms = 0;
  for (const MaterialParameter& m : l.parameters()) {
    if (m.plan->name.ends_with("norm.weight")) norms += m.numel;
  }
  EXPECT_EQ(bytes, 2 * (r.elements + norms));
  EXPECT_THAT([&] { (void)dry_run(l, 1000); },
              ThrowsMessage<Error>(HasSubstr("bytes of parameters, more than its device's 1000")));
}

TEST(MaterializeVerify, OneRankPlanPassesAndACorruptedShardIsCaught) {
  const MaterialLayout l(tiny_plan(1, 1, 1, 0));
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  RankShards s = allocate_shards(l, 0, *host);
  InitSource init(l);
  init_shards(l, s, init);
  collectives::MeshCommunicators comms = one_rank_communicators();
  const VerifyReport ok = verify_shards(l, s, init, comms);
  EXPECT_EQ(ok.failures, 0) << (ok.messages.empty() ? "" : ok.messages[0]);
  EXPECT_EQ(ok.covered, static_cast<int64_t>(l.parameters().size()));
  EXPECT_EQ(ok.gathered, static_cast<int64_t>(l.parameters().size()));
  // Flip one bit of the last element of the first shard: the sample at the last element, the
  // coverage checksum and the gather all see it.
  s.data[0][s.parts[0].bytes - 1] ^= std::byte{1};
  const VerifyReport bad = verify_shards(l, s, init, comms);
  EXPECT_EQ(bad.failures, 3);
  ASSERT_FALSE(bad.messages.empty());
  EXPECT_THAT(bad.messages[0], HasSubstr("model.embed_tokens.weight"));
}

// Note [Padding row]: with pad_token_id 5 the embedding's row 5 starts at zero, as
// nn.Embedding(padding_idx=5) does, on whichever rank holds it; every other element is the fill,
// and the one-rank verification (samples, coverage, gather) agrees.
TEST(MaterializeShards, PaddingRowStartsAtZeroOnEveryShard) {
  nlohmann::json cfg = tensor::to_hf_json(tiny_llama());
  cfg["pad_token_id"] = 5;
  const tensor::ModelConfig model = tensor::parse_model_config(cfg, "tiny llama with padding");
  ASSERT_EQ(model.pad_token_id, 5);
  Planner p(model, collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 4, .seq = 64, .global_batch = 8}, {});
  Pins pins;
  pins.tp = 2;  // the embedding's rows split over tp (vocabulary parallel), then over dp (ZeRO-3)
  pins.dp = 2;
  pins.zero = 3;
  const MaterialLayout l(plan_file(p, p.search(pins, 1).top.at(0), "tiny-llama", 99));
  const MaterialParameter& embed = l.parameters().at(0);
  ASSERT_EQ(embed.plan->name, "model.embed_tokens.weight");
  EXPECT_EQ(embed.init.zero_row, 5);
  InitSource init(l);
  EXPECT_EQ(init.fill_spec(0), nullptr);  // a GPU takes the host path for it
  EXPECT_NE(init.fill_spec(1), nullptr);
  const int64_t hidden = embed.plan->shape[1];
  const size_t elem = kernels::element_size(embed.type);
  const std::unique_ptr<ShardMemory> host = host_shard_memory();
  int64_t zeros = 0, filled = 0;
  for (int64_t rank = 0; rank < 4; ++rank) {
    RankShards s = allocate_shards(l, rank, *host);
    init_shards(l, s, init);
    for (size_t k = 0; k < s.parts.size(); ++k) {
      if (s.parts[k].index != 0) continue;
      for (int64_t local = 0; local < s.parts[k].numel; ++local) {
        const int64_t g = global_index_of(embed, s.parts[k], local);
        uint64_t bits = 0;
        std::memcpy(&bits, s.data[k] + static_cast<size_t>(local) * elem, elem);
        if (g / hidden == 5) {
          EXPECT_EQ(bits, 0u) << "rank " << rank << " element " << g;
          ++zeros;
        } else {
          EXPECT_EQ(bits,
                    kernels::fill_reference_bits(embed.type, embed.fill, static_cast<uint64_t>(g)))
              << "rank " << rank << " element " << g;
          ++filled;
        }
      }
    }
  }
  EXPECT_EQ(zeros, hidden);  // the row lies on exactly one rank: ZeRO-3 shards the tp shard
  EXPECT_EQ(zeros + filled, embed.numel);
  EXPECT_EQ(init.element_bits(0, 5 * hidden + 3), 0u);

  // One rank holds everything: the verification's samples, coverage and gather all agree.
  Planner q(model, collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 1, .seq = 64, .global_batch = 8}, {});
  const MaterialLayout whole(plan_file(q, q.search({}, 1).top.at(0), "tiny-llama", 99));
  InitSource whole_init(whole);
  RankShards s = allocate_shards(whole, 0, *host);
  init_shards(whole, s, whole_init);
  collectives::MeshCommunicators comms = one_rank_communicators();
  const VerifyReport ok = verify_shards(whole, s, whole_init, comms);
  EXPECT_EQ(ok.failures, 0) << (ok.messages.empty() ? "" : ok.messages[0]);
  EXPECT_EQ(ok.gathered, static_cast<int64_t>(whole.parameters().size()));
}

// A Mixtral of 2 layers, hidden 64, 4 experts of 96, top-2.
tensor::ModelConfig tiny_mixtral() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "mixtral", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "hidden_act": "silu", "num_local_experts": 4,
    "num_experts_per_tok": 2, "torch_dtype": "bfloat16", "tie_word_embeddings": false})"),
                                    "tiny mixtral");
}

// Expert parallelism splits the fused experts' dim 0 over the "ep" mesh dim: with ep 2 over 4
// experts, the ranks at ep coordinate 0 hold rows 0 and 1 (experts 0 and 1) of every layer's
// gate_up_proj and down_proj, those at 1 rows 2 and 3 (or a part of those rows, when FSDP splits
// them further); every other tensor is split over the ep dim only as ZeRO-3 splits it over the
// whole data-parallel group.
TEST(MaterializeLayout, ExpertsLiveOnTheirEpRanksOnly) {
  const tensor::ModelConfig moe = tiny_mixtral();
  Planner p(moe, collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 4, .seq = 64, .global_batch = 8}, {});
  Pins pins;
  pins.dp = 4;
  pins.ep = 2;
  const SearchResult r = p.search(pins, 1);
  ASSERT_FALSE(r.top.empty());
  const MaterialLayout l(plan_file(p, r.top.at(0), "tiny-mixtral", 1));
  for (int64_t rank = 0; rank < 4; ++rank) {
    const int64_t ep = (*l.mesh().coordinate_of(rank))[kEpDim];
    int64_t experts = 0;
    for (const LocalParameter& part : l.rank_parameters(rank)) {
      const MaterialParameter& m = l.parameters()[part.index];
      const bool expert = m.plan->name.find(".experts.") != std::string::npos;
      if (!expert) {
        EXPECT_EQ(m.plan->placements[kEpDim].is_any_shard(), r.top.at(0).config.zero == 3)
            << m.plan->name;
        continue;
      }
      EXPECT_TRUE(m.plan->placements[kEpDim].is_shard(0)) << m.plan->name;
      ++experts;
      for (const mesh::IndexRange& r : part.ranges[0]) {
        EXPECT_GE(r.begin, 2 * ep) << m.plan->name << " on rank " << rank;
        EXPECT_LE(r.end, 2 * ep + 2) << m.plan->name << " on rank " << rank;
      }
    }
    EXPECT_EQ(experts, 2 * 2) << "rank " << rank;  // 2 layers x gate_up_proj, down_proj
  }
  const DryRunReport d = dry_run(l, 0);
  for (const RankClass& c : d.classes) EXPECT_EQ(c.parameters, 21);  // every tensor, in part
}

// Whole experts (etp 1, Note [Expert fold]) on tp 2 x dp 4 with ep 4: the experts' dim 0 splits
// over the ep mesh dim then the tp one, so the rank at (ep e, tp t) holds expert 2e + t whole.
// ZeRO-3 cannot split that one expert over the 2 remaining dp ranks on dim 0 and shards dim 1
// instead (gate_up_proj [4, 192, 64]: rows 96 d .. 96 d + 96 at dp coordinate d).
TEST(MaterializeLayout, WholeExpertsSplitOverEpThenTpAndFsdpTakesTheirNextDim) {
  const tensor::ModelConfig moe = tiny_mixtral();
  Planner p(moe, collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 8, .seq = 64, .global_batch = 8}, {});
  Pins pins;
  pins.tp = 2;
  pins.dp = 4;
  pins.ep = 4;
  pins.etp = 1;
  pins.zero = 3;
  const SearchResult r = p.search(pins, 1);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.top.at(0).config.etp, 1);
  const MaterialLayout l(plan_file(p, r.top.at(0), "tiny-mixtral", 1));
  EXPECT_EQ(mesh_shape_vector(r.top.at(0).config), std::vector<int64_t>({1, 2, 2, 1, 2}));
  for (int64_t rank = 0; rank < 8; ++rank) {
    const auto at = *l.mesh().coordinate_of(rank);
    const int64_t expert = 2 * at[kEpDim] + at[kTpDim];
    int64_t seen = 0;
    for (const LocalParameter& part : l.rank_parameters(rank)) {
      const MaterialParameter& m = l.parameters()[part.index];
      if (m.plan->name.find(".experts.gate_up_proj") == std::string::npos) continue;
      ++seen;
      ASSERT_EQ(part.ranges[0].size(), 1u);
      EXPECT_EQ(part.ranges[0][0].begin, expert) << "rank " << rank;
      EXPECT_EQ(part.ranges[0][0].end, expert + 1) << "rank " << rank;
      ASSERT_EQ(part.ranges[1].size(), 1u);
      EXPECT_EQ(part.ranges[1][0].begin, 96 * at[kDpDim]) << "rank " << rank;
      EXPECT_EQ(part.ranges[1][0].end, 96 * at[kDpDim] + 96) << "rank " << rank;
    }
    EXPECT_EQ(seen, 2) << "rank " << rank;  // one per layer
  }
}

}  // namespace
}  // namespace shardplan::planner
