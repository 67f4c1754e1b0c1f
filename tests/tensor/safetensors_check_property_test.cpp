// match_checkpoint on thousands of random checkpoints: a tiny Mixtral's tensors saved in the forms
// real checkpoints take (per-expert slices under Mixtral's or Qwen's names, a multimodal prefix,
// quantized stand-ins and scales, a prediction layer), then mutated (a tensor dropped, a shape
// changed, a stranger added, a slice saved twice, a fused tensor beside its slices, a second
// stand-in). Whatever the input, the report accounts for
// every checkpoint tensor exactly once, every part list holds exactly its model tensor's
// elements, and a loadable checkpoint gives every model tensor its bytes or says it is quantized.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tensor/models/model_config.h"
#include "tensor/models/models.h"
#include "tensor/module.h"
#include "tensor/safetensors.h"

namespace shardplan::tensor {
namespace {

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

ModelConfig tiny_mixtral() {
  return parse_model_config(nlohmann::json::parse(R"({
    "model_type": "mixtral", "vocab_size": 40, "hidden_size": 32, "intermediate_size": 16,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 64, "num_local_experts": 3, "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16", "tie_word_embeddings": false})"),
                            "tiny mixtral");
}

// The model's state_dict in one of the saved forms.
std::vector<Entry> saved(const Module& model, std::mt19937& rng) {
  const bool mixtral_names = rng() % 2 == 0;
  const int quant = static_cast<int>(rng() % 3);  // none, 4-bit packed experts, fp8 scales
  std::vector<Entry> out;
  for (const NamedTensor& t : model.named_parameters()) {
    const std::vector<int64_t> shape(t.tensor.sizes().begin(), t.tensor.sizes().end());
    const std::string& n = t.name;
    if (n.ends_with("experts.gate_up_proj") || n.ends_with("experts.down_proj")) {
      if (rng() % 4 == 0) {  // saved fused, as transformers 5 saves it
        out.push_back({n, DType::kBFloat16, shape});
        continue;
      }
      const std::string layer = n.substr(0, n.find(".mlp.") + 1);
      const std::string moe = layer + (mixtral_names ? "block_sparse_moe." : "mlp.");
      for (int64_t e = 0; e < shape[0]; ++e) {
        const std::string ex = moe + "experts." + std::to_string(e) + ".";
        std::vector<std::pair<std::string, std::vector<int64_t>>> slices;
        if (n.ends_with("down_proj")) {
          slices.push_back({mixtral_names ? "w2" : "down_proj", {shape[1], shape[2]}});
        } else {
          slices.push_back({mixtral_names ? "w1" : "gate_proj", {shape[1] / 2, shape[2]}});
          slices.push_back({mixtral_names ? "w3" : "up_proj", {shape[1] / 2, shape[2]}});
        }
        for (const auto& [proj, s] : slices) {
          const std::string w = ex + proj + ".weight";
          if (quant == 1) {
            out.push_back({w + "_packed", DType::kInt32, {s[0], s[1] / 8}});
            out.push_back({w + "_scale", DType::kBFloat16, {s[0], 1}});
          } else {
            out.push_back({w, DType::kBFloat16, s});
            if (quant == 2) out.push_back({w + "_scale_inv", DType::kFloat32, {1, 1}});
          }
        }
      }
      continue;
    }
    std::string name = n;
    if (mixtral_names && n.ends_with("mlp.gate.weight")) {
      name = n.substr(0, n.find(".mlp.")) + ".block_sparse_moe.gate.weight";
    }
    out.push_back({name, DType::kBFloat16, shape});
  }
  if (rng() % 3 == 0) {  // a prediction layer after the last
    out.push_back({"model.layers.2.eh_proj.weight", DType::kBFloat16, {32, 64}});
  }
  if (rng() % 3 == 0) {  // a multimodal checkpoint, in either layout
    const bool old = rng() % 2 == 0;
    for (Entry& e : out) {
      if (e.name.starts_with("model.")) {
        e.name = (old ? "language_model.model." : "model.language_model.") + e.name.substr(6);
      } else if (e.name.starts_with("lm_head.") && old) {
        e.name = "language_model." + e.name;
      }
    }
    out.push_back({old ? "vision_tower.patch.weight" : "model.vision_tower.patch.weight",
                   DType::kFloat32,
                   {4, 3}});
  }
  return out;
}

void mutate(std::vector<Entry>& e, std::mt19937& rng) {
  const int n = static_cast<int>(rng() % 4);
  for (int k = 0; k < n && !e.empty(); ++k) {
    Entry& pick = e[rng() % e.size()];
    switch (rng() % 7) {
      case 0:
        pick = e.back();
        e.pop_back();
        break;
      case 1:
        if (!pick.shape.empty()) pick.shape[rng() % pick.shape.size()] += 1;
        break;
      case 2:
        e.push_back({pick.name + (rng() % 2 ? "_scale" : ".stray"), DType::kFloat32, {2}});
        break;
      case 3: {  // the same tensor under a second name (w1 beside gate_proj, say)
        Entry twin = pick;
        for (const auto& [a, b] : {std::pair{"w1", "gate_proj"},
                                   {"gate_proj", "w1"},
                                   {"block_sparse_moe", "mlp"},
                                   {"mlp", "block_sparse_moe"}}) {
          const size_t at = twin.name.find(a);
          if (at != std::string::npos) {
            twin.name.replace(at, std::string(a).size(), b);
            break;
          }
        }
        e.push_back(twin);
        break;
      }
      case 4: {  // a fused expert tensor stored whole beside (or instead of) its slices
        const bool down = rng() % 2 == 0;
        e.push_back({std::string("model.layers.") + (rng() % 2 ? "0" : "1") + ".mlp.experts." +
                         (down ? "down_proj" : "gate_up_proj"),
                     DType::kBFloat16,
                     down ? std::vector<int64_t>{3, 32, 16} : std::vector<int64_t>{3, 32, 32}});
        break;
      }
      case 5: {  // a second stand-in for a packed tensor
        const size_t at = pick.name.find(".weight_packed");
        if (at != std::string::npos) {
          e.push_back({pick.name.substr(0, at) + ".qweight", DType::kInt32, pick.shape});
        }
        break;
      }
      default:
        pick.dtype = DType::kFloat32;
    }
  }
}

Checkpoint in_memory(std::vector<Entry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) { return a.name == b.name; }),
                entries.end());
  Checkpoint ck;
  ck.files.resize(1);
  int64_t offset = 0;
  for (const Entry& e : entries) {
    CheckpointTensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = DimVector(e.shape);
    int64_t numel = 1;
    for (const int64_t d : e.shape) numel *= d;
    t.offset = offset;
    t.nbytes = numel * static_cast<int64_t>(itemsize(e.dtype));
    offset += t.nbytes;
    ck.tensors.push_back(std::move(t));
  }
  return ck;
}

