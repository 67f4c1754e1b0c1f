// The best plan of a shipped model on dgx-h100 with its parallel degrees pinned: what the
// rehearsal's layer tests (layer GEMMs, layer attention) read their local shapes from.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collectives/cluster.h"
#include "planner/plan/plan_file.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {

// tp, pp, cp and ep pinned; dp 0 leaves it free; `stack` empty: the default stack.
inline PlanFile plan_of(const std::string& model, int64_t gpus, int64_t seq, int64_t tp, int64_t pp,
                        int64_t cp, int64_t ep = 1, int64_t dp = 0, int64_t global_batch = 256) {
  Pins pins;
  pins.tp = tp;
  pins.pp = pp;
  pins.cp = cp;
  pins.ep = ep;
  if (dp > 0) pins.dp = dp;
  Planner p(tensor::find_model_config(model),
            collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = gpus, .seq = seq, .global_batch = global_batch}, {});
  const SearchResult r = p.search(pins, 1);
  EXPECT_FALSE(r.top.empty()) << model;
  return plan_file(p, r.top.at(0), model, 1);
}

}  // namespace shardplan::planner
