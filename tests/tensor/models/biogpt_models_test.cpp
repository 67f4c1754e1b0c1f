// biogpt (Microsoft's BioGPT, Luo et al. 2022) against hand formulas written here from
// transformers 5's modeling_biogpt.py and configuration_biogpt.py. h hidden_size, V vocabulary, F
// intermediate_size, L layers, P max_position_embeddings, every Linear of a layer with a bias:
//   self_attn  k_proj, v_proj, q_proj, out_proj: [h, h] + [h] each        4 h^2 + 4 h
//   mlp        fc1 [F, h] + [F], fc2 [h, F] + [h] (in the layer itself)    2 h F + F + h
//   norms      self_attn_layer_norm, final_layer_norm: nn.LayerNorm [h] + [h]        4 h
//   model      embed_tokens [V, h], embed_positions [P + 2, h] (the offset of 2), the final
//              layer_norm 2 h, output_projection [V, h] tied to embed_tokens (untied: + V h)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
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

// The parameter total of a BioGPT model, by the formula of the head comment.
int64_t biogpt_total(int64_t V, int64_t h, int64_t F, int64_t L, int64_t P, bool tied = true) {
  const int64_t layer = 4 * h * h + 4 * h + 2 * h * F + F + h + 4 * h;
  return L * layer + V * h + (P + 2) * h + 2 * h + (tied ? 0 : V * h);
}

// The names of m's parameters outside the layers, in named_parameters order.
Names names_outside_layers(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("biogpt.layers.")) out.push_back(p.name);
  }
  return out;
}

// BioGptDecoderLayer's registration order: self_attn (k, v, q, out), self_attn_layer_norm, fc1,
// fc2, final_layer_norm.
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

TEST(BioGptModels, BioGptLargeIsThePublishedSize) {
  // microsoft/BioGPT-Large: V 57,717 tied, h 1,600, 48 layers of 25 heads of 64, F 6,400, P 2,048.
  //   layer 4 x 2,560,000 + 4 x 1,600 + 2 x 10,240,000 + 6,400 + 1,600 + 4 x 1,600 = 30,740,800;
  //   48 layers 1,475,558,400
  //   embed_tokens 57,717 x 1,600 = 92,347,200; embed_positions 2,050 x 1,600 = 3,280,000; the
  //   final layer_norm 3,200
  //   total 1,571,188,800 (the published "1.5B", GPT-2 XL's layer sizes).
  const int64_t total = biogpt_total(57717, 1600, 6400, 48, 2048);
  EXPECT_EQ(total, 1'571'188'800);
  // microsoft/biogpt (BioGptConfig's defaults: 42,384 / 1,024 / 4,096 / 24 layers / 1,024
  // positions): the paper's 347M.
  EXPECT_EQ(biogpt_total(42384, 1024, 4096, 24, 1024), 346'763'264);

  const ModelConfig c = find_model_config("biogpt-large");
  EXPECT_EQ(c.vocab_size, 57717);
  EXPECT_EQ(c.hidden_size, 1600);
  EXPECT_EQ(c.intermediate_size, 6400);
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.num_attention_heads, 25);
  EXPECT_EQ(c.num_key_value_heads, 25);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_TRUE(c.scale_embeddings);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.1);
  // layer_norm_eps 1e-12 in the file, which no LayerNorm of BioGPT reads: nn.LayerNorm's 1e-5.
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(1));
  EXPECT_EQ(c.torch_dtype, DType::kFloat32);

  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "BioGptForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "biogpt.layers.0."), kLayerNames);
  EXPECT_EQ(names_under(*m, "biogpt.layers.47."), kLayerNames);
  // The token and position tables before the layers, the final norm after them;
  // output_projection is tied (listed once, under embed_tokens).
  EXPECT_EQ(names_outside_layers(*m),
            (Names{"biogpt.embed_tokens.weight", "biogpt.embed_positions.weight",
                   "biogpt.layer_norm.weight", "biogpt.layer_norm.bias"}));
  EXPECT_EQ(m->get_parameter("biogpt.embed_positions.weight").sizes(), DimVector({2050, 1600}));
  EXPECT_EQ(m->get_parameter("biogpt.layers.0.fc1.weight").sizes(), DimVector({6400, 1600}));
  EXPECT_EQ(m->get_parameter("biogpt.layers.0.fc2.weight").sizes(), DimVector({1600, 6400}));
  EXPECT_EQ(m->get_parameter("biogpt.layers.0.self_attn.q_proj.weight").sizes(),
            DimVector({1600, 1600}));
  EXPECT_EQ(m->get_submodule("biogpt").type_name(), "BioGptModel");
  EXPECT_EQ(m->get_submodule("biogpt.layers.47").type_name(), "BioGptDecoderLayer");
  EXPECT_EQ(m->get_submodule("biogpt.layers.0.self_attn").type_name(), "BioGptAttention");
  EXPECT_EQ(m->get_submodule("output_projection").type_name(), "Linear");
  EXPECT_EQ(layers_path(c), "biogpt.layers");
  // fc1 and fc2 sit in the layer itself: reported as the MLP's, 48 x (2 h F + F + h); the
  // embeddings are the tied token table and the position table.
  const std::map<std::string, int64_t> kinds = parameters_by_kind(*m);
  EXPECT_EQ(kinds.at("mlp"), 48 * (int64_t{2} * 1600 * 6400 + 6400 + 1600));
  EXPECT_EQ(kinds.at("embedding"), int64_t{57717} * 1600 + int64_t{2050} * 1600);
  EXPECT_EQ(kinds.count("lm_head"), 0u);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "biogpt"},        {"vocab_size", 100},        {"hidden_size", 32},
          {"intermediate_size", 48},       {"num_hidden_layers", 2},   {"num_attention_heads", 4},
          {"max_position_embeddings", 16}, {"torch_dtype", "bfloat16"}};
}

