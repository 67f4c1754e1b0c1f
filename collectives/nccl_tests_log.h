// The standard output of nccl-tests (all_reduce_perf, all_gather_perf, ...) as data: which
// collective, how many ranks on how many hosts, and every size row with its out-of-place and
// in-place times. calibration.h fits the cost model's link parameters to these rows.
//   NcclTestsLog log = load_nccl_tests_log("all_reduce_perf.log");
//   log.kind == CollectiveKind::kAllReduce; log.ranks == 16; log.nodes == 2; log.rows.size() == 24
// Note [nccl-tests output] in nccl_tests_log.cpp describes the format and what is checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/collective_call.h"

namespace shardplan::collectives {

struct NcclTestsRow {
  int64_t line = 0;   // 1-based line in the log, for messages
  int64_t bytes = 0;  // nccl-tests' size S (column "size")
  int64_t count = 0;  // elements per rank (column "count")
  // Average time of one operation in microseconds (column "time"): out-of-place, then in-place
  // when the log has that block.
  double out_of_place_us = 0;
  std::optional<double> in_place_us;
};

struct NcclTestsLog {
  std::string origin;  // the file name, in messages
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t ranks = 0;           // "#  Rank N Group G Pid P on HOST device D ..." lines
  int64_t nodes = 0;           // distinct HOSTs among them
  int64_t ranks_per_node = 0;  // the most ranks on one host
  bool same_ranks_per_node = true;
  std::vector<NcclTestsRow> rows;
};

// Parses `text`; `origin` names it in errors. Throws shardplan::Error naming origin, line and
// field for a malformed row (too few or too many fields, a field that is not a number, a row that
// nccl-tests flagged with wrong results), and naming origin for a log without a column header,
// without rows, without the rank list or without a collective name.
NcclTestsLog parse_nccl_tests_log(std::string_view text, std::string_view origin);
// Reads the file (errors name it) and parses it. The collective comes from the log's "# Collective
// test starting: <name>" line or, for older nccl-tests, from the file name (all_reduce_perf.log).
NcclTestsLog load_nccl_tests_log(const std::filesystem::path& path);

}  // namespace shardplan::collectives
