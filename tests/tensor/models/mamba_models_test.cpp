// granitemoehybrid (IBM Granite 4.0): Mamba-2 layers beside attention layers, against hand
// formulas written here from transformers 5's modeling_granitemoehybrid.py and the published
// totals. h hidden, H Mamba heads of P channels (d_inner = H P), g groups of state width N, K
// convolution taps, conv = d_inner + 2 g N:
//   mamba:     dt_bias, A_log, D [H], conv1d.weight [conv, 1, K], conv1d.bias [conv],
//              in_proj.weight [d_inner + conv + H, h], norm.weight [d_inner],
//              out_proj.weight [h, d_inner]
//   self_attn: q_proj [heads hd, h], k_proj, v_proj [kv hd, h], o_proj [h, heads hd]
//   every layer: two norms [h], shared_mlp (input_linear [2 S, h], output_linear [h, S]) and,
//   with E experts of width F, block_sparse_moe (router [E, h], gate_up_proj [E, 2 F, h],
//   down_proj [E, h, F]).
// Note [Mamba-2 scan work] (tensor/ops.h) for the FLOPs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/op_graph.h"
#include "tensor/ops.h"
#include "tensor/training.h"

namespace shardplan::tensor {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

struct Mamba {
  int64_t h, heads, head_dim, groups, state, taps;
};

int64_t mamba_params(const Mamba& a) {
  const int64_t inner = a.heads * a.head_dim, conv = inner + 2 * a.groups * a.state;
  return 3 * a.heads + conv * a.taps + conv + (inner + conv + a.heads) * a.h + inner + inner * a.h;
}

int64_t attention_params(int64_t h, int64_t heads, int64_t kv, int64_t hd) {
  return 2 * heads * hd * h + 2 * kv * hd * h;
}

// Every layer's norms, shared MLP of width S and (E > 0) experts of width F.
int64_t common_params(int64_t h, int64_t S, int64_t E, int64_t F) {
  return 2 * h + 3 * h * S + (E > 0 ? E * h + E * 3 * h * F : 0);
}

// A small hybrid: two Mamba-2 layers (8 heads of 16, 2 groups of state 16), then attention.
nlohmann::json tiny() {
  return {{"model_type", "granitemoehybrid"},
          {"vocab_size", 1000},
          {"hidden_size", 64},
          {"intermediate_size", 32},
          {"shared_intermediate_size", 48},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"num_local_experts", 4},
          {"num_experts_per_tok", 2},
          {"mamba_n_heads", 8},
          {"mamba_n_groups", 2},
          {"mamba_d_state", 16},
          {"mamba_d_conv", 4},
          {"mamba_expand", 2},
          {"layer_types", {"mamba", "mamba", "attention"}}};
}

