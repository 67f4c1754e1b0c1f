// Activation layouts of the parallel styles (docs/semantics.md §5.6's table) and the
// redistributions a forward implies at module boundaries, on a 3-layer Llama 3 8B shaped model
// (hidden 4096, bf16) with token ids [2, 16]. Expected counts come from Megatron-LM's f/g operators
// (Shoeybi et al. 2019, §3: one all_reduce after the attention output projection and one after the
// MLP's second Linear per layer in forward) and Korthikanti et al. 2022 §4.2.2 (with sequence
// parallelism g becomes an all_gather before each block and g-bar a reduce_scatter after it: 2 + 2
// per layer).
#include "mesh/module_boundaries.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::mesh {
namespace {

using enum ParallelStyle;
using shardplan::DimVector;

const Placement R = Replicate{};
const Placement P = Partial{ReduceOp::kSum};
Placement S(int64_t d) { return Shard{d}; }

constexpr int64_t kLayers = 3, kBatch = 2, kSeq = 16, kHidden = 4096;

tensor::ModulePtr small_llama() {
  tensor::ModelConfig cfg = tensor::find_model_config("llama3-8b");
  cfg.num_hidden_layers = kLayers;
  return tensor::build_model(cfg);
}

ParallelizeConfig cfg(std::string tp, std::vector<std::string> fsdp = {}) {
  ParallelizeConfig c;
  c.tp_dim = std::move(tp);
  c.fsdp_dims = std::move(fsdp);
  return c;
}

// Megatron TP without sequence parallelism (torchtitan's plan with enable_sp off): replicated
// token ids into a vocab-split embedding, loss-parallel lm_head (output stays Shard(-1)).
std::vector<StyleRule> megatron_plan() {
  return {{"model.embed_tokens", kRowwise, R},
          {"model.layers.*.self_attn.[qkv]_proj", kColwise},
          {"model.layers.*.self_attn.o_proj", kRowwise},
          {"model.layers.*.mlp.gate_proj", kColwise},
          {"model.layers.*.mlp.up_proj", kColwise},
          {"model.layers.*.mlp.down_proj", kRowwise},
          {"lm_head", kColwise}};
}

// torchtitan's sequence-parallel plan: norms on Shard(1), one PrepareModuleInput per block so q,
// k, v (gate, up) share one gathered input, row-wise outputs reduce-scattered back to Shard(1).
std::vector<StyleRule> sequence_parallel_plan() {
  StyleRule gather_attn{"model.layers.*.self_attn", kPrepareInput, S(1), R};
  StyleRule gather_mlp{"model.layers.*.mlp", kPrepareInput, S(1), R};
  StyleRule embed{"model.embed_tokens", kRowwise, R};
  embed.output_layout = S(1);
  StyleRule o{"model.layers.*.self_attn.o_proj", kRowwise};
  o.output_layout = S(1);
  StyleRule down{"model.layers.*.mlp.down_proj", kRowwise};
  down.output_layout = S(1);
  StyleRule head{"lm_head", kColwise, S(1)};
  head.output_layout = R;  // no loss parallel: gather the logits
  return {embed,
          {"model.layers.*.*_layernorm", kSequence},
          gather_attn,
          {"model.layers.*.self_attn.[qkv]_proj", kColwise},
          o,
          gather_mlp,
          {"model.layers.*.mlp.gate_proj", kColwise},
          {"model.layers.*.mlp.up_proj", kColwise},
          down,
          {"model.norm", kSequence},
          head};
}

// The collective a change on the TP mesh dim needs, by the rules of docs/semantics.md §3.1 written
// out.
std::string collective(const Placement& from, const Placement& to) {
  if (from.is_partial() && to.is_replicate()) return "all_reduce";
  if (from.is_partial() && to.is_shard()) return "reduce_scatter";
  if (from.is_shard() && to.is_replicate()) return "all_gather";
  if (from.is_shard() && to.is_shard()) return "all_to_all";
  return "local";
}

// "model.layers.<n>...." -> n; -1 outside the layers.
int layer_of(const std::string& fqn) {
  const std::string prefix = "model.layers.";
  if (fqn.rfind(prefix, 0) != 0) return -1;
  return std::stoi(fqn.substr(prefix.size()));
}

// Per layer (-1: outside), collective name -> count, reading the TP entry at mesh dim `tp`.
std::map<int, std::map<std::string, int>> census(const std::vector<BoundaryRedistribution>& bs,
                                                 size_t tp) {
  std::map<int, std::map<std::string, int>> c;
  for (const auto& b : bs) ++c[layer_of(b.fqn)][collective(b.from[tp], b.to[tp])];
  return c;
}

void expect_error(const std::function<void()>& f, const std::string& needle);

TEST(ActivationLayouts, DefaultsFollowTheStyleTable) {
  const auto lm = small_llama();
  auto layouts = [&](const StyleRule& rule, const std::string& fqn) {
    return activation_layouts(rule, lm->get_submodule(fqn), fqn);
  };
  const std::string q = "model.layers.0.self_attn.q_proj";
  const ActivationLayouts col = layouts({q, kColwise}, q);
  EXPECT_EQ(col.input, R);
  EXPECT_EQ(col.desired_input, R);
  EXPECT_EQ(col.computed_output, S(-1));
  EXPECT_EQ(col.output, S(-1));
  const ActivationLayouts row = layouts({q, kRowwise}, q);
  EXPECT_EQ(row.input, S(-1));
  EXPECT_EQ(row.desired_input, S(-1));
  EXPECT_EQ(row.computed_output, P);
  EXPECT_EQ(row.output, R);
  // Row-wise embedding: PyTorch's default input annotation is still Shard(-1), but the lookup
  // needs whole index tensors.
  const ActivationLayouts emb = layouts({"model.embed_tokens", kRowwise}, "model.embed_tokens");
  EXPECT_EQ(emb.input, S(-1));
  EXPECT_EQ(emb.desired_input, R);
  EXPECT_EQ(emb.output, R);
  const ActivationLayouts seq = layouts({"model.norm", kSequence}, "model.norm");
  EXPECT_EQ(seq.input, S(1));
  EXPECT_EQ(seq.output, S(1));
  StyleRule seq0{"model.norm", kSequence};
  seq0.sequence_dim = 0;
  EXPECT_EQ(layouts(seq0, "model.norm").desired_input, S(0));
  // Overrides replace only what they name.
  StyleRule row_sp{q, kRowwise};
  row_sp.output_layout = S(1);
  EXPECT_EQ(layouts(row_sp, q).output, S(1));
  EXPECT_EQ(layouts(row_sp, q).input, S(-1));
  const ActivationLayouts prep =
      layouts({"model.layers.0.mlp", kPrepareInput, S(1), R}, "model.layers.0.mlp");
  EXPECT_EQ(prep.input, S(1));
  EXPECT_EQ(prep.desired_input, R);
  EXPECT_FALSE(prep.output.has_value());
}

TEST(ModuleBoundaries, MegatronTensorParallelAllReducesTwicePerLayer) {
  const auto lm = small_llama();
  const DeviceMesh mesh({4}, {"tp"});
  const auto bs = module_boundary_redistributions(*lm, mesh, megatron_plan(), cfg("tp"),
                                                  tensor::token_ids(kBatch, kSeq));
  // Written out in forward order: the embedding's masked partial sums, then per layer the
  // row-wise outputs (Megatron's g after attention and after the MLP).
  const DimVector h{kBatch, kSeq, kHidden};
  std::vector<BoundaryRedistribution> expected{
      {"model.embed_tokens", BoundaryRole::kOutput, {P}, {R}, h, tensor::DType::kBFloat16}};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    expected.push_back(
        {p + ".self_attn.o_proj", BoundaryRole::kOutput, {P}, {R}, h, tensor::DType::kBFloat16});
    expected.push_back(
        {p + ".mlp.down_proj", BoundaryRole::kOutput, {P}, {R}, h, tensor::DType::kBFloat16});
  }
  EXPECT_EQ(bs, expected);
  const auto c = census(bs, 0);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(c.at(l), (std::map<std::string, int>{{"all_reduce", 2}})) << "layer " << l;
  }
}