TEST(BioGptModels, TinyConfigsByHand) {
  // h 32, F 48, V 100, P 16: a layer 4 x (1,024 + 32) + (1,536 + 48) + (1,536 + 32) + 128 =
  // 7,504; two 15,008; embed_tokens 3,200, embed_positions 18 x 32 = 576, the final norm 64:
  // 18,848.
  EXPECT_EQ(biogpt_total(100, 32, 48, 2, 16), 18'848);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  // BioGptConfig's defaults: GELU (exact), scaled embeddings, tied, both dropouts 0.1,
  // initializer_range 0.02, pad_token_id 1.
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
  EXPECT_EQ(m->parameters_numel(), 18'848);
  EXPECT_EQ(m->get_parameter("biogpt.embed_positions.weight").sizes(), DimVector({18, 32}));
  EXPECT_EQ(m->get_parameter("biogpt.embed_positions.weight").dtype(), DType::kBFloat16);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Untied: output_projection [100, 32] of its own, + 3,200, listed last.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = false;
  const ModelConfig untied = parse_model_config(j, "untied");
  const ModulePtr um = build_model(untied);
  EXPECT_EQ(um->parameters_numel(), 18'848 + 3'200);
  EXPECT_EQ(biogpt_total(100, 32, 48, 2, 16, false), 18'848 + 3'200);
  EXPECT_EQ(names_outside_layers(*um).back(), "output_projection.weight");
  EXPECT_EQ(parse_model_config(to_hf_json(untied), "round trip"), untied);
  // scale_embedding false: the same parameters (the product runs by 1.0).
  j = tiny();
  j["scale_embedding"] = false;
  const ModelConfig unscaled = parse_model_config(j, "unscaled");
  EXPECT_FALSE(unscaled.scale_embeddings);
  EXPECT_EQ(build_model(unscaled)->parameters_numel(), 18'848);
  EXPECT_EQ(parse_model_config(to_hf_json(unscaled), "round trip"), unscaled);
  // Other dropouts and activation: read, written back.
  j = tiny();
  j["hidden_dropout_prob"] = 0.0;
  j["attention_probs_dropout_prob"] = 0.05;
  j["hidden_act"] = "relu";
  const ModelConfig other = parse_model_config(j, "other");
  EXPECT_DOUBLE_EQ(other.resid_dropout, 0.0);
  EXPECT_DOUBLE_EQ(other.embd_dropout, 0.0);
  EXPECT_DOUBLE_EQ(other.attention_dropout, 0.05);
  EXPECT_EQ(other.hidden_act, "relu");
  EXPECT_EQ(parse_model_config(to_hf_json(other), "round trip"), other);
  // pad_token_id null: no padding row (and written back as null, not the class's 1).
  j = tiny();
  j["pad_token_id"] = nullptr;
  const ModelConfig unpadded = parse_model_config(j, "unpadded");
  EXPECT_FALSE(unpadded.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(unpadded), "round trip"), unpadded);
  // The keys that change nothing built: zero activation dropout and layerdrop, and
  // layer_norm_eps, which transformers passes to no LayerNorm.
  j = tiny();
  j["activation_dropout"] = 0.0;
  j["layerdrop"] = 0;
  j["layer_norm_eps"] = 1e-12;
  EXPECT_EQ(parse_model_config(j, "neutral"), c);
}

TEST(BioGptModels, RefusedOptionsNameTheirKeys) {
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
  refused("num_attention_heads", 5, "5 does not divide hidden_size 32");
  refused("hidden_act", "swiglu", "'swiglu' is not supported");
  refused("hidden_dropout_prob", 1.0, "a dropout probability must be in [0, 1)");
  refused("attention_probs_dropout_prob", 1.0, "a dropout probability must be in [0, 1)");
  refused("pad_token_id", 100, "expected a token id in [-vocab_size, vocab_size)");
  // The shapes are required, BioGptConfig's microsoft/biogpt defaults notwithstanding: the
  // position table's rows too.
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "max_position_embeddings"}) {
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
    if (n.op == "add" && n.module == "biogpt.layers.0") out.push_back("add");
    if (n.op == "layer_norm" && n.module.starts_with("biogpt.layers.0.")) {
      out.push_back(n.module.substr(std::string("biogpt.layers.0.").size()));
    }
  }
  return out;
}

