// plan.json: what `shardplan plan --out` writes and `materialize` reads (docs/user-guide.md
// "plan.json"): the model (its name and full config), the job, a top-level
// "mesh": {"shape": [pp, dp/ep, ep, cp, tp], "names": ["pp", "dp", "ep", "cp", "tp"]}, the
// configuration, the placement of every parameter on that mesh, the init seed and the
// predictions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "planner/planner.h"

namespace shardplan::planner {

inline constexpr std::string_view kPlanFormat = "shardplan.plan";
inline constexpr int64_t kPlanVersion = 1;
inline constexpr int64_t kDefaultInitSeed = 0;

nlohmann::ordered_json plan_document(Planner& p, const PlanResult& r, std::string_view model_name,
                                     int64_t seed = kDefaultInitSeed);

}  // namespace shardplan::planner
