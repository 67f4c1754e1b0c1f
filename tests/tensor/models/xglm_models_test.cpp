// xglm (Meta's XGLM, Lin et al. 2021) against hand formulas written here from transformers 5's
// modeling_xglm.py and configuration_xglm.py. d d_model, V vocabulary, F ffn_dim, L layers, every
// Linear of a layer with a bias, sinusoidal positions (a buffer: no parameters):
//   self_attn  k_proj, v_proj, q_proj, out_proj: [d, d] + [d] each        4 d^2 + 4 d
//   mlp        fc1 [F, d] + [F], fc2 [d, F] + [d] (in the layer itself)    2 d F + F + d
//   norms      self_attn_layer_norm, final_layer_norm: nn.LayerNorm [d] + [d]        4 d
//   model      embed_tokens [V, d], the final layer_norm 2 d, lm_head [V, d] tied to
//              embed_tokens (untied: + V d)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tensor/training.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using test::names_under;
using test::ops_in;
using test::ops_under;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using Names = std::vector<std::string>;

// The parameter total of an XGLM model, by the formula of the head comment.
int64_t xglm_total(int64_t V, int64_t d, int64_t F, int64_t L, bool tied = true) {
  const int64_t layer = 4 * d * d + 4 * d + 2 * d * F + F + d + 4 * d;
  return L * layer + V * d + 2 * d + (tied ? 0 : V * d);
}

// The names of m's parameters outside the layers, in named_parameters order.
Names names_outside_layers(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("model.layers.")) out.push_back(p.name);
  }
  return out;
}

// XGLMDecoderLayer's registration order: self_attn (k, v, q, out), self_attn_layer_norm, fc1, fc2,
// final_layer_norm.
const Names kLayerNames = {"self_attn.k_proj.weight",
                           "self_attn.k_proj.bias",
                           "self_attn.v_proj.weight",
                           "self_attn.v_proj.bias",
                           "self_attn.q_proj.weight",
                           "self_attn.q_proj.bias",
                           "self_attn.out_proj.weight",
                           "self_attn.out_proj.bias",
                           "self_attn_layer_norm.weight",
                           "self_attn_layer_norm.bias",
                           "fc1.weight",
                           "fc1.bias",
                           "fc2.weight",
                           "fc2.bias",
                           "final_layer_norm.weight",
                           "final_layer_norm.bias"};

TEST(XglmModels, Xglm75BIsThePublishedSize) {
  // facebook/xglm-7.5B: V 256,008 tied, d 4,096, 32 layers of 32 heads of 128, F 16,384.
  //   layer 4 x 16,777,216 + 4 x 4,096 + 2 x 67,108,864 + 16,384 + 4,096 + 4 x 4,096
  //     = 201,379,840; 32 layers 6,444,154,880
  //   embed_tokens 256,008 x 4,096 = 1,048,608,768; final layer_norm 8,192
  //   total 7,492,771,840 (the model card's "7.5 billion parameters").
  const int64_t total = xglm_total(256008, 4096, 16384, 32);
  EXPECT_EQ(total, 7'492'771'840);
  // The other published sizes by the same formula (Lin et al. 2021, Table 1: 1,024 / 24 layers,
  // 2,048 / 24, 2,048 / 48): 564M, 1.7B, 2.9B.
  EXPECT_EQ(xglm_total(256008, 1024, 4096, 24), 564'463'616);
  EXPECT_EQ(xglm_total(256008, 2048, 8192, 24), 1'732'907'008);
  EXPECT_EQ(xglm_total(256008, 2048, 8192, 48), 2'941'505'536);

  const ModelConfig c = find_model_config("xglm-7.5b");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_TRUE(c.scale_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(1));
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);

  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "XGLMForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.layers.0."), kLayerNames);
  EXPECT_EQ(names_under(*m, "model.layers.31."), kLayerNames);
  // The final norm comes after the layers; lm_head is tied (listed once, under embed_tokens).
  EXPECT_EQ(names_outside_layers(*m), (Names{"model.embed_tokens.weight", "model.layer_norm.weight",
                                             "model.layer_norm.bias"}));
  EXPECT_EQ(m->get_parameter("model.layers.0.fc1.weight").sizes(), DimVector({16384, 4096}));
  EXPECT_EQ(m->get_parameter("model.layers.0.fc2.weight").sizes(), DimVector({4096, 16384}));
  // The sinusoid table: a non-persistent buffer of max_position_embeddings + 2 rows in the
  // model's dtype, in no state_dict.
  const Tensor table = m->get_buffer("model.embed_positions.weights");
  EXPECT_EQ(table.sizes(), DimVector({2050, 4096}));
  EXPECT_EQ(table.dtype(), DType::kFloat32);
  EXPECT_FALSE(m->get_submodule("model.embed_positions").is_buffer_persistent("weights"));
  EXPECT_TRUE(m->named_buffers({.persistent_only = true}).empty());
  EXPECT_EQ(m->get_submodule("model").type_name(), "XGLMModel");
  EXPECT_EQ(m->get_submodule("model.embed_positions").type_name(),
            "XGLMSinusoidalPositionalEmbedding");
  EXPECT_EQ(m->get_submodule("model.layers.31").type_name(), "XGLMDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.self_attn").type_name(), "XGLMAttention");
  EXPECT_EQ(layers_path(c), "model.layers");
  // fc1 and fc2 sit in the layer itself: reported as the MLP's, 32 x (2 d F + F + d); the
  // embedding is the tied table alone (the positions hold no parameter).
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("mlp"), 32 * (int64_t{2} * 4096 * 16384 + 16384 + 4096));
  EXPECT_EQ(kinds.at("embedding"), int64_t{256008} * 4096);
  EXPECT_EQ(kinds.count("lm_head"), 0u);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "xglm"},
          {"vocab_size", 100},
          {"d_model", 32},
          {"ffn_dim", 48},
          {"num_layers", 2},
          {"attention_heads", 4},
          {"max_position_embeddings", 16},
          {"torch_dtype", "bfloat16"}};
}

