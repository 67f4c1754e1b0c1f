// gptj: EleutherAI's GPT-J as transformers' GPTJConfig (GPT-2's key names: n_embd, n_layer, n_head,
// n_positions, n_inner 4 n_embd when null, activation_function gelu_new, layer_norm_epsilon; and
// rotary_dim 64, vocab 50400, untied, every dropout 0) and modeling_gptj.py: one LayerNorm before
// attention and MLP side by side, x + attn(n) + mlp(n); q, k, v and out_proj without biases, the
// MLP and lm_head with; the first rotary_dim channels of every head rotated:
//   transformer.wte.weight [vocab, n_embd]
//   transformer.h.N.ln_1.{weight,bias} [n_embd]
//   transformer.h.N.attn.{k_proj,v_proj,q_proj,out_proj}.weight [n_embd, n_embd] (in that order)
//   transformer.h.N.mlp.fc_in.{weight [n_inner, n_embd], bias}, fc_out.{weight [n_embd, n_inner],
//   bias [n_embd]}
//   transformer.ln_f.{weight,bias}, lm_head.{weight [vocab, n_embd], bias [vocab]}
// and, per attention, the non-persistent float32 buffer embed_positions [n_positions, rotary_dim]
// (sin and cos of GPT-J's fixed base 10,000, side by side).
// GPT-J rotates interleaved channel pairs (rotate_every_two: (x0, x1), (x2, x3), ...) where Llama
// rotates halves (rotate_half: (x0, x_{r/2}), ...). The pairing is a permutation of the rotated
// channels: the same shapes, the same elementwise ops and FLOPs, so apply_rotary (blocks.h) is
// traced for it, as for Cohere's and Helium's interleaved RoPE.
#include <cmath>
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

// transformers' apply_rotary_pos_emb of GPT-J on x [B, S, heads, head_dim] (q and k before their
// heads move forward): sin and cos [1, S, rot / 2] each repeated in place, repeat_interleave(2) on
// [1, S, 1, rot / 2] (a copy, made anew for every call as transformers does), then x * cos +
// rotate_every_two(x) * sin on the first rot channels and the rest passed through.
Tensor rotate(const Tensor& x, const Tensor& sin_half, const Tensor& cos_half) {
  const auto pairs = [](const Tensor& t) {
    const int64_t s = t.size(1), half = t.size(2);
    const Tensor each = unsqueeze(unsqueeze(t, 2), -1);  // [1, S, 1, rot / 2, 1]
    return reshape(expand(each, {1, s, 1, half, 2}), {1, s, 1, 2 * half});
  };
  const Tensor sin_t = pairs(sin_half);
  const Tensor cos_t = pairs(cos_half);
  return apply_rotary(x, cos_t, sin_t);
}

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("GPTJAttention"),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        rot_(rotary_dim(c)),
        attn_dropout_(training ? c.attention_dropout : 0.0),
        resid_dropout_(c.resid_dropout),
        training_(training) {
    const int64_t h = c.hidden_size;
    // GPTJAttention.__init__ registers k, v, q, then out_proj: named_parameters' order.
    register_module("k_proj", std::make_shared<Linear>(h, h, false, o));
    register_module("v_proj", std::make_shared<Linear>(h, h, false, o));
    register_module("q_proj", std::make_shared<Linear>(h, h, false, o));
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
    const Tensor q = view(child("q_proj")->call(x), {b, s, heads_, head_dim_});
    const Tensor k = view(child("k_proj")->call(x), {b, s, heads_, head_dim_});
    const Tensor v = split_heads(child("v_proj")->call(x), heads_, head_dim_);
    // Every layer gathers its positions' rows of its own table (torch.gather) and casts them to
    // the activations' dtype: sin then cos. transformers first copies the table and an int64 index
    // [S, rot] with repeat (1.5 MB a layer at 2,048 tokens), which is not traced.
    const Tensor sincos = to(embedding(buffer("embed_positions"), pos), x.dtype());
    const Tensor sin_half = narrow(sincos, -1, 0, rot_ / 2);
    const Tensor cos_half = narrow(sincos, -1, rot_ / 2, rot_ / 2);
    const Tensor k_rot = rotate(k, sin_half, cos_half);  // k first, as transformers
    const Tensor q_rot = rotate(q, sin_half, cos_half);
    // transformers' own paths are eager (scores in float32) and FlashAttention-2 (GPT-J has no
    // SDPA path); the planner prices the fused kernel unless attn_implementation says eager.
    const Tensor out =
        scaled_dot_product_attention(permute(q_rot, {0, 2, 1, 3}), permute(k_rot, {0, 2, 1, 3}), v,
                                     Tensor(), attn_dropout_, /*is_causal=*/true);
    return maybe_dropout(child("out_proj")->call(merge_heads(out)), resid_dropout_, training_);
  }

 private:
  int64_t heads_, head_dim_, rot_;
  double attn_dropout_, resid_dropout_;
  bool training_;
};

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("n_embd");
  c.num_hidden_layers = f.integer("n_layer");
  c.num_attention_heads = f.integer("n_head");
  c.num_key_value_heads = c.num_attention_heads;
  c.max_position_embeddings = f.integer("n_positions", 2048);
  // n_inner: null or absent means 4 * n_embd (GPTJBlock). (validate reports n_embd <= 0.)
  int64_t default_inner = 0;
  if (!f.has("n_inner") && !mul_into(c.hidden_size, 4, default_inner) && c.hidden_size > 0) {
    f.fail("n_embd", std::to_string(c.hidden_size) +
                         " is too large for the default n_inner = 4 * n_embd, expected at most " +
                         std::to_string(INT64_MAX / 4) + " or an explicit n_inner");
  }
  c.intermediate_size = f.integer("n_inner", default_inner);
  head_dim_from_hidden(f, c, "n_head", "n_embd", " (GPTJAttention's head_dim)");
  if (c.head_dim > 0) {  // else validate refuses n_embd or n_head, naming them
    // GPTJAttention builds tables rotary_dim wide (n_embd when null) and applies them to each
    // head's first rotary_dim channels: they must be pairs within a head, or transformers fails in
    // forward. A null one fits only a single head, which it then rotates whole.
    if (f.is_null("rotary_dim")) {
      if (c.num_attention_heads != 1) {
        f.fail("rotary_dim",
               "null makes GPTJAttention's tables n_embd = " + std::to_string(c.hidden_size) +
                   " wide, which heads of " + std::to_string(c.head_dim) +
                   " cannot take; expected an even width in (0, head_dim] (or n_head 1)");
      }
      c.partial_rotary_factor = 1;
    } else {
      const int64_t r = f.integer("rotary_dim", 64);
      if (r <= 0 || r > c.head_dim || r % 2 != 0) {
        f.fail("rotary_dim", "must be even and in (0, head_dim = " + std::to_string(c.head_dim) +
                                 "], got " + std::to_string(r));
      }
      c.partial_rotary_factor = rotary_fraction(r, c.head_dim);
    }
    // Every layer holds its own table of n_positions x rotary_dim floats: their sum stays
    // countable, as validate keeps the parameters' (1e18).
    const double values = static_cast<double>(c.num_hidden_layers) *
                          static_cast<double>(c.max_position_embeddings) *
                          static_cast<double>(rotary_dim(c));
    if (!(values < 1e18)) {
      f.fail("n_positions", std::to_string(c.max_position_embeddings) +
                                " rows in each layer's sinusoid table make about " +
                                std::to_string(values) +
                                " values, beyond what shardplan counts exactly (1e18)");
    }
  }
  models::parse_gptj_common(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) { models::gptj_config_to_hf_json(c, j); }

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return make_gptj_causal_lm<Attention>(c, o, training, {.prefix = "GPTJ", .family = "gptj"});
}

