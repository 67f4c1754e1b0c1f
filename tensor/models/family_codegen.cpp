// codegen: Salesforce's CodeGen (350M, 2B, 6B, 16B; -nl, -multi, -mono) as transformers'
// CodeGenConfig (GPT-J's key names and defaults: n_embd 4,096, n_layer 28, n_head 16, n_positions
// 2,048, rotary_dim 64, n_inner 4 n_embd when null, gelu_new, layer_norm_epsilon 1e-5, vocabulary
// 50,400, untied, every dropout 0) and modeling_codegen.py: GPT-J's block (one LayerNorm before
// attention and MLP side by side, x + attn(n) + mlp(n); the first rotary_dim channels of every
// head rotated in interleaved pairs) with q, k and v from one projection laid out in blocks:
//   transformer.wte.weight [vocab, n_embd]
//   transformer.h.N.ln_1.{weight,bias} [n_embd]
//   transformer.h.N.attn.qkv_proj.weight [3 n_embd, n_embd] (no bias; rows in Note [CodeGen's qkv
//   layout]), attn.out_proj.weight [n_embd, n_embd] (no bias)
//   transformer.h.N.mlp.fc_in.{weight [n_inner, n_embd], bias}, fc_out.{weight [n_embd, n_inner],
//   bias [n_embd]}
//   transformer.ln_f.{weight,bias}, lm_head.{weight [vocab, n_embd], bias [vocab]}
// and, per attention, the non-persistent float32 buffer embed_positions [n_positions, rotary_dim]
// (sin and cos of base 10,000 side by side, GPT-J's table).
//
// Note [CodeGen's qkv layout]
// Salesforce trained CodeGen with JAX on TPU-v4 pods split four ways for model parallelism, and
// the converted checkpoints keep that split: transformers hard-codes mp_num = 4. The 3 n_embd
// output rows of qkv_proj are 4 blocks of 3 n_embd / 4 rows; block m holds, in this order, the
// query, VALUE and key rows of heads m H / 4 ... (m + 1) H / 4 - 1 (H = n_head), each part H / 4
// heads of head_dim rows. The forward reshapes the output to [B, S, 4, 3 n_embd / 4], splits the
// last dim into q, v, k and folds (4, H / 4) back into H heads, a copy for each of the three
// since a block's parts lie 3 n_embd / 4 apart. So H must be a multiple of 4 (transformers'
// reshape fails otherwise; parse refuses it). Under tensor parallelism a plain column split of
// the rows hands rank r of tp the blocks [4 r / tp, 4 (r + 1) / tp) when tp divides 4: q, k and v
// of heads [H r / tp, H (r + 1) / tp), exactly the heads whose out_proj columns the row-parallel
// split gives it. Any other tp cuts a block between its parts (tp 8: one rank holds a block's q
// and half its v, the next the other half and its k), and a split of each of the 12 parts
// (fused_parts 12) would hand a rank heads from every block, which out_proj's contiguous split of
// its input columns does not match. The family says fused_qkv_blocks = 4 and the planner refuses
// tp that does not divide 4 (planner/candidate/parallel_dims.cpp); running CodeGen at tp 8 would
// need its qkv_proj rows reordered per head first, a conversion shardplan does not model.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/gptj_shell.h"
#include "tensor/models/model_shell.h"

