// nemotron_h (NVIDIA Nemotron-H, Nemotron 3): single-part blocks (a norm and one mixer: Mamba-2,
// attention, MoE or MLP) against hand formulas written here from transformers 5's
// modeling_nemotron_h.py and the published totals. h hidden, per block one norm [h] and:
//   M  Mamba-2: dt_bias, A_log, D [H], conv1d [conv, 1, K] + bias [conv], in_proj [d_inner +
//      conv + H, h], norm [d_inner], out_proj [h, d_inner]; d_inner = H P, conv = d_inner + 2 g N
//   *  attention: q_proj [heads hd, h], k_proj, v_proj [kv hd, h], o_proj [h, heads hd]
//   E  experts up_proj [E, F, d], down_proj [E, d, F], gate [E, h], shared_experts up_proj [S, h]
//      and down_proj [h, S] (d = h, or the latent width between fc1 [d, h] and fc2 [h, d])
//   -  up_proj [F', h], down_proj [h, F']
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/op_graph.h"
#include "tensor/ops.h"
#include "tests/tensor/models/family_test_support.h"

namespace shardplan::tensor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

int64_t mamba_params(int64_t h, int64_t heads, int64_t head_dim, int64_t groups, int64_t state,
                     int64_t taps) {
  const int64_t inner = heads * head_dim, conv = inner + 2 * groups * state;
  return 3 * heads + conv * taps + conv + (inner + conv + heads) * h + inner + inner * h;
}

// One of each block (M E * -), MoE with 4 experts of 32 (top 2) and a shared MLP of 48, dense
// MLP 40; Mamba-2 of 4 heads of 16 in 2 groups of state 8.
nlohmann::json tiny() {
  return {{"model_type", "nemotron_h"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"hybrid_override_pattern", "ME*-"},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"intermediate_size", 40},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 32},
          {"moe_shared_expert_intermediate_size", 48},
          {"mamba_num_heads", 4},
          {"mamba_head_dim", 16},
          {"n_groups", 2},
          {"ssm_state_size", 8},
          {"conv_kernel", 4}};
}