TEST(MambaModels, Granite4MatchesThePublishedTotals) {
  // granite-4.0-h-small: V 100,352 tied, h 4,096, 40 layers of which 4 attend (32 heads of 128, 8
  // kv heads), 36 Mamba-2 (128 heads of 64, one group of state 128, 4 taps); 72 experts of 768
  // (top 10) and a shared MLP of 1,536 in every layer.
  const int64_t V = 100352;
  {
    const int64_t h = 4096;
    const int64_t mamba = mamba_params({h, 128, 64, 1, 128, 4});
    EXPECT_EQ(mamba, 102'286'976);
    const int64_t total = V * h + h + 36 * mamba + 4 * attention_params(h, 32, 8, 128) +
                          40 * common_params(h, 1536, 72, 768);
    // 59.99 GiB of bf16 safetensors: 32,207,337,984 parameters.
    EXPECT_EQ(total, 32'207'337'984);
    const ModelConfig c = find_model_config("granite-4.0-h-small");
    const ModulePtr m = build_model(c);
    EXPECT_EQ(m->parameters_numel(), total);
    // Active: 10 of 72 experts ("9B active").
    EXPECT_EQ(active_parameters(*m, c), total - 40 * (72 - 10) * 3 * h * 768);
    const LayerStack s = layer_stack(c);
    ASSERT_EQ(s.kinds.size(), 2u);
    EXPECT_EQ(describe(s.kinds[0]), "linear moe");
    EXPECT_EQ(s.count(0), 36);
    EXPECT_EQ(s.first_layer(1), 5);
  }
  {
    // granite-4.0-h-tiny: h 1,536, 12 heads, 4 kv heads, 48 Mamba heads, 64 experts of 512 (top
    // 6), a shared MLP of 1,024: 6,939,037,248 (12.93 GiB of bf16).
    const int64_t h = 1536;
    const int64_t total = V * h + h + 36 * mamba_params({h, 48, 64, 1, 128, 4}) +
                          4 * attention_params(h, 12, 4, 128) +
                          40 * common_params(h, 1024, 64, 512);
    EXPECT_EQ(total, 6'939'037'248);
    EXPECT_EQ(build_model(find_model_config("granite-4.0-h-tiny"))->parameters_numel(), total);
  }
  // granite-4.0-h-micro: dense, h 2,048, 16 heads, 4 kv heads, 64 Mamba heads, a shared MLP of
  // 8,192 as the whole feed-forward: 3,191,396,096.
  const int64_t h = 2048;
  const int64_t total = V * h + h + 36 * mamba_params({h, 64, 64, 1, 128, 4}) +
                        4 * attention_params(h, 16, 4, 128) + 40 * common_params(h, 8192, 0, 0);
  EXPECT_EQ(total, 3'191'396'096);
  const ModelConfig c = find_model_config("granite-4.0-h-micro");
  EXPECT_EQ(c.num_local_experts, 0);
  EXPECT_EQ(c.intermediate_size, 8192);  // the shared MLP's width
  EXPECT_EQ(build_model(c)->parameters_numel(), total);
  EXPECT_EQ(describe(layer_stack(c).kinds[0]), "linear dense");
}

TEST(MambaModels, NamesOrderAndShapesAreTransformers) {
  const ModulePtr m = build_model(parse_model_config(tiny(), "tiny.json"));
  std::vector<std::string> mamba, full;
  for (const auto& [name, t] : m->named_parameters()) {
    if (name.starts_with("model.layers.0.")) mamba.push_back(name.substr(15));
    if (name.starts_with("model.layers.2.")) full.push_back(name.substr(15));
  }
  // The norms, the sparse block, the shared MLP, then the mixer; a module's own parameters list
  // before its children's, as PyTorch lists them.
  const std::vector<std::string> ffn = {"input_layernorm.weight",
                                        "post_attention_layernorm.weight",
                                        "block_sparse_moe.router.weight",
                                        "block_sparse_moe.experts.gate_up_proj",
                                        "block_sparse_moe.experts.down_proj",
                                        "shared_mlp.input_linear.weight",
                                        "shared_mlp.output_linear.weight"};
  std::vector<std::string> want = ffn;
  for (const char* p :
       {"mamba.dt_bias", "mamba.A_log", "mamba.D", "mamba.conv1d.weight", "mamba.conv1d.bias",
        "mamba.in_proj.weight", "mamba.norm.weight", "mamba.out_proj.weight"}) {
    want.emplace_back(p);
  }
  EXPECT_EQ(mamba, want);
  want = ffn;
  for (const char* p : {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight", "self_attn.o_proj.weight"}) {
    want.emplace_back(p);
  }
  EXPECT_EQ(full, want);
  auto shape = [&](const std::string& p) { return m->get_parameter(p).sizes(); };
  // d_inner 2 x 64 = 128 (8 heads of 16, mamba_d_head "auto"); conv 128 + 2 x 2 x 16 = 192.
  EXPECT_EQ(shape("model.layers.0.mamba.conv1d.weight"), (DimVector{192, 1, 4}));
  EXPECT_EQ(shape("model.layers.0.mamba.conv1d.bias"), (DimVector{192}));
  EXPECT_EQ(shape("model.layers.0.mamba.in_proj.weight"), (DimVector{128 + 192 + 8, 64}));
  EXPECT_EQ(shape("model.layers.0.mamba.A_log"), (DimVector{8}));
  EXPECT_EQ(shape("model.layers.0.mamba.norm.weight"), (DimVector{128}));
  EXPECT_EQ(shape("model.layers.0.mamba.out_proj.weight"), (DimVector{64, 128}));
  EXPECT_EQ(shape("model.layers.0.shared_mlp.input_linear.weight"), (DimVector{96, 64}));
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "GraniteMoeHybridMambaLayer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.norm").type_name(),
            "GraniteMoeHybridRMSNormGated");
  EXPECT_EQ(m->get_submodule("model.layers.0.shared_mlp").type_name(), "GraniteMoeHybridMLP");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.conv1d").type_name(), "Conv1d");
  // No layer rotates (position_embedding_type None): the model has no rotary_emb, as
  // GraniteMoeHybridModel builds one only for "rope".
  EXPECT_THROW((void)m->get_submodule("model.rotary_emb"), Error);
  // Untied (the class's tie_word_embeddings False): embed_tokens and lm_head.
  EXPECT_EQ(m->parameters_numel(), 2 * 1000 * 64 + 64 + 2 * mamba_params({64, 8, 16, 2, 16, 4}) +
                                       attention_params(64, 4, 2, 16) +
                                       3 * common_params(64, 48, 4, 32));
  // Biases as the file says: no conv bias, both projections with one.
  nlohmann::json j = tiny();
  j["mamba_conv_bias"] = false;
  j["mamba_proj_bias"] = true;
  const ModulePtr b = build_model(parse_model_config(j, "tiny.json"));
  EXPECT_FALSE(b->get_parameter("model.layers.0.mamba.conv1d.bias").defined());
  for (const auto& [name, t] : b->named_parameters()) EXPECT_FALSE(name.ends_with("conv1d.bias"));
  EXPECT_EQ(b->get_parameter("model.layers.0.mamba.in_proj.bias").sizes(), (DimVector{328}));
  EXPECT_EQ(b->get_parameter("model.layers.0.mamba.out_proj.bias").sizes(), (DimVector{64}));
}

TEST(MambaModels, ConfigDefaultsRoundTripAndRefusals) {
  ModelConfig c = parse_model_config(tiny(), "tiny.json");
  EXPECT_EQ(c.linear_num_value_heads, 8);
  EXPECT_EQ(c.linear_value_head_dim, 16);
  EXPECT_EQ(c.linear_num_key_heads, 2);
  EXPECT_TRUE(c.linear_conv_bias);
  EXPECT_FALSE(c.linear_proj_bias);
  // position_embedding_type absent (the class's None): the attention layer does not rotate.
  EXPECT_EQ(c.nope_layers, (std::vector<int64_t>{2}));
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  nlohmann::json j = tiny();
  j["position_embedding_type"] = "rope";
  j["num_local_experts"] = 0;
  c = parse_model_config(j, "tiny.json");
  EXPECT_TRUE(c.nope_layers.empty());
  EXPECT_EQ(build_model(c)->get_submodule("model.rotary_emb").type_name(),
            "GraniteMoeHybridRotaryEmbedding");
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  // No layer_types: every layer is Mamba-2 (the class's default); the class's Mamba defaults.
  j = tiny();
  for (const char* k : {"layer_types", "mamba_n_heads", "mamba_n_groups", "mamba_d_state",
                        "mamba_d_conv", "mamba_expand"}) {
    j.erase(k);
  }
  j["hidden_size"] = 128;
  j["num_attention_heads"] = 4;
  c = parse_model_config(j, "tiny.json");
  EXPECT_EQ(c.layer_types, std::vector<AttentionType>(3, AttentionType::kLinear));
  EXPECT_EQ(c.linear_num_value_heads, 128);
  EXPECT_EQ(c.linear_value_head_dim, 2);  // 2 x 128 / 128
  EXPECT_EQ(c.linear_key_head_dim, 256);
  EXPECT_EQ(c.linear_num_key_heads, 1);

  auto refused = [](nlohmann::json bad, const std::string& what) {
    EXPECT_THAT([&] { (void)parse_model_config(bad, "tiny.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << bad.dump();
  };
  j = tiny();
  j["mamba_n_heads"] = 5;
  refused(j, "'mamba_n_heads': 5 does not divide mamba_expand x hidden_size = 128");
  j = tiny();
  j["mamba_d_head"] = 32;
  refused(j, "'mamba_d_head': 32 x mamba_n_heads 8 is not mamba_expand x hidden_size = 128");
  j = tiny();
  j["mamba_n_groups"] = 3;  // 8 heads in 3 groups
  refused(j, "'mamba_n_heads' (linear_num_value_heads): 8 is not a multiple of mamba_n_groups 3");
  j = tiny();
  j["mamba_expand"] = int64_t{1} << 60;
  refused(j,
          "'mamba_expand': 1152921504606846976 must be positive, with mamba_expand x "
          "hidden_size in int64");
  j = tiny();
  j["mamba_n_heads"] = 0;
  refused(j, "'mamba_n_heads': must be positive, got 0");
  j = tiny();
  j["position_embedding_type"] = "alibi";
  refused(j, "'position_embedding_type': 'alibi' is not a position encoding");
  j = tiny();
  j["shared_intermediate_size"] = 0;
  refused(j, "'shared_intermediate_size': must be positive");
  j = tiny();
  j["layer_types"] = {"mamba", "sliding_attention", "attention"};
  refused(j, "'layer_types': \"sliding_attention\" is not a layer type");
  j = tiny();
  j["mamba_d_state"] = 0;
  refused(j, "'mamba_d_state' (linear_key_head_dim): must be a positive integer");
  // A family without Mamba layers refuses their fields rather than ignore them.
  nlohmann::json llama = to_hf_json(find_model_config("llama3-8b"));
  llama["mamba_n_heads"] = 128;
  refused(llama, "'mamba_n_heads': 128 changes the architecture");
}

TEST(MambaModels, TracedWorkIsTheProjectionsAndTheFusedScan) {
  // One dense Mamba-2 layer, 100 tokens: the scan pads to one chunk of 256.
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  j["num_local_experts"] = 0;
  j["layer_types"] = {"mamba"};
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"));
  const OpGraph g = trace_model_forward(*m, 1, 100);
  const double T = 100, h = 64;
  // in_proj (328 outputs), out_proj (128 in), the shared MLP (96 out, 48 in), lm_head (1000).
  const double linears =
      2 * T * h * 328 + 2 * T * 128 * h + 2 * T * h * 96 + 2 * T * 48 * h + 2 * T * h * 1000;
  // Note [Mamba-2 scan work] at Q 256, P 16, N 16 on 256 padded tokens: per head 4 N P + P (Q +
  // 64) = 1,024 + 5,120; per group 2 Q N = 8,192; 8 heads, 2 groups.
  const double scan = 256 * (8 * (1024 + 5120) + 2 * 8192.0);
  EXPECT_DOUBLE_EQ(g.totals().matmul_flops, linears + scan);
  int scans = 0;
  for (const OpNode& n : g.nodes()) {
    if (n.op != "mamba_split_conv1d_scan_combined") continue;
    ++scans;
    EXPECT_EQ(n.module, "model.layers.0.mamba");
    EXPECT_DOUBLE_EQ(n.matmul_flops, scan);
    // The elementwise rest: the convolution over 192 channels (4 taps and the SiLU) and 12 per
    // d_inner channel, per token.
    EXPECT_DOUBLE_EQ(n.flops - n.matmul_flops, T * (192 * (2 * 4 + 4) + 12 * 128));
  }
  EXPECT_EQ(scans, 1);
}

TEST(MambaModels, BambaMatchesThePublishedTotalAndNames) {
  // Bamba-9B: V 128,256 untied, h 4,096, 32 layers, attention on 9, 18 and 27 (32 heads of 128, 8
  // kv heads), Mamba-2 elsewhere (128 heads of 64, one group of state 128), a gated MLP of
  // 14,336 in every layer: 9,780,235,392 ("9.78B").
  const int64_t V = 128256, h = 4096;
  const int64_t total = 2 * V * h + h + 29 * mamba_params({h, 128, 64, 1, 128, 4}) +
                        3 * attention_params(h, 32, 8, 128) + 32 * (3 * h * 14336 + 2 * h);
  EXPECT_EQ(total, 9'780'235'392);
  const ModelConfig c = find_model_config("bamba-9b");
  const ModulePtr m = build_model(c);
  EXPECT_EQ(m->parameters_numel(), total);
  // The file cannot change the rotated half (BambaConfig passes partial_rotary_factor 0.5).
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(parse_model_config(to_hf_json(c), "round trip"), c);
  std::vector<std::string> names;
  for (const auto& [name, t] : m->named_parameters()) {
    if (name.starts_with("model.layers.9.")) names.push_back(name.substr(15));
  }
  // feed_forward, the two norms, then the mixer.
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "feed_forward.gate_proj.weight", "feed_forward.up_proj.weight",
                "feed_forward.down_proj.weight", "input_layernorm.weight",
                "pre_ff_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                "self_attn.v_proj.weight", "self_attn.o_proj.weight"}));
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba").type_name(), "BambaMixer");
  EXPECT_EQ(m->get_submodule("model.layers.0.mamba.norm").type_name(), "BambaRMSNormGated");
  EXPECT_EQ(m->get_submodule("model.rotary_emb").type_name(), "BambaRotaryEmbedding");
  // BambaModel names its last norm final_layernorm (registered before rotary_emb).
  const std::vector<NamedTensor> all = m->named_parameters();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[all.size() - 2].name, "model.final_layernorm.weight");
  const LayerStack s = layer_stack(c);
  EXPECT_EQ(describe(s.kinds[0]), "linear dense");
  EXPECT_EQ(s.count(1), 3);
  nlohmann::json j = to_hf_json(c);
  j["attn_layer_indices"] = {9, 32};
  EXPECT_THAT(
      [&] { (void)parse_model_config(j, "bamba.json"); },
      ThrowsMessage<Error>(HasSubstr("'attn_layer_indices': 32 is not a layer, expected 0..31")));
}

// Note [Mamba-2 scan work] at Granite 4.0's P 64, N 128 and mamba_ssm's Q 256, per token, summed
// by hand from the kernels' products:
//   forward per head 4 x 8,192 (N P) + 64 x 320 (P (Q + 64)) = 53,248; per group 2 x 32,768;
//   backward per head 10 x 8,192 + 3 x 20,480 = 143,360; per group 4 x 32,768;
//   recompute per head 2 x 8,192; per group 2 x 32,768.
TEST(MambaModels, ScanWorkPerToken) {
  const ChunkedScanWork head = mamba_scan_work(1, 1, 64, 0, 128, 256);
  EXPECT_DOUBLE_EQ(head.forward, 53'248);
  EXPECT_DOUBLE_EQ(head.backward, 143'360);
  EXPECT_DOUBLE_EQ(head.recompute, 16'384);
  const ChunkedScanWork group = mamba_scan_work(1, 0, 64, 1, 128, 256);
  EXPECT_DOUBLE_EQ(group.forward, 65'536);
  EXPECT_DOUBLE_EQ(group.backward, 131'072);
  EXPECT_DOUBLE_EQ(group.recompute, 65'536);
  // Linear in tokens, heads and groups: granite-4.0-h-small's 128 heads in one group.
  EXPECT_DOUBLE_EQ(mamba_scan_work(4096, 128, 64, 1, 128, 256).forward,
                   4096.0 * (128 * 53'248 + 65'536));
  EXPECT_EQ(chunked_scan_chunk("mamba_split_conv1d_scan_combined"), 256);
  EXPECT_EQ(chunked_scan_chunk("chunk_gated_delta_rule"), 64);
  EXPECT_EQ(chunked_scan_chunk("linear"), 0);
}

TEST(MambaModels, TrainingSavesTheFusedInputsNormInputAndRstd) {
  nlohmann::json j = tiny();
  j["num_hidden_layers"] = 1;
  j["num_local_experts"] = 0;
  j["layer_types"] = {"mamba"};
  const ModulePtr m = build_model(parse_model_config(j, "tiny.json"),
                                  {.dtype = DType::kBFloat16, .training = true});
  TraceOptions opts;
  opts.batch = 2;
  opts.seq = 64;
  const TrainingStep st = trace_training_step(*m, opts);
  int found = 0;
  for (const TrainingOp& op : st.ops) {
    if (op.op != "mamba_split_conv1d_scan_combined") continue;
    ++found;
    ASSERT_EQ(op.outputs.size(), 2u);
    int64_t out_x = -1, rstd = -1, zxbcdt = -1;
    for (const SavedTensor& s : op.saved) {
      const int64_t bytes = s.tensor >= 0 ? st.tensors[static_cast<size_t>(s.tensor)].nbytes
                                          : st.buffers[static_cast<size_t>(s.buffer)].bytes;
      if (s.what == "out_x") out_x = bytes;
      if (s.what == "rstd") rstd = bytes;
      if (s.tensor == op.inputs[0]) zxbcdt = bytes;
    }
    // [2, 64, 8 x 16] bf16 before the norm; fp32 [2, 64, 2 groups]; zxbcdt [2, 64, 328] bf16.
    EXPECT_EQ(out_x, 2 * 64 * 128 * 2);
    EXPECT_EQ(rstd, 2 * 64 * 2 * 4);
    EXPECT_EQ(zxbcdt, 2 * 64 * 328 * 2);
    // 2 x 256 padded tokens. Backward per head 10 N P + 3 P (Q + 64) = 2,560 + 15,360, per group
    // 4 Q N = 16,384; recompute per head 2 N P = 512, per group 2 Q N = 8,192.
    EXPECT_DOUBLE_EQ(op.backward_matmul_flops, 512.0 * (8 * 17'920 + 2 * 16'384));
    EXPECT_DOUBLE_EQ(op.recompute_flops, 512.0 * (8 * 512 + 2 * 8'192));
  }
  EXPECT_EQ(found, 1);
}

TEST(MambaModels, ScanOpChecksItsOperands) {
  const TensorOptions o{};
  const Tensor zx = empty({1, 4, 328}, o), w = empty({192, 1, 4}, o), bias = empty({192}, o);
  const Tensor heads = empty({8}, o), norm = empty({128}, o);
  EXPECT_EQ(mamba_split_conv1d_scan_combined(zx, w, bias, heads, heads, heads, norm, 2).sizes(),
            (DimVector{1, 4, 8, 16}));
  EXPECT_THAT(
      [&] { (void)mamba_split_conv1d_scan_combined(zx, w, bias, heads, heads, heads, norm, 3); },
      ThrowsMessage<Error>(HasSubstr("ngroups 3 must be positive and divide the heads 8")));
  EXPECT_THAT(
      [&] {
        (void)mamba_split_conv1d_scan_combined(empty({1, 4, 300}, o), w, bias, heads, heads, heads,
                                               norm, 2);
      },
      ThrowsMessage<Error>(HasSubstr("expected 328 channels = d_inner + conv_dim + heads")));
  EXPECT_THAT(
      [&] {
        (void)mamba_split_conv1d_scan_combined(zx, w, empty({100}, o), heads, heads, heads, norm,
                                               2);
      },
      ThrowsMessage<Error>(HasSubstr("expected the convolution bias as [192]")));
}

}  // namespace
}  // namespace shardplan::tensor
