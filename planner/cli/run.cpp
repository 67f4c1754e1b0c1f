// The command line, whole: builds the verb list, parses, runs the chosen verb, and is the only
// place where errors become exit codes (docs/architecture.md "Errors and exit codes"):
//   shardplan::Error, command-line errors -> "shardplan: error: ..."                     exit 2
//   shardplan::RuntimeFailure            -> "shardplan: error: ..."                     exit 1
//   shardplan::InternalError (SP_ASSERT) -> "shardplan: internal error at file:line: ..." exit 1
//   any other exception                  -> "shardplan: internal error: ..."            exit 1
#include "planner/cli/run.h"

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/nearest_name.h"
#include "planner/cli/cli_common.h"
#include "shardplan/build_info.h"

namespace shardplan::cli {
// The verbs, each defined in planner/cli/cmd_<verb>.cpp. To add one: declare it here and list it in
// kVerbs below (the CMake glob picks up the new file).
void register_calibrate(CLI::App& app, CliContext& ctx);
void register_collective(CLI::App& app, CliContext& ctx);
void register_compare(CLI::App& app, CliContext& ctx);
void register_env(CLI::App& app, CliContext& ctx);
void register_estimate(CLI::App& app, CliContext& ctx);
void register_export(CLI::App& app, CliContext& ctx);
void register_inspect(CLI::App& app, CliContext& ctx);
void register_materialize(CLI::App& app, CliContext& ctx);
void register_plan(CLI::App& app, CliContext& ctx);
void register_redistribute(CLI::App& app, CliContext& ctx);
void register_rehearse(CLI::App& app, CliContext& ctx);
void register_shard(CLI::App& app, CliContext& ctx);
}  // namespace shardplan::cli

namespace {

using RegisterVerb = void (*)(CLI::App&, shardplan::cli::CliContext&);
// One verb per line, so adding one is a one-line change.
// clang-format off
constexpr RegisterVerb kVerbs[] = {
    &shardplan::cli::register_calibrate,
    &shardplan::cli::register_collective,
    &shardplan::cli::register_compare,
    &shardplan::cli::register_env,
    &shardplan::cli::register_estimate,
    &shardplan::cli::register_export,
    &shardplan::cli::register_inspect,
    &shardplan::cli::register_materialize,
    &shardplan::cli::register_plan,
    &shardplan::cli::register_redistribute,
    &shardplan::cli::register_rehearse,
    &shardplan::cli::register_shard,
};
// clang-format on

// Errors are one line on stderr, written at once (scripts grep them; Note [One line, one write]).
int report(std::string_view prefix, std::string_view message, shardplan::cli::ExitCode code) {
  shardplan::cli::print_error_line("shardplan: " + std::string(prefix) + ": " +
                                   std::string(message));
  return static_cast<int>(code);
}

// The flags `verb` takes, spelt as on the command line ("--placements", "-h").
std::vector<std::string> flag_names(const CLI::App& verb) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : verb.get_options()) {
    for (const std::string& n : opt->get_lnames()) out.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) out.push_back("-" + n);
  }
  return out;
}

// CLI11 checks required options before it complains about unknown ones, so a misspelt flag
// (--placement for --placements) would read "--placements is required". Name the unknown flag
// first, with the nearest real one, and point at the verb's own help.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e) {
  const std::vector<std::string> extras = app.remaining(true);
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) {
    if (!extras.empty() && extras.front().rfind('-', 0) == 0) {
      return "unknown option '" + extras.front() + "' (see 'shardplan --help')";
    }
    // CLI11 only says "A subcommand is required": name the unexpected word and the verbs.
    std::vector<std::string> verbs;
    for (const CLI::App* verb : app.get_subcommands({})) verbs.push_back(verb->get_name());
    if (!extras.empty()) {
      std::string list;
      for (const std::string& v : verbs) list += (list.empty() ? "" : ", ") + v;
      return "unknown verb '" + extras.front() + "'" +
             shardplan::did_you_mean(extras.front(), verbs) + ", expected one of: " + list;
    }
    return std::string(e.what()) + " (see 'shardplan --help')";
  }
  const CLI::App& verb = *chosen.front();
  const std::string help = " (see 'shardplan " + verb.get_name() + " --help')";
  for (const std::string& word : extras) {
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string flag = word.substr(0, word.find('='));
    return "unknown option '" + flag + "' for '" + verb.get_name() + "'" +
           shardplan::did_you_mean(flag, flag_names(verb)) + help;
  }
  return std::string(e.what()) + help;
}

// Every option that takes a value refuses an empty one: the verbs keep "not given" as an empty
// string, so `--checkpoint ""` (an unset shell variable) would silently mean no checkpoint, and
// `--out ""` stdout. Verbs may have named the value expected (non_empty in cli_common.h); this
// covers the rest, after their checks.
void refuse_empty_values(CLI::App& app) {
  for (CLI::App* verb : app.get_subcommands({})) {
    for (CLI::Option* option : verb->get_options()) {
      if (option->get_type_size() != 0 && option->get_positional() == false) {
        const std::string type = option->get_type_name();
        const bool path =
            type.find("PATH") != std::string::npos || type.find("FILE") != std::string::npos;
        const bool name = type.find("NAME") != std::string::npos;
        option->check(shardplan::cli::non_empty(path && name ? "a name or a file path"
                                                : path       ? "a file path"
                                                : name       ? "a name"
                                                             : "a value"));
      }
    }
  }
}

int run_parsed(int argc, char** argv) {
  using shardplan::cli::ExitCode;
  shardplan::cli::CliContext ctx;
  CLI::App app{"shardplan: plan how to shard a model over a cluster, on meta tensors", "shardplan"};
  try {
    app.set_version_flag("--version", "shardplan " SHARDPLAN_VERSION);
    app.add_flag("--json", ctx.json, "Print one JSON document on stdout instead of text");
    app.require_subcommand(1);
    for (RegisterVerb register_verb : kVerbs) register_verb(app, ctx);
    refuse_empty_values(app);
    // The chosen verb runs inside parse(), from its callback, once the whole command line is valid.
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version: print them, succeed
    return report("error", parse_error_message(app, e), ExitCode::kBadInput);
  } catch (const shardplan::Error& e) {
    return report("error", e.what(), ExitCode::kBadInput);
  } catch (const shardplan::RuntimeFailure& e) {
    return report("error", e.what(), ExitCode::kRuntimeFailure);
  } catch (const shardplan::InternalError& e) {
    return report("internal error", std::string("at ") + e.what(), ExitCode::kRuntimeFailure);
  } catch (const std::exception& e) {
    return report("internal error", e.what(), ExitCode::kRuntimeFailure);
  }
  return static_cast<int>(ctx.exit_code);
}

}  // namespace

namespace shardplan::cli {

int run(int argc, char** argv) {
  // Last resort, for what escapes run_parsed() (a non-std exception, or one thrown while
  // reporting): still one line and exit 1, never std::terminate's abort.
  try {
    return run_parsed(argc, argv);
  } catch (...) {
    std::fputs("shardplan: internal error: unknown exception\n", stderr);
    return static_cast<int>(ExitCode::kRuntimeFailure);
  }
}

}  // namespace shardplan::cli
