// The report of `shardplan inspect --model` as data (planner/reports/model_report.h); the CLI
// prints it.
#include "planner/reports/model_report.h"

#include <algorithm>
#include <map>
#include <string>

#include "base/error.h"
#include "tensor/models/family.h"
#include "tensor/models/layer_kinds.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"
#include "tensor/training.h"

namespace shardplan::planner {
namespace {

using nlohmann::ordered_json;
using namespace shardplan::tensor;

// Rows of the module table: the root's and the backbone's direct children, and the first decoder
// layer of each layer kind with its direct children, standing for the layers of that kind
// (tensor/models/layer_kinds.h: layers of one kind are identical; a uniform model has one).
// ModuleLists are containers and skipped.
ordered_json module_rows(const Module& root, const OpGraph& g, const ModelConfig& c,
                         double tokens) {
  const std::string layers = layers_path(c);
  const std::string backbone = layers.substr(0, layers.find('.'));
  const LayerStack stack = layer_stack(c);
  std::map<std::string, int64_t> first_of_kind;  // "model.layers.3" -> layers of its kind
  for (int32_t k = 0; k < static_cast<int32_t>(stack.kinds.size()); ++k) {
    first_of_kind[layers + "." + std::to_string(stack.first_layer(k))] = stack.count(k);
  }
  const auto depth = [](const std::string& s) {
    return s.empty() ? 0 : 1 + static_cast<int>(std::count(s.begin(), s.end(), '.'));
  };
  const int layer_depth = depth(layers) + 1;
  ordered_json rows = ordered_json::array();
  for (const NamedModule& nm : root.named_modules()) {
    const std::string& n = nm.name;
    // The layer this module sits in, when it is one a row stands for.
    int64_t count = 1;
    bool in_shown_layer = false;
    if (n.rfind(layers + ".", 0) == 0) {
      const size_t end = n.find('.', layers.size() + 1);
      const auto it = first_of_kind.find(n.substr(0, end));
      in_shown_layer = it != first_of_kind.end();
      if (in_shown_layer) count = it->second;
    }
    const bool top = depth(n) <= 1 || (n.rfind(backbone + ".", 0) == 0 && depth(n) == 2);
    const bool shown =
        in_shown_layer ? depth(n) <= layer_depth + 1 : top && n.rfind(layers, 0) != 0;
    if (!shown || nm.module->type_name() == "ModuleList") continue;
    auto it = g.module_totals().find(n);
    const double flops = it == g.module_totals().end() ? 0 : it->second.flops;
    ordered_json r;
    r["module"] = n.empty() ? "(model)" : n;
    r["type"] = nm.module->type_name();
    r["count"] = count;
    r["parameters"] = nm.module->parameters_numel();
    r["forward_flops_per_token"] = flops / tokens;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

ordered_json model_report(const ModelReportOptions& opts) {
  SP_CHECK(!opts.seq || *opts.seq > 0, "--seq ", opts.seq.value_or(0),
           ": expected a positive number of tokens");
  SP_CHECK(opts.batch > 0, "--batch ", opts.batch, ": expected a positive number of sequences");
  // A name, a config.json, or a checkpoint with its config.json (tensor/models/model_source.h).
  const ModelSource src = find_model_source(opts.model);
  const std::filesystem::path& path = src.config_path;
  const ModelConfig& cfg = src.config;
  // A default must never make the plain command fail: the model's own positions, capped.
  const int64_t seq = opts.seq.value_or(cfg.max_position_embeddings > 0
                                            ? std::min(cfg.max_position_embeddings, kDefaultSeqCap)
                                            : kDefaultSeqCap);
  const ModelReportOptions& o = opts;
  // A table of learned positions (GPT-2's wpe) has no row beyond max_position_embeddings.
  const ModelFamily& family = family_of(cfg);
  SP_CHECK(!family.learned_positions || seq <= cfg.max_position_embeddings, "--seq ", seq, ": ",
           o.model, " has learned positions up to ", family.file_key("max_position_embeddings"),
           " ", cfg.max_position_embeddings);
  // Every activation is tokens x a width of the model (the logits: x vocab, the MLP: x
  // intermediate): a batch x seq whose widest would not fit a 64-bit byte count is refused here,
  // naming the flags, rather than by an op deep in the trace.
  const double tokens = static_cast<double>(o.batch) * static_cast<double>(seq);
  const double widest =
      static_cast<double>(std::max({cfg.vocab_size, cfg.intermediate_size, 3 * cfg.hidden_size,
                                    cfg.num_attention_heads * cfg.head_dim}));
  SP_CHECK(tokens * widest * 8 < 9.2e18, "--batch ", o.batch, " x --seq ", seq,
           " tokens: activations of tokens x ", static_cast<int64_t>(widest),
           " elements would exceed 2^63 bytes (int64), expected a smaller --batch or --seq");
  const ModulePtr model = build_model(cfg);
  const OpGraph g = trace_model_forward(*model, o.batch, seq);

  ordered_json r;
  r["model"] = o.model;
  r["model_type"] = cfg.model_type;
  r["architecture"] = model->type_name();
  r["config"] = path.string();
  if (src.checkpoint) {
    // Checked loadable by find_model_source; its element count is the model's minus tied names
    // the checkpoint omits (Hugging Face saves a tied lm_head once).
    r["checkpoint"] = {{"path", src.checkpoint->source.string()},
                       {"files", src.checkpoint->files.size()},
                       {"tensors", src.checkpoint->tensors.size()},
                       {"parameters", src.checkpoint->numel()},
                       {"bytes", src.checkpoint->nbytes()}};
    // Note [Multimodal checkpoints] (tensor/safetensors_check.cpp): the counts above include
    // the tensors outside the language model, which are not modelled.
    if (!src.check.language_model_prefix.empty()) {
      r["checkpoint"]["language_model_prefix"] = src.check.language_model_prefix;
      r["checkpoint"]["outside_language_model"] = src.check.outside_language_model.size();
    }
  }
  r["seq"] = seq;
  r["seq_is_default"] = !opts.seq.has_value();
  r["batch"] = o.batch;
  r["parameters"] = model->parameters_numel();
  const auto kinds = parameters_by_kind(*model);
  r["parameters_by_kind"] = kinds;
  r["embedding_parameters"] = kinds.count("embedding") ? kinds.at("embedding") : 0;
  r["active_parameters"] = active_parameters(*model, cfg);  // per token: top-k of the experts
  // Beside transformers' count: the routers' score-bias buffers and the multi-token prediction
  // modules, each reported on its own (the published totals name them: DeepSeek-V3's 671 B
  // counts the buffers, its 685 B adds the MTP module with its own copies of embedding and head).
  const ParametersBeyondModel beyond = parameters_beyond_model(cfg);
  if (beyond.router_bias > 0) {
    r["parameters_with_router_bias"] = model->parameters_numel() + beyond.router_bias;
  }
  if (beyond.mtp > 0) r["mtp_parameters"] = beyond.mtp;
  // The decoder layers as a stack of kinds (tensor/models/layer_kinds.h), in order of first
  // appearance: what the planner traces one layer of each.
  const LayerStack stack = layer_stack(cfg);
  ordered_json layers = ordered_json::array();
  for (size_t k = 0; k < stack.kinds.size(); ++k) {
    const auto kind = static_cast<int32_t>(k);
    layers.push_back({{"kind", describe(stack.kinds[k])},
                      {"layers", stack.count(kind)},
                      {"first_layer", stack.first_layer(kind)}});
  }
  r["layer_stack"] = layers;
  std::map<std::string, int64_t> by_dtype;
  for (const NamedTensor& p : model->named_parameters()) {
    by_dtype[std::string(dtype_name(p.tensor.dtype()))] += p.tensor.nbytes();
  }
  r["bytes_by_dtype"] = by_dtype;
  r["bytes"] = model->parameters_nbytes();
  // Forward FLOPs of the traced ops; fwd+bwd is the usual 3x (backward = 2x forward).
  r["flops_per_token"] = g.totals().flops / tokens;
  r["flops_per_token_detail"] = {{"forward", g.totals().flops / tokens},
                                 {"forward_matmul", g.totals().matmul_flops / tokens},
                                 {"forward_backward_3x", 3 * g.totals().flops / tokens}};
  // Activations of one training step (tensor/training.h): the model built with its dropout,
  // flash attention, loss included; per recomputation policy.
  BuildOptions build;
  build.training = true;
  const ModulePtr train = build_model(cfg, build);
  ordered_json acts;
  for (RecomputePolicy p :
       {RecomputePolicy::kNone, RecomputePolicy::kSelective, RecomputePolicy::kFull}) {
    TraceOptions trace;
    trace.batch = o.batch;
    trace.seq = seq;
    trace.recompute = p;
    const TrainingStep st = trace_training_step(*train, trace);
    acts[std::string(to_string(p))] = st.totals.activation_bytes;
    if (p == RecomputePolicy::kNone) {
      r["activation_bytes"] = st.totals.activation_bytes;
      r["flops_per_token_detail"]["training_model_flops"] = st.totals.model_flops() / tokens;
    }
  }
  r["activation_bytes_by_recompute"] = acts;
  ordered_json notes = ordered_json::array();
  if (const std::string method = config_quantization_method(path); !method.empty()) {
    r["quantization_method"] = method;
    notes.push_back("the config's checkpoint stores weights quantized (quantization_config " +
                    method + "); bytes here are in torch_dtype, " +
                    std::string(dtype_name(cfg.torch_dtype)) +
                    " (float32 when the file states none), not the file's; counts are the same");
  }
  if (!cfg.multimodal_model_type.empty()) {
    r["multimodal_model_type"] = cfg.multimodal_model_type;
    notes.push_back(multimodal_note(cfg));
  }
  if (!opts.seq) {
    notes.push_back("seq " + std::to_string(seq) + " by default: the model's maximum positions (" +
                    std::to_string(cfg.max_position_embeddings) + ") capped at " +
                    std::to_string(kDefaultSeqCap) + "; --seq sets it");
  }
  notes.push_back(
      "flops_per_token: traced forward only, all ops; forward_backward_3x is the 3x "
      "convention; training_model_flops is the traced training step (fwd + bwd + loss)");
  notes.push_back(
      "attention counted in full (s^2, the causal mask skips no counted work); sliding-window and "
      "chunked layers count their window of keys per query");
  notes.push_back(
      "activation_bytes: saved for backward in one training step of batch x seq, "
      "flash attention, config dropout, " +
      std::string(dtype_name(cfg.torch_dtype)) + " activations");
  if (cfg.num_local_experts > 0) {
    notes.push_back(
        "MoE: capacity-free expected load, every expert on tokens * k / experts tokens");
  }
  r["notes"] = notes;
  r["modules"] = module_rows(*model, g, cfg, tokens);
  return r;
}

}  // namespace shardplan::planner
