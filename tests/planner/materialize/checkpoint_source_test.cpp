// CheckpointSource reading checkpoints whose names are not the model's: a Mixtral saved as the
// Hub stores it (each expert's w1, w3 and w2 apart, the router under block_sparse_moe), alone and
// as the language model of a multimodal checkpoint (Note [Multimodal checkpoints] and Note
// [Experts stored one by one] in tensor/safetensors_check.cpp). Every tensor element of the file
// holds its own bit pattern, and every element of every rank's shards is checked against the
// element transformers 5 puts there: gate_up_proj[e, r, c] is expert e's w1[r, c] for r < F and
// its w3[r - F, c] after; down_proj[e] is its w2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/materialize/layout.h"
#include "planner/materialize/parameter_source.h"
#include "planner/materialize/shards.h"
#include "tensor/models/model_config.h"
#include "tensor/safetensors.h"
#include "tests/planner/materialize/tiny_llama.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::planner {
namespace {

namespace fs = std::filesystem;
using tensor::test::StEntry;

constexpr int64_t kHidden = 16, kFfn = 8, kExperts = 4, kVocab = 32;

tensor::ModelConfig tiny_mixtral() {
  return tensor::parse_model_config(nlohmann::json::parse(R"({
    "model_type": "mixtral", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 64, "num_local_experts": 4, "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16", "tie_word_embeddings": false})"),
                                    "tiny mixtral");
}

// The bits of element k of the file's tensor number j: distinct for every (j, k) here (j < 64,
// k < 1000).
uint16_t bits(size_t j, int64_t k) { return static_cast<uint16_t>(j * 1000 + k); }

// The Hub's names of a Mixtral state_dict, the language model's under `model` and `head` (a
// multimodal checkpoint), with `extra` tensors beside it.
std::vector<StEntry> hub_mixtral(const std::string& model, const std::string& head,
                                 const std::vector<StEntry>& extra) {
  std::vector<StEntry> e = {{model + "embed_tokens.weight", "BF16", {kVocab, kHidden}},
                            {model + "norm.weight", "BF16", {kHidden}},
                            {head + "weight", "BF16", {kVocab, kHidden}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = model + "layers." + std::to_string(l) + ".";
    e.push_back({p + "self_attn.q_proj.weight", "BF16", {kHidden, kHidden}});
    e.push_back({p + "self_attn.k_proj.weight", "BF16", {kHidden / 2, kHidden}});
    e.push_back({p + "self_attn.v_proj.weight", "BF16", {kHidden / 2, kHidden}});
    e.push_back({p + "self_attn.o_proj.weight", "BF16", {kHidden, kHidden}});
    e.push_back({p + "input_layernorm.weight", "BF16", {kHidden}});
    e.push_back({p + "post_attention_layernorm.weight", "BF16", {kHidden}});
    e.push_back({p + "block_sparse_moe.gate.weight", "BF16", {kExperts, kHidden}});
    for (int64_t x = 0; x < kExperts; ++x) {
      const std::string ex = p + "block_sparse_moe.experts." + std::to_string(x) + ".";
      e.push_back({ex + "w1.weight", "BF16", {kFfn, kHidden}});
      e.push_back({ex + "w3.weight", "BF16", {kFfn, kHidden}});
      e.push_back({ex + "w2.weight", "BF16", {kHidden, kFfn}});
    }
  }
  e.insert(e.end(), extra.begin(), extra.end());
  return e;
}

// Writes `entries` back to back, element k of entry j holding bits(j, k).
void write_checkpoint(const fs::path& path, const std::vector<StEntry>& entries) {
  const tensor::test::StHeader h = tensor::test::make_header(entries);
  std::string data;
  for (size_t j = 0; j < entries.size(); ++j) {
    int64_t n = 1;
    for (const int64_t d : entries[j].shape) n *= d;
    for (int64_t k = 0; k < n; ++k) {
      const uint16_t b = bits(j, k);
      data.push_back(static_cast<char>(b & 0xff));
      data.push_back(static_cast<char>(b >> 8));
    }
  }
  ASSERT_EQ(static_cast<int64_t>(data.size()), h.data_bytes);
  tensor::test::write_bytes(path, tensor::test::length_prefixed(h.json).append(data));
}

// The file's element that belongs at `global` (a multi-index) of model parameter `name`.
uint16_t expected_bits(const std::vector<StEntry>& entries, const std::string& model,
                       const std::string& head, const std::string& name,
                       const std::vector<int64_t>& global) {
  auto index_of = [&](const std::string& n) {
    for (size_t j = 0; j < entries.size(); ++j) {
      if (entries[j].name == n) return j;
    }
    ADD_FAILURE() << "no file tensor " << n;
    return size_t{0};
  };
  std::string n = name;
  if (n.starts_with("model.")) n = model + n.substr(6);
  if (n.starts_with("lm_head.")) n = head + n.substr(8);
  const size_t at = n.find(".mlp.");
  if (at != std::string::npos) {
    const std::string moe = n.substr(0, at) + ".block_sparse_moe.";
    if (n.ends_with("mlp.gate.weight"))
      return bits(index_of(moe + "gate.weight"), global[0] * kHidden + global[1]);
    const std::string ex = moe + "experts." + std::to_string(global[0]) + ".";
    const int64_t r = global[1], c = global[2];
    if (n.ends_with("gate_up_proj")) {
      return r < kFfn ? bits(index_of(ex + "w1.weight"), r * kHidden + c)
                      : bits(index_of(ex + "w3.weight"), (r - kFfn) * kHidden + c);
    }
    return bits(index_of(ex + "w2.weight"), r * kFfn + c);  // down_proj [E, H, F]
  }
  const size_t j = index_of(n);
  int64_t k = 0;
  for (size_t d = 0; d < global.size(); ++d) k = k * entries[j].shape[d] + global[d];
  return bits(j, k);
}

// The global index along one dim of local index i: the i-th element of the ranges, in order.
int64_t global_along(const std::vector<mesh::IndexRange>& ranges, int64_t i) {
  for (const mesh::IndexRange& r : ranges) {
    if (i < r.size()) return r.begin + i;
    i -= r.size();
  }
  ADD_FAILURE() << "local index beyond the part";
  return 0;
}

struct Layout {
  const char* what;
  std::string model, head;
  std::vector<StEntry> extra;
};

class CheckpointSourceTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void TearDown() override { fs::remove(path_); }
  fs::path path_ = fs::temp_directory_path() /
                   ("shardplan_cksource_" + std::to_string(::getpid()) + ".safetensors");
};

