// `shardplan inspect`: what a set of named meta tensors holds, one row per tensor (shape, dtype,
// strides, storage, view-of, bytes), then totals with aliasing taken into account (a tied weight
// is one storage and its parameters count once).
//   shardplan inspect --description configs/examples/gpt2-small.description.json [--json]
// The tensors come from exactly one source: --description (tensor/describe.h) is listed here;
// --model (planner/cli/inspect_model.h) and --checkpoint (planner/cli/inspect_checkpoint.h) have
// reports of their own. Exactly one of the three may be given.
//   shardplan inspect --model llama3-70b --seq 4096
//   shardplan inspect --checkpoint ckpt/model.safetensors.index.json --config ckpt/config.json
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/inspect_checkpoint.h"
#include "planner/cli/inspect_model.h"
#include "planner/cli/text_format.h"
#include "tensor/describe.h"

namespace shardplan::cli {
namespace {

using tensor::NamedTensors;

// The command line of the verb; CLI11 writes into it during parse.
struct InspectOptions {
  std::string description;  // --description FILE
};

// One way of naming the tensors to inspect.
struct Source {
  const char* flag;
  const std::string* value;  // empty: not given
  std::function<NamedTensors(const std::string&)> load;
};

std::vector<Source> sources(const InspectOptions& o) {
  return {
      {"--description", &o.description,
       [](const std::string& path) { return tensor::load_description_file(path); }},
  };
}

NamedTensors load_source(const InspectOptions& o) {
  const std::vector<Source> all = sources(o);
  const Source* chosen = nullptr;
  std::string flags;
  for (const Source& s : all) {
    flags += (flags.empty() ? "" : ", ") + std::string(s.flag);
    if (s.value->empty()) continue;
    SP_CHECK(chosen == nullptr, "inspect: ", chosen ? chosen->flag : "", " and ", s.flag,
             " both name tensors to inspect, expected exactly one");
    chosen = &s;
  }
  SP_CHECK(chosen != nullptr, "inspect: nothing to inspect, expected one of: ", flags,
           ", --model, --checkpoint");
  return chosen->load(*chosen->value);
}

// One row per tensor from the description (it carries the stable storage ids and view_of names).
nlohmann::ordered_json tensor_rows(const NamedTensors& named) {
  const nlohmann::json d = tensor::describe(named);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < named.size(); ++i) {
    const nlohmann::json& e = d["tensors"][i];
    nlohmann::ordered_json row;
    row["name"] = e["name"];
    row["shape"] = e["sizes"];
    row["dtype"] = e["dtype"];
    row["strides"] = e["strides"];
    row["storage_offset"] = e["storage_offset"];
    row["storage"] = e["storage"];
    row["view_of"] = e["view_of"];
    row["bytes"] = named[i].second.nbytes();
    row["is_parameter"] = e["is_parameter"];
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_text(const nlohmann::ordered_json& rows, const tensor::TensorSetSummary& sum) {
  const std::vector<std::string> header = {"name",    "shape",   "dtype", "strides",
                                           "storage", "view_of", "bytes"};
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    table.push_back({r["name"].get<std::string>(), dims(r["shape"]), r["dtype"].get<std::string>(),
                     dims(r["strides"]), r["storage"].dump(),
                     r["view_of"].is_null() ? "-" : r["view_of"].get<std::string>(),
                     with_commas(r["bytes"].get<int64_t>())});
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : table) width[c] = std::max(width[c], row[c].size());
  }
  // Numbers (storage, bytes) right-aligned, text left-aligned.
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool right = c == 4 || c == 6;
      line += (c ? "  " : "") + (right ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : ""));
    }
    std::cout << line << '\n';
  };
  print_row(header);
  for (const auto& row : table) print_row(row);
  std::cout << '\n'
            << "tensors     " << with_commas(sum.tensors) << '\n'
            << "storages    " << with_commas(sum.storages) << " distinct\n"
            << "parameters  " << with_commas(sum.parameters) << " (each storage element once)\n"
            << "bytes       " << with_commas(sum.bytes) << " (" << human_bytes(sum.bytes)
            << ", distinct storages)\n";
}

}  // namespace

void register_inspect(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "inspect",
                           "Inspect a model (--model: parameters, FLOPs, activation memory), a "
                           "safetensors checkpoint (--checkpoint) or a tensor description "
                           "(--description: shapes, strides, storage aliasing)");
  auto opts = std::make_shared<InspectOptions>();
  cmd.add_option("--description", opts->description,
                 "A tensor description (JSON, tensor/describe.h), such as "
                 "configs/examples/gpt2-small.description.json")
      ->type_name("FILE");
  auto model_opts = std::make_shared<ModelInspectOptions>();
  add_model_options(cmd, *model_opts);  // --model, --seq, --batch (planner/cli/inspect_model.h)
  auto ck_opts = std::make_shared<CheckpointInspectOptions>();
  add_checkpoint_options(cmd, *ck_opts);  // --checkpoint, --config, --strict
  cmd.callback([&ctx, opts, model_opts, ck_opts] {
    const bool model = !model_opts->model.empty();
    const bool checkpoint =
        !ck_opts->checkpoint.empty() || !ck_opts->config.empty() || ck_opts->strict;
    const int given = int(!opts->description.empty()) + int(model) + int(checkpoint);
    SP_CHECK(given <= 1, "inspect: ", given,
             " of --description, --model, --checkpoint name something to inspect, expected one");
    if (model) {
      run_inspect_model(*model_opts, ctx);
      return;
    }
    if (checkpoint) {
      run_inspect_checkpoint(*ck_opts, ctx);
      return;
    }
    const NamedTensors named = load_source(*opts);
    const tensor::TensorSetSummary sum = tensor::summarize(named);
    const nlohmann::ordered_json rows = tensor_rows(named);
    if (ctx.json) {
      nlohmann::ordered_json doc;
      doc["tensors"] = rows;
      doc["storages"] = sum.storages;
      doc["parameters"] = sum.parameters;
      doc["bytes"] = sum.bytes;
      print_json_document(doc);
    } else {
      print_text(rows, sum);
    }
  });
}

}  // namespace shardplan::cli
