// mpt: MosaicML's MPT (MPT-7B, MPT-30B) as transformers' MptConfig and modeling_mpt.py: a
// pre-norm decoder with ALiBi positions (Press, Smith and Lewis 2022, "Train Short, Test Long": a
// per-head linear bias on the scores, no position parameters), one fused Wqkv holding [q; k; v]
// side by side, no bias anywhere (Linears and LayerNorms alike), an exact-GELU MLP 4 d_model wide,
// the output layer tied to the token embedding by default:
//   transformer.wte.weight [vocab, d_model]
//   transformer.blocks.N.norm_1.weight [d_model]
//   transformer.blocks.N.attn.Wqkv.weight [3 d_model, d_model], attn.out_proj.weight [d, d]
//   transformer.blocks.N.norm_2.weight [d_model]
//   transformer.blocks.N.ffn.up_proj.weight [4 d_model, d_model], ffn.down_proj.weight [d, 4 d]
//   transformer.norm_f.weight [d_model], lm_head.weight [vocab, d_model] (tied unless
//   tie_word_embeddings is false)
//
// Note [MPT keys transformers does not read]
// MptConfig keeps MosaicML's keys (llm-foundry's MPTConfig), but MptModel builds one fixed model
// from a few of them: d_model, n_heads, n_layers, vocab_size, max_seq_len (the width of its ALiBi
// table: a longer sequence fails to add the bias), layer_norm_epsilon, tie_word_embeddings and,
// in attn_config, attn_pdrop, clip_qkv and softmax_scale. Everything else is fixed: no bias
// whatever no_bias says (MptBlock and MptModel set each LayerNorm's bias to None), an MLP 4 d_model
// wide whatever expansion_ratio says, ALiBi with alibi_bias_max 8 whatever attn_config.alibi and
// alibi_bias_max say, full multi-head attention whatever attn_type says, no q/k LayerNorm, causal
// masking only (no prefix LM, no sequence ids), no logit scale, no embedding gradient fraction, and
// dropout only by attn_pdrop (on the attention weights, the attention output and the MLP output;
// resid_pdrop and emb_pdrop are read and not applied, as transformers reads and drops them: no
// shape depends on them). A file asking for any of the others otherwise describes a model
// transformers builds differently, or whose checkpoint it cannot load: it is refused, naming the
// key, rather than built as something else. learned_pos_emb is read and changes
// nothing: transformers builds no position table, and MosaicML's own MPTConfig turns it off
// whenever ALiBi is on (MPT-7B's file says true beside alibi true). llm-foundry's later keys that
// change the model (ffn_config's MLP type and width, attn_config's rope, qk_gn, unfused q/k/v, a
// sliding window, soft-capping, block_overrides) are refused on the same grounds.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "tensor/layers.h"
#include "tensor/models/blocks.h"
#include "tensor/models/config_fields.h"
#include "tensor/models/family.h"
#include "tensor/models/model_shell.h"
#include "tensor/ops.h"