TEST_P(CheckpointSourceTest, HubMixtralLoadsEveryElementIntoItsPlace) {
  const int64_t tp = GetParam();
  const MaterialLayout l(testing::pinned_plan(tiny_mixtral(), "tiny mixtral",
                                              {.tp = tp, .pp = 1, .dp = 1, .seq = 32}));
  const std::vector<Layout> layouts = {
      {"the Hub's Mixtral", "model.", "lm_head.", {}},
      {"a multimodal checkpoint before transformers 4.52",
       "language_model.model.",
       "language_model.lm_head.",
       {{"vision_tower.patch_embed.weight", "BF16", {4, 3}},
        {"multi_modal_projector.linear.weight", "BF16", {16, 4}}}},
      {"a multimodal checkpoint of transformers 4.52 on",
       "model.language_model.",
       "lm_head.",
       {{"model.vision_tower.patch_embed.weight", "BF16", {4, 3}}}},
  };
  for (const Layout& lay : layouts) {
    SCOPED_TRACE(lay.what);
    const std::vector<StEntry> entries = hub_mixtral(lay.model, lay.head, lay.extra);
    write_checkpoint(path_, entries);
    CheckpointSource source(l, tensor::read_checkpoint(path_));
    const std::unique_ptr<ShardMemory> host = host_shard_memory();
    int64_t checked = 0, bytes = 0;
    for (int64_t rank = 0; rank < l.world_size(); ++rank) {
      RankShards s = allocate_shards(l, rank, *host);
      init_shards(l, s, source);
      bytes += s.bytes;
      for (size_t p = 0; p < s.parts.size(); ++p) {
        const LocalParameter& part = s.parts[p];
        const std::string& name = l.parameters()[part.index].plan->name;
        const auto* data = reinterpret_cast<const uint16_t*>(s.data[p]);
        std::vector<int64_t> local(part.local_shape.size(), 0);
        for (int64_t i = 0; i < part.numel; ++i) {
          std::vector<int64_t> global(local.size());
          for (size_t d = 0; d < local.size(); ++d)
            global[d] = global_along(part.ranges[d], local[d]);
          const uint16_t want = expected_bits(entries, lay.model, lay.head, name, global);
          if (data[i] != want) {
            ADD_FAILURE() << "rank " << rank << " '" << name << "' element " << i << ": " << data[i]
                          << ", expected " << want;
            break;
          }
          ++checked;
          for (size_t d = local.size(); d-- > 0;) {
            if (++local[d] < part.local_shape[d]) break;
            local[d] = 0;
          }
        }
      }
    }
    // Every rank's every element (replicated ones on each rank), read from storage once each.
    EXPECT_EQ(checked * 2, bytes);
    EXPECT_EQ(source.bytes_read(), bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Tp, CheckpointSourceTest, ::testing::Values(int64_t{1}, int64_t{2}));

// The Hub's Mixtral under a prefix the model has no name for: refused before a byte is read,
// naming a parameter the checkpoint lacks.
TEST_F(CheckpointSourceTest, UnknownPrefixIsRefusedNamingTheParameter) {
  const MaterialLayout l(testing::pinned_plan(tiny_mixtral(), "tiny mixtral", {.seq = 32}));
  write_checkpoint(path_, hub_mixtral("backbone.model.", "backbone.lm_head.", {}));
  try {
    CheckpointSource source(l, tensor::read_checkpoint(path_));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no tensor 'model.embed_tokens.weight'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardplan::planner