TEST(NemotronHModels, Nemotron3NanoMatchesThePublishedTotals) {
  // NVIDIA-Nemotron-3-Nano-30B-A3B: V 131,072 untied, h 2,688, 52 blocks: 23 Mamba-2 (64 heads
  // of 64, 8 groups of state 128), 23 MoE (128 experts of 1,856, top 6, a shared MLP of 3,712),
  // 6 attention (32 heads of 128, 2 kv heads). "31.6B total, 3.6B active with embeddings".
  const int64_t V = 131072, h = 2688;
  const int64_t mamba = mamba_params(h, 64, 64, 8, 128, 4);
  const int64_t moe = 128 * h + 128 * 2 * h * 1856 + 2 * h * 3712;
  const int64_t attention = 2 * 32 * 128 * h + 2 * 2 * 128 * h;
  const int64_t total = 2 * V * h + h + 23 * (mamba + h) + 23 * (moe + h) + 6 * (attention + h);
  EXPECT_EQ(total, 31'577'937'344);
  const ModelConfig c = find_model_config("nemotron-3-nano-30b-a3b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  const int64_t active = total - 23 * (128 - 6) * 2 * h * 1856;
  EXPECT_EQ(active, 3'580'073'408);
  EXPECT_EQ(active_parameters(*m, c), active);
  const LayerStack s = layer_stack(c);
  ASSERT_EQ(s.kinds.size(), 3u);
  EXPECT_EQ(describe(s.kinds[0]), "linear mixer");
  EXPECT_EQ(describe(s.kinds[1]), "ffn moe");
  EXPECT_EQ(describe(s.kinds[2]), "attention mixer");
  EXPECT_EQ(s.count(0), 23);
  EXPECT_EQ(s.count(1), 23);
  EXPECT_EQ(s.first_layer(2), 5);
  // The router's score-correction buffer is a tensor of the checkpoints, counted aside.
  EXPECT_EQ(parameters_beyond_model(c).router_bias, 23 * 128);
  // Nemotron-H-8B: dense, 24 Mamba-2 (128 heads), 24 MLPs of 21,504, 4 attention blocks.
  const int64_t h8 = 4096;
  const int64_t dense = 2 * V * h8 + h8 + 24 * (mamba_params(h8, 128, 64, 8, 128, 4) + h8) +
                        24 * (2 * h8 * 21504 + h8) +
                        4 * (2 * 32 * 128 * h8 + 2 * 8 * 128 * h8 + h8);
  EXPECT_EQ(dense, 8'100'852'736);
  const ModelConfig c8 = find_model_config("nemotron-h-8b");
  EXPECT_EQ(build_model(c8)->parameters_numel(), dense);
  EXPECT_EQ(describe(layer_stack(c8).kinds[1]), "ffn dense");
}

TEST(NemotronHModels, NamesOrderAndTypesAreTransformers) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  std::vector<std::string> names;
  for (const auto& [name, t] : m->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"model.embeddings.weight",
                                             "model.layers.0.norm.weight",
                                             "model.layers.0.mixer.dt_bias",
                                             "model.layers.0.mixer.A_log",
                                             "model.layers.0.mixer.D",
                                             "model.layers.0.mixer.conv1d.weight",
                                             "model.layers.0.mixer.conv1d.bias",
                                             "model.layers.0.mixer.in_proj.weight",
                                             "model.layers.0.mixer.norm.weight",
                                             "model.layers.0.mixer.out_proj.weight",
                                             "model.layers.1.norm.weight",
                                             "model.layers.1.mixer.experts.up_proj",
                                             "model.layers.1.mixer.experts.down_proj",
                                             "model.layers.1.mixer.gate.weight",
                                             "model.layers.1.mixer.shared_experts.up_proj.weight",
                                             "model.layers.1.mixer.shared_experts.down_proj.weight",
                                             "model.layers.2.norm.weight",
                                             "model.layers.2.mixer.q_proj.weight",
                                             "model.layers.2.mixer.k_proj.weight",
                                             "model.layers.2.mixer.v_proj.weight",
                                             "model.layers.2.mixer.o_proj.weight",
                                             "model.layers.3.norm.weight",
                                             "model.layers.3.mixer.up_proj.weight",
                                             "model.layers.3.mixer.down_proj.weight",
                                             "model.norm_f.weight",
                                             "lm_head.weight"}));
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  // d_inner 64, conv 64 + 2 x 2 x 8 = 96, in_proj 64 + 96 + 4.
  EXPECT_EQ(shape("model.layers.0.mixer.in_proj.weight"), (DimVector{164, 64}));
  EXPECT_EQ(shape("model.layers.0.mixer.conv1d.weight"), (DimVector{96, 1, 4}));
  EXPECT_EQ(shape("model.layers.1.mixer.experts.up_proj"), (DimVector{4, 32, 64}));
  EXPECT_EQ(shape("model.layers.1.mixer.experts.down_proj"), (DimVector{4, 64, 32}));
  EXPECT_EQ(shape("model.layers.1.mixer.shared_experts.up_proj.weight"), (DimVector{48, 64}));
  EXPECT_EQ(shape("model.layers.3.mixer.up_proj.weight"), (DimVector{40, 64}));
  EXPECT_EQ(m->get_submodule("model").type_name(), "NemotronHModel");
  EXPECT_EQ(m->get_submodule("model.layers.0").type_name(), "NemotronHBlock");
  EXPECT_EQ(m->get_submodule("model.layers.0.mixer").type_name(), "NemotronHMamba2Mixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mixer.norm").type_name(), "Zamba2RMSNormGated");
  EXPECT_EQ(m->get_submodule("model.layers.1.mixer").type_name(), "NemotronHMoE");
  EXPECT_EQ(m->get_submodule("model.layers.1.mixer.experts").type_name(), "NemotronHExperts");
  EXPECT_EQ(m->get_submodule("model.layers.1.mixer.gate").type_name(), "NemotronHTopkRouter");
  EXPECT_EQ(m->get_submodule("model.layers.2.mixer").type_name(), "NemotronHAttention");
  EXPECT_EQ(m->get_submodule("model.layers.3.mixer").type_name(), "NemotronHMLP");
}

