// The chart of `shardplan compare --svg`: per strategy, a bar of the step time split into
// compute, bubble, exposed communication and optimizer, and a bar of memory per GPU against the
// GPU's capacity (a dashed line). Plain SVG 1.1, no script, readable when rendered to PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/step_model.h"

namespace shardplan::cli {

struct ChartRow {
  std::string strategy;
  bool fits = false;
  std::string reason;  // when it does not fit
  planner::Bill bill;
  double step_time_s = 0;
  int64_t memory_bytes = 0;
  std::string detail;  // under the bar: its configuration and MFU
};

// Text for SVG: & < > " escaped.
std::string escape_xml(const std::string& s);
// A round axis maximum: 1, 2 or 5 times a power of ten at or above x.
double nice_max(double x);

std::string compare_chart_svg(const std::vector<ChartRow>& rows, double capacity_bytes,
                              const std::string& title);

}  // namespace shardplan::cli