namespace shardplan::tensor {
namespace models {
namespace {

// transformers' mp_num in CodeGenAttention.forward (Note [CodeGen's qkv layout]).
constexpr int64_t kMpNum = 4;

// transformers' apply_rotary_pos_emb of CodeGen (GPT-J's) on the first `rot` channels of x [B, S,
// heads, head_dim], then torch.cat with the rest (a copy even when nothing is left over): sin and
// cos [1, S, rot / 2] each repeated in place, repeat_interleave(2) on [1, S, 1, rot / 2] (a copy
// made anew for every call, as transformers does). The float32 tables are not cast: the rotated
// channels, and so the whole of q and k after the cat, come out float32 (Note [CodeGen keeps q
// and k in float32]). rotate_every_two pairs neighbouring channels where apply_rotary (blocks.h)
// pairs halves: a permutation of the same channels, the same ops and work (GPT-J's note).
Tensor rotate(const Tensor& x, const Tensor& sin_half, const Tensor& cos_half, int64_t rot) {
  const auto pairs = [](const Tensor& t) {
    const int64_t s = t.size(1), half = t.size(2);
    const Tensor each = unsqueeze(unsqueeze(t, 2), -1);  // [1, S, 1, rot / 2, 1]
    return reshape(expand(each, {1, s, 1, half, 2}), {1, s, 1, 2 * half});
  };
  const Tensor sin_t = pairs(sin_half);  // sin first, as transformers repeats them
  const Tensor cos_t = pairs(cos_half);
  const Tensor rotated = apply_rotary(narrow(x, -1, 0, rot), cos_t, sin_t);
  const int64_t d = x.size(-1);
  return cat({rotated, narrow(x, -1, rot, d - rot)}, -1);
}

// Note [CodeGen keeps q and k in float32]
// CodeGen's sinusoid table stays float32 (GPT-J casts its rows to the activations' dtype;
// CodeGen's comment cites Salesforce's code, whose rotated keys are always float32), so under
// bfloat16 weights the rotation's products promote q and k to float32, and its eager attention
// (transformers' only path for CodeGen) computes the scores in float32 before casting the
// probabilities to v's dtype. The trace keeps the float32 rotation and then prices the fused
// kernel, which takes q, k and v in one 16-bit dtype: q and k are cast to v's dtype first, the
// one step that is the kernel's and not transformers' (a float32 model casts nothing).
class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("CodeGenAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        rot_(rotary_dim(c)),
        attn_dropout_(training ? c.attention_dropout : 0.0),
        resid_dropout_(c.resid_dropout),
        training_(training) {
    const int64_t h = c.hidden_size;
    // CodeGenAttention.__init__: qkv_proj, out_proj (both bias=False), then the table.
    register_module("qkv_proj", std::make_shared<Linear>(h, 3 * h, false, o));
    register_module("out_proj", std::make_shared<Linear>(h, h, false, o));
    // create_sinusoidal_positions(n_positions, rotary_dim): float32 whatever the model's dtype.
    register_buffer(
        "embed_positions",
        empty({c.max_position_embeddings, rot_}, {.dtype = DType::kFloat32, .device = o.device}),
        /*persistent=*/false);
  }
  // x [B, S, n_embd], pos the position ids [1, S].
  Tensor run(const Tensor& x, const Tensor& pos) {
    CallScope scope(*this);
    const int64_t b = x.size(0), s = x.size(1);
    const int64_t per_block = heads_ / kMpNum, local = per_block * head_dim_;
    // [B, S, 3 n_embd] -> [B, S, 4, 3 local] (a view), then q, v, k of every block (Note
    // [CodeGen's qkv layout]), each folded into [B, S, heads, head_dim] by a copying reshape.
    const Tensor blocks = reshape(child("qkv_proj")->call(x), {b, s, kMpNum, 3 * local});
    const auto heads_of = [&](int64_t part) {
      const Tensor p = narrow(blocks, -1, part * local, local);
      return reshape(reshape(p, {b, s, kMpNum, per_block, head_dim_}), {b, s, heads_, head_dim_});
    };
    const Tensor q = heads_of(0), k = heads_of(2);
    const Tensor v = permute(heads_of(1), {0, 2, 1, 3});  // [B, heads, S, head_dim]
    // Every layer indexes its own table with the position ids (embed_positions[position_ids]):
    // [1, S, rotary_dim] float32, sin then cos.
    const Tensor sincos = embedding(buffer("embed_positions"), pos);
    const Tensor sin_half = narrow(sincos, -1, 0, rot_ / 2);
    const Tensor cos_half = narrow(sincos, -1, rot_ / 2, rot_ / 2);
    const Tensor k_rot = rotate(k, sin_half, cos_half, rot_);  // k first, as transformers
    const Tensor q_rot = rotate(q, sin_half, cos_half, rot_);
    // Note [CodeGen keeps q and k in float32]: the fused kernel's inputs in v's dtype.
    const Tensor q_in = to(permute(q_rot, {0, 2, 1, 3}), v.dtype());
    const Tensor k_in = to(permute(k_rot, {0, 2, 1, 3}), v.dtype());
    const Tensor out =
        scaled_dot_product_attention(q_in, k_in, v, Tensor(), attn_dropout_, /*is_causal=*/true);
    return maybe_dropout(child("out_proj")->call(merge_heads(out)), resid_dropout_, training_);
  }

 private:
  int64_t heads_, head_dim_, rot_;
  double attn_dropout_, resid_dropout_;
  bool training_;
};

void parse(const ConfigFields& f, ModelConfig& c) {
  // CodeGenConfig's defaults fill every key a file omits (its documented checkpoint's sizes).
  c.vocab_size = f.integer("vocab_size", 50400);
  c.hidden_size = f.integer("n_embd", 4096);
  c.num_hidden_layers = f.integer("n_layer", 28);
  c.num_attention_heads = f.integer("n_head", 16);
  c.num_key_value_heads = c.num_attention_heads;
  c.max_position_embeddings = f.integer("n_positions", 2048);
  // n_inner: null or absent means 4 * n_embd (CodeGenBlock). (validate reports n_embd <= 0.)
  int64_t default_inner = 0;
  if (!f.has("n_inner") && !mul_into(c.hidden_size, 4, default_inner) && c.hidden_size > 0) {
    f.fail("n_embd", std::to_string(c.hidden_size) +
                         " is too large for the default n_inner = 4 * n_embd, expected at most " +
                         std::to_string(INT64_MAX / 4) + " or an explicit n_inner");
  }
  c.intermediate_size = f.integer("n_inner", default_inner);
  head_dim_from_hidden(f, c, "n_head", "n_embd", " (CodeGenAttention's head_dim)");
  const int64_t heads = c.num_attention_heads;
  if (heads > 0 && heads % kMpNum != 0) {  // else validate refuses n_head, naming it
    f.fail("n_head", std::to_string(heads) +
                         " is not a multiple of 4: CodeGenAttention splits qkv_proj's output into "
                         "mp_num = 4 blocks of n_head / 4 whole heads (Note [CodeGen's qkv "
                         "layout]), and its reshape fails otherwise");
  }
  if (c.head_dim > 0) {
    // rotary_dim: an int (CodeGenConfig is strict, and CodeGenModel computes min(rotary_dim,
    // n_ctx // n_head), which None cannot take), rotating pairs within a head: odd, zero or wider
    // than a head, the forward's products fail to broadcast.
    if (f.is_null("rotary_dim")) {
      f.fail("rotary_dim",
             "null cannot build CodeGenModel (it takes min(rotary_dim, n_ctx // "
             "n_head)); expected an even width in (0, head_dim = " +
                 std::to_string(c.head_dim) + "]");
    }
    const int64_t r = f.integer("rotary_dim", 64);
    if (r <= 0 || r > c.head_dim || r % 2 != 0) {
      f.fail("rotary_dim", "must be even and in (0, head_dim = " + std::to_string(c.head_dim) +
                               "], got " + std::to_string(r));
    }
    c.partial_rotary_factor = rotary_fraction(r, c.head_dim);
    // Every layer holds its own table of n_positions x rotary_dim floats: their sum stays
    // countable, as validate keeps the parameters' (1e18).
    const double values = static_cast<double>(c.num_hidden_layers) *
                          static_cast<double>(c.max_position_embeddings) * static_cast<double>(r);
    if (!(values < 1e18)) {
      f.fail("n_positions", std::to_string(c.max_position_embeddings) +
                                " rows in each layer's sinusoid table make about " +
                                std::to_string(values) +
                                " values, beyond what shardplan counts exactly (1e18)");
    }
  }
  models::parse_gptj_common(f, c);
  // n_ctx is read by CodeGenModel into an attribute nothing uses; scale_attn_weights is not read
  // at all (CodeGen always divides by sqrt(head_dim)): both ignored, as transformers ignores them.
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) { models::gptj_config_to_hf_json(c, j); }

// What parse guarantees, checked again for a config built in code (the planner copies configs
// and cuts their layers): the 4 blocks of whole heads and one key/value head per query head.
void check_layout(const ModelConfig& c) {
  const int64_t heads = c.num_attention_heads;
  SP_CHECK(heads % kMpNum == 0 && c.num_key_value_heads == heads, "codegen: ", heads, " heads and ",
           c.num_key_value_heads,
           " key/value heads; expected a multiple of 4 heads (qkv_proj's mp_num = 4 blocks) and "
           "as many key/value heads");
  const int64_t r = rotary_dim(c);
  SP_CHECK(r > 0 && r % 2 == 0 && r <= c.head_dim, "codegen: rotary_dim ", r,
           ", expected an even width in (0, head_dim = ", c.head_dim, "]");
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  check_layout(c);
  return make_gptj_causal_lm<Attention>(c, o, training, {.prefix = "CodeGen", .family = "codegen"});
}

// CodeGenConfig's names for ModelConfig's fields, so that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"hidden_size", "n_embd"},
    {"intermediate_size", "n_inner"},
    {"num_hidden_layers", "n_layer"},
    {"num_attention_heads", "n_head"},
    {"num_key_value_heads", "n_head"},  // derived: kv heads = heads
    {"head_dim", "n_head"},             // derived: n_embd / n_head
    {"max_position_embeddings", "n_positions"},
    {"hidden_act", "activation_function"},
    {"norm_eps", "layer_norm_epsilon"},
    {"partial_rotary_factor", "rotary_dim"},  // derived: rotary_dim / head_dim
    {"embd_dropout", "embd_pdrop"},
    {"attention_dropout", "attn_pdrop"},
    {"resid_dropout", "resid_pdrop"},
};

}  // namespace
}  // namespace models

