// The traced training step against published formulas, written out here (not taken from the code):
//  - Megatron-LM (Narayanan et al. 2021, Eq. 3 and Appendix; Korthikanti et al. 2022 Eq. 7):
//    forward+backward GEMM FLOPs of a GPT = 72 B L s h^2 (1 + s/6h + V/12hL), i.e. 3 passes
//    (forward 1 + backward 2) x 24 B s h^2 (1 + s/6h) per layer plus 3 x 2 B s h V for the logits;
//    with full recomputation 4 passes: 96 B L s h^2 (1 + s/6h + V/16hL).
//  - Korthikanti et al. 2022 Table 2: activation bytes per GPT layer with fp16 activations and
//    1-byte dropout masks, attention scores materialized: s b h (34 + 5 a s / h); selective
//    recomputation 34 s b h; full recomputation 2 s b h.
// The formulas neglect terms the trace counts; each test adds them back explicitly.
#include "tensor/training.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/module.h"
#include "tests/tensor/test_models.h"
#include "tests/tensor/training_models.h"

namespace shardplan::tensor {
namespace {

struct GptCase {
  int64_t b, s, h, a, L, V;
};

std::shared_ptr<test::GptModel> make_gpt(const GptCase& c, bool fused, double dropout = 0.1) {
  test::GptConfig g;
  g.vocab = c.V;
  g.hidden = c.h;
  g.heads = c.a;
  g.layers = c.L;
  g.fused_attention = fused;
  g.dropout = dropout;
  return std::make_shared<test::GptModel>(g);
}

TraceOptions opts(const GptCase& c, RecomputePolicy r, AttentionImpl attn = AttentionImpl::kMath,
                  bool dropout = true) {
  TraceOptions o;
  o.batch = c.b;
  o.seq = c.s;
  o.recompute = r;
  o.attention = attn;
  o.dropout = dropout;
  return o;
}

// Two shapes, so a formula matching by accident at one point would show.
const GptCase kCases[] = {{2, 32, 64, 4, 2, 1000}, {3, 16, 96, 6, 3, 512}};

// LayerNorm statistics, which Korthikanti et al. ignore (§4: "only main contributors"): two
// LayerNorms per layer, each saving fp32 mean and rstd per token: 2 x 2 x 4 bytes x s b.
int64_t ln_stats(const GptCase& c) { return 2 * 2 * 4 * c.s * c.b; }

TEST(TrainingActivations, GptLayerMatchesKorthikantiEq1) {
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, /*fused=*/false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kNone));
    ASSERT_EQ(st.blocks.size(), static_cast<size_t>(c.L));
    // s b h (34 + 5 a s / h) = 34 s b h + 5 a s^2 b.
    const int64_t sbh = c.s * c.b * c.h;
    const int64_t expected = 34 * sbh + 5 * c.a * c.s * c.s * c.b + ln_stats(c);
    for (const StepBlock& blk : st.blocks) EXPECT_EQ(blk.activation_bytes, expected) << blk.fqn;
  }
}

TEST(TrainingActivations, GptOutsideLayersMatchesKorthikantiExtraTerms) {
  // §4.3 with p = t = 1: embedding dropout mask s b h, final LayerNorm input 2 s b h, output-layer
  // input 2 s b h, fp32 logits (the cross-entropy's log-probabilities) 4 s b V; plus ln_f's
  // statistics (2 x 4 bytes per token), not in the paper.
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kNone));
    const int64_t sbh = c.s * c.b * c.h;
    EXPECT_EQ(st.totals.activation_bytes_outside_blocks,
              sbh + 2 * sbh + 2 * sbh + 4 * c.s * c.b * c.V + 8 * c.s * c.b);
    EXPECT_EQ(st.totals.activation_bytes,
              c.L * st.blocks[0].activation_bytes + st.totals.activation_bytes_outside_blocks);
  }
}

TEST(TrainingActivations, SelectiveRecomputeKeeps34sbh) {
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kSelective));
    for (const StepBlock& blk : st.blocks) {
      EXPECT_EQ(blk.activation_bytes, 34 * c.s * c.b * c.h + ln_stats(c)) << blk.fqn;
    }
  }
}

