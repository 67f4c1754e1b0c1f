// fuzz_plan_file: a plan file (planner/plan/plan_file.h) as materialize reads it: strict JSON, then
// plan_from_json, which checks the model, the cluster and their hashes, the configuration, the mesh
// and every parameter's placements. A plan that is accepted must write back to the same JSON and
// pass the dry run of materialize (its shards tile every tensor on every virtual rank).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/strict_json.h"
#include "planner/materialize/dry_run.h"
#include "planner/materialize/layout.h"
#include "planner/plan/plan_file.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;
using namespace shardplan::planner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  PlanFile f;
  if (!fuzz::run([&] {
        // What read_plan_file passes (kMaxDepth there).
        const nlohmann::json j =
            parse_strict_json(fuzz::as_text(data, size), "plan.json", 16, "a shardplan plan file");
        f = plan_from_json(j, "plan.json");
      })) {
    return 0;
  }
  // What plan_to_json writes reads back as the same plan.
  PlanFile back;
  FUZZ_CHECK(fuzz::run([&] {
    back = plan_from_json(nlohmann::json::parse(plan_to_json(f).dump()), "plan_to_json");
  }));
  FUZZ_CHECK(back == f);
  // The dry run checks what the plan builds; a large world or model is skipped to keep inputs fast
  // (the dry run itself is bounded by the mesh's classes, not its ranks).
  if (f.setup.gpus > 4096 || f.parameters.size() > 4096) return 0;
  fuzz::run([&] {
    const MaterialLayout layout(std::move(f));
    (void)dry_run(layout, 0);
  });
  return 0;
}
