// opt (Meta's OPT, Zhang et al. 2022) against hand formulas written here from transformers 5's
// modeling_opt.py. h hidden, V vocabulary, F ffn_dim, P max_position_embeddings, d
// word_embed_proj_dim (h unless given), every Linear of a layer with a bias (enable_bias):
//   self_attn  k_proj, v_proj, q_proj, out_proj: [h, h] + [h] each        4 h^2 + 4 h
//   mlp        fc1 [F, h] + [F], fc2 [h, F] + [h] (in the layer itself)    2 h F + F + h
//   norms      self_attn_layer_norm, final_layer_norm: nn.LayerNorm [h] + [h]        4 h
//   model      embed_tokens [V, d], embed_positions [P + 2, h] (OPT's offset of 2), a final
//              LayerNorm 2 h (pre-norm only), project_out [d, h] and project_in [h, d] (d != h
//              only), lm_head [V, d] tied to embed_tokens
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/init_rules.h"
#include "tensor/models/layer_kinds.h"
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

// The parameter total of an OPT model, by the formula of the head comment.
int64_t opt_total(int64_t V, int64_t h, int64_t F, int64_t L, int64_t P, int64_t d, bool pre_norm) {
  const int64_t layer = 4 * h * h + 4 * h + 2 * h * F + F + h + 4 * h;
  const int64_t projections = d != h ? 2 * h * d : 0;
  return L * layer + V * d + (P + 2) * h + (pre_norm ? 2 * h : 0) + projections;
}

// The names of m's parameters outside the layers, in named_parameters order.
Names names_outside_layers(const Module& m) {
  Names out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with("model.decoder.layers.")) out.push_back(p.name);
  }
  return out;
}

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