TEST(TrainingActivations, FullRecomputeKeepsTheLayerInput) {
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kFull));
    for (const StepBlock& blk : st.blocks) EXPECT_EQ(blk.activation_bytes, 2 * c.s * c.b * c.h);
    // Outside the layers nothing is recomputed: the same as without recomputation.
    auto again = make_gpt(c, false);
    EXPECT_EQ(st.totals.activation_bytes_outside_blocks,
              trace_training_step(*again, opts(c, RecomputePolicy::kNone))
                  .totals.activation_bytes_outside_blocks);
  }
}

TEST(TrainingActivations, DropoutOffDropsMasksAndAliasesProbabilities) {
  // Without dropout the three masks go (a s^2 b + 2 x s b h bytes), and the probabilities the
  // scores x V product saves are the softmax output itself (one 2 a s^2 b tensor, not two):
  // 34 s b h + 5 a s^2 b - (a s^2 b + 2 a s^2 b) - 2 s b h = 32 s b h + 2 a s^2 b.
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st =
        trace_training_step(*gpt, opts(c, RecomputePolicy::kNone, AttentionImpl::kMath, false));
    const int64_t expected = 32 * c.s * c.b * c.h + 2 * c.a * c.s * c.s * c.b + ln_stats(c);
    for (const StepBlock& blk : st.blocks) EXPECT_EQ(blk.activation_bytes, expected);
    // A model built with p = 0 never calls dropout: the same accounting.
    auto no_dropout = make_gpt(c, false, /*dropout=*/0.0);
    const TrainingStep st0 = trace_training_step(*no_dropout, opts(c, RecomputePolicy::kNone));
    EXPECT_EQ(st0.blocks[0].activation_bytes, expected);
  }
}

TEST(TrainingActivations, FlashAttentionHasNoQuadraticTerm) {
  // Flash sdpa saves q, k, v (views of the fused qkv output, 6 s b h, already in the 34), its
  // output [b, a, s, d] (2 s b h) and the fp32 logsumexp per (b, a, s) (4 a s b); the attention
  // dropout mask is regenerated from the RNG state. The projection's input is the contiguous
  // copy of the output (2 s b h, in the 34). No a s^2 b term.
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, /*fused=*/true);
    const int64_t sbh = c.s * c.b * c.h;
    // The math path's 34 s b h counts two attention-dropout-free terms the fused path also has.
    const TrainingStep none =
        trace_training_step(*gpt, opts(c, RecomputePolicy::kNone, AttentionImpl::kFlash));
    EXPECT_EQ(none.blocks[0].activation_bytes,
              34 * sbh + 2 * sbh + 4 * c.a * c.s * c.b + ln_stats(c));
    // Selective recomputation re-runs the sdpa: its output and logsumexp are not kept.
    const TrainingStep sel =
        trace_training_step(*gpt, opts(c, RecomputePolicy::kSelective, AttentionImpl::kFlash));
    EXPECT_EQ(sel.blocks[0].activation_bytes, 34 * sbh + ln_stats(c));
    // The math mode of the same fused op reproduces Korthikanti's quadratic term.
    const TrainingStep math =
        trace_training_step(*gpt, opts(c, RecomputePolicy::kNone, AttentionImpl::kMath));
    // (the math path's products save their inputs, not the attention output).
    EXPECT_EQ(math.blocks[0].activation_bytes, 34 * sbh + 5 * c.a * c.s * c.s * c.b + ln_stats(c));
  }
}

// Forward non-matrix FLOPs of the GPT of training_models.h, by op, with the per-element counts of
// tensor/ops/nn.cpp (layer_norm 7, gelu 8, softmax 5, dropout 2, cross_entropy 6) and 1 for
// pointwise ops and a bias add. Per layer, N = b s tokens:
//   ln1 7Nh, qkv bias 3Nh, scale 1 N a s, softmax 5 N a s, dropout 2 N a s, proj bias Nh,
//   dropout 2Nh, residual Nh, ln2 7Nh, fc bias 4Nh, gelu 32Nh, out bias Nh, dropout 2Nh,
//   residual Nh  => 61 N h + 8 N a s.
// Outside: wte + wpe Nh, dropout 2Nh, ln_f 7Nh, cross_entropy 6 N V  => 10 N h + 6 N V.
double gpt_neglected_forward_flops(const GptCase& c) {
  const double N = double(c.b) * c.s;
  return c.L * (61 * N * c.h + 8 * N * c.a * c.s) + 10 * N * c.h + 6 * N * c.V;
}

