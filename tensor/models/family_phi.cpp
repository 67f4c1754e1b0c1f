// phi (Microsoft Phi-1, Phi-1.5, Phi-2): transformers' PhiConfig (vocab 51200, max positions 2048,
// layer_norm_eps 1e-5, hidden_act gelu_new, num_key_value_heads = heads when absent or null,
// partial_rotary_factor 0.5 when neither rope_parameters nor the file gives one, untied, no
// pad_token_id, qk_layernorm false, resid_pdrop and embd_pdrop 0) and modeling_phi.py: one
// nn.LayerNorm (weight and bias) before attention and MLP side by side, x + attn(n) + mlp(n) (as
// GPT-J), each half's output dropped out by resid_pdrop in training; biases on q, k, v, the output
// projection `dense`, the ungated MLP's fc1 and fc2 and on lm_head, always; RoPE on the first
// int(head_dim * partial_rotary_factor) channels of each head; with qk_layernorm an nn.LayerNorm
// over hidden / heads on each head of q and k before RoPE (one weight for all heads); the
// embeddings dropped out by embd_pdrop; the last norm final_layernorm. transformers registers
// rotary_emb before final_layernorm (no parameters: the names and their order are these).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/layers.h"
#include "tensor/models/rotary_decoder.h"

namespace shardplan::tensor {

extern const ModelFamily kPhiFamily;  // listed in family_registry.cpp

namespace {

// nn.LayerNorm with weight and bias: the layer norms, the final one and the q/k layernorms.
ModulePtr make_norm(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<LayerNorm>(DimVector{dim}, eps, true, true, o);
}

void parse(const ConfigFields& f, ModelConfig& c) {
  models::parse_rotary_decoder(f, c, {.max_position_embeddings = 2048, .hidden_act = "gelu_new"});
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  // PhiConfig.__post_init__'s kwargs.setdefault: the file's key, else 0.5; rope_parameters'
  // partial_rotary_factor, read after this by parse_model_config, wins over both.
  c.partial_rotary_factor = f.number("partial_rotary_factor", 0.5);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // PhiAttention and PhiMLP: bias=True always
  c.lm_head_bias = true;                      // PhiForCausalLM: nn.Linear(h, V, bias=True)
  c.qk_norm_per_head = f.boolean("qk_layernorm", false);
  // PhiAttention sizes q_layernorm and k_layernorm by hidden_size // heads, the projections by
  // head_dim: a head_dim of another width would not fit the norms (transformers fails in forward).
  // Non-positive head counts are validate()'s to refuse, naming them.
  if (c.qk_norm_per_head && c.num_attention_heads > 0 &&
      c.head_dim != c.hidden_size / c.num_attention_heads) {
    f.fail("head_dim", std::to_string(c.head_dim) + " with qk_layernorm, whose norms are " +
                           std::to_string(c.hidden_size / c.num_attention_heads) +
                           " wide (hidden_size / num_attention_heads); expected that head_dim");
  }
  c.resid_dropout = f.number("resid_pdrop", 0.0);
  c.embd_dropout = f.number("embd_pdrop", 0.0);
}

void to_hf_json(const ModelConfig& c, nlohmann::json& j) {
  models::rotary_decoder_to_hf_json(c, j);
  j.erase("rms_norm_eps");
  j["layer_norm_eps"] = c.norm_eps;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["qk_layernorm"] = c.qk_norm_per_head;
  j["resid_pdrop"] = c.resid_dropout;
  j["embd_pdrop"] = c.embd_dropout;
  // No lm_head_bias: Phi's output bias is the family's, not a config key (and the shared check of
  // architecture keys refuses one nobody reads).
}

ModulePtr build(const ModelConfig& c, const TensorOptions& o, bool training) {
  return models::build_rotary_decoder(c, o, training,
                                      {.prefix = kPhiFamily.hf_class_prefix,
                                       .make_norm = make_norm,
                                       .qk_norm = c.qk_norm_per_head,
                                       .qk_norm_names = {"q_layernorm", "k_layernorm"},
                                       .norms = models::NormPlacement::kParallel,
                                       .o_proj_name = "dense",
                                       .ungated_mlp = true,
                                       .ungated_in_name = "fc1",
                                       .ungated_out_name = "fc2",
                                       .final_norm_name = "final_layernorm"});
}

constexpr FieldRename kPhiRenames[] = {{"norm_eps", "layer_norm_eps"},
                                       {"resid_dropout", "resid_pdrop"},
                                       {"embd_dropout", "embd_pdrop"},
                                       {"qk_norm_per_head", "qk_layernorm"}};

// PhiConfig's base_model_tp_plan (q, k, v and fc1 column-parallel, dense and fc2 row-parallel)
// with Megatron-LM's embedding and output splits. The per-head q/k layernorms are replicated (one
// weight for every head).
constexpr TensorParallelRule kPhiTpPlan[] = {{"model.embed_tokens", "rowwise"},
                                             {"model.layers.*.self_attn.q_proj", "colwise"},
                                             {"model.layers.*.self_attn.k_proj", "colwise"},
                                             {"model.layers.*.self_attn.v_proj", "colwise"},
                                             {"model.layers.*.self_attn.dense", "rowwise"},
                                             {"model.layers.*.mlp.fc1", "colwise"},
                                             {"model.layers.*.mlp.fc2", "rowwise"},
                                             {"lm_head", "colwise"}};

}  // namespace

// PhiPreTrainedModel has no _init_weights of its own: PreTrainedModel's (Linear normal with zero
// biases, lm_head's bias included; nn.LayerNorm weight one, bias zero; the embedding normal, its
// pad_token_id row zero when the file sets one): the Llama-shaped decoders' rules.
const ModelFamily kPhiFamily{
    .model_type = "phi",
    .hf_class_prefix = "Phi",
    .layers_path = "model.layers",
    .parse = parse,
    .to_hf_json = to_hf_json,
    .build = build,
    .renamed = kPhiRenames,
    .tp_plan = kPhiTpPlan,
    .init_rules = models::kRotaryDecoderInitRules,
};

}  // namespace shardplan::tensor
