// fuzz_cli_numbers: the numeric options of the verbs with any value, through the whole command line
// (shardplan::cli::run, as the binary runs it): --gpus, --seq, --global-batch, the pins, --top,
// --nodes, --group-size, --bytes, --batch. The input is lines: the first picks a verb, a model and
// a cluster; each further line is the value of the next numeric flag of that verb (an empty line
// leaves the flag out). Whatever the numbers, the answer is exit 0 (a plan, a price), 2 (bad input,
// one line) or 3 (nothing fits); exit 1 here means an internal error (a broken invariant,
// std::bad_alloc) and is a bug. libFuzzer's -timeout and -rss_limit_mb catch work or memory that
// grows with a number (the limits of base/limits.h).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <streambuf>
#include <string>
#include <vector>

#include "planner/cli/run.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

struct Verb {
  const char* name;
  std::vector<const char*> fixed;    // flags every run has
  std::vector<const char*> numeric;  // flags the input's lines give values to, in order
};

// The planning verbs share their flags; collective, inspect and shard have their own.
const std::vector<const char*> kPlanNumbers = {"--gpus",
                                               "--seq",
                                               "--global-batch",
                                               "--tp",
                                               "--pp",
                                               "--dp",
                                               "--cp",
                                               "--ep",
                                               "--micro-batch",
                                               "--virtual-stages",
                                               "--zero",
                                               "--top",
                                               "--recompute-layers"};

const Verb kVerbs[] = {
    {"plan", {}, kPlanNumbers},
    {"estimate",
     {},
     {"--gpus", "--seq", "--global-batch", "--tp", "--pp", "--dp", "--cp", "--ep", "--micro-batch",
      "--virtual-stages", "--zero", "--recompute-layers"}},
    {"compare", {}, {"--gpus", "--seq", "--global-batch", "--tp", "--pp", "--micro-batch"}},
    {"collective",
     {"--kind", "all_reduce"},
     {"--group-size", "--bytes", "--gpus", "--nodes", "--ranks-per-node"}},
    {"inspect", {}, {"--seq", "--batch"}},
    {"shard", {"--dtype", "bf16", "--placements", "S0,R"}, {"--shape", "--mesh", "--nodes"}},
};
const char* const kModels[] = {"gpt2", "pythia-160m", "llama3-8b", "mixtral-8x7b"};
const char* const kClusters[] = {"cpu-local", "dgx-h100", "dgx-a100-80g", "hgx-h200"};

// Swallows the verbs' output: only the exit code matters here.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> lines =
      shardplan::fuzz::split(shardplan::fuzz::as_text(data, size), "\n", 20);
  if (lines.empty() || lines[0].empty()) return 0;
  const auto pick = [&](size_t i, size_t n) {
    return static_cast<size_t>(static_cast<unsigned char>(lines[0].size() > i ? lines[0][i] : 0)) %
           n;
  };
  const Verb& verb = kVerbs[pick(0, std::size(kVerbs))];
  std::vector<std::string> args = {"shardplan", verb.name};
  const std::string name = verb.name;
  if (name == "plan" || name == "estimate" || name == "compare" || name == "inspect") {
    args.insert(args.end(), {"--model", kModels[pick(1, std::size(kModels))]});
  }
  if (name != "inspect" && name != "shard") {
    args.insert(args.end(), {"--cluster", kClusters[pick(2, std::size(kClusters))]});
  }
  for (const char* f : verb.fixed) args.emplace_back(f);
  for (size_t i = 0; i < verb.numeric.size() && i + 1 < lines.size(); ++i) {
    if (lines[i + 1].empty()) continue;
    args.emplace_back(verb.numeric[i]);
    args.emplace_back(lines[i + 1]);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The verbs' output goes nowhere while they run (some of it is printf, so stdout itself is
  // redirected); stderr stays, for the one line a refusal prints and for a sanitizer's report.
  static NullBuffer null_buffer;
  static const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  static const int saved_stdout = ::dup(STDOUT_FILENO);
  std::streambuf* const out = std::cout.rdbuf(&null_buffer);
  std::fflush(stdout);
  ::dup2(null_fd, STDOUT_FILENO);
  const int rc = shardplan::cli::run(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  ::dup2(saved_stdout, STDOUT_FILENO);
  std::cout.rdbuf(out);
  if (rc != 0 && rc != 2 && rc != 3) {
    std::string command;
    for (const std::string& a : args) command += a + " ";
    shardplan::fuzz::bug("exit code other than 0, 2 or 3 (an internal error)", command.c_str());
  }
  return 0;
}