TEST(ModuleBoundaries, SequenceParallelGathersAndScattersTwicePerLayer) {
  const auto lm = small_llama();
  // dp x tp with FSDP on dp: activations are batch-split on dp, only the TP entry changes.
  const DeviceMesh mesh({2, 4}, {"dp", "tp"});
  const auto bs = module_boundary_redistributions(
      *lm, mesh, sequence_parallel_plan(), cfg("tp", {"dp"}), tensor::token_ids(kBatch, kSeq));
  const auto c = census(bs, 1);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(c.at(l), (std::map<std::string, int>{{"all_gather", 2}, {"reduce_scatter", 2}}))
        << "layer " << l;
  }
  // Outside the layers: the embedding reduce-scatters into Shard(1); lm_head gathers its input
  // sequence and then its vocab-split logits.
  EXPECT_EQ(c.at(-1), (std::map<std::string, int>{{"all_gather", 2}, {"reduce_scatter", 1}}));

  // Layer 1 in forward order: g before attention, g-bar after o_proj, g before the MLP, g-bar
  // after down_proj; every tensor is the [2, 16, 4096] hidden state.
  const DimVector h{kBatch, kSeq, kHidden};
  const std::vector<Placement> seq{S(0), S(1)}, rep{S(0), R}, part{S(0), P};
  std::vector<BoundaryRedistribution> layer1;
  for (const auto& b : bs) {
    if (layer_of(b.fqn) == 1) layer1.push_back(b);
  }
  const auto bf16 = tensor::DType::kBFloat16;
  EXPECT_EQ(layer1,
            (std::vector<BoundaryRedistribution>{
                {"model.layers.1.self_attn", BoundaryRole::kInput, seq, rep, h, bf16},
                {"model.layers.1.self_attn.o_proj", BoundaryRole::kOutput, part, seq, h, bf16},
                {"model.layers.1.mlp", BoundaryRole::kInput, seq, rep, h, bf16},
                {"model.layers.1.mlp.down_proj", BoundaryRole::kOutput, part, seq, h, bf16}}));
  // The lm_head's logits: vocab split (Shard(-1) -> 2) gathered, [2, 16, 128256].
  EXPECT_EQ(bs.back(), (BoundaryRedistribution{"lm_head",
                                               BoundaryRole::kOutput,
                                               {S(0), S(2)},
                                               rep,
                                               DimVector{kBatch, kSeq, 128256},
                                               bf16}));
}

