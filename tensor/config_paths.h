// Where the shipped configuration files live (configs/models/*.json, configs/clusters/*.json), so
// that `--model llama3-70b` and `--cluster dgx-a100` work from the source tree, from build/bin and
// from tests alike. One mechanism for every kind of config:
//   std::filesystem::path dir = configs_dir();                       // .../configs
//   std::filesystem::path p = find_config("models", "llama3-70b");  //
//   .../configs/models/llama3-70b.json
//
// Note [Locating configs]
// The directory is, in order: $SHARDPLAN_CONFIGS_DIR when set (an installed binary or a test that
// wants its own files), else the source tree's configs/ recorded at compile time
// (SHARDPLAN_SOURCE_DIR, a definition on config_paths.cpp only). A name is a file stem in
// <dir>/<kind>/; anything that looks like a path (has a '/' or ends in ".json") is taken as one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan::tensor {

// The configs directory (Note [Locating configs]). Throws shardplan::Error when it does not exist,
// naming where it looked.
std::filesystem::path configs_dir();

// The stems of <configs_dir>/<kind>/*.json, sorted ("gpt2", "llama3-70b", ...); empty when the
// folder is missing.
std::vector<std::string> list_configs(std::string_view kind);

// A config named by `name_or_path`: an existing file path is returned as is; a bare name is looked
// up as <configs_dir>/<kind>/<name>.json. Throws shardplan::Error naming the value and listing the
// shipped names when neither exists.
std::filesystem::path find_config(std::string_view kind, std::string_view name_or_path);

}  // namespace shardplan::tensor