TEST(BioGptModels, ForwardScalesTheEmbeddingsAndAddsLearnedPositions) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  const OpGraph g = trace_model_forward(*m, 2, 8);
  // The token table, its product by sqrt(h), the positions' offset (an int64 add on the ids
  // [1, 8]), the gather of [1, 8, 32] rows from the position table and their broadcast add;
  // nothing else outside the layers but the final norm and the output layer.
  EXPECT_EQ(ops_in(g, "embedding", "biogpt.embed_tokens"), 1);
  EXPECT_EQ(ops_in(g, "embedding", "biogpt.embed_positions"), 1);
  EXPECT_EQ(ops_in(g, "mul", "biogpt"), 1);
  EXPECT_EQ(ops_in(g, "add", "biogpt"), 2);
  EXPECT_EQ(ops_in(g, "dropout", "biogpt"), 0);  // not a training build
  EXPECT_EQ(ops_in(g, "layer_norm", "biogpt.layer_norm"), 1);
  EXPECT_EQ(ops_in(g, "linear", "output_projection"), 1);
  int offsets = 0, gathers = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.module == "biogpt" && n.op == "add" && g.tensor(n.outputs[0]).dtype == DType::kInt64) {
      ++offsets;
      EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 8}));
    }
    if (n.module == "biogpt.embed_positions" && n.op == "embedding") {
      ++gathers;
      EXPECT_EQ(g.tensor(n.inputs[0]).name, "biogpt.embed_positions.weight");
      EXPECT_EQ(g.tensor(n.outputs[0]).sizes, (DimVector{1, 8, 32}));
    }
  }
  EXPECT_EQ(offsets, 1);
  EXPECT_EQ(gathers, 1);
  // Pre-norm: each half's LayerNorm before it, then its residual add.
  EXPECT_EQ(norm_and_add_order(g),
            (Names{"self_attn_layer_norm", "add", "final_layer_norm", "add"}));
  // transformers 5 passes head_dim^-0.5 as the attention's scale: no product on q, one fused
  // causal attention over 4 heads of 8 on [2, 8] tokens; exact GELU between fc1 and fc2.
  EXPECT_EQ(ops_under(g, "mul", "biogpt.layers.0."), 0);
  EXPECT_EQ(ops_in(g, "gelu", "biogpt.layers.0"), 1);
  EXPECT_EQ(ops_under(g, "linear", "biogpt.layers.0."), 6);
  int attention = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    ++attention;
    EXPECT_EQ(g.tensor(n.inputs[0]).sizes, (DimVector{2, 4, 8, 8}));
  }
  EXPECT_EQ(attention, 2);
  // scale_embedding false: the product by 1.0 still runs, as BioGptScaledWordEmbedding's does.
  nlohmann::json j = tiny();
  j["scale_embedding"] = false;
  const OpGraph unscaled =
      trace_model_forward(*build_model(parse_model_config(j, "unscaled")), 2, 8);
  EXPECT_EQ(ops_in(unscaled, "mul", "biogpt"), 1);
}

