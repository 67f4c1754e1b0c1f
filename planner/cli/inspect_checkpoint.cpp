// `shardplan inspect --checkpoint PATH [--config config.json] [--strict] [--json]`: see
// inspect_checkpoint.h. The report is planner/reports/checkpoint_report.h; this file prints it.
#include "planner/cli/inspect_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "planner/cli/text_format.h"
#include "planner/reports/checkpoint_report.h"

namespace shardplan::cli {
namespace {

using nlohmann::ordered_json;

// "a, b, c" of the first few names, then "... (N more)": a report stays readable for 723 tensors.
std::string name_list(const nlohmann::json& names) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) {
    out += (i ? ", " : "") + names[i].get<std::string>();
  }
  if (names.size() > kShown) out += ", ... (" + std::to_string(names.size() - kShown) + " more)";
  return out;
}

void print_check(const nlohmann::json& check) {
  std::cout << "\ncheck against " << check["config"].get<std::string>() << " ("
            << check["model"].get<std::string>()
            << "): " << (check["loadable"].get<bool>() ? "loadable" : "NOT loadable") << '\n'
            << "  matched           " << check["matched"].get<int64_t>() << '\n';
  if (!check["stripped_prefix"].get<std::string>().empty()) {
    std::cout << "  prefix            model names under '"
              << check["stripped_prefix"].get<std::string>()
              << "' matched without it (a base-model checkpoint)\n";
  }
  if (!check["language_model_prefix"].get<std::string>().empty()) {
    std::cout << "  prefix            the language model is under '"
              << check["language_model_prefix"].get<std::string>()
              << "' (a multimodal checkpoint)\n";
  }
  auto list = [&](const char* key, const char* label) {
    if (check[key].empty()) return;
    std::cout << "  " << label << " (" << check[key].size() << "): " << name_list(check[key])
              << '\n';
  };
  list("missing", "missing         ");
  list("missing_slices", "missing slices  ");
  list("unexpected", "unexpected      ");
  for (const auto& m : check["shape_mismatches"]) {
    std::cout << "  shape mismatch    " << m["name"].get<std::string>() << ": checkpoint "
              << dims(m["actual_shape"]) << ' ' << m["actual_dtype"].get<std::string>()
              << ", model " << dims(m["expected_shape"]) << ' '
              << m["expected_dtype"].get<std::string>() << '\n';
  }
  // A checkpoint saved in another precision differs on every tensor: one line per pair of dtypes,
  // with a count and the first few names, not one warning per tensor.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> by_pair;
  for (const auto& m : check["dtype_mismatches"]) {
    by_pair[{m["actual_dtype"].get<std::string>(), m["expected_dtype"].get<std::string>()}]
        .push_back(m["name"].get<std::string>());
  }
  for (const auto& [pair, names] : by_pair) {
    std::cout << "  dtype (warning)   " << names.size() << " tensor(s) are " << pair.first
              << " in the checkpoint, " << pair.second
              << " in the model: " << name_list(nlohmann::json(names)) << '\n';
  }
  list("tied_omitted", "tied, omitted   ");
  list("stacked_experts", "experts stacked ");
  list("outside_language_model", "not modelled    ");  // vision encoder, projector
  list("beyond_model", "beyond the model");            // multi-token prediction layers
  list("buffers", "router buffers  ");                 // e_score_correction_bias, not loaded
  if (!check["quantization_tensors"].empty() || !check["stored_quantized"].empty()) {
    std::cout << "  quantized         quant_method '" << check["quant_method"].get<std::string>()
              << "': " << check["quantization_tensors"].size() << " scale tensor(s)";
    if (!check["stored_quantized"].empty()) {
      std::cout << ", " << check["stored_quantized"].size()
                << " model tensor(s) stored quantized under other names";
    }
    std::cout << " (matched, not loadable in the model's dtype)\n";
  }
}

void print_checkpoint_text(const planner::CheckpointReport& report) {
  const tensor::Checkpoint& ck = report.checkpoint;
  print_table({"name", "dtype", "shape", "file", "offset", "bytes"}, ck.tensors.size(),
              [&](size_t i) -> std::vector<std::string> {
                const tensor::CheckpointTensor& t = ck.tensors[i];
                return {t.name,
                        std::string(tensor::safetensors_dtype_name(t.dtype)),
                        bracketed(t.shape),
                        ck.file_of(t).filename().string(),
                        with_commas(t.offset),
                        with_commas(t.nbytes)};
              },
              {false, false, false, false, true, true});
  const ordered_json& r = report.summary;
  const int64_t bytes = r["bytes"].get<int64_t>();
  std::cout << '\n'
            << "checkpoint  " << r["checkpoint"].get<std::string>() << " (" << r["files"].size()
            << (r["files"].size() == 1 ? " file" : " files") << ")\n"
            << "tensors     " << with_commas(r["tensor_count"].get<int64_t>()) << '\n'
            << "parameters  " << with_commas(r["parameters"].get<int64_t>()) << '\n'
            << "bytes       " << with_commas(bytes) << " (" << human_bytes(bytes) << ")\n";
  for (const auto& [dtype, d] : r["by_dtype"].items()) {
    std::cout << "  " << dtype << ": " << with_commas(d["tensors"].get<int64_t>()) << " tensors, "
              << with_commas(d["parameters"].get<int64_t>()) << " parameters, "
              << with_commas(d["bytes"].get<int64_t>()) << " bytes\n";
  }
  if (r.contains("check")) print_check(r["check"]);
}

}  // namespace

void add_checkpoint_options(CLI::App& cmd, CheckpointInspectOptions& o) {
  cmd.add_option("--checkpoint", o.checkpoint,
                 "A safetensors checkpoint: model.safetensors, model.safetensors.index.json, or "
                 "their folder (only headers are read)")
      ->type_name("PATH");
  cmd.add_option("--config", o.config,
                 "With --checkpoint: a Hugging Face config.json (or a name in configs/models/) to "
                 "check the checkpoint against")
      ->type_name("FILE");
  cmd.add_flag("--strict", o.strict,
               "With --config: exit 1 when tensors are missing, unexpected or mis-shaped");
}

void run_inspect_checkpoint(const CheckpointInspectOptions& o, CliContext& ctx) {
  SP_CHECK(!o.strict || !o.config.empty(), "inspect: --strict needs --config to check against");
  const planner::CheckpointReport report = planner::checkpoint_report(o.checkpoint, o.config);
  const ordered_json& r = report.summary;
  if (ctx.json) {
    report.write_json(std::cout);
    std::cout << '\n';
  } else {
    print_checkpoint_text(report);
  }
  if (o.strict && r.contains("check") && !r["check"]["loadable"].get<bool>()) {
    ctx.exit_code = ExitCode::kRuntimeFailure;
  }
}

}  // namespace shardplan::cli