double megatron_eq7(const GptCase& c) {
  const double B = c.b, L = c.L, s = c.s, h = c.h, V = c.V;
  return 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
}

TEST(TrainingFlops, ModelFlopsMatchMegatronEq7) {
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kNone));
    const StepTotals& t = st.totals;
    // GEMMs only: exactly the formula (all values are integers well below 2^53).
    EXPECT_DOUBLE_EQ(t.forward_matmul_flops + t.backward_matmul_flops, megatron_eq7(c));
    EXPECT_DOUBLE_EQ(t.backward_matmul_flops, 2 * t.forward_matmul_flops);
    // Everything: the formula plus the neglected terms, forward and (pointwise ~ forward) backward.
    EXPECT_DOUBLE_EQ(t.model_flops(), megatron_eq7(c) + 2 * gpt_neglected_forward_flops(c));
    EXPECT_DOUBLE_EQ(t.recompute_flops, 0);
    EXPECT_DOUBLE_EQ(t.hardware_flops(), t.model_flops());
  }
}

TEST(TrainingFlops, FullRecomputeMatchesMegatronEq3) {
  // SC21 Eq. 3 counts one more forward of every layer: 96 B L s h^2 (1 + s/6h + V/16hL).
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kFull));
    const double B = c.b, L = c.L, s = c.s, h = c.h, V = c.V;
    const double eq3 = 96 * B * L * s * h * h * (1 + s / (6 * h) + V / (16 * h * L));
    double recompute_matmul = 0;
    for (const TrainingOp& op : st.ops) {
      if (op.recomputed) recompute_matmul += op.matmul_flops;
    }
    EXPECT_DOUBLE_EQ(
        st.totals.forward_matmul_flops + st.totals.backward_matmul_flops + recompute_matmul, eq3);
    // The non-matrix part of the recomputed forward: the per-layer neglected terms once more.
    const double N = B * s;
    EXPECT_DOUBLE_EQ(st.totals.recompute_flops - recompute_matmul,
                     L * (61 * N * h + 8 * N * c.a * s));
  }
}

TEST(TrainingFlops, SelectiveRecomputeAddsTheAttentionCoreForward) {
  // Selective recomputation re-runs the attention core (Megatron's CoreAttention under
  // checkpoint): Q K^T and scores x V, 2 x 2 B s^2 h per layer, plus its scale, softmax and
  // dropout (1 + 5 + 2) B a s^2. Korthikanti et al. Eq. 8 writes the hardware FLOPs as
  // 72 B L s h^2 (1 + s/3h + V/12hL), which is Eq. 7 + 12 B L s^2 h: three times the core's
  // forward GEMMs (its backward is already in Eq. 7). We count the re-run forward once, as SC21
  // Eq. 3 counts full recomputation (one extra forward), and check both relations.
  for (const GptCase& c : kCases) {
    auto gpt = make_gpt(c, false);
    const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kSelective));
    const double B = c.b, L = c.L, s = c.s, h = c.h, V = c.V;
    const double core_gemms = L * 4 * B * s * s * h;
    EXPECT_DOUBLE_EQ(st.totals.recompute_flops, core_gemms + L * 8 * B * c.a * s * s);
    const double eq8 = 72 * B * L * s * h * h * (1 + s / (3 * h) + V / (12 * h * L));
    EXPECT_NEAR(eq8 - megatron_eq7(c), 3 * core_gemms, 1e-9 * eq8);
    const double gemm_hw =
        st.totals.forward_matmul_flops + st.totals.backward_matmul_flops + core_gemms;
    EXPECT_GT(gemm_hw, megatron_eq7(c));
    EXPECT_LT(gemm_hw, eq8);
  }
}

