#include "base/config_paths.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "base/enum_names.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/nearest_name.h"
#include "base/strict_json.h"

namespace shardplan {
namespace fs = std::filesystem;
namespace {

// <prefix>/share/shardplan/configs for a binary at <prefix>/bin/shardplan (Linux: /proc/self/exe);
// the relative path comes from the install layout (GNUInstallDirs). Empty when the running binary
// cannot be found, which only removes that one search folder.
fs::path installed_configs_dir() {
#ifdef SHARDPLAN_CONFIGS_FROM_BIN
  const fs::path relative = SHARDPLAN_CONFIGS_FROM_BIN;
#else
  const fs::path relative = "../share/shardplan/configs";
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return (exe.parent_path() / relative).lexically_normal();
}

}  // namespace

std::vector<fs::path> config_search_dirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  // Note [Locating configs], step 1: an explicit folder must exist.
  if (const char* env = std::getenv("SHARDPLAN_CONFIGS_DIR"); env != nullptr && *env != '\0') {
    SP_CHECK(fs::is_directory(env, ec), "SHARDPLAN_CONFIGS_DIR='", env,
             "' is not a directory; expected the folder holding models/ and clusters/");
    dirs.emplace_back(env);
  }
  if (fs::path installed = installed_configs_dir();
      !installed.empty() && fs::is_directory(installed, ec)) {
    dirs.push_back(std::move(installed));
  }
#ifdef SHARDPLAN_SOURCE_DIR
  if (const fs::path compiled = fs::path(SHARDPLAN_SOURCE_DIR) / "configs";
      fs::is_directory(compiled, ec)) {
    dirs.push_back(compiled);
  }
#endif
  SP_CHECK(!dirs.empty(),
           "no configs folder found (neither share/shardplan/configs beside the binary nor the "
           "source tree's); set SHARDPLAN_CONFIGS_DIR to the folder holding models/ and clusters/");
  return dirs;
}

fs::path configs_dir() { return config_search_dirs().front(); }

std::vector<std::string> list_configs(std::string_view kind) {
  std::vector<std::string> names;
  for (const fs::path& root : config_search_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(root / kind, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

fs::path find_config(std::string_view kind, std::string_view name_or_path) {
  // "models" -> "model" in messages ("unknown model 'x'").
  const std::string_view one = kind.ends_with('s') ? kind.substr(0, kind.size() - 1) : kind;
  SP_CHECK(!name_or_path.empty(), "empty ", one, " name; expected a name from configs/", kind,
           "/ or a path to a .json file");
  std::error_code ec;
  const fs::path as_path(name_or_path);
  const fs::file_status status = fs::status(as_path, ec);
  if (fs::is_regular_file(status)) return as_path;
  // Something that exists but is not a file (a folder, /dev/zero, a FIFO) is refused for what it
  // is; something path-like that does not exist is a missing file, not looked up by name.
  SP_CHECK(!fs::exists(status), one, " file '", printable(name_or_path, 256), "' is ",
           file_kind(status.type()), ", expected a .json file");
  const bool path_like =
      name_or_path.find('/') != std::string_view::npos || as_path.extension() == ".json";
  SP_CHECK(!path_like, one, " file '", printable(name_or_path, 256), "' does not exist");
  const std::vector<fs::path> roots = config_search_dirs();
  std::string searched;
  for (const fs::path& root : roots) {
    const fs::path named = root / kind / (std::string(name_or_path) + ".json");
    if (fs::is_regular_file(named, ec)) return named;
    searched += (searched.empty() ? "" : ", ") + (root / kind).string();
  }
  // Names are case-insensitive (Llama3-70B is llama3-70b), as model hubs and cluster names are.
  const std::vector<std::string> names = list_configs(kind);
  for (const std::string& n : names) {
    if (!detail::names_equal(n, name_or_path, NameCase::kInsensitive)) continue;
    for (const fs::path& root : roots) {
      const fs::path named = root / kind / (n + ".json");
      if (fs::is_regular_file(named, ec)) return named;
    }
  }
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  SP_FAIL("unknown ", one, " '", printable(name_or_path, 80), "'",
          did_you_mean(name_or_path, names), ": not a file and not in ", searched,
          "; expected one of: ", known.empty() ? "<none found>" : known,
          " or a path to a .json file");
}

}  // namespace shardplan
