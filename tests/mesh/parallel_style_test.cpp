// Parallel styles on a Llama 3 8B shaped model (2 layers, meta): placements and local shapes of
// q/k/v/o, gate/up/down, the embedding, norms and lm_head, with and without FSDP, worked out by
// hand from the config (hidden 4096, 32 heads of 128, 8 kv heads -> k/v out 1024, MLP 14336, vocab
// 128256).
#include "mesh/parallel_style.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/error.h"
#include "tensor/models/models.h"

namespace shardplan::mesh {
namespace {

using shardplan::DimVector;

const Placement R = Replicate{};
Placement S(int64_t d) { return Shard{d}; }

tensor::ModulePtr small_llama() {
  tensor::ModelConfig cfg = tensor::find_model_config("llama3-8b");
  cfg.num_hidden_layers = 2;
  return tensor::build_model(cfg);
}

// The Megatron/torchtitan Llama plan.
std::vector<StyleRule> llama_tp_plan() {
  using enum ParallelStyle;
  return {{"model.embed_tokens", kRowwise},
          {"model.layers.*.self_attn.[qkv]_proj", kColwise},
          {"model.layers.*.self_attn.o_proj", kRowwise},
          {"model.layers.*.mlp.gate_proj", kColwise},
          {"model.layers.*.mlp.up_proj", kColwise},
          {"model.layers.*.mlp.down_proj", kRowwise},
          {"model.layers.*.*_layernorm", kSequence},
          {"model.norm", kSequence},
          {"lm_head", kColwise}};
}

ParallelizeConfig cfg(std::string tp, std::vector<std::string> fsdp = {}) {
  ParallelizeConfig c;
  c.tp_dim = std::move(tp);
  c.fsdp_dims = std::move(fsdp);
  return c;
}

std::map<std::string, ParameterSharding> by_fqn(const std::vector<ParameterSharding>& v) {
  std::map<std::string, ParameterSharding> m;
  for (const auto& p : v) m.emplace(p.fqn, p);
  return m;
}

TEST(ParallelStyle, FqnPatterns) {
  EXPECT_TRUE(fqn_matches("model.layers.*.self_attn.q_proj", "model.layers.17.self_attn.q_proj"));
  EXPECT_FALSE(fqn_matches("model.layers.*.self_attn.q_proj", "model.layers.1.self_attn"));
  EXPECT_FALSE(fqn_matches("model.layers.*", "model.layers.1.mlp"));  // '*' is one component
  EXPECT_TRUE(fqn_matches("model.layers.*.mlp.*_proj", "model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(fqn_matches("lm_head", "lm_head"));
}

TEST(ParallelStyle, LlamaTensorParallelOnly) {
  const auto lm = small_llama();
  const DeviceMesh mesh({4}, {"tp"});
  const auto ps = by_fqn(parallelize_module(*lm, mesh, llama_tp_plan(), cfg("tp")));
  const MeshCoord c{1};
  auto local = [&](const std::string& fqn) { return local_shape(ps.at(fqn).spec, c); };
  const std::string a = "model.layers.1.self_attn.", m = "model.layers.0.mlp.";
  EXPECT_EQ(ps.at(a + "q_proj.weight").spec.placements, std::vector<Placement>{S(0)});
  EXPECT_EQ(local(a + "q_proj.weight"), (DimVector{1024, 4096}));  // 8 of 32 heads
  EXPECT_EQ(local(a + "k_proj.weight"), (DimVector{256, 4096}));   // 2 of 8 kv heads
  EXPECT_EQ(local(a + "v_proj.weight"), (DimVector{256, 4096}));
  EXPECT_EQ(ps.at(a + "o_proj.weight").spec.placements, std::vector<Placement>{S(1)});
  EXPECT_EQ(local(a + "o_proj.weight"), (DimVector{4096, 1024}));
  EXPECT_EQ(local(m + "gate_proj.weight"), (DimVector{3584, 4096}));
  EXPECT_EQ(local(m + "up_proj.weight"), (DimVector{3584, 4096}));
  EXPECT_EQ(local(m + "down_proj.weight"), (DimVector{4096, 3584}));
  EXPECT_EQ(global_offset(ps.at(m + "down_proj.weight").spec, c), (DimVector{0, 3584}));
  // Rowwise embedding: vocab rows split, 128256 / 4 = 32064 each.
  EXPECT_EQ(ps.at("model.embed_tokens.weight").spec.placements, std::vector<Placement>{S(0)});
  EXPECT_EQ(local("model.embed_tokens.weight"), (DimVector{32064, 4096}));
  EXPECT_EQ(local("lm_head.weight"), (DimVector{32064, 4096}));
  // Sequence-parallel norms keep whole (replicated) weights.
  EXPECT_EQ(ps.at("model.layers.0.input_layernorm.weight").spec.placements,
            std::vector<Placement>{R});
  EXPECT_EQ(ps.at("model.layers.0.input_layernorm.weight").style, "sequence");
  EXPECT_EQ(local("model.norm.weight"), (DimVector{4096}));
  // Every parameter is listed: 2 layers x 9 + embed + norm + lm_head.
  EXPECT_EQ(ps.size(), 2u * 9 + 3);
}

TEST(ParallelStyle, ColwiseEmbeddingSplitsTheEmbeddingDim) {
  const auto lm = small_llama();
  const DeviceMesh mesh({4}, {"tp"});
  const auto ps = by_fqn(
      parallelize_module(*lm, mesh, {{"model.embed_tokens", ParallelStyle::kColwise}}, cfg("tp")));
  EXPECT_EQ(ps.at("model.embed_tokens.weight").spec.placements, std::vector<Placement>{S(1)});
  EXPECT_EQ(local_shape(ps.at("model.embed_tokens.weight").spec, MeshCoord{3}),
            (DimVector{128256, 1024}));
  // Parameters no rule touches stay replicated.
  EXPECT_EQ(ps.at("lm_head.weight").spec.placements, std::vector<Placement>{R});
}

TEST(ParallelStyle, FsdpOverTensorParallelUsesStridedShard) {
  const auto lm = small_llama();
  const DeviceMesh mesh({2, 4}, {"dp", "tp"});
  const auto ps = by_fqn(parallelize_module(*lm, mesh, llama_tp_plan(), cfg("tp", {"dp"})));
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  // Colwise q: TP splits rows 4 ways first, FSDP halves each TP piece: [SS(0, 4), S(0)].
  EXPECT_EQ(ps.at(q).spec.placements, (std::vector<Placement>{StridedShard{0, 4}, S(0)}));
  // Rank (dp=d, tp=t) holds rows 1024 t + 512 d .. +512 (TP piece t, FSDP half d), 512 rows.
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t t = 0; t < 4; ++t) {
      const MeshCoord c{d, t};
      EXPECT_EQ(local_shape(ps.at(q).spec, c), (DimVector{512, 4096}));
      const auto ranges = global_index_ranges(ps.at(q).spec, c);
      ASSERT_EQ(ranges[0].size(), 1u);
      EXPECT_EQ(ranges[0][0].begin, 1024 * t + 512 * d) << d << "," << t;
    }
  }
  // Rowwise o/down: TP on dim 1, so FSDP is a plain Shard(0).
  EXPECT_EQ(ps.at("model.layers.1.self_attn.o_proj.weight").spec.placements,
            (std::vector<Placement>{S(0), S(1)}));
  EXPECT_EQ(local_shape(ps.at("model.layers.1.mlp.down_proj.weight").spec, MeshCoord{1, 2}),
            (DimVector{2048, 3584}));
  EXPECT_EQ(local_shape(ps.at("model.layers.1.self_attn.k_proj.weight").spec, MeshCoord{1, 2}),
            (DimVector{128, 4096}));
  // Rowwise embedding shards vocab rows on tp too: strided again; 128256 / 8 = 16032 rows.
  EXPECT_EQ(ps.at("model.embed_tokens.weight").spec.placements,
            (std::vector<Placement>{StridedShard{0, 4}, S(0)}));
  EXPECT_EQ(local_shape(ps.at("model.embed_tokens.weight").spec, MeshCoord{1, 3}),
            (DimVector{16032, 4096}));
  // Norm weights: FSDP only.
  EXPECT_EQ(ps.at("model.norm.weight").spec.placements, (std::vector<Placement>{S(0), R}));
  EXPECT_EQ(local_shape(ps.at("model.norm.weight").spec, MeshCoord{1, 0}), (DimVector{2048}));
}

TEST(ParallelStyle, TpBeforeDpInMeshOrderNeedsNoStridedShard) {
  // Mesh (tp, dp): left-to-right nesting already splits by TP first.
  const auto lm = small_llama();
  const DeviceMesh mesh({4, 2}, {"tp", "dp"});
  const auto ps = by_fqn(
      parallelize_module(*lm, mesh, {{"model.layers.*.self_attn.q_proj", ParallelStyle::kColwise}},
                         cfg("tp", {"dp"})));
  EXPECT_EQ(ps.at("model.layers.0.self_attn.q_proj.weight").spec.placements,
            (std::vector<Placement>{S(0), S(0)}));
  EXPECT_EQ(global_offset(ps.at("model.layers.0.self_attn.q_proj.weight").spec, MeshCoord{2, 1}),
            (DimVector{2048 + 512, 0}));
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ParallelStyle, BadInput) {
  const auto lm = small_llama();
  const DeviceMesh mesh({2, 4}, {"dp", "tp"});
  expect_error(
      [&] {
        parallelize_module(*lm, mesh, {{"model.layers.*.attn.q_proj", ParallelStyle::kColwise}},
                           cfg("tp"));
      },
      "pattern 'model.layers.*.attn.q_proj' matches no module");
  expect_error(
      [&] {
        parallelize_module(*lm, mesh, {{"model.norm", ParallelStyle::kColwise}}, cfg("tp"));
      },
      "'model.norm' is a");
  expect_error(
      [&] {
        parallelize_module(
            *lm, mesh, {{"lm_head", ParallelStyle::kColwise}, {"lm_*", ParallelStyle::kRowwise}},
            cfg("tp"));
      },
      "matched by two patterns");
  expect_error(
      [&] {
        parallelize_module(*lm, mesh, {{"lm_head", ParallelStyle::kColwise}}, {});
      },
      "no TP mesh dim");
  expect_error([&] { parallelize_module(*lm, mesh, {}, cfg("tp", {"tp"})); }, "used twice");
  EXPECT_THROW(parallelize_module(*lm, mesh, {}, cfg("pp")), Error);
  EXPECT_THROW(parallelize_module(*lm, DeviceMesh({8}), {}, cfg("", {"dp"})), Error);
  EXPECT_THROW(parse_parallel_style("diagonal"), Error);
  EXPECT_EQ(parse_parallel_style("sequence_parallel"), ParallelStyle::kSequence);
}

// A tied embedding and output layer are one tensor [vocab, hidden]. Vocab-parallel embedding
// (rowwise: Shard(0), rows) and column-parallel output layer (colwise on a Linear [out = vocab,
// in]: Shard(0)) agree, as Megatron-LM ties them; a column-split embedding (Shard(1)) does not.
TEST(ParallelStyle, TiedWeightsTakeTwoStylesOnlyWhenTheyAgree) {
  tensor::ModelConfig c = tensor::find_model_config("llama3-8b");
  c.num_hidden_layers = 1;
  c.tie_word_embeddings = true;
  const auto lm = tensor::build_model(c);
  const DeviceMesh mesh({4}, {"tp"});
  const std::vector<ParameterSharding> ps = parallelize_module(
      *lm, mesh,
      {{"model.embed_tokens", ParallelStyle::kRowwise}, {"lm_head", ParallelStyle::kColwise}},
      cfg("tp"));
  const auto tied = std::find_if(ps.begin(), ps.end(), [](const ParameterSharding& p) {
    return p.fqn == "model.embed_tokens.weight";
  });
  ASSERT_NE(tied, ps.end());
  EXPECT_EQ(tied->spec.placements, std::vector<Placement>{S(0)});
  EXPECT_EQ(tied->style, "rowwise");  // the first style that reached it
  EXPECT_EQ(local_shape(tied->spec, std::vector<int64_t>{0}), (DimVector{128256 / 4, 4096}));
  expect_error(
      [&] {
        parallelize_module(
            *lm, mesh,
            {{"model.embed_tokens", ParallelStyle::kColwise}, {"lm_head", ParallelStyle::kColwise}},
            cfg("tp"));
      },
      "(tied) gets both colwise (S1) and colwise (S0)");
}

// GPT-2's Conv1D stores weights [in, out]: colwise splits dim 1 (and the bias), rowwise dim 0.
// c_attn's output is [q; k; v]: with fused_parts 3 each third is split over the ranks, so rank r
// of 4 holds columns of q, of k and of v ([768, 2304] -> [768, 576] as SS1:3; the bias SS0:3).
TEST(ParallelStyle, Conv1DAndFusedProjections) {
  tensor::ModelConfig c = tensor::find_model_config("gpt2");
  c.num_hidden_layers = 1;
  const auto lm = tensor::build_model(c);
  const DeviceMesh mesh({4}, {"tp"});
  StyleRule qkv{"transformer.h.*.attn.c_attn", ParallelStyle::kColwise};
  qkv.fused_parts = 3;
  const auto ps =
      by_fqn(parallelize_module(*lm, mesh,
                                {qkv,
                                 {"transformer.h.*.attn.c_proj", ParallelStyle::kRowwise},
                                 {"transformer.h.*.mlp.c_fc", ParallelStyle::kColwise}},
                                cfg("tp")));
  const auto placement = [&](const std::string& fqn) { return ps.at(fqn).spec.placements[0]; };
  EXPECT_EQ(placement("transformer.h.0.attn.c_attn.weight"), Placement(StridedShard{1, 3}));
  EXPECT_EQ(placement("transformer.h.0.attn.c_attn.bias"), Placement(StridedShard{0, 3}));
  EXPECT_EQ(local_shape(ps.at("transformer.h.0.attn.c_attn.weight").spec, std::vector<int64_t>{1}),
            (DimVector{768, 576}));
  EXPECT_EQ(placement("transformer.h.0.attn.c_proj.weight"), S(0));
  EXPECT_EQ(placement("transformer.h.0.attn.c_proj.bias"), R);
  EXPECT_EQ(placement("transformer.h.0.mlp.c_fc.weight"), S(1));
  EXPECT_EQ(placement("transformer.h.0.mlp.c_fc.bias"), S(0));
  StyleRule bad{"transformer.h.*.attn.c_proj", ParallelStyle::kRowwise};
  bad.fused_parts = 3;
  expect_error([&] { parallelize_module(*lm, mesh, {bad}, cfg("tp")); },
               "fused_parts applies to colwise only");
}

}  // namespace
}  // namespace shardplan::mesh