TEST(NemotronHModels, BlockListsAliasesRoundTripAndLatentExperts) {
  const ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.layer_types,
            (std::vector<AttentionType>{AttentionType::kLinear, AttentionType::kNone,
                                        AttentionType::kFull, AttentionType::kNone}));
  EXPECT_EQ(c.no_ffn_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.dense_layers, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.intermediate_size, 32);  // the experts'
  EXPECT_EQ(c.dense_intermediate_size, 40);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // transformers 5's layers_block_type (with its legacy names) reads as the pattern; the older
  // mamba_* keys stand for the fields NemotronHConfig pops them into; num_hidden_layers yields
  // to the list's length.
  nlohmann::json j = tiny();
  j.erase("hybrid_override_pattern");
  j["layers_block_type"] = {"mamba", "moe", "attention", "mlp"};
  j.erase("n_groups");
  j["mamba_n_groups"] = 2;
  j.erase("conv_kernel");
  j["mamba_d_conv"] = 4;
  j["num_hidden_layers"] = 52;
  EXPECT_EQ(parse_model_config(j, "tiny.json"), c);
  j["hybrid_override_pattern"] = "MMMM";  // the list wins
  EXPECT_EQ(parse_model_config(j, "tiny.json"), c);
  // Latent experts: fc1 and fc2 around experts of the latent width.
  j = tiny();
  j["moe_latent_size"] = 24;
  const ModelConfig latent = parse_model_config(j, "tiny.json");
  EXPECT_EQ(parse_model_config(to_hf_json(latent), "round trip"), latent);
  const ModulePtr m = build_model(latent);
  EXPECT_EQ(m->get_parameter("model.layers.1.mixer.experts.up_proj").sizes(),
            (DimVector{4, 32, 24}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mixer.fc1_latent_proj.weight").sizes(),
            (DimVector{24, 64}));
  EXPECT_EQ(m->get_parameter("model.layers.1.mixer.fc2_latent_proj.weight").sizes(),
            (DimVector{64, 24}));
  // Dense: no experts, the MLP at intermediate_size.
  j = tiny();
  j["hybrid_override_pattern"] = "M-*-";
  const ModelConfig dense = parse_model_config(j, "tiny.json");
  EXPECT_EQ(dense.num_local_experts, 0);
  EXPECT_EQ(dense.intermediate_size, 40);
  EXPECT_EQ(parse_model_config(to_hf_json(dense), "round trip"), dense);
}

TEST(NemotronHModels, BadBlocksAreRefusedByName) {
  auto refused = [](nlohmann::json j, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(j, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << j.dump();
  };
  nlohmann::json j = tiny();
  j["hybrid_override_pattern"] = "ME*X";
  refused(j, "'hybrid_override_pattern': 'X' at position 3 is not a block");
  j["hybrid_override_pattern"] = "ME\xc3\xa9";  // UTF-8 "é": its first byte is named in hex
  refused(j, "'hybrid_override_pattern': 0xc3 at position 2 is not a block");
  j["hybrid_override_pattern"] = std::string(1025, 'M');
  refused(j, "'hybrid_override_pattern': has 1025 blocks, expected at most 1024");
  j = tiny();
  j["layers_block_type"] = {"mamba", "sliding_attention"};
  refused(j, "'layers_block_type': \"sliding_attention\" is not a block type");
  j = tiny();
  j["moe_latent_size"] = 0;
  refused(j, "'moe_latent_size': must be positive");
  j = tiny();
  j["n_routed_experts"] = 0;
  refused(j, "'n_routed_experts': must be positive (the blocks list moe), got 0");
  j = tiny();
  j["mamba_hidden_act"] = "gelu";
  refused(j, "'mamba_hidden_act': 'gelu' is not built");
  j = tiny();
  j["n_groups"] = 3;
  refused(j, "'mamba_num_heads' (linear_num_value_heads): 4 is not a multiple of n_groups 3");
  // Single-part blocks: a config built in code with a layer of both parts, or of neither, is
  // refused; a family of two-part layers refuses either kind of single-part layer.
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  c.no_ffn_layers = {2};  // layer 0 is a Mamba-2 mixer with an MLP
  EXPECT_THAT([&] { validate(c, "built"); },
              ThrowsMessage<Error>(HasSubstr("layer 0 has both a token mixer and a feed-forward")));
  c.no_ffn_layers = {0, 1, 2};
  EXPECT_THAT([&] { validate(c, "built"); },
              ThrowsMessage<Error>(HasSubstr("layer 1 has neither a mixer nor a feed-forward")));
  ModelConfig llama = find_model_config("llama3-8b");
  llama.layer_types.assign(32, AttentionType::kFull);
  llama.layer_types[3] = AttentionType::kNone;
  EXPECT_THAT([&] { validate(llama, "built"); },
              ThrowsMessage<Error>(HasSubstr("model_type 'llama' builds none")));
}

TEST(NemotronHModels, TracedMoeBlockIsRouterExpertsAndSharedMlp) {
  nlohmann::json j = tiny();
  j["hybrid_override_pattern"] = "E";
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  // The float32 router (4 experts), each expert on ceil(100 x 2 / 4) = 50 tokens through up and
  // down (32 wide, no gate), the shared MLP (48), lm_head (1000).
  const double expected = 2 * T * h * 4 + 4 * 50 * (2 * h * 32 + 2 * 32 * h) +
                          (2 * T * h * 48 + 2 * T * 48 * h) + 2 * T * h * 1000;
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, expected);
}