TEST(TrainingFlops, FlashBackwardRecomputesScores) {
  // FlashAttention's backward recomputes Q K^T (2 B s^2 h per layer) since no scores are stored.
  const GptCase c = kCases[0];
  auto gpt = make_gpt(c, true);
  const TrainingStep st =
      trace_training_step(*gpt, opts(c, RecomputePolicy::kNone, AttentionImpl::kFlash));
  EXPECT_DOUBLE_EQ(st.totals.recompute_flops, c.L * 2.0 * c.b * c.s * c.s * c.h);
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops + st.totals.backward_matmul_flops,
                   megatron_eq7(c));
}

TEST(TrainingStep, SavedTensorsPerOpFollowTheRuleTable) {
  const GptCase c = kCases[0];
  auto gpt = make_gpt(c, false);
  const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kNone));
  auto whats = [&](const TrainingOp& op) {
    std::vector<std::string> w;
    for (const SavedTensor& s : op.saved) w.emplace_back(s.what);
    return w;
  };
  using V = std::vector<std::string>;
  int seen = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.block != 0) continue;
    if (op.op == "layer_norm") {
      EXPECT_EQ(whats(op), (V{"input", "weight", "weight", "mean_rstd"}));
    }
    if (op.op == "linear") {
      EXPECT_EQ(whats(op), (V{"input", "weight"}));
    }
    if (op.op == "gelu") {
      EXPECT_EQ(whats(op), (V{"input"}));
    }
    if (op.op == "softmax") {
      EXPECT_EQ(whats(op), (V{"output"}));
    }
    if (op.op == "dropout") {
      EXPECT_EQ(whats(op), (V{"mask"}));
    }
    if (op.op == "add" || op.op == "reshape") {
      EXPECT_TRUE(op.saved.empty()) << op.op;
    }
    if (op.op == "mul") {
      EXPECT_TRUE(op.saved.empty());  // by a Python number
    }
    if (op.op == "matmul") {
      EXPECT_EQ(whats(op), (V{"input", "input"}));
      ++seen;
    }
    EXPECT_TRUE(op.rule_known) << op.op;
  }
  EXPECT_EQ(seen, 2);
  // Q K^T saves q and k^T: views of one storage (the fused qkv output), counted once.
  for (const TrainingOp& op : st.ops) {
    if (op.op == "matmul" && op.block == 0) {
      EXPECT_EQ(op.saved[0].buffer, op.saved[1].buffer);
      EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[0].buffer)].bytes, 3 * c.s * c.b * c.h * 2);
      break;
    }
  }
}

TEST(TrainingStep, MlpSavedBytesByHand) {
  // Sequential(Linear(16, 64), GELU, Linear(64, 16)) on a float32 input [2, 4, 16], no loss.
  // Saved activations: the first linear's output (gelu's input) and gelu's output (the second
  // linear's input), 2*4*64 floats = 2048 bytes each. The model input is saved by reference.
  auto mlp = test::make_mlp(16, 64, 16);
  TraceOptions o;
  o.input = empty({2, 4, 16});
  o.loss = false;
  const TrainingStep st = trace_training_step(*mlp, o);
  EXPECT_EQ(st.totals.activation_bytes, 2 * 2048);
  // Forward 2*8*16*64 per product = 16384 each; backward: the first product's input does not
  // require grad (a plain input), so only its weight gradient: 16384; the second both: 32768.
  EXPECT_DOUBLE_EQ(st.totals.forward_matmul_flops, 2 * 16384.0);
  EXPECT_DOUBLE_EQ(st.totals.backward_matmul_flops, 16384.0 + 32768.0);
  // Parameters: 16*64 + 64 + 64*16 + 16 = 2128 (the optimizer step is priced by the planner,
  // planner/cost/optimizer_step.h, from this count).
  EXPECT_EQ(st.totals.parameters, 2128);
}

