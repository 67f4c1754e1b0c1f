// nemotron (NVIDIA Nemotron-4 15B / 340B and the Minitron 4B / 8B prunings; not nemotron_h):
// transformers' NemotronConfig (vocab 256000, max positions 4096, norm_eps 1e-5, hidden_act
// "relu2", initializer_range 0.0134, no biases unless attention_bias / mlp_bias, untied, no pad
// token, rope_theta 10000, and half of each head rotated: partial_rotary_factor 0.5 unless the
// file (or its rope_parameters) says otherwise) and modeling_nemotron.py: Llama's pre-norm layer
// whose three norms are NemotronLayerNorm1P (an nn.LayerNorm with weight and bias that scales by
// weight + 1), NemotronMLP without a gate (down_proj(relu(up_proj(x))^2), up_proj registered
// first), q, k, v and o biased together by attention_bias, RoPE on the first
// int(head_dim x partial_rotary_factor) channels of each head and the rest passed through.
// NemotronConfig leaves a missing num_key_value_heads None, which NemotronAttention cannot divide
// by: such a file is refused. The NeMo converter's kv_channels is not read by transformers
// (head_dim is head_dim or hidden_size // heads); one that disagrees with that head width is
// refused.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/init_rules.h"
#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kNemotronFamily;  // listed in family_registry.cpp

namespace {

// NemotronLayerNorm1P: F.layer_norm(x, (dim,), weight + 1, bias, eps), weight and bias [dim]
// (nn.LayerNorm's). transformers' _init_weights starts the weight at ONE (not zero), so the norm
// starts scaling by 2. Under autocast it runs in the autocast dtype, not float32.
class NemotronLayerNorm1P : public Module {
 public:
  NemotronLayerNorm1P(int64_t dim, double eps, const TensorOptions& o)
      : Module("NemotronLayerNorm1P"), dim_(dim), eps_(eps) {
    register_parameter("weight", empty({dim}, o));
    register_parameter("bias", empty({dim}, o));
  }
  Tensor forward(const Tensor& x) override {
    return layer_norm(x, {dim_}, add(parameter("weight"), 1.0), parameter("bias"), eps_);
  }
  void reset_parameters(uint64_t /*seed*/) override {
    init_member_constant("weight", 1.0);
    init_member_constant("bias", 0.0);
  }

 private:
  int64_t dim_;
  double eps_;
};

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<NemotronLayerNorm1P>(dim, eps, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  // NemotronConfig's num_key_value_heads stays None when absent or null (no __post_init__
  // default), and NemotronAttention divides the heads by it: transformers builds no such model.
  if (!f.has("num_key_value_heads")) {
    f.fail("num_key_value_heads",
           "missing or null; NemotronConfig gives it no default and NemotronAttention cannot "
           "build without it (the NeMo converter writes num_query_groups there)");
  }
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 4096, .hidden_act = "relu2"});
  c.norm_eps = f.number("norm_eps", 1e-5);
  c.initializer_range = 0.0134;  // the class's; parse_model_config reads a file's
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  // __post_init__'s kwargs.setdefault("partial_rotary_factor", 0.5), which rope_parameters' own
  // factor overrides (parse_rope_parameters runs after this, as convert_rope_params_to_dict's
  // setdefault keeps the dict's).
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);
  // The NeMo converter writes kv_channels, which NemotronConfig ignores: the heads are head_dim
  // wide, else hidden_size // heads. A file whose kv_channels says another width has weights
  // transformers cannot load into what it builds.
  if (f.has("kv_channels") && !f.has("head_dim") && f.integer("kv_channels") != c.head_dim) {
    f.fail("kv_channels",
           std::to_string(f.integer("kv_channels")) +
               ", but transformers' NemotronConfig does not read kv_channels: its heads are "
               "hidden_size / num_attention_heads = " +
               std::to_string(c.head_dim) + " wide; expected a head_dim key of " +
               std::to_string(f.integer("kv_channels")));
  }
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");
  j["norm_eps"] = c.norm_eps;
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  // RotaryEmbedding over rotary_dim(c) channels; apply_rotary rotates that many and passes the
  // rest through, as Nemotron's apply_rotary_pos_emb does.
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kNemotronFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .ungated_mlp = true});  // up_proj, down_proj
}

constexpr FieldRename kNemotronRenames[] = {{"qkv_bias", "attention_bias"},
                                            {"o_bias", "attention_bias"}};

// NemotronPreTrainedModel._init_weights: PreTrainedModel's (Linear normal(0, initializer_range)
// and biases zero, the embedding normal with the pad row zero), then NemotronLayerNorm1P's weight
// one and bias zero.
constexpr InitRule kNemotronNormInitRules[] = {{"NemotronLayerNorm1P", "weight", InitFill::kOnes},
                                               {"NemotronLayerNorm1P", "bias", InitFill::kZeros}};
constexpr auto kNemotronInitRules =
    models::concat_init_rules(kNemotronNormInitRules, models::kRotaryDecoderInitRules);

}  // namespace

// Tensor parallelism: the rotary decoder's plan (its gate_proj rule matches nothing here).
const ModelFamily kNemotronFamily{
    .model_type = "nemotron",
    .hf_class_prefix = "Nemotron",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kNemotronRenames,
    .tp_plan = models::kRotaryDecoderTpPlan,
    .init_rules = kNemotronInitRules,
};

}  // namespace shardplan::tensor