TEST(ModuleBoundaries, GatheringPerProjectionCostsOneAllGatherEach) {
  // Without PrepareModuleInput on the block, each column-wise projection annotated Shard(1)
  // gathers its own input (as PyTorch does): q, k, v and gate, up = 5 all_gathers per layer.
  auto rules = sequence_parallel_plan();
  std::erase_if(rules, [](const StyleRule& r) { return r.style == kPrepareInput; });
  for (StyleRule& r : rules) {
    if (r.style == kColwise && r.pattern != "lm_head") r.input_layout = S(1);
  }
  const auto lm = small_llama();
  const auto bs = module_boundary_redistributions(*lm, DeviceMesh({4}, {"tp"}), rules, cfg("tp"),
                                                  tensor::token_ids(kBatch, kSeq));
  EXPECT_EQ(census(bs, 0).at(2),
            (std::map<std::string, int>{{"all_gather", 5}, {"reduce_scatter", 2}}));
}

TEST(ModuleBoundaries, NoRulesNoBoundaries) {
  const auto lm = small_llama();
  EXPECT_TRUE(module_boundary_redistributions(*lm, DeviceMesh({4}, {"tp"}), {}, cfg("tp"),
                                              tensor::token_ids(1, 8))
                  .empty());
}

TEST(ModuleBoundaries, RowwiseEmbeddingWithPyTorchsDefaultGathersTheIds) {
  // RowwiseParallel's default input_layouts is Shard(-1) even on an Embedding, so replicated ids
  // [2, 16] are taken for sequence shards and gathered (why torchtitan passes Replicate()).
  const auto lm = small_llama();
  const auto bs = module_boundary_redistributions(*lm, DeviceMesh({4}, {"tp"}),
                                                  {{"model.embed_tokens", kRowwise}}, cfg("tp"),
                                                  tensor::token_ids(kBatch, kSeq));
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0], (BoundaryRedistribution{"model.embed_tokens",
                                           BoundaryRole::kInput,
                                           {S(1)},
                                           {R},
                                           DimVector{kBatch, kSeq},
                                           tensor::DType::kInt64}));
  EXPECT_EQ(bs[1].role, BoundaryRole::kOutput);
}

