// What the model-family tests share: the parameter names (and shapes) under a module, the ops a
// traced module runs, and a model's fused
// routed experts written as the Hub's files store them, one tensor per expert and projection.
//   EXPECT_EQ(names_under(*m, "model.layers.0."), (std::vector<std::string>{"self_attn...."}));
//   append_experts_one_by_one(entries, "model.layers.1.block_sparse_moe", p.name, shape,
//                             {"w1", "w3", "w2"});
#pragma once

#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/models/model_source.h"
#include "tensor/module.h"
#include "tensor/op_graph.h"
#include "tests/tensor/safetensors_test_support.h"

namespace shardplan::tensor::test {

// The names of m's parameters under `prefix`, the prefix cut, in named_parameters order.
inline std::vector<std::string> names_under(const Module& m, const std::string& prefix) {
  std::vector<std::string> out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (p.name.starts_with(prefix)) out.push_back(p.name.substr(prefix.size()));
  }
  return out;
}

// The names (prefix cut) and shapes of m's parameters under `prefix`, in named_parameters order.
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
inline Shapes shapes_under(const Module& m, const std::string& prefix) {
  Shapes out;
  for (const NamedTensor& p : m.named_parameters()) {
    if (!p.name.starts_with(prefix)) continue;
    out.emplace_back(p.name.substr(prefix.size()),
                     std::vector<int64_t>(p.tensor.sizes().begin(), p.tensor.sizes().end()));
  }
  return out;
}

// Ops named `op` in a traced graph run by the module `module` itself (not its children), and by
// `module_prefix` and everything under it.
inline int64_t ops_in(const OpGraph& g, const std::string& op, const std::string& module) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op && node.module == module;
  return n;
}
inline int64_t ops_under(const OpGraph& g, const std::string& op,
                         const std::string& module_prefix) {
  int64_t n = 0;
  for (const OpNode& node : g.nodes()) n += node.op == op && node.module.starts_with(module_prefix);
  return n;
}

// What the checkpoint check says of a folder holding `config` and one model.safetensors in which
// every parameter of `model` is stored under stored_name(its name) (an empty name: not stored),
// and the `extra` tensors: how a family's Hub names (transformers 4's, a backbone prefix, experts
// one by one) fit the model.
inline ModelSource check_stored_as(
    const nlohmann::json& config, const Module& model,
    const std::function<std::string(const std::string&)>& stored_name,
    std::vector<StEntry> extra = {}) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("shardplan_stored_as_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(1);
  for (const NamedTensor& t : model.named_parameters()) {
    if (stored_name(t.name).empty()) continue;
    extra.push_back({stored_name(t.name), "BF16",
                     std::vector<int64_t>(t.tensor.sizes().begin(), t.tensor.sizes().end())});
  }
  const StHeader h = make_header(extra);
  write_bytes(dir / "model.safetensors", file_bytes(h.json, h.data_bytes));
  ModelSource src = find_model_source(dir.string());
  fs::remove_all(dir);
  return src;
}

// Note [Experts stored one by one] in tensor/safetensors_check.cpp: the fused tensor `name`
// ("...experts.gate_up_proj" [E, 2F, h] or "...experts.down_proj" [E, h, F]) as E tensors per
// projection, "<stored_block>.experts.<e>.<proj>.weight", `proj` naming the gate, up and down
// projections as the checkpoint does (Mixtral's and MiniMax-M2's Hub files: w1, w3, w2).
inline void append_experts_one_by_one(std::vector<StEntry>& out, const std::string& stored_block,
                                      std::string_view name, const std::vector<int64_t>& shape,
                                      const std::array<std::string, 3>& proj,
                                      const std::string& dtype = "BF16") {
  for (int64_t e = 0; e < shape[0]; ++e) {
    const std::string stem = stored_block + ".experts." + std::to_string(e) + ".";
    if (name.ends_with("down_proj")) {
      out.push_back({stem + proj[2] + ".weight", dtype, {shape[1], shape[2]}});
    } else {
      out.push_back({stem + proj[0] + ".weight", dtype, {shape[1] / 2, shape[2]}});
      out.push_back({stem + proj[1] + ".weight", dtype, {shape[1] / 2, shape[2]}});
    }
  }
}

}  // namespace shardplan::tensor::test
