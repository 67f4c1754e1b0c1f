// Where the shipped configuration files live (configs/models/*.json, configs/clusters/*.json), so
// that
// `--model llama3-70b` and `--cluster dgx-h100` work from the source tree, from build/bin, from an
// installed prefix and from tests alike. The one lookup every kind of config goes through:
//   std::filesystem::path p = find_config("models", "llama3-70b");  //
//   .../configs/models/llama3-70b.json std::vector<std::string> names = list_configs("clusters");
//   // {"cpu-local", "dgx-a100-40g", ...}
//
// Note [Locating configs]
// Folders are searched in this order, and a bare name is taken from the first that holds it:
//   1. $SHARDPLAN_CONFIGS_DIR when set (it must then be a directory: a typo there is an error, not
//   a
//      silent fall-back): a user's own models and clusters, found before the shipped ones;
//   2. <dir of the running binary>/../share/shardplan/configs: what `cmake --install` lays out, so
//   an
//      installed bin/shardplan finds its configs wherever it is copied with its prefix;
//   3. the source tree's configs/, recorded at compile time (SHARDPLAN_SOURCE_DIR, a definition on
//      config_paths.cpp only): build/bin/shardplan and the tests.
// Anything that looks like a path (has a '/' or ends in ".json") is taken as a file, never looked
// up.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardplan {

// The existing folders of Note [Locating configs], in search order. Throws shardplan::Error when
// $SHARDPLAN_CONFIGS_DIR is set but is not a directory, or when no folder exists at all.
std::vector<std::filesystem::path> config_search_dirs();

// The first folder of config_search_dirs().
std::filesystem::path configs_dir();

// The stems of <dir>/<kind>/*.json over every search folder, sorted and unique ("gpt2", ...).
std::vector<std::string> list_configs(std::string_view kind);

// A config named by `name_or_path`: an existing file path is returned as is; a bare name is looked
// up as <dir>/<kind>/<name>.json in the search folders. Throws shardplan::Error naming the value,
// the folders searched and the shipped names when neither exists ("unknown cluster 'x': ...").
std::filesystem::path find_config(std::string_view kind, std::string_view name_or_path);

}  // namespace shardplan