// Megatron's split with transformers' module names (CodeGenConfig has no base_model_tp_plan).
// qkv_proj is one column-parallel projection split evenly by rows (no fused_parts): with tp
// dividing its 4 blocks each rank holds whole blocks, q, k and v of the same heads, and out_proj's
// row-parallel split gives it those heads' columns (Note [CodeGen's qkv layout]; the planner
// refuses other tp through fused_qkv_blocks). The rotated channels are the first rotary_dim of
// each head, so RoPE stays local to the rank. Attention and MLP both read ln_1's output: one
// column-parallel input, its gradient all-reduced once in backward; out_proj and fc_out are each
// row-parallel, two all-reduces in forward. The output layer's bias splits with its vocabulary.
constexpr TensorParallelRule kCodegenTpPlan[] = {{"transformer.wte", "rowwise"},
                                                 {"transformer.h.*.attn.qkv_proj", "colwise"},
                                                 {"transformer.h.*.attn.out_proj", "rowwise"},
                                                 {"transformer.h.*.mlp.fc_in", "colwise"},
                                                 {"transformer.h.*.mlp.fc_out", "rowwise"},
                                                 {"lm_head", "colwise"}};

// CodeGenPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), no padding row since wte has no padding_idx, Linear biases zero,
// LayerNorm weight one and bias zero), then each attention's embed_positions buffer recomputed,
// which materialize (parameters only) does not fill.
constexpr std::span<const InitRule> kCodegenInitRules = kPreTrainedInitRules;

extern const ModelFamily kCodegenFamily;  // listed in family_registry.cpp
const ModelFamily kCodegenFamily{
    .model_type = "codegen",
    .hf_class_prefix = "CodeGen",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    // CodeGenConfig has no rope_parameters and its attention reads none: the shared reading, which
    // would let a rope_parameters' partial_rotary_factor override rotary_dim, is skipped.
    .rope_parameters_by_layer_type = true,
    .fused_qkv = true,
    .fused_qkv_blocks = models::kMpNum,
    .tp_plan = kCodegenTpPlan,
    .init_rules = kCodegenInitRules,
};

}  // namespace shardplan::tensor