namespace shardplan::tensor {
namespace models {
namespace {

// MptMLP's width: 4 x hidden, the only one transformers builds (Note [MPT keys transformers does
// not read]).
constexpr int64_t kExpansionRatio = 4;
// build_mpt_alibi_tensor's default, which MptModel never overrides.
constexpr int64_t kAlibiBiasMax = 8;

class Attention : public Module {
 public:
  Attention(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("MptAttention"),
        hidden_(c.hidden_size),
        heads_(c.num_attention_heads),
        head_dim_(c.head_dim),
        dropout_(training ? c.attention_dropout : 0.0),
        clip_(c.clip_qkv) {
    // attn_config.softmax_scale in place of 1/sqrt(head_dim) (same work, another scale).
    if (c.attention_multiplier > 0) scale_ = c.attention_multiplier;
    register_module("Wqkv", std::make_shared<Linear>(hidden_, 3 * hidden_, false, o));
    register_module("out_proj", std::make_shared<Linear>(hidden_, hidden_, false, o));
  }
  Tensor forward(const Tensor& x) override {
    Tensor qkv = child("Wqkv")->call(x);
    // clip_qkv: the whole projection clamped to [-clip, clip] before the split (a new tensor, not
    // in place), traced as a maximum and a minimum against the bounds.
    if (clip_) {
      qkv = binary(BinaryOp::kMinimum, binary(BinaryOp::kMaximum, qkv, Scalar(-*clip_)),
                   Scalar(*clip_));
    }
    // [B, S, 3 h] -> q, k, v [B, S, h] (mixed_qkv.chunk(3, dim=2)) -> [B, heads, S, head_dim].
    const std::vector<Tensor> parts = chunk(qkv, 3, 2);
    // transformers adds the ALiBi bias (a slope per head times the key's distance) to the scores
    // of its eager attention. FlashAttention-2 takes the slopes natively (alibi_slopes), as
    // MosaicML's trainers run it, so attention is the fused causal kernel here and the bias,
    // computed inside it, is not traced (docs/models.md, "What the models leave out").
    const Tensor out = scaled_dot_product_attention(
        split_heads(parts[0], heads_, head_dim_), split_heads(parts[1], heads_, head_dim_),
        split_heads(parts[2], heads_, head_dim_), Tensor(), dropout_, /*is_causal=*/true, scale_);
    return child("out_proj")->call(merge_heads(out));
  }

 private:
  int64_t hidden_, heads_, head_dim_;
  double dropout_;
  std::optional<double> clip_;   // ModelConfig::clip_qkv (attn_config.clip_qkv)
  std::optional<double> scale_;  // unset: 1/sqrt(head_dim)
};

class Mlp : public Module {
 public:
  Mlp(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("MptMLP"), dropout_(c.resid_dropout), training_(training) {
    register_module("up_proj",
                    std::make_shared<Linear>(c.hidden_size, c.intermediate_size, false, o));
    register_module("down_proj",
                    std::make_shared<Linear>(c.intermediate_size, c.hidden_size, false, o));
  }
  // MptMLP.forward(hidden_states, residual): the MLP, its output dropout (attn_pdrop), then the
  // residual added inside the module.
  Tensor run(const Tensor& x, const Tensor& residual) {
    CallScope scope(*this);
    const Tensor h = gelu(child("up_proj")->call(x), "none");  // nn.GELU(approximate="none")
    return add(maybe_dropout(child("down_proj")->call(h), dropout_, training_), residual);
  }

 private:
  double dropout_;
  bool training_;
};

// Empty until build() (Note [Filling repeated blocks after registration], blocks.h).
class Block : public Module {
 public:
  Block() : Module("MptBlock") {}
  void build(const ModelConfig& c, const TensorOptions& o, bool training) {
    dropout_ = c.resid_dropout;
    training_ = training;
    const DimVector h{c.hidden_size};
    // LayerNorm(hidden, eps) with its bias set to None afterwards: a weight only.
    register_module("norm_1", std::make_shared<LayerNorm>(h, c.norm_eps, true, false, o));
    register_module("attn", std::make_shared<Attention>(c, o, training));
    register_module("norm_2", std::make_shared<LayerNorm>(h, c.norm_eps, true, false, o));
    ffn = register_module("ffn", std::make_shared<Mlp>(c, o, training));
  }
  Tensor forward(const Tensor& x) override {
    // resid_attn_dropout (attn_pdrop) on the attention's output, then the residual add.
    const Tensor a =
        maybe_dropout(child("attn")->call(child("norm_1")->call(x)), dropout_, training_);
    const Tensor h = add(a, x);
    return ffn->run(child("norm_2")->call(h), h);
  }
  std::shared_ptr<Mlp> ffn;

 private:
  double dropout_ = 0;
  bool training_ = false;
};

class MptModel : public Module {
 public:
  MptModel(const ModelConfig& c, const TensorOptions& o, bool training)
      : Module("MptModel"), max_seq_len_(c.max_position_embeddings) {
    register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, o));
    auto blocks = register_module("blocks", std::make_shared<ModuleList>());
    std::vector<std::shared_ptr<Block>> empty;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      empty.push_back(blocks->push_back(std::make_shared<Block>()));
    }
    register_module("norm_f", std::make_shared<LayerNorm>(DimVector{c.hidden_size}, c.norm_eps,
                                                          true, false, o));
    for (const auto& b : empty) b->build(c, o, training);
  }
  Tensor forward(const Tensor& ids) override {
    // The ALiBi table MptModel adds to the scores is max_seq_len keys wide: a longer sequence
    // fails to broadcast in transformers, as GPT-2's positions end at n_positions.
    SP_CHECK(ids.size(1) <= max_seq_len_, "mpt: sequence length ", ids.size(1),
             " exceeds max_seq_len ", max_seq_len_, " (the width of its ALiBi table)");
    Tensor h = child("wte")->call(ids);
    for (const auto& [name, block] : child("blocks")->named_children()) h = block->call(h);
    return child("norm_f")->call(h);
  }