TEST(CheckCheckpointProperty, EveryTensorAccountedOnceAndEveryPartListWhole) {
  const ModulePtr model = build_model(tiny_mixtral());
  std::vector<NamedTensor> expected = model->named_parameters({.remove_duplicate = false});
  const CheckpointExpectations expect{.beyond_model_prefixes = {"model.layers.2."},
                                      .quant_method = "compressed-tensors"};
  std::mt19937 rng(20261128);
  int loadable = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::vector<Entry> e = saved(*model, rng);
    mutate(e, rng);
    const Checkpoint ck = in_memory(e);
    const CheckpointMatch m = match_checkpoint(ck, *model, expect);
    const CheckpointReport& r = m.report;
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    const size_t accounted = static_cast<size_t>(r.matched) + r.unexpected.size() +
                             r.outside_language_model.size() + r.beyond_model.size() +
                             r.buffers.size() + r.quantization_tensors.size() +
                             r.shape_mismatches.size();
    ASSERT_EQ(accounted, ck.tensors.size());
    std::set<std::string> listed;
    for (const auto* list : {&r.unexpected, &r.outside_language_model, &r.beyond_model, &r.buffers,
                             &r.quantization_tensors}) {
      for (const std::string& n : *list) ASSERT_TRUE(listed.insert(n).second) << n;
    }
    for (const NamedTensor& t : expected) {
      const std::vector<size_t>* parts = m.parts_of(t.name);
      const bool quantized =
          std::binary_search(r.stored_quantized.begin(), r.stored_quantized.end(), t.name);
      if (parts) {
        ASSERT_FALSE(quantized) << t.name;
        int64_t numel = 0;
        for (const size_t i : *parts) {
          ASSERT_LT(i, ck.tensors.size());
          ASSERT_EQ(listed.count(ck.tensors[i].name), 0U) << ck.tensors[i].name;
          int64_t n = 1;
          for (const int64_t d : ck.tensors[i].shape) n *= d;
          numel += n;
        }
        ASSERT_EQ(numel, t.tensor.numel()) << t.name;
      } else if (r.loadable()) {
        ASSERT_TRUE(quantized) << t.name << " has no bytes in a loadable checkpoint";
      }
    }
    loadable += r.loadable() ? 1 : 0;
  }
  // Both outcomes occur often enough for the properties to mean something.
  EXPECT_GT(loadable, 300);
  EXPECT_LT(loadable, 2700);
}

}  // namespace
}  // namespace shardplan::tensor
