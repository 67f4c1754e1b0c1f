#include "tensor/config_paths.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "tensor/error.h"

namespace shardplan::tensor {
namespace fs = std::filesystem;

fs::path configs_dir() {
  // Note [Locating configs]: the environment overrides the compiled-in source tree.
  if (const char* env = std::getenv("SHARDPLAN_CONFIGS_DIR"); env != nullptr && *env != '\0') {
    std::error_code ec;
    SP_CHECK(fs::is_directory(env, ec), "SHARDPLAN_CONFIGS_DIR='", env,
             "' is not a directory; expected the folder holding models/ and clusters/");
    return fs::path(env);
  }
#ifdef SHARDPLAN_SOURCE_DIR
  const fs::path compiled = fs::path(SHARDPLAN_SOURCE_DIR) / "configs";
#else
  const fs::path compiled = fs::path("configs");
#endif
  std::error_code ec;
  SP_CHECK(
      fs::is_directory(compiled, ec), "the configs directory ", compiled.string(),
      " does not exist; set SHARDPLAN_CONFIGS_DIR to the folder holding models/ and clusters/");
  return compiled;
}

std::vector<std::string> list_configs(std::string_view kind) {
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path dir = configs_dir() / kind;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_config(std::string_view kind, std::string_view name_or_path) {
  // "models" -> "model" in messages ("unknown model 'x'").
  const std::string_view one = kind.ends_with('s') ? kind.substr(0, kind.size() - 1) : kind;
  SP_CHECK(!name_or_path.empty(), "empty ", one, " name; expected a name from configs/", kind,
           "/ or a path to a .json file");
  std::error_code ec;
  const fs::path as_path(name_or_path);
  if (fs::is_regular_file(as_path, ec)) return as_path;
  // Something path-like that is not a file is reported as a missing file, not looked up by name.
  const bool path_like =
      name_or_path.find('/') != std::string_view::npos || as_path.extension() == ".json";
  SP_CHECK(!path_like, one, " file '", name_or_path, "' does not exist");
  const fs::path named = configs_dir() / kind / (std::string(name_or_path) + ".json");
  if (fs::is_regular_file(named, ec)) return named;
  std::string known;
  for (const std::string& n : list_configs(kind)) known += (known.empty() ? "" : ", ") + n;
  SP_FAIL("unknown ", one, " '", name_or_path, "': not a file and not in ",
          (configs_dir() / kind).string(), "; expected one of: ", known);
}

}  // namespace shardplan::tensor