TEST(XglmModels, TinyConfigsByHand) {
  // d 32, F 48, V 100: a layer 4 x (1,024 + 32) + (1,536 + 48) + (1,536 + 32) + 128 = 7,504; two
  // 15,008; embed_tokens 3,200, the final norm 64: 18,272.
  EXPECT_EQ(xglm_total(100, 32, 48, 2), 18'272);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  // XGLMConfig's defaults: GELU (exact), scaled embeddings, tied, dropout and attention dropout
  // 0.1, init_std 0.02, pad_token_id 1, 2,048 positions when absent.
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_TRUE(c.scale_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(1));
  EXPECT_EQ(c.head_dim, 8);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 18'272);
  EXPECT_EQ(m->get_buffer("model.embed_positions.weights").sizes(), DimVector({18, 32}));
  EXPECT_EQ(m->get_buffer("model.embed_positions.weights").dtype(), DType::kBFloat16);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  nlohmann::json j = tiny();
  j.erase("max_position_embeddings");
  EXPECT_EQ(parse_model_config(j, "no positions").max_position_embeddings, 2048);

  // Untied: lm_head [100, 32] of its own, + 3,200.
  j = tiny();
  j["tie_word_embeddings"] = false;
  const ModelConfig untied = parse_model_config(j, "untied");
  EXPECT_EQ(build_model(untied)->parameters_numel(), 18'272 + 3'200);
  EXPECT_EQ(parse_model_config(to_hf_json(untied), "round trip"), untied);
  // scale_embedding false: the same parameters (the product runs by 1.0).
  j = tiny();
  j["scale_embedding"] = false;
  const ModelConfig unscaled = parse_model_config(j, "unscaled");
  EXPECT_FALSE(unscaled.scale_embeddings);
  EXPECT_EQ(build_model(unscaled)->parameters_numel(), 18'272);
  EXPECT_EQ(parse_model_config(to_hf_json(unscaled), "round trip"), unscaled);
  // The attribute_map aliases win over the fairseq keys when a file holds both, as PreTrainedConfig
  // sets them after the dataclass fields.
  j = tiny();
  j["hidden_size"] = 64;
  j["num_hidden_layers"] = 3;
  j["num_attention_heads"] = 8;
  const ModelConfig aliased = parse_model_config(j, "aliased");
  EXPECT_EQ(aliased.hidden_size, 64);
  EXPECT_EQ(aliased.num_hidden_layers, 3);
  EXPECT_EQ(aliased.num_attention_heads, 8);
  EXPECT_EQ(build_model(aliased)->parameters_numel(), xglm_total(100, 64, 48, 3));
  EXPECT_EQ(parse_model_config(to_hf_json(aliased), "round trip"), aliased);
  // pad_token_id null: no padding row (and written back as null, not the class's 1).
  j = tiny();
  j["pad_token_id"] = nullptr;
  const ModelConfig unpadded = parse_model_config(j, "unpadded");
  EXPECT_FALSE(unpadded.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(unpadded), "round trip"), unpadded);
  // The keys that change nothing built: zero dropouts, no cross-attention.
  j = tiny();
  j["activation_dropout"] = 0.0;
  j["layerdrop"] = 0;
  j["add_cross_attention"] = false;
  EXPECT_EQ(parse_model_config(j, "neutral"), c);
}

TEST(XglmModels, RefusedOptionsNameTheirKeys) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* what) {
    SCOPED_TRACE(key);
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")));
    EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
                ThrowsMessage<Error>(HasSubstr(what)));
  };
  refused("activation_dropout", 0.1, "drops out the MLP's activations in training");
  refused("layerdrop", 0.1, "skips layers at random in training");
  refused("add_cross_attention", true, "adds encoder_attn and encoder_attn_layer_norm");
  refused("attention_heads", 5, "5 does not divide d_model 32");
  refused("num_attention_heads", 5, "5 does not divide d_model 32");
  refused("hidden_size", nullptr, "is null, which sets d_model to None");
  refused("num_hidden_layers", nullptr, "is null, which sets num_layers to None");
  refused("activation_function", "swiglu", "'swiglu' is not supported");
  refused("dropout", 1.0, "a dropout probability must be in [0, 1)");
  refused("pad_token_id", 100, "expected a token id in [-vocab_size, vocab_size)");
  // A width the heads do not divide, named by the alias the file used.
  nlohmann::json wide = tiny();
  wide["hidden_size"] = 34;
  EXPECT_THAT(
      [&] { (void)parse_model_config(wide, "bad.json"); },
      ThrowsMessage<Error>(HasSubstr("field 'attention_heads': 4 does not divide hidden_size 34")));
  // The shapes are required, XGLMConfig's 564M defaults notwithstanding.
  for (const char* key : {"vocab_size", "d_model", "ffn_dim", "num_layers", "attention_heads"}) {
    SCOPED_TRACE(key);
    nlohmann::json j = tiny();
    j.erase(key);
    EXPECT_THAT([&] { (void)parse_model_config(j, "missing.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")));
  }
}