TEST(TrainingStep, PeakCoversRetainedAndRecomputedActivations) {
  const GptCase c = kCases[0];
  auto gpt = make_gpt(c, false);
  const TrainingStep none = trace_training_step(*gpt, opts(c, RecomputePolicy::kNone));
  const TrainingStep full = trace_training_step(*gpt, opts(c, RecomputePolicy::kFull));
  EXPECT_GE(none.totals.peak_activation_bytes, none.totals.activation_bytes);
  EXPECT_GE(full.totals.peak_activation_bytes, full.totals.activation_bytes);
  // Full recomputation re-creates one layer's tensors while that layer's backward runs.
  // When the last layer's backward starts: every layer's input (L x 2 s b h) and the last
  // layer's re-created tensors (its no-recompute bytes less the input it already counts).
  EXPECT_GE(full.totals.peak_activation_bytes,
            (c.L - 1) * 2 * c.s * c.b * c.h + none.blocks[0].activation_bytes);
  EXPECT_LT(full.totals.peak_activation_bytes, none.totals.peak_activation_bytes);
}

TEST(TrainingStep, LlamaGqaFlashSavesKvAtKvHeads) {
  // A 2-layer Llama-like model: hidden 64, 8 heads of 8, 2 kv heads, intermediate 160, V 300.
  test::LlamaConfig lc;
  lc.vocab = 300;
  lc.hidden = 64;
  lc.heads = 8;
  lc.kv_heads = 2;
  lc.intermediate = 160;
  lc.layers = 2;
  auto m = std::make_shared<test::LlamaModel>(lc);
  TraceOptions o;
  o.batch = 2;
  o.seq = 16;
  o.dropout = false;
  const TrainingStep st = trace_training_step(*m, o);
  // Parameters by hand: embed 300*64, per layer q 64*64, k 64*16, v 64*16, o 64*64, gate/up/down
  // 3*64*160, two norms 2*64; final norm 64; lm_head 64*300.
  const int64_t layer = 64 * 64 + 2 * 64 * 16 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
  EXPECT_EQ(st.totals.parameters, 300 * 64 + 2 * layer + 64 + 64 * 300);
  for (const TrainingOp& op : st.ops) {
    if (op.op != "scaled_dot_product_attention") continue;
    ASSERT_EQ(op.saved.size(), 5u);  // q, k, v, out, logsumexp
    const int64_t N = 2 * 16;        // tokens, bf16
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[0].buffer)].bytes, N * 64 * 2);  // q
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[1].buffer)].bytes, N * 16 * 2);  // k
    EXPECT_EQ(st.buffers[static_cast<size_t>(op.saved[4].buffer)].bytes, N * 8 * 4);   // lse
  }
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].fqn, "layers.0");
  EXPECT_EQ(st.blocks[0].activation_bytes, st.blocks[1].activation_bytes);
}

TEST(TrainingStep, BadOptionsAreClearErrors) {
  auto gpt = make_gpt(kCases[0], false);
  TraceOptions o;
  o.batch = 0;
  EXPECT_THROW(trace_training_step(*gpt, o), Error);
  o.batch = 1;
  o.block_fqns = {"layers.7"};
  try {
    trace_training_step(*gpt, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'7'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_recompute_policy("some"), Error);
  EXPECT_EQ(parse_recompute_policy("selective"), RecomputePolicy::kSelective);
  EXPECT_EQ(parse_attention_impl("math"), AttentionImpl::kMath);
}

TEST(TrainingStep, SummaryJsonRoundTripsTotals) {
  const GptCase c = kCases[0];
  auto gpt = make_gpt(c, false);
  const TrainingStep st = trace_training_step(*gpt, opts(c, RecomputePolicy::kSelective));
  const nlohmann::json j = summary_json(st);
  EXPECT_EQ(j.at("totals").get<StepTotals>(), st.totals);
  EXPECT_EQ(j.at("options").at("recompute"), "selective");
  EXPECT_EQ(j.at("blocks").size(), static_cast<size_t>(c.L));
  EXPECT_EQ(j.at("max_block_activation_bytes").get<int64_t>(), st.max_block_activation_bytes());
}

}  // namespace
}  // namespace shardplan::tensor
