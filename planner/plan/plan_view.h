// A plan as the planning verbs report it (--json of plan, estimate, compare; docs/user-guide.md
// "plan"): its configuration, schedule, stage split, mesh and predictions, and its bill.
//   nlohmann::ordered_json j = plan_view_json(planner, result);
//   j["bill"] = bill_json(bill);          // time_s: the parts the step time is summed from
#pragma once

#include <nlohmann/json.hpp>

#include "planner/search/planner.h"

namespace shardplan::planner {

// The fields every plan row has: family, degrees, choices, schedule, gradient accumulation, stage
// layers, dim order, mesh, step time, MFU, tokens/s, TFLOP/s per GPU, memory and capacity.
nlohmann::ordered_json plan_view_json(const Planner& p, const PlanResult& r);
// One collective of a bill: what, kind, mesh_dim, group_size, bytes, calls_per_step, time_s,
// exposed_s (bill_json's entries add "hidden"; plan.json's prediction.collectives are these).
nlohmann::ordered_json collective_json(const BillCollective& c);
// Resident bytes by category, the time parts (time_parts), the pacing stage and every collective.
nlohmann::ordered_json bill_json(const Bill& b);

}  // namespace shardplan::planner
