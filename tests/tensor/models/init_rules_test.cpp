// Each family's _init_weights as rules (tensor/models/init_rules.h), against transformers'
// modeling files by hand: GPT-2 draws c_proj weights with std 0.02 / sqrt(2 n_layer), norms start
// at one (Gemma's at zero: it scales by 1 + weight), biases at zero, everything else normal(0,
// initializer_range).
#include "tensor/models/init_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"

namespace shardplan::tensor {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::map<std::string, ParameterInit> inits_of(const std::string& name) {
  const ModelConfig c = find_model_config(name);
  const ModulePtr m = build_model(c);
  std::map<std::string, ParameterInit> out;
  for (const NamedInit& p : parameter_inits(*m, c)) out[p.name] = p.init;
  return out;
}

constexpr ParameterInit kOne{ParameterInit::Kind::kConstant, 1.0, 0.0};
constexpr ParameterInit kZero{ParameterInit::Kind::kConstant, 0.0, 0.0};

ParameterInit normal(double std) { return {ParameterInit::Kind::kNormal, 0.0, std}; }

TEST(InitRules, Gpt2ScalesResidualProjectionsByDepth) {
  const std::map<std::string, ParameterInit> i = inits_of("gpt2");
  EXPECT_EQ(i.size(), 148u);  // 12 layers x 12 + wte, wpe, ln_f.{weight,bias}
  // 0.02 / sqrt(2 x 12 layers) = 0.0040824829...
  const double scaled = 0.02 / std::sqrt(24.0);
  EXPECT_NEAR(scaled, 0.00408248290463863, 1e-15);
  EXPECT_EQ(i.at("transformer.h.0.attn.c_proj.weight"), normal(scaled));
  EXPECT_EQ(i.at("transformer.h.11.mlp.c_proj.weight"), normal(scaled));
  EXPECT_EQ(i.at("transformer.h.0.attn.c_attn.weight"), normal(0.02));
  EXPECT_EQ(i.at("transformer.h.0.mlp.c_fc.bias"), kZero);
  EXPECT_EQ(i.at("transformer.h.0.attn.c_proj.bias"), kZero);
  EXPECT_EQ(i.at("transformer.h.3.ln_1.weight"), kOne);
  EXPECT_EQ(i.at("transformer.h.3.ln_2.bias"), kZero);
  EXPECT_EQ(i.at("transformer.wte.weight"), normal(0.02));
  EXPECT_EQ(i.at("transformer.wpe.weight"), normal(0.02));
  EXPECT_EQ(i.count("lm_head.weight"), 0u);  // tied to wte: listed once, under its first name
}

TEST(InitRules, DecodersAndGemma) {
  const std::map<std::string, ParameterInit> llama = inits_of("llama3-8b");
  EXPECT_EQ(llama.at("model.layers.0.self_attn.q_proj.weight"), normal(0.02));
  EXPECT_EQ(llama.at("model.layers.0.input_layernorm.weight"), kOne);
  EXPECT_EQ(llama.at("model.norm.weight"), kOne);
  EXPECT_EQ(llama.at("lm_head.weight"), normal(0.02));
  EXPECT_EQ(llama.at("model.embed_tokens.weight"), normal(0.02));  // no pad_token_id: no zero row
  const std::map<std::string, ParameterInit> gemma = inits_of("gemma-7b");
  EXPECT_EQ(gemma.at("model.layers.0.input_layernorm.weight"), kZero);
  // gemma-7b's config.json has pad_token_id 0: GemmaModel builds nn.Embedding(..., padding_idx=0)
  // and _init_weights zeroes that row after the normal fill.
  ParameterInit padded = normal(0.02);
  padded.zero_row = 0;
  EXPECT_EQ(gemma.at("model.embed_tokens.weight"), padded);
  const std::map<std::string, ParameterInit> mixtral = inits_of("mixtral-8x7b");
  EXPECT_EQ(mixtral.at("model.layers.0.mlp.gate.weight"), normal(0.02));
  EXPECT_EQ(mixtral.at("model.layers.0.mlp.experts.gate_up_proj"), normal(0.02));
  EXPECT_EQ(mixtral.at("model.layers.31.mlp.experts.down_proj"), normal(0.02));
  const std::map<std::string, ParameterInit> neox = inits_of("pythia-160m");
  EXPECT_EQ(neox.at("gpt_neox.layers.0.attention.query_key_value.bias"), kZero);
  EXPECT_EQ(neox.at("gpt_neox.final_layer_norm.weight"), kOne);
}

TEST(InitRules, InitializerRangeIsReadAndChecked) {
  nlohmann::json j = to_hf_json(find_model_config("llama3-8b"));
  j["initializer_range"] = 0.006;
  EXPECT_EQ(parse_model_config(j).initializer_range, 0.006);
  j.erase("initializer_range");
  EXPECT_EQ(parse_model_config(j).initializer_range, 0.02);  // transformers' default
  j["initializer_range"] = -1;
  EXPECT_THAT([&] { (void)parse_model_config(j, "cfg.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'initializer_range'")));
  // pad_token_id: a token id, null (none), or an error naming the field.
  j["initializer_range"] = 0.02;
  j["pad_token_id"] = 7;
  EXPECT_EQ(parse_model_config(j).pad_token_id, 7);
  EXPECT_EQ(parse_model_config(to_hf_json(parse_model_config(j))).pad_token_id, 7);  // round trip
  j["pad_token_id"] = nullptr;
  EXPECT_FALSE(parse_model_config(j).pad_token_id.has_value());
  // A negative id counts from the end, as nn.Embedding's padding_idx: -1 is the last row.
  j["pad_token_id"] = -1;
  const ModelConfig last = parse_model_config(j);
  const ModulePtr m = build_model(last);
  EXPECT_EQ(parameter_inits(*m, last).front().init.zero_row, 128255);
  j["pad_token_id"] = 128256;  // llama3-8b's vocab_size: one past the last id
  EXPECT_THAT([&] { (void)parse_model_config(j, "cfg.json"); },
              ThrowsMessage<Error>(HasSubstr("field 'pad_token_id': expected a token id in "
                                             "[-vocab_size, vocab_size) = [-128256, 128256)")));
  // GPT-2's embedding has no padding_idx: transformers ignores the id, and so does the parse.
  nlohmann::json gpt2 = to_hf_json(find_model_config("gpt2"));
  gpt2["pad_token_id"] = 999999;
  EXPECT_EQ(parse_model_config(gpt2).pad_token_id, 999999);
  const ModelFamily& llama = *find_family("llama");
  EXPECT_THAT([&] { (void)parameter_init(llama, ModelConfig{}, "Conv3D", "x.weight"); },
              ThrowsMessage<Error>(HasSubstr("'x.weight' (a Conv3D) matches no init rule")));
}

}  // namespace
}  // namespace shardplan::tensor