 private:
  int64_t max_seq_len_;
};

// The key's value as the file has it, for refusals.
std::string value_of(const ConfigFields& f, const char* key) {
  return f.has(key) ? f.raw(key).dump().substr(0, 80) : "null";
}

// Refuses `key` when it does not hold what transformers builds (`ok` false); `expected` says what
// it builds (Note [MPT keys transformers does not read]).
void require(const ConfigFields& f, const char* key, bool ok, const std::string& expected) {
  if (!ok) f.fail(key, value_of(f, key) + ": " + expected);
}

// llm-foundry's ffn_config: only its default MLP ("mptmlp", exact GELU, 4 d_model) is what
// MptMLP builds.
void check_ffn_config(const ConfigFields& f, int64_t inner) {
  if (!f.has("ffn_config")) return;
  const nlohmann::json& ffn = f.raw("ffn_config");
  if (!ffn.is_object()) {
    f.fail("ffn_config", "expected an object or null, got " + ffn.dump().substr(0, 80));
  }
  const std::string source = std::string(f.source()) + ": ffn_config";
  const ConfigFields g(ffn, source);
  require(g, "ffn_type", g.string("ffn_type", "mptmlp") == "mptmlp",
          "transformers' MptMLP is the plain up_proj / GELU / down_proj MLP; expected \"mptmlp\"");
  require(g, "ffn_hidden_size", !g.has("ffn_hidden_size") || g.integer("ffn_hidden_size") == inner,
          "transformers' MptMLP is 4 x d_model = " + std::to_string(inner) +
              " wide; expected that or null");
  if (g.has("ffn_act_fn")) {
    const nlohmann::json& act = g.raw("ffn_act_fn");
    const auto is = [&](const char* key, const char* value, bool absent_ok) {
      if (!act.contains(key)) return absent_ok;
      return act.at(key).is_string() && act.at(key).get<std::string>() == value;
    };
    const bool exact_gelu =
        act.is_object() && is("name", "gelu", false) && is("approximate", "none", true);
    require(g, "ffn_act_fn", exact_gelu,
            "transformers' MptMLP applies nn.GELU(approximate=\"none\"); expected "
            "{\"name\": \"gelu\"} or null");
  }
}

// attn_config, MptAttentionConfig's fields with its defaults (absent or null: all defaults).
void parse_attn_config(const ConfigFields& f, ModelConfig& c) {
  static const nlohmann::json kDefaults = nlohmann::json::object();
  const nlohmann::json* attn = &kDefaults;
  if (f.has("attn_config")) {
    attn = &f.raw("attn_config");
    if (!attn->is_object()) {
      f.fail("attn_config", "expected an object or null, got " + attn->dump().substr(0, 80));
    }
  }
  const std::string source = std::string(f.source()) + ": attn_config";
  const ConfigFields a(*attn, source);
  require(a, "attn_type", a.string("attn_type", "multihead_attention") == "multihead_attention",
          "transformers' MptAttention is multi-head (one Wqkv of 3 x d_model rows); expected "
          "\"multihead_attention\"");
  c.attention_dropout = c.resid_dropout = a.number("attn_pdrop", 0.0);
  (void)a.string("attn_impl", "torch");  // a kernel choice: the same model
  if (a.has("clip_qkv")) {
    const double clip = a.number("clip_qkv", 0.0);
    require(a, "clip_qkv", std::isfinite(clip) && clip >= 0,
            "expected a bound >= 0 for |q|, |k| and |v| (0 or null: none)");
    if (clip > 0) c.clip_qkv = clip;  // MptAttention clamps when clip_qkv is truthy
  }
  if (a.has("softmax_scale")) {
    c.attention_multiplier = a.number("softmax_scale", 0.0);
    require(a, "softmax_scale", std::isfinite(c.attention_multiplier) && c.attention_multiplier > 0,
            "expected a positive softmax scale (or null: 1/sqrt(d_model / n_heads))");
  }
  const std::string no_mask = "transformers' MPT masks causally and nothing else; expected false";
  require(a, "prefix_lm", !a.boolean("prefix_lm", false), no_mask);
  require(a, "attn_uses_sequence_id", !a.boolean("attn_uses_sequence_id", false), no_mask);
  require(a, "qk_ln", !a.boolean("qk_ln", false),
          "transformers' MptAttention has no q/k LayerNorm; expected false");
  require(a, "alibi", a.boolean("alibi", true),
          "transformers' MptModel always adds the ALiBi bias and has no position embedding to "
          "build instead; expected true");
  require(a, "alibi_bias_max", a.number("alibi_bias_max", 8.0) == kAlibiBiasMax,
          "transformers' MptModel builds its ALiBi slopes with 8 whatever this says; expected 8");
  // llm-foundry's later keys.
  require(a, "rope", !a.boolean("rope", false),
          "transformers' MPT has no rotary embedding (ALiBi only); expected false");
  require(a, "qk_gn", !a.boolean("qk_gn", false),
          "transformers' MptAttention has no q/k GroupNorm; expected false");
  require(a, "fused_qkv", a.boolean("fused_qkv", true),
          "transformers' MptAttention has one fused Wqkv; expected true");
  require(a, "sliding_window_size", a.integer("sliding_window_size", -1) == -1,
          "transformers' MPT attends every earlier token; expected -1 or null");
  require(a, "attn_logit_softcapping", !a.has("attn_logit_softcapping"),
          "transformers' MPT does not soft-cap the scores; expected null");
}

void parse(const ConfigFields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("d_model");
  c.num_hidden_layers = f.integer("n_layers");
  c.num_attention_heads = c.num_key_value_heads = f.integer("n_heads");
  head_dim_from_hidden(f, c, "n_heads", "d_model");
  c.max_position_embeddings = f.integer("max_seq_len", 2048);
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.hidden_act = "gelu";        // nn.GELU(approximate="none"): no key sets it
  c.partial_rotary_factor = 0;  // ALiBi, no rotary
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  require(f, "expansion_ratio", f.number("expansion_ratio", kExpansionRatio) == kExpansionRatio,
          "transformers' MptMLP is 4 x d_model wide whatever expansion_ratio says (a checkpoint of "
          "another width does not load); expected 4");
  int64_t inner = 0;
  if (!mul_into(c.hidden_size, kExpansionRatio, inner) && c.hidden_size > 0) {
    f.fail("d_model", std::to_string(c.hidden_size) + " is too large for an MLP of 4 x d_model");
  }
  c.intermediate_size = inner;
  require(f, "no_bias", f.boolean("no_bias", true),
          "transformers' MPT builds no bias on any Linear or LayerNorm whatever no_bias says (a "
          "checkpoint with biases does not load); expected true");
  (void)f.boolean("learned_pos_emb", true);  // no table either way (the Note above)
  // Read and dropped, as transformers' MPT drops them (its residual dropouts use attn_pdrop, it
  // has no embedding dropout): they change no shape, and MosaicML's files set them (0 in MPT-7B
  // and MPT-30B), so a file with them is the model transformers builds.
  (void)f.number("resid_pdrop", 0.0);
  (void)f.number("emb_pdrop", 0.0);
  require(f, "logit_scale", !f.has("logit_scale"),
          "transformers' MptForCausalLM does not scale the logits; expected null");
  require(f, "embedding_fraction", f.number("embedding_fraction", 1.0) == 1,
          "transformers' MPT does not scale the embeddings' gradient; expected 1.0");
  std::string norm = f.string("norm_type", "low_precision_layernorm");
  std::transform(norm.begin(), norm.end(), norm.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  require(f, "norm_type", norm == "low_precision_layernorm" || norm == "layernorm",
          "transformers' MPT builds nn.LayerNorm; expected \"low_precision_layernorm\" or "
          "\"layernorm\"");
  require(f, "block_overrides", !f.has("block_overrides") || f.raw("block_overrides").empty(),
          "transformers' MPT builds every block alike; expected null");
  check_ffn_config(f, inner);
  parse_attn_config(f, c);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["d_model"] = c.hidden_size;
  j["n_heads"] = c.num_attention_heads;
  j["n_layers"] = c.num_hidden_layers;
  // 4 for every config parse makes; another width (a config built in code) is written as its
  // ratio, which parse refuses by name.
  const int64_t h = std::max<int64_t>(1, c.hidden_size);
  if (c.intermediate_size % h == 0) {
    j["expansion_ratio"] = c.intermediate_size / h;
  } else {
    j["expansion_ratio"] = static_cast<double>(c.intermediate_size) / static_cast<double>(h);
  }
  j["max_seq_len"] = c.max_position_embeddings;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["no_bias"] = true;
  j["learned_pos_emb"] = false;
  j["attn_config"] = {
      {"attn_type", "multihead_attention"},
      {"attn_pdrop", c.attention_dropout},
      {"clip_qkv", c.clip_qkv ? nlohmann::json(*c.clip_qkv) : nlohmann::json(nullptr)},
      {"softmax_scale", c.attention_multiplier > 0 ? nlohmann::json(c.attention_multiplier)
                                                   : nlohmann::json(nullptr)},
      {"prefix_lm", false},
      {"qk_ln", false},
      {"attn_uses_sequence_id", false},
      {"alibi", true},
      {"alibi_bias_max", kAlibiBiasMax}};
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return std::make_shared<LmHeadModel<MptModel>>("MptForCausalLM", c, o, training, "transformer",
                                                 "transformer.wte.weight");
}

// MptConfig's names for ModelConfig's fields (its attribute_map and the attn_config dict), so
// that errors name the key in the file.
constexpr FieldRename kRenamed[] = {
    {"hidden_size", "d_model"},
    {"num_hidden_layers", "n_layers"},
    {"num_attention_heads", "n_heads"},
    {"num_key_value_heads", "n_heads"},  // derived: kv heads = heads
    {"head_dim", "n_heads"},             // derived: d_model / n_heads
    {"intermediate_size", "expansion_ratio"},
    {"max_position_embeddings", "max_seq_len"},
    {"norm_eps", "layer_norm_epsilon"},
    {"attention_dropout", "attn_config.attn_pdrop"},
    {"resid_dropout", "attn_config.attn_pdrop"},
    {"attention_multiplier", "attn_config.softmax_scale"},
    {"clip_qkv", "attn_config.clip_qkv"},
};

}  // namespace
}  // namespace models

// Megatron's split with transformers' module names. Wqkv holds [q; k; v] side by side, each
// d_model rows of whole heads, so each of the three is split over the ranks (fused_parts 3): a
// rank gets the same heads of q, k and v (a plain column split would hand rank 0 all of q). ALiBi
// has a slope per head: each rank's kernel takes its heads' slopes. The output layer is tied to
// wte by default; both lay the tied weight out by vocabulary rows.
constexpr TensorParallelRule kMptTpPlan[] = {{"transformer.wte", "rowwise"},
                                             {"transformer.blocks.*.attn.Wqkv", "colwise", 3},
                                             {"transformer.blocks.*.attn.out_proj", "rowwise"},
                                             {"transformer.blocks.*.ffn.up_proj", "colwise"},
                                             {"transformer.blocks.*.ffn.down_proj", "rowwise"},
                                             {"lm_head", "colwise"}};

// MptPreTrainedModel has no _init_weights of its own: PreTrainedModel's (modeling_utils.py)
// draws Linear weights and Embedding rows from normal(0, initializer_range), with no padding row
// (wte has no padding_idx), and starts LayerNorm weights at one; there are no biases.
constexpr InitRule kMptInitRules[] = {{"Linear", "weight", InitFill::kNormal},
                                      {"Embedding", "weight", InitFill::kNormal},
                                      {"LayerNorm", "weight", InitFill::kOnes}};

extern const ModelFamily kMptFamily;  // listed in family_registry.cpp
const ModelFamily kMptFamily{
    .model_type = "mpt",
    .hf_class_prefix = "Mpt",
    .layers_path = "transformer.blocks",
    .parse = models::parse,
    .to_hf_json = models::to_hf_json,
    .build = models::build,
    .renamed = models::kRenamed,
    .rotary = false,
    .learned_positions = false,
    .fused_qkv = true,
    .tp_plan = kMptTpPlan,
    .init_rules = kMptInitRules,
};

}  // namespace shardplan::tensor