TEST(BioGptModels, LearnedPositionsEndAtMaxPositionEmbeddings) {
  const ModelConfig c = parse_model_config(tiny(), "tiny");
  const ModulePtr m = build_model(c);
  EXPECT_NO_THROW((void)trace_model_forward(*m, 1, 16));
  EXPECT_THAT([&] { (void)trace_model_forward(*m, 1, 17); },
              ThrowsMessage<Error>(HasSubstr("exceeds max_position_embeddings 16")));
  const ModelFamily& f = family_of(c);
  EXPECT_TRUE(f.learned_positions);
  EXPECT_FALSE(f.rotary);
  EXPECT_FALSE(f.fused_qkv);
}

TEST(BioGptModels, TrainingStepMatmulsByHand) {
  // B 2, S 8 (16 tokens), h 32, F 48, 4 heads of 8. Per layer forward: the six projections
  // 2 x 16 x (4 x 32^2 + 2 x 32 x 48) = 229,376, attention's Q K^T and P V 4 B S^2 h = 16,384:
  // 245,760; the tied output_projection 2 x 16 x 32 x 100 = 102,400. Each projection's backward
  // is twice its forward (input and weight gradients).
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  EXPECT_EQ(st.blocks[0].fqn, "biogpt.layers.0");
  EXPECT_EQ(st.blocks[0].type, "BioGptDecoderLayer");
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
  // hidden_dropout_prob (0.1) after out_proj and after fc2; attention_probs_dropout_prob inside
  // the fused attention; one on the embeddings once the positions have joined them.
  EXPECT_EQ(dropouts0, 2);
  EXPECT_EQ(outside_dropouts, 1);
}

TEST(BioGptModels, InitDrawsFromInitializerRangeAndZeroesThePaddingRow) {
  nlohmann::json j = tiny();
  j["initializer_range"] = 0.006;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.006};
  ParameterInit padded = normal;
  padded.zero_row = 1;  // pad_token_id 1: embed_tokens's padding_idx
  EXPECT_EQ(init.at("biogpt.embed_tokens.weight"), padded);
  EXPECT_EQ(init.at("biogpt.embed_positions.weight"), normal);  // no padding_idx
  EXPECT_EQ(init.at("biogpt.layers.1.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("biogpt.layers.1.fc1.weight"), normal);
  EXPECT_EQ(init.at("biogpt.layers.1.fc2.bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("biogpt.layer_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.count("output_projection.weight"), 0u);  // tied: under embed_tokens's name
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The family's tensor-parallel plan names modules the model builds (Megatron's split:
// tests/planner/cost/biogpt_tensor_parallel_test.cpp applies it).
TEST(BioGptModels, TensorParallelPlanIsMegatronsOnTheModulesItBuilds) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  const ModelFamily& f = family_of(c);
  EXPECT_EQ(f.layers_path, "biogpt.layers");
  EXPECT_EQ(f.hf_class_prefix, "BioGpt");
  EXPECT_EQ(f.file_key("resid_dropout"), "hidden_dropout_prob");
  EXPECT_EQ(f.file_key("attention_dropout"), "attention_probs_dropout_prob");
  EXPECT_EQ(f.file_key("scale_embeddings"), "scale_embedding");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"biogpt.embed_tokens", "rowwise"},
      {"biogpt.layers.*.self_attn.q_proj", "colwise"},
      {"biogpt.layers.*.self_attn.k_proj", "colwise"},
      {"biogpt.layers.*.self_attn.v_proj", "colwise"},
      {"biogpt.layers.*.self_attn.out_proj", "rowwise"},
      {"biogpt.layers.*.fc1", "colwise"},
      {"biogpt.layers.*.fc2", "rowwise"},
      {"output_projection", "colwise"}};
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
