#include "planner/cli/inspect_model.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "planner/cli/placement_args.h"
#include "planner/cli/text_format.h"
#include "planner/reports/model_report.h"

namespace shardplan::cli {
namespace {

using nlohmann::ordered_json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

void add_model_options(CLI::App& cmd, ModelInspectOptions& o) {
  cmd.add_option("--model", o.model,
                 "A model, one of: a name in configs/models/ (llama3-70b, gpt2, ...; any case); "
                 "a path to a Hugging Face config.json; a checkpoint folder (sharded, ./sharded, "
                 "/data/llama; looked at before the names); a .safetensors file or "
                 "model.safetensors.index.json. A checkpoint needs its config.json beside it")
      ->type_name("NAME_OR_PATH");
  cmd.add_option("--seq", o.seq,
                 "Tokens per sequence of the traced forward (with --model); default: the model's "
                 "maximum positions, at most 4096")
      ->transform(positive_count("tokens"))
      ->type_name("S");
  cmd.add_option("--batch", o.batch, "Sequences of the traced forward (with --model)")
      ->transform(positive_count("sequences"))
      ->capture_default_str()
      ->type_name("B");
}

void run_inspect_model(const ModelInspectOptions& opts, const CliContext& ctx) {
  const ordered_json r = planner::model_report(opts);
  const struct {
    int64_t seq;
    int64_t batch;
  } o{r["seq"].get<int64_t>(), r["batch"].get<int64_t>()};
  if (ctx.json) {
    print_json_document(r);
    return;
  }
  std::cout << "model        " << r["model"].get<std::string>() << " ("
            << r["architecture"].get<std::string>() << ", " << r["config"].get<std::string>()
            << ")\n";
  if (r.contains("checkpoint")) {
    const ordered_json& ck = r["checkpoint"];
    std::cout << "checkpoint   " << ck["path"].get<std::string>() << ": "
              << with_commas(ck["tensors"].get<int64_t>()) << " tensors in "
              << ck["files"].get<int64_t>() << " file(s), "
              << human_bytes(ck["bytes"].get<double>());
    if (ck.contains("language_model_prefix")) {
      std::cout << "; its language model, under '" << ck["language_model_prefix"].get<std::string>()
                << "', fits the model and " << ck["outside_language_model"].get<int64_t>()
                << " tensor(s) outside it (vision encoder, projector) are not modelled\n";
    } else {
      std::cout << ", fits the model\n";
    }
  }
  const auto params = r["parameters"].get<int64_t>();
  std::cout << "parameters   " << with_commas(params) << fmt(" (%.2f billion)", params / 1e9)
            << '\n';
  if (r.contains("parameters_with_router_bias")) {
    const auto n = r["parameters_with_router_bias"].get<int64_t>();
    std::cout << "  + bias     " << with_commas(n) << fmt(" (%.2f billion)", n / 1e9)
              << " with the routers' e_score_correction_bias (a buffer in transformers)\n";
  }
  if (r.contains("mtp_parameters")) {
    const auto n = r["mtp_parameters"].get<int64_t>();
    std::cout << "  mtp        " << with_commas(n) << fmt(" (%.2f billion)", n / 1e9)
              << " in the multi-token prediction modules (not in the model above; embedding and "
                 "head shared)\n";
  }
  const auto active = r["active_parameters"].get<int64_t>();
  if (active != params) {
    std::cout << "active       " << with_commas(active) << fmt(" (%.2f billion)", active / 1e9)
              << " per token\n";
  }
  for (const auto& [kind, n] : r["parameters_by_kind"].items()) {
    std::printf("  %-10s %s\n", kind.c_str(), with_commas(n.get<int64_t>()).c_str());
  }
  std::cout << "layers      ";
  for (const auto& k : r["layer_stack"]) {
    std::cout << " " << k["layers"].get<int64_t>() << " " << k["kind"].get<std::string>();
  }
  std::cout << '\n';
  std::fflush(stdout);
  for (const auto& [dtype, n] : r["bytes_by_dtype"].items()) {
    std::cout << "bytes        " << with_commas(n.get<int64_t>()) << " ("
              << human_bytes(n.get<double>()) << ") " << dtype << '\n';
  }
  const ordered_json& f = r["flops_per_token_detail"];
  std::cout << "flops/token  " << fmt("%.4g", f["forward"].get<double>()) << " forward ("
            << fmt("%.4g", f["forward_matmul"].get<double>()) << " matmul), "
            << fmt("%.4g", f["forward_backward_3x"].get<double>()) << " fwd+bwd (3x), "
            << fmt("%.4g", f["training_model_flops"].get<double>())
            << " traced training step; batch " << o.batch << " x seq " << o.seq << '\n';
  std::cout << "activations  ";
  for (const auto& [policy, n] : r["activation_bytes_by_recompute"].items()) {
    std::cout << policy << ' ' << human_bytes(n.get<double>()) << "  ";
  }
  std::cout << "(batch " << o.batch << " x seq " << o.seq << ")\n\n";
  std::printf("%-44s %-28s %6s %16s %16s\n", "module", "type", "count", "parameters",
              "fwd FLOP/token");
  for (const auto& row : r["modules"]) {
    std::printf("%-44s %-28s %6lld %16s %16s\n", row["module"].get<std::string>().c_str(),
                row["type"].get<std::string>().c_str(),
                static_cast<long long>(row["count"].get<int64_t>()),
                with_commas(row["parameters"].get<int64_t>()).c_str(),
                fmt("%.4g", row["forward_flops_per_token"].get<double>()).c_str());
  }
  std::cout << '\n';
  for (const auto& n : r["notes"]) std::cout << "note: " << n.get<std::string>() << '\n';
}

}  // namespace shardplan::cli
