// The report of `shardplan inspect --checkpoint` as data (planner/reports/checkpoint_report.h).
#include "planner/reports/checkpoint_report.h"

#include <array>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/models/model_config.h"
#include "tensor/models/model_source.h"
#include "tensor/models/models.h"

namespace shardplan::planner {

using nlohmann::ordered_json;

ordered_json CheckpointReport::tensor_row(size_t i) const {
  const tensor::CheckpointTensor& t = checkpoint.tensors.at(i);
  return {{"name", t.name},
          {"dtype", std::string(tensor::safetensors_dtype_name(t.dtype))},
          {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
          {"file", checkpoint.file_of(t).filename().string()},
          {"offset", t.offset},
          {"nbytes", t.nbytes}};
}

void CheckpointReport::write_json(std::ostream& os) const {
  // ordered_json prints keys in insertion order: the summary's keys, "tensors" after "files".
  os << '{';
  bool first = true;
  auto key = [&](const std::string& k) {
    os << (first ? "" : ",") << ordered_json(k).dump() << ':';
    first = false;
  };
  for (const auto& [k, v] : summary.items()) {
    key(k);
    os << v.dump();
    if (k != "files") continue;
    key("tensors");
    os << '[';
    for (size_t i = 0; i < tensor_count(); ++i) os << (i ? "," : "") << tensor_row(i).dump();
    os << ']';
  }
  os << '}';
}

CheckpointReport checkpoint_report(const std::string& checkpoint, const std::string& config) {
  SP_CHECK(!checkpoint.empty(), "inspect: --checkpoint is required with --config or --strict");
  CheckpointReport out{tensor::read_checkpoint(checkpoint), ordered_json::object()};
  const tensor::Checkpoint& ck = out.checkpoint;
  ordered_json& r = out.summary;
  r["checkpoint"] = ck.source.string();
  r["files"] = ordered_json::array();
  for (const tensor::CheckpointFile& f : ck.files) {
    r["files"].push_back({{"path", f.path.string()},
                          {"header_bytes", f.header.header_bytes},
                          {"data_bytes", f.header.data_bytes},
                          {"metadata", f.header.metadata}});
  }
  // By dtype in the format's spelling; std::map keeps the output order stable.
  std::map<std::string, std::array<int64_t, 3>> by_dtype;  // tensors, parameters, bytes
  for (const tensor::CheckpointTensor& t : ck.tensors) {
    auto& d = by_dtype[std::string(tensor::safetensors_dtype_name(t.dtype))];
    d[0] += 1;
    d[1] += tensor::checked_numel(t.shape, "inspect");  // bounded by the files' sizes, which
    d[2] += t.nbytes;                                   // ck.numel() below checks in total
  }
  r["tensor_count"] = ck.tensors.size();
  r["parameters"] = ck.numel();
  r["bytes"] = ck.nbytes();
  r["by_dtype"] = ordered_json::object();
  for (const auto& [dtype, d] : by_dtype) {
    r["by_dtype"][dtype] = {{"tensors", d[0]}, {"parameters", d[1]}, {"bytes", d[2]}};
  }
  if (!config.empty()) {
    const std::filesystem::path config_path = tensor::model_config_path(config);
    const tensor::ModelConfig cfg = tensor::load_model_config(config_path);
    const tensor::ModulePtr model = tensor::build_model(cfg);
    const nlohmann::json check =
        tensor::check_checkpoint(ck, *model, tensor::checkpoint_expectations(cfg, config_path));
    ordered_json c;
    c["config"] = config;
    c["model"] = model->type_name();
    for (const auto& [k, v] : check.items()) c[k] = v;
    r["check"] = std::move(c);
  }
  return out;
}

}  // namespace shardplan::planner