TEST(ModuleBoundaries, PrepareModuleOutputRelaysTheOutputOnly) {
  // The decoder hands back Replicate hidden states; re-lay them as sequence shards (a local
  // chunk, no collective) for a sequence-parallel head. Its input is left alone.
  const auto lm = small_llama();
  StyleRule out{"model", kPrepareOutput};
  out.output_layout = R;
  out.desired_output_layout = S(1);
  const auto bs = module_boundary_redistributions(*lm, DeviceMesh({4}, {"tp"}), {out}, cfg("tp"),
                                                  tensor::token_ids(kBatch, kSeq));
  EXPECT_EQ(bs, (std::vector<BoundaryRedistribution>{{"model",
                                                      BoundaryRole::kOutput,
                                                      {R},
                                                      {S(1)},
                                                      DimVector{kBatch, kSeq, kHidden},
                                                      tensor::DType::kBFloat16}}));
}

TEST(ModuleBoundaries, PrintsAndRoundTripsThroughJson) {
  const BoundaryRedistribution b{
      "model.layers.0.mlp.down_proj", BoundaryRole::kOutput,   {S(0), P}, {S(0), S(1)},
      DimVector{2, 16, 4096},         tensor::DType::kBFloat16};
  std::ostringstream os;
  os << b;
  EXPECT_EQ(os.str(), "model.layers.0.mlp.down_proj output S0,P -> S0,S1 [2, 16, 4096] bfloat16");
  const nlohmann::json j = b;
  EXPECT_EQ(j.dump(),
            R"({"dtype":"bfloat16","from":["S0","P"],"module":"model.layers.0.mlp.down_proj",)"
            R"("role":"output","shape":[2,16,4096],"to":["S0","S1"]})");
  EXPECT_EQ(j.get<BoundaryRedistribution>(), b);
  nlohmann::json bad = j;
  bad["role"] = "middle";
  expect_error([&] { (void)bad.get<BoundaryRedistribution>(); }, "unknown boundary role 'middle'");
  bad = j;
  bad.erase("shape");
  expect_error([&] { (void)bad.get<BoundaryRedistribution>(); },
               "boundary redistribution: field 'shape': missing (required)");
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModuleBoundaries, BadInput) {
  const auto lm = small_llama();
  const DeviceMesh mesh({4}, {"tp"});
  auto run = [&](std::vector<StyleRule> rules) {
    return [&lm, &mesh, rules] {
      module_boundary_redistributions(*lm, mesh, rules, cfg("tp"), tensor::token_ids(1, 8));
    };
  };
  // Styles on modules they do not apply to.
  expect_error(run({{"model.layers.0.mlp", kColwise, R}}),
               "colwise applies to Linear, Conv1D and Embedding modules, but "
               "'model.layers.0.mlp' is a");
  expect_error(run({{"model.layers.0.self_attn.q_proj", kSequence}}),
               "sequence applies to LayerNorm, RMSNorm and Dropout modules, but "
               "'model.layers.0.self_attn.q_proj' is a Linear");
  // Overrides a style does not take, or lacks.
  expect_error(run({{"lm_head", kColwise, R, R}}), "colwise takes no desired_input_layout (got R)");
  StyleRule seq{"model.norm", kSequence};
  seq.output_layout = R;
  expect_error(run({seq}), "sequence takes no output_layout");
  expect_error(run({{"model.layers.0.mlp", kPrepareInput, S(1)}}),
               "prepare_input needs both input_layout and desired_input_layout");
  // Layouts that are not activation layouts, or that DTensor cannot reach.
  expect_error(run({{"lm_head", kColwise, StridedShard{0, 2}}}),
               "input_layout SS0:2 is not an activation layout");
  StyleRule avg{"model.layers.0.self_attn.o_proj", kRowwise};
  avg.output_layout = Partial{ReduceOp::kAvg};
  expect_error(run({avg}), "P cannot be redistributed to Pavg");
  StyleRule col_p{"lm_head", kColwise};
  col_p.output_layout = P;
  expect_error(run({col_p}), "S-1 cannot be redistributed to P");
  // A Shard dim the activation lacks is found when the shapes are known.
  StyleRule deep{"model.layers.0.self_attn.o_proj", kRowwise};
  deep.output_layout = S(5);
  expect_error(run({deep}),
               "module 'model.layers.0.self_attn.o_proj' output layout S5: the activation [1, 8, "
               "4096] has 3 dims");
  // Unknown layout and style names.
  EXPECT_THROW(parse_placement("Q1"), Error);
  EXPECT_THROW(parse_parallel_style("prepare"), Error);
  EXPECT_EQ(parse_parallel_style("prepare_input"), kPrepareInput);
}

}  // namespace
}  // namespace shardplan::mesh