// The residual adds and LayerNorms of layer 0 in the order the forward runs them.
Names norm_and_add_order(const OpGraph& g) {
  Names out;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "add" && n.module == "model.layers.0") out.push_back("add");
    if (n.op == "layer_norm" && n.module.starts_with("model.layers.0.")) {
      out.push_back(n.module.substr(std::string("model.layers.0.").size()));
    }
  }
  return out;
}

TEST(XglmModels, ForwardScalesTheEmbeddingsAndAddsTheSinusoids) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  // The token table, its product by sqrt(d_model), the positions' offset (an int64 add on the ids
  // [1, 8]) and gather of [1, 8, 32] rows from the buffer, their broadcast add: nothing else
  // outside the layers but the final norm.
  EXPECT_EQ(ops_in(g, "embedding", "model.embed_tokens"), 1);
  EXPECT_EQ(ops_in(g, "mul", "model"), 1);
  EXPECT_EQ(ops_in(g, "add", "model"), 1);
  EXPECT_EQ(ops_in(g, "dropout", "model"), 0);  // not a training build
  EXPECT_EQ(ops_in(g, "layer_norm", "model.layer_norm"), 1);
  int gathers = 0, offsets = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module != "model.embed_positions") continue;
    if (n.op == "embedding") {
      ++gathers;
      EXPECT_EQ(g.tensor(n.inputs[0]).name, "model.embed_positions.weights");
      EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 8, 32}));
      EXPECT_EQ(g.tensor(n.outputs[0]).dtype, DType::kBFloat16);
    } else if (n.op == "add") {
      ++offsets;
      EXPECT_EQ(g.tensor(n.outputs[0]).dtype, DType::kInt64);
      EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 8}));
    } else {
      ADD_FAILURE() << "unexpected " << n.op << " in the positions";
    }
  }
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(offsets, 1);
  // Pre-norm: each half's LayerNorm before it, then its residual add.
  EXPECT_EQ(norm_and_add_order(g),
            (Names{"self_attn_layer_norm", "add", "final_layer_norm", "add"}));
  // q scaled by head_dim^-0.5 after its projection: one mul in the attention, then one fused
  // causal attention over 4 heads of 8 on [2, 8] tokens; exact GELU between fc1 and fc2.
  EXPECT_EQ(ops_in(g, "mul", "model.layers.0.self_attn"), 1);
  EXPECT_EQ(ops_in(g, "gelu", "model.layers.0"), 1);
  EXPECT_EQ(ops_under(g, "linear", "model.layers.0."), 6);
  int attention = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    ++attention;
    EXPECT_EQ(g.tensor(n.inputs[0]).sizes, (DimVector{2, 4, 8, 8}));
  }
  EXPECT_EQ(attention, 2);
  // scale_embedding false: the product by 1.0 still runs, as XGLMScaledWordEmbedding's does.
  nlohmann::json j = tiny();
  j["scale_embedding"] = false;
  const OpGraph unscaled =
      trace_model_forward(*build_model(parse_model_config(j, "unscaled")), 2, 8);
  EXPECT_EQ(ops_in(unscaled, "mul", "model"), 1);
}

