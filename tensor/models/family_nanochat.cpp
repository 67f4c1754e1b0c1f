// nanochat (Karpathy's nanochat d20 / d32): transformers' NanoChatConfig (vocab 50304, max
// positions 2048, rms_norm_eps 1e-6, hidden_act "relu2", biases on q, k, v and o by attention_bias
// (false), untied, pad_token_id 1, final_logit_softcapping 15 (null: none), rope_theta 10000; no
// head_dim field, a file's head_dim key is read as an attribute) and modeling_nanochat.py: Llama's
// pre-norm layer in which every norm is NanoChatRMSNorm, an RMSNorm WITHOUT a weight computed in
// float32 (Llama 4's L2 norm); q_norm and k_norm per head over head_dim AFTER RoPE (registered
// after o_proj); an MLP without gate or biases, fc2(relu(fc1(x))^2); the model's one `norm` applied
// to the embeddings before the first layer and again after the last; the logits softcapped, cap *
// tanh(logits / cap) (Gemma 2's). Its rotate_half is cat(x2, -x1), Llama's sign flipped: the same
// ops. _init_weights draws each attention's o_proj weight with initializer_range / sqrt(2
// num_hidden_layers), after the generic Linear init.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/models/rotary_decoder.h"
#include "tensor/ops.h"

namespace shardplan::tensor {

extern const ModelFamily kNanoChatFamily;  // listed in family_registry.cpp

namespace {

// NanoChatRMSNorm: x * rsqrt(mean(x^2) + eps) over the last dim, no weight, on x.float() then cast
// back (the traced rms_norm's cost; the upcast adds no FLOP of note).
class NanoChatRMSNorm : public Module {
 public:
  NanoChatRMSNorm(int64_t dim, double eps) : Module("NanoChatRMSNorm"), dim_(dim), eps_(eps) {}
  Tensor forward(const Tensor& x) override { return rms_norm(x, {dim_}, Tensor(), eps_); }

 private:
  int64_t dim_;
  double eps_;
};

ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& /*o*/) {
  return std::make_shared<NanoChatRMSNorm>(dim, eps);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .hidden_act = "relu2"});
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  // NanoChatForCausalLM caps the logits unless final_logit_softcapping is None (15 when absent).
  c.final_logit_softcapping =
      f.is_null("final_logit_softcapping") ? 0.0 : f.number("final_logit_softcapping", 15.0);
  if (f.has("final_logit_softcapping") && !(c.final_logit_softcapping > 0)) {
    f.fail("final_logit_softcapping",
           "must be a positive cap (null: none), got " + std::to_string(c.final_logit_softcapping));
  }
  models::pad_token_id_or(f, c, 1);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j["attention_bias"] = c.qkv_bias;
  j["final_logit_softcapping"] = c.final_logit_softcapping > 0
                                     ? nlohmann::json(c.final_logit_softcapping)
                                     : nlohmann::json(nullptr);
  if (!c.pad_token_id) j["pad_token_id"] = nullptr;  // none, not the class's 1
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kNanoChatFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .qk_norm = true,
                                       .qk_norm_after_rope = true,
                                       .ungated_mlp = true,
                                       .ungated_in_name = "fc1",
                                       .ungated_out_name = "fc2",
                                       .norm_embeddings = true});
}

constexpr FieldRename kNanoChatRenames[] = {
    {"norm_eps", "rms_norm_eps"}, {"qkv_bias", "attention_bias"}, {"o_bias", "attention_bias"}};

// NanoChatConfig.base_model_tp_plan: q, k, v and fc1 column-parallel, o_proj and fc2 row-parallel
// (the per-head q and k norms have no weight to split).
constexpr TensorParallelRule kNanoChatTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                                  {"model.layers.*.self_attn.q_proj", "colwise"},
                                                  {"model.layers.*.self_attn.k_proj", "colwise"},
                                                  {"model.layers.*.self_attn.v_proj", "colwise"},
                                                  {"model.layers.*.self_attn.o_proj", "rowwise"},
                                                  {"model.layers.*.mlp.fc1", "colwise"},
                                                  {"model.layers.*.mlp.fc2", "rowwise"},
                                                  {"lm_head", "colwise"}};

// NanoChatPreTrainedModel._init_weights: PreTrainedModel's (Linear normal(0, initializer_range),
// biases zero, the embedding normal with the pad_token_id row zero; the norms have no parameter),
// then each NanoChatAttention's o_proj weight normal(0, initializer_range / sqrt(2 L)), which
// wins: smart_apply visits the attention after its o_proj.
constexpr InitRule kNanoChatInitRules[] = {
    {"Linear", "o_proj.weight", InitFill::kNormalDepthScaled},
    {"Linear", "weight", InitFill::kNormal},
    {"Linear", "bias", InitFill::kZeros},
    {"Embedding", "weight", InitFill::kNormalPaddingRowZero}};

}  // namespace

const ModelFamily kNanoChatFamily{
    .model_type = "nanochat",
    .hf_class_prefix = "NanoChat",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kNanoChatRenames,
    .tp_plan = kNanoChatTpPlan,
    .init_rules = kNanoChatInitRules,
};

}  // namespace shardplan::tensor