// GPTJConfig's names for ModelConfig's fields, so that errors name the key in the file.
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

// Megatron's split with transformers' module names (GPTJConfig has no base_model_tp_plan). q, k
// and v are separate Linears whose rows are [heads, head_dim]: a column split hands each rank
// whole heads, and the rotated channels are the first rotary_dim of each head, so RoPE stays
// local to the rank. Attention and MLP both read ln_1's output: one column-parallel input, whose
// gradient is all-reduced once in backward; out_proj and fc_out are each row-parallel, two
// all-reduces in forward where mesh-transformer-jax summed both halves before its one. The output
// layer's bias splits with its vocabulary columns.
constexpr TensorParallelRule kGptjTpPlan[] = {{"transformer.wte", "rowwise"},
                                              {"transformer.h.*.attn.q_proj", "colwise"},
                                              {"transformer.h.*.attn.k_proj", "colwise"},
                                              {"transformer.h.*.attn.v_proj", "colwise"},
                                              {"transformer.h.*.attn.out_proj", "rowwise"},
                                              {"transformer.h.*.mlp.fc_in", "colwise"},
                                              {"transformer.h.*.mlp.fc_out", "rowwise"},
                                              {"lm_head", "colwise"}};

// GPTJPreTrainedModel._init_weights: PreTrainedModel's (Linear weights and Embedding rows
// normal(0, initializer_range), no padding row since wte has no padding_idx, Linear biases zero,
// LayerNorm weight one and bias zero), then each attention's embed_positions buffer recomputed,
// which materialize (parameters only) does not fill.
constexpr std::span<const InitRule> kGptjInitRules = kPreTrainedInitRules;

extern const ModelFamily kGptjFamily;  // listed in family_registry.cpp
const ModelFamily kGptjFamily{
    .model_type = "gptj",
    .hf_class_prefix = "GPTJ",
    .layers_path = "transformer.h",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    // GPTJConfig has no rope_parameters and its attention reads none: the shared reading, which
    // would let a rope_parameters' partial_rotary_factor override rotary_dim, is skipped.
    .rope_parameters_by_layer_type = true,
    .tp_plan = kGptjTpPlan,
    .init_rules = kGptjInitRules,
};

}  // namespace shardplan::tensor
