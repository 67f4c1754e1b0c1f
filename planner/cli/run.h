// The shardplan command line as a function, so main.cpp stays a one-liner that does not compile
// CLI11 (see CMakeLists.txt here for why that matters).
//   int main(int argc, char** argv) { return shardplan::cli::run(argc, argv); }
#pragma once

namespace shardplan::cli {

// Parses argv, runs the chosen verb and returns the process exit status (ExitCode in cli_common.h);
// never throws.
int run(int argc, char** argv);

}  // namespace shardplan::cli