// The Hub's Nemotron-H files name the model `backbone` (transformers 5 loads it as `model`) and
// keep the multi-token prediction layers under mtp.*, which transformers skips: a dense
// checkpoint so named fits the model, the mtp tensors listed as not loaded.
TEST(NemotronHModels, BackboneCheckpointNamesFitTheModel) {
  nlohmann::json cfg = tiny();
  cfg["hybrid_override_pattern"] = "M-*-";
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  const ModelSource src = test::check_stored_as(
      cfg, *model,
      [](const std::string& n) { return n.starts_with("model.") ? "backbone." + n.substr(6) : n; },
      {{"mtp.layers.0.norm.weight", "BF16", {64}}});
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
}

// Nemotron 3's Hub files keep the routed experts one tensor per expert and projection,
// backbone.layers.1.mixer.experts.<e>.up_proj.weight [F, h] and .down_proj.weight [h, F]:
// transformers stacks them into the non-gated experts.up_proj [E, F, h] and down_proj [E, h, F].
TEST(NemotronHModels, ExpertsStoredOneByOneStackIntoTheNonGatedTensors) {
  const nlohmann::json cfg = tiny();  // "ME*-": block 1 holds 4 experts of 32 over h 64
  const ModulePtr model = build_model(parse_model_config(cfg, "tiny"));
  auto backbone = [](const std::string& n) {
    return n.starts_with("model.") ? "backbone." + n.substr(6) : n;
  };
  auto stored = [&](const std::string& n) {
    return n.find(".experts.") != std::string::npos ? std::string() : backbone(n);
  };
  std::vector<test::StEntry> experts;
  for (int e = 0; e < 4; ++e) {
    const std::string stem = "backbone.layers.1.mixer.experts." + std::to_string(e) + ".";
    experts.push_back({stem + "up_proj.weight", "BF16", {32, 64}});
    experts.push_back({stem + "down_proj.weight", "BF16", {64, 32}});
  }
  const ModelSource src = test::check_stored_as(cfg, *model, stored, experts);
  EXPECT_TRUE(src.check.loadable());
  EXPECT_TRUE(src.check.unexpected.empty());
  EXPECT_TRUE(src.check.missing.empty());
  EXPECT_EQ(src.check.stacked_experts,
            (std::vector<std::string>{"model.layers.1.mixer.experts.down_proj",
                                      "model.layers.1.mixer.experts.up_proj"}));
  // One expert's up_proj missing is named, as the Hub names it; a gate is not asked for.
  experts.erase(experts.begin() + 4);  // expert 2's up_proj
  EXPECT_THAT([&] { test::check_stored_as(cfg, *model, stored, experts); },
              ThrowsMessage<Error>(AllOf(
                  HasSubstr("'backbone.layers.1.mixer.experts.2.up_proj.weight' (one expert's "
                            "slice of a fused tensor of the model) is missing"),
                  Not(HasSubstr("gate_proj")))));
  // A slice of the wrong width is a shape mismatch of that slice.
  experts.push_back({"backbone.layers.1.mixer.experts.2.up_proj.weight", "BF16", {16, 64}});
  EXPECT_THAT([&] { test::check_stored_as(cfg, *model, stored, experts); },
              ThrowsMessage<Error>(HasSubstr("backbone.layers.1.mixer.experts.2.up_proj.weight")));
}

}  // namespace
}  // namespace shardplan::tensor