TEST(XglmModels, SinusoidsHaveNoLengthLimit) {
  // transformers regrows the table past max_position_embeddings (16 here): no refusal, unlike a
  // learned table.
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  EXPECT_NO_THROW((void)trace_model_forward(*m, 1, 16));
  EXPECT_NO_THROW((void)trace_model_forward(*m, 1, 64));
  const ModelFamily& f = family_of(parse_model_config(tiny(), "tiny"));
  EXPECT_FALSE(f.learned_positions);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.fused_qkv);
}

TEST(XglmModels, TrainingStepMatmulsByHand) {
  // B 2, S 8 (16 tokens), d 32, F 48, 4 heads of 8. Per layer forward: the six projections
  // 2 x 16 x (4 x 32^2 + 2 x 32 x 48) = 229,376, attention's Q K^T and P V 4 B S^2 d = 16,384:
  // 245,760; the tied lm_head 2 x 16 x 32 x 100 = 102,400. Each projection's backward is twice
  // its forward (input and weight gradients).
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].fqn, "model.layers.0");
  EXPECT_EQ(st.blocks[0].type, "XGLMDecoderLayer");
  double block0 = 0, linear0 = 0, linear0_backward = 0, total = 0;
  int64_t dropouts0 = 0, outside_dropouts = 0;
  for (const TrainingOp& op : st.ops) {
    total += op.matmul_flops;
    if (op.block < 0) outside_dropouts += op.op == "dropout";
    if (op.block != 0) continue;
    block0 += op.matmul_flops;
    dropouts0 += op.op == "dropout";
    if (op.op == "linear") {
      linear0 += op.matmul_flops;
      linear0_backward += op.backward_matmul_flops;
    }
  }
  EXPECT_DOUBLE_EQ(linear0, 229'376);
  EXPECT_DOUBLE_EQ(block0, 245'760);
  EXPECT_DOUBLE_EQ(linear0_backward, 2 * 229'376.0);
  EXPECT_DOUBLE_EQ(total, 2 * 245'760.0 + 102'400);
  // dropout (0.1) after out_proj and after fc2; attention's own (0.1) is inside its fused op; one
  // on the embeddings once the positions have joined them.
  EXPECT_EQ(dropouts0, 2);
  EXPECT_EQ(outside_dropouts, 1);
}

TEST(XglmModels, InitDrawsFromInitStdAndZeroesThePaddingRow) {
  nlohmann::json j = tiny();
  j["init_std"] = 0.006;
  const ModelConfig c = parse_model_config(j, "tiny");
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.006);
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.006};
  ParameterInit padded = normal;
  padded.zero_row = 1;  // pad_token_id 1: embed_tokens's padding_idx
  EXPECT_EQ(init.at("model.embed_tokens.weight"), padded);
  EXPECT_EQ(init.at("model.layers.1.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.fc1.weight"), normal);
  EXPECT_EQ(init.at("model.layers.1.fc2.bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("model.layer_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.count("lm_head.weight"), 0u);                 // tied: under embed_tokens's name
  EXPECT_EQ(init.count("model.embed_positions.weights"), 0u);  // a buffer
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The family's tensor-parallel plan names modules the model builds (Megatron's split:
// tests/planner/cost/xglm_tensor_parallel_test.cpp applies it).
TEST(XglmModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_EQ(f.layers_path, "model.layers");
  EXPECT_EQ(f.file_key("hidden_size"), "d_model");
  EXPECT_EQ(f.file_key("num_hidden_layers"), "num_layers");
  EXPECT_EQ(f.file_key("num_attention_heads"), "attention_heads");
  EXPECT_EQ(f.file_key("intermediate_size"), "ffn_dim");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model.embed_tokens", "rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
      {"model.layers.*.self_attn.out_proj", "rowwise"},
      {"model.layers.*.fc1", "colwise"},
      {"model.layers.*.fc2", "rowwise"},
      {"lm_head", "colwise"}};
  ASSERT_EQ(f.tp_plan.size(), want.size());
  const ModulePtr m = build_model(c);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(f.tp_plan[i].pattern, want[i].first);
    EXPECT_EQ(f.tp_plan[i].style, want[i].second);
    EXPECT_EQ(f.tp_plan[i].fused_parts, 1);  // q, k and v are separate Linears
    // Each pattern's module exists in layer 1 (the '*' as a layer index) and is a Linear or the
    // Embedding.
    std::string fqn = want[i].first;
    if (const size_t star = fqn.find('*'); star != std::string::npos) fqn.replace(star, 1, "1");
    const std::string type = m->get_submodule(fqn).type_name();
    EXPECT_TRUE(type == "Linear" || type == "Embedding") << fqn << " is a " << type;
  }
}

}  // namespace
}  // namespace shardplan::tensor
