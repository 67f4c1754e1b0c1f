#include "tensor/models/model_source.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>

#include "base/config_paths.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/strict_json.h"
#include "tensor/models/family.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::tensor {
namespace fs = std::filesystem;

bool names_a_checkpoint(std::string_view name_or_path) {
  const std::string_view s = name_or_path;
  if (s.ends_with(".safetensors") || s.ends_with(".safetensors.index.json")) return true;
  std::error_code ec;
  // Any existing folder, "sharded" as well as "./sharded": like Hugging Face's from_pretrained, a
  // local folder wins over a shipped config of the same name.
  return !s.empty() && fs::is_directory(fs::path(s), ec);
}

namespace {

// One line for the first finding of a failed check, counts for the rest.
std::string first_finding(const CheckpointReport& r) {
  const size_t more = r.missing.size() + r.unexpected.size() + r.shape_mismatches.size() - 1;
  std::string what;
  if (!r.missing_slices.empty()) {
    // A fused expert tensor stored one by one: name the slice the file lacks.
    what = "tensor '" + r.missing_slices.front() +
           "' (one expert's slice of a fused tensor of the model) is missing";
  } else if (!r.missing.empty()) {
    what = "tensor '" + r.missing.front() + "' of the model is missing";
  } else if (!r.unexpected.empty()) {
    what = "tensor '" + r.unexpected.front() + "' is not in the model";
  } else {
    const CheckpointReport::Mismatch& m = r.shape_mismatches.front();
    std::ostringstream os;
    os << "tensor '" << m.name << "' has shape " << m.actual_shape << ", the model "
       << m.expected_shape;
    what = os.str();
  }
  if (more > 0) what += " (and " + std::to_string(more) + " more findings)";
  return what;
}

// Note [Quantized checkpoints] (tensor/safetensors_check.cpp): a quantized checkpoint that does not
// fit may be in a form shardplan does not match; say so, with the way around it.
std::string quantization_hint(const CheckpointReport& r) {
  if (r.quant_method.empty()) return "";
  return " (the config says its checkpoint is quantized with '" + r.quant_method +
         "'; shardplan matches the tensors of fp8, mxfp4, compressed-tensors, AWQ and GPTQ "
         "checkpoints: pass --model path/to/config.json to plan from the config alone)";
}

}  // namespace

std::string config_quantization_method(const fs::path& config) {
  const nlohmann::json j = parse_strict_json(read_text_file(config, "model config"),
                                             config.string(), 16, "a Hugging Face config.json");
  if (!j.is_object() || !j.contains("quantization_config")) return "";
  const nlohmann::json& q = j.at("quantization_config");
  if (!q.is_object()) return "";
  const auto m = q.find("quant_method");
  return m != q.end() && m->is_string() ? m->get<std::string>() : "unnamed";
}

CheckpointExpectations checkpoint_expectations(const ModelConfig& c, const fs::path& config_path) {
  CheckpointExpectations x;
  const std::string layers(family_of(c).layers_path);
  for (int64_t i = 0; i < c.mtp_layers; ++i) {
    x.beyond_model_prefixes.push_back(layers + "." + std::to_string(c.num_hidden_layers + i) + ".");
  }
  // transformers' routers keep their score-correction bias as a persistent buffer (saved in
  // every DeepSeek-V3, Kimi K2, GLM-4.5 and MiniMax-M2 checkpoint); shardplan counts it aside
  // (parameters_beyond_model) and builds no buffer for it.
  switch (family_of(c).router_score_bias) {
    case ModelFamily::RouterBias::kNone:
      break;
    case ModelFamily::RouterBias::kOnRouter:
      x.buffer_suffixes.push_back(".mlp.gate.e_score_correction_bias");
      break;
    case ModelFamily::RouterBias::kExpertBiasOnFeedForward:
      x.buffer_suffixes.push_back(".feed_forward.expert_bias");
      break;
    case ModelFamily::RouterBias::kOnMixer:
      x.buffer_suffixes.push_back(".mixer.gate.e_score_correction_bias");
      break;
    case ModelFamily::RouterBias::kOnMlpRouter:
      x.buffer_suffixes.push_back(".mlp.router.e_score_correction_bias");
      break;
    case ModelFamily::RouterBias::kOnBlock:  // Mixtral's older block name, as the Hub files say
      x.buffer_suffixes.push_back(".mlp.e_score_correction_bias");
      x.buffer_suffixes.push_back(".block_sparse_moe.e_score_correction_bias");
      break;
  }
  // Qwen2-VL's and Qwen2.5-VL's published checkpoints keep the language model under its plain
  // names and the vision encoder beside it as visual.* (transformers 5 renames both as it loads).
  if (c.multimodal_model_type == "qwen2_vl" || c.multimodal_model_type == "qwen2_5_vl") {
    x.beyond_model_prefixes.emplace_back("visual.");
  }
  // Layers that attend with an earlier layer's keys and values (Gemma 4 E2B, E4B) build no key or
  // value projections or norms; the published checkpoints still hold them, and transformers
  // skips them on load (_keys_to_ignore_on_load_unexpected, set per model).
  for (int64_t i = c.num_hidden_layers - c.num_kv_shared_layers; i < c.num_hidden_layers; ++i) {
    for (const char* part : {"k_proj.", "v_proj.", "k_norm.", "v_norm."}) {
      x.beyond_model_prefixes.push_back(layers + "." + std::to_string(i) + ".self_attn." + part);
    }
  }
  if (!family_of(c).unloaded_key.empty()) {
    x.beyond_model_substrings.emplace_back(family_of(c).unloaded_key);
  }
  x.quant_method = config_quantization_method(config_path);
  return x;
}

ModelSource find_model_source(std::string_view name_or_path) {
  ModelSource src;
  std::error_code ec;
  const bool folder_without_weights =
      names_a_checkpoint(name_or_path) && fs::is_directory(fs::path(name_or_path), ec) &&
      !fs::exists(fs::path(name_or_path) / "model.safetensors", ec) &&
      !fs::exists(fs::path(name_or_path) / "model.safetensors.index.json", ec);
  if (!names_a_checkpoint(name_or_path) || folder_without_weights) {
    // A model folder without weights names its config.json alone.
    src.config_path = model_config_path(name_or_path);
    src.config = load_model_config(src.config_path);
    return src;
  }
  const fs::path path(name_or_path);
  SP_CHECK(fs::exists(path, ec), "checkpoint '", path.string(), "' does not exist");
  // Read the headers first: a hostile checkpoint is reported as such, whatever its folder holds.
  Checkpoint ck = read_checkpoint(path);
  const fs::path folder = fs::is_directory(path, ec) ? path : path.parent_path();
  src.config_path = folder / "config.json";
  SP_CHECK(fs::is_regular_file(src.config_path, ec), path.string(),
           ": a checkpoint names a model only with its config.json, and ", src.config_path.string(),
           " does not exist; pass --model path/to/config.json");
  src.config = load_model_config(src.config_path);
  const ModulePtr model = build_model(src.config);
  const CheckpointReport r =
      check_checkpoint(ck, *model, checkpoint_expectations(src.config, src.config_path));
  SP_CHECK(r.loadable(), ck.source.string(), ": does not fit ", src.config_path.string(), ": ",
           first_finding(r), quantization_hint(r),
           "; `shardplan inspect --checkpoint` with --config lists them all");
  src.checkpoint = std::move(ck);
  src.check = r;
  return src;
}

}  // namespace shardplan::tensor
