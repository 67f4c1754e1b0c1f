// fuzz_nccl_tests_log: the standard output of an nccl-tests binary (all_reduce_perf, ...), parsed
// by parse_nccl_tests_log (collectives/nccl_tests_log.h). A log that parses is then fitted
// (fit_log) and used to calibrate the shipped dgx-h100 cluster, as `shardplan calibrate` does.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/calibration.h"
#include "collectives/cluster.h"
#include "collectives/nccl_tests_log.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::collectives;

namespace {
// configs/clusters/dgx-h100.json, found in the source tree (Note [Locating configs]).
const Cluster& dgx_h100() {
  static const Cluster c = load_cluster(resolve_cluster("dgx-h100"));
  return c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  NcclTestsLog log;
  if (!fuzz::run([&] { log = parse_nccl_tests_log(fuzz::as_text(data, size), "fuzz.log"); })) {
    return 0;
  }
  FUZZ_CHECK(!log.rows.empty() && log.ranks > 0 && log.nodes > 0 && log.nodes <= log.ranks);
  FUZZ_CHECK(log.ranks_per_node > 0 && log.ranks_per_node <= log.ranks);
  fuzz::run([&] { (void)fit_log(log); });
  fuzz::run([&] {
    const std::vector<CalibrationInput> in = {
        {log, log.nodes > 1 ? CalibratedLink::kInter : CalibratedLink::kIntra}};
    (void)calibrate(dgx_h100(), in);
  });
  return 0;
}