TEST(OptModels, Opt66BMatchesTheHandTotal) {
  // facebook/opt-66b: V 50,272 tied, h 9,216, 64 layers of 72 heads of 128, F 36,864, P 2,048.
  //   layer 4 x 84,934,656 + 2 x 339,738,624 + 9 x 9,216 + 36,864 = 1,019,335,680
  //   64 layers 65,237,483,520; embed_tokens 463,306,752; embed_positions 2,050 x 9,216 =
  //   18,892,800; final LayerNorm 18,432: 65,719,701,504 (the published "66B").
  const int64_t total = opt_total(50272, 9216, 36864, 64, 2048, 9216, true);
  EXPECT_EQ(total, 65'719'701'504);
  const ModelConfig c = find_model_config("opt-66b");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 72);
  EXPECT_EQ(c.word_embed_proj_dim, 0);  // equal to hidden_size: no projections
  EXPECT_FALSE(c.norm_after_residual);
  EXPECT_EQ(c.hidden_act, "relu");
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(1));
  EXPECT_EQ(c.torch_dtype, DType::kFloat16);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->type_name(), "OPTForCausalLM");
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.decoder.layers.0."), kLayerNames);
  // OPTDecoder registers its final norm before the layers; lm_head is tied (listed once).
  EXPECT_EQ(
      names_outside_layers(*m),
      (Names{"model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
             "model.decoder.final_layer_norm.weight", "model.decoder.final_layer_norm.bias"}));
  EXPECT_EQ(m->get_parameter("model.decoder.embed_positions.weight").sizes(),
            DimVector({2050, 9216}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "OPTModel");
  EXPECT_EQ(m->get_submodule("model.decoder").type_name(), "OPTDecoder");
  EXPECT_EQ(m->get_submodule("model.decoder.layers.63").type_name(), "OPTDecoderLayer");
  EXPECT_EQ(m->get_submodule("model.decoder.layers.0.self_attn").type_name(), "OPTAttention");
  EXPECT_EQ(layers_path(c), "model.decoder.layers");
  // fc1 and fc2 sit in the layer itself: reported as the MLP's, 64 x (2 h F + F + h).
  EXPECT_EQ(parameters_by_kind(*m).at("mlp"), 64 * (int64_t{2} * 9216 * 36864 + 36864 + 9216));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

TEST(OptModels, Opt175BIsThePapersSize) {
  // Zhang et al. 2022 Table 1: 96 layers, 96 heads, h 12,288 (F 49,152), 2,048 positions.
  //   layer 4 x 150,994,944 + 2 x 603,979,776 + 9 x 12,288 + 49,152 = 1,812,099,072
  //   96 layers 173,961,510,912; embed_tokens 617,742,336; embed_positions 25,190,400; final
  //   LayerNorm 24,576: 174,604,468,224 (the paper's "175B").
  const int64_t total = opt_total(50272, 12288, 49152, 96, 2048, 12288, true);
  EXPECT_EQ(total, 174'604'468'224);
  const ModelConfig c = find_model_config("opt-175b");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// facebook/opt-350m's config.json: the model whose embeddings are narrower than its layers
// (word_embed_proj_dim 512) and whose norms follow each residual add.
nlohmann::json opt_350m() {
  return {{"_name_or_path", "facebook/opt-350m"},
          {"activation_dropout", 0.0},
          {"activation_function", "relu"},
          {"architectures", {"OPTForCausalLM"}},
          {"attention_dropout", 0.0},
          {"bos_token_id", 2},
          {"do_layer_norm_before", false},
          {"dropout", 0.1},
          {"eos_token_id", 2},
          {"ffn_dim", 4096},
          {"hidden_size", 1024},
          {"init_std", 0.02},
          {"layerdrop", 0.0},
          {"max_position_embeddings", 2048},
          {"model_type", "opt"},
          {"num_attention_heads", 16},
          {"num_hidden_layers", 24},
          {"pad_token_id", 1},
          {"prefix", "</s>"},
          {"torch_dtype", "float16"},
          {"transformers_version", "4.20.0.dev0"},
          {"use_cache", true},
          {"vocab_size", 50272},
          {"word_embed_proj_dim", 512}};
}

TEST(OptModels, Opt350mProjectsItsEmbeddingsAndHasNoFinalNorm) {
  // h 1,024, 24 layers of 16 heads, F 4,096, d 512, post-norm:
  //   layer 4 x 1,048,576 + 2 x 4,194,304 + 9 x 1,024 + 4,096 = 12,596,224; 24 layers
  //   302,309,376; embed_tokens 50,272 x 512 = 25,739,264; embed_positions 2,050 x 1,024 =
  //   2,099,200; project_out and project_in 524,288 each; no final LayerNorm: 331,196,416
  //   (the published "350m", 331M as the Hub counts it).
  const int64_t total = opt_total(50272, 1024, 4096, 24, 2048, 512, false);
  EXPECT_EQ(total, 331'196'416);
  const ModelConfig c = parse_model_config(opt_350m(), "opt-350m");
  EXPECT_EQ(c.word_embed_proj_dim, 512);
  EXPECT_TRUE(c.norm_after_residual);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  EXPECT_EQ(names_under(*m, "model.decoder.layers.0."), kLayerNames);
  // project_out is registered before project_in; no final_layer_norm.
  EXPECT_EQ(names_outside_layers(*m),
            (Names{"model.decoder.embed_tokens.weight", "model.decoder.embed_positions.weight",
                   "model.decoder.project_out.weight", "model.decoder.project_in.weight"}));
  EXPECT_EQ(m->get_parameter("model.decoder.embed_tokens.weight").sizes(), DimVector({50272, 512}));
  EXPECT_EQ(m->get_parameter("model.decoder.project_in.weight").sizes(), DimVector({1024, 512}));
  EXPECT_EQ(m->get_parameter("model.decoder.project_out.weight").sizes(), DimVector({512, 1024}));
  EXPECT_EQ(m->get_parameter("lm_head.weight").sizes(), DimVector({50272, 512}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

nlohmann::json tiny() {
  return {{"model_type", "opt"},
          {"vocab_size", 100},
          {"hidden_size", 32},
          {"ffn_dim", 48},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"max_position_embeddings", 16},
          {"torch_dtype", "bfloat16"}};
}

TEST(OptModels, TinyConfigsByHand) {
  // h 32, F 48, V 100, P 16: a layer 4 x (1,024 + 32) + (1,536 + 48) + (1,536 + 32) + 128 =
  // 7,504; two 15,008; embed_tokens 3,200, embed_positions 18 x 32 = 576, final norm 64: 18,848.
  EXPECT_EQ(opt_total(100, 32, 48, 2, 16, 32, true), 18'848);
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  // OPTConfig's defaults: ReLU, pre-norm, biases, affine norms, tied, dropout 0.1, init_std 0.02,
  // pad_token_id 1.
  EXPECT_EQ(c.hidden_act, "relu");
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_TRUE(c.norm_elementwise_affine);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.resid_dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.embd_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(1));
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), 18'848);
  EXPECT_EQ(m->get_parameter("model.decoder.embed_positions.weight").sizes(), DimVector({18, 32}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);

  // Untied: lm_head [100, 32] of its own, + 3,200.
  nlohmann::json j = tiny();
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(build_model(parse_model_config(j, "untied"))->parameters_numel(), 18'848 + 3'200);
  // enable_bias false: no bias on the six Linears of a layer, 4 x 32 + 48 + 32 = 208 fewer each.
  j = tiny();
  j["enable_bias"] = false;
  const ModelConfig nobias = parse_model_config(j, "no bias");
  EXPECT_EQ(build_model(nobias)->parameters_numel(), 18'848 - 2 * 208);
  EXPECT_EQ(parse_model_config(to_hf_json(nobias), "round trip"), nobias);
  // layer_norm_elementwise_affine false: no LayerNorm parameters, 2 x 128 + 64 fewer; the norms
  // still run.
  j = tiny();
  j["layer_norm_elementwise_affine"] = false;
  const ModelConfig plain = parse_model_config(j, "no affine");
  const ModulePtr pm = build_model(plain);
  EXPECT_EQ(pm->parameters_numel(), 18'848 - 2 * 128 - 64);
  EXPECT_TRUE(names_under(*pm, "model.decoder.final_layer_norm.").empty());
  EXPECT_EQ(ops_in(trace_model_forward(*pm, 1, 8), "layer_norm", "model.decoder.final_layer_norm"),
            1);
  EXPECT_EQ(parse_model_config(to_hf_json(plain), "round trip"), plain);
  // word_embed_proj_dim 16 and post-norm: embed_tokens 1,600, project_out and project_in 512
  // each, no final norm: 15,008 + 1,600 + 576 + 1,024 = 18,208.
  j = tiny();
  j["word_embed_proj_dim"] = 16;
  j["do_layer_norm_before"] = false;
  EXPECT_EQ(opt_total(100, 32, 48, 2, 16, 16, false), 18'208);
  const ModelConfig narrow = parse_model_config(j, "narrow");
  EXPECT_EQ(build_model(narrow)->parameters_numel(), 18'208);
  EXPECT_EQ(parse_model_config(to_hf_json(narrow), "round trip"), narrow);
  // A null word_embed_proj_dim is hidden_size (OPTConfig.__post_init__), as is one equal to it.
  j = tiny();
  j["word_embed_proj_dim"] = nullptr;
  EXPECT_EQ(parse_model_config(j, "null"), c);
  j["word_embed_proj_dim"] = 32;
  EXPECT_EQ(parse_model_config(j, "equal"), c);
  // pad_token_id null: no padding row (and written back as null, not the class's 1).
  j = tiny();
  j["pad_token_id"] = nullptr;
  const ModelConfig unpadded = parse_model_config(j, "unpadded");
  EXPECT_FALSE(unpadded.pad_token_id.has_value());
  EXPECT_EQ(parse_model_config(to_hf_json(unpadded), "round trip"), unpadded);
}

TEST(OptModels, RefusedOptionsNameTheirKeys) {
  const auto refused = [](const char* key, const nlohmann::json& value, const char* what) {
    SCOPED_TRACE(key);
    nlohmann::json j = tiny();
    j[key] = value;
    EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")));
    EXPECT_THAT([&] { (void)parse_model_config(j, "bad.json"); },
                ThrowsMessage<Error>(HasSubstr(what)));
  };
  refused("layerdrop", 0.1, "skips layers at random in training");
  refused("_remove_final_layer_norm", true, "drops the final LayerNorm of a pre-norm model");
  refused("word_embed_proj_dim", 0, "must be a positive integer");
  refused("word_embed_proj_dim", -8, "must be a positive integer");
  refused("num_attention_heads", 5, "5 does not divide hidden_size 32");
  refused("activation_function", "swiglu", "'swiglu' is not supported");
  refused("dropout", 1.0, "a dropout probability must be in [0, 1)");
  refused("pad_token_id", 100, "expected a token id in [-vocab_size, vocab_size)");
  // The post-norm model has no final norm to remove: accepted.
  nlohmann::json j = tiny();
  j["do_layer_norm_before"] = false;
  j["_remove_final_layer_norm"] = true;
  EXPECT_TRUE(parse_model_config(j, "post-norm").norm_after_residual);
  // The shapes are required, OPTConfig's 125m defaults notwithstanding.
  for (const char* key : {"ffn_dim", "hidden_size", "max_position_embeddings", "vocab_size"}) {
    SCOPED_TRACE(key);
    j = tiny();
    j.erase(key);
    EXPECT_THAT([&] { (void)parse_model_config(j, "missing.json"); },
                ThrowsMessage<Error>(HasSubstr(std::string("field '") + key + "'")));
  }
  // A config built in code with a negative width is refused by validate.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.word_embed_proj_dim = -1;
  EXPECT_THAT([&] { validate(c); }, ThrowsMessage<Error>(HasSubstr("word_embed_proj_dim")));
}

// The residual adds and LayerNorms of layer 0 in the order the forward runs them.
Names norm_and_add_order(const OpGraph& g) {
  Names out;
  for (const OpNode& n : g.nodes()) {
    if (n.op == "add" && n.module == "model.decoder.layers.0") out.push_back("add");
    if (n.op == "layer_norm" && n.module.starts_with("model.decoder.layers.0.")) {
      out.push_back(n.module.substr(std::string("model.decoder.layers.0.").size()));
    }
  }
  return out;
}

TEST(OptModels, NormsBeforeEachHalfOrAfterEachResidual) {
  const OpGraph pre = trace_model_forward(*build_model(parse_model_config(tiny(), "tiny")), 2, 8);
  EXPECT_EQ(norm_and_add_order(pre),
            (Names{"self_attn_layer_norm", "add", "final_layer_norm", "add"}));
  EXPECT_EQ(ops_in(pre, "layer_norm", "model.decoder.final_layer_norm"), 1);
  nlohmann::json j = tiny();
  j["do_layer_norm_before"] = false;
  j["word_embed_proj_dim"] = 16;
  const OpGraph post = trace_model_forward(*build_model(parse_model_config(j, "post")), 2, 8);
  EXPECT_EQ(norm_and_add_order(post),
            (Names{"add", "self_attn_layer_norm", "add", "final_layer_norm"}));
  EXPECT_EQ(ops_under(post, "layer_norm", "model.decoder.final_layer_norm"), 0);
  // q scaled by head_dim^-0.5 after its projection: one mul in the attention, then one fused
  // attention over 4 heads of 8 on [2, 8] tokens; ReLU between fc1 and fc2.
  for (const OpGraph* g : {&pre, &post}) {
    EXPECT_EQ(ops_in(*g, "mul", "model.decoder.layers.0.self_attn"), 1);
    EXPECT_EQ(ops_in(*g, "relu", "model.decoder.layers.0"), 1);
    int64_t attention = 0;
    for (const OpNode& n : g->nodes()) {
      if (n.op != "scaled_dot_product_attention") continue;
      ++attention;
      EXPECT_EQ(g->tensor(n.inputs[0]).sizes, (DimVector{2, 4, 8, 8}));
    }
    EXPECT_EQ(attention, 2);
  }
  // The embeddings: the token table's output (16 wide) through project_in before positions
  // join it; project_out after the last layer, before lm_head.
  EXPECT_EQ(ops_under(post, "linear", "model.decoder.project_in"), 1);
  EXPECT_EQ(ops_under(post, "linear", "model.decoder.project_out"), 1);
  EXPECT_EQ(ops_in(post, "add", "model.decoder"), 1);
}

TEST(OptModels, LearnedPositionsEndAtMaxPositionEmbeddings) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"));
  EXPECT_NO_THROW((void)trace_model_forward(*m, 1, 16));
  EXPECT_THAT([&] { (void)trace_model_forward(*m, 1, 17); },
              ThrowsMessage<Error>(HasSubstr("exceeds max_position_embeddings 16")));
}

TEST(OptModels, TrainingStepMatmulsByHand) {
  // B 2, S 8 (16 tokens), h 32, F 48, 4 heads of 8. Per layer forward: the six projections
  // 2 x 16 x (4 x 32^2 + 2 x 32 x 48) = 229,376, attention's Q K^T and P V 4 B S^2 h = 16,384:
  // 245,760; the tied lm_head 2 x 16 x 32 x 100 = 102,400. Each projection's backward is twice
  // its forward (input and weight gradients).
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions o;
  o.batch = 2;
  o.seq = 8;
  const TrainingStep st = trace_training_step(*m, o);
  ASSERT_EQ(st.blocks.size(), 2u);
  double block0 = 0, linear0 = 0, linear0_backward = 0, total = 0;
  int64_t dropouts0 = 0;
  for (const TrainingOp& op : st.ops) {
    total += op.matmul_flops;
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
  // dropout (0.1) after out_proj and after fc2; attention's own is inside its fused op; none on
  // the embeddings.
  EXPECT_EQ(dropouts0, 2);
  int64_t outside = 0;
  for (const TrainingOp& op : st.ops) outside += op.block < 0 && op.op == "dropout";
  EXPECT_EQ(outside, 0);
}

TEST(OptModels, InitDrawsFromInitStdAndZeroesThePaddingRow) {
  nlohmann::json j = tiny();
  j["init_std"] = 0.006;
  const ModelConfig c = parse_model_config(j, "tiny");
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> init;
  for (const NamedInit& p : parameter_inits(*m, c)) init[p.name] = p.init;
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.0, 0.006};
  ParameterInit padded = normal;
  padded.zero_row = 1;  // pad_token_id 1: embed_tokens's padding_idx
  EXPECT_EQ(init.at("model.decoder.embed_tokens.weight"), padded);
  EXPECT_EQ(init.at("model.decoder.embed_positions.weight"), normal);  // no padding_idx
  EXPECT_EQ(init.at("model.decoder.layers.1.self_attn.q_proj.weight"), normal);
  EXPECT_EQ(init.at("model.decoder.layers.1.fc2.bias"),
            (ParameterInit{ParameterInit::Kind::kConstant, 0.0, 0.0}));
  EXPECT_EQ(init.at("model.decoder.final_layer_norm.weight"),
            (ParameterInit{ParameterInit::Kind::kConstant, 1.0, 0.0}));
  EXPECT_EQ(init.count("lm_head.weight"), 0u);  // tied: under embed_tokens's name
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
}

// The Hub's OPT files were saved from OPTModel: "decoder.*" without the "model." prefix, and
// without lm_head.weight (tied); transformers loads them into OPTForCausalLM all the same.
TEST(OptModels, HubCheckpointWithoutTheModelPrefixLoads) {
  nlohmann::json cfg = tiny();
  cfg["word_embed_proj_dim"] = 16;
  cfg["do_layer_norm_before"] = false;
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  const ModelSource src = test::check_stored_as(
      cfg, *model, [](const std::string& n) { return n.starts_with("model.") ? n.substr(6) : n; });
  EXPECT_TRUE(src.check.loadable());
  EXPECT_EQ(src.check.stripped_prefix, "model.");
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_TRUE(src.check.unexpected.empty());
}

}  // namespace
}  // namespace shardplan::tensor
