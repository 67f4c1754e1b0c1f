// nccl-tests' standard output as data: both column layouts (current: root and #wrong; older: no
// root, "error"), foreign lines among the rows, and every malformed-log error naming file, line
// and field. Logs under tests/data/nccl_tests/ come from scripts/gen_nccl_tests_logs.py.
#include "collectives/nccl_tests_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace shardplan::collectives {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::string data(const char* name) {
  return std::string(SHARDPLAN_TEST_DATA_DIR) + "/nccl_tests/" + name;
}

// A minimal current-format log: two ranks on one host, `rows` pasted after the header (line 6).
std::string small_log(const std::string& rows,
                      const std::string& ranks =
                          "#  Rank  0 Group  0 Pid 1 on h device  0 [0] G\n"
                          "#  Rank  1 Group  0 Pid 2 on h device  1 [1] G\n") {
  return "# Collective test starting: all_reduce_perf\n" + ranks +
         "#       size   count  type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw "
         "#wrong\n" +
         rows;
}
const char* kGoodRow = "1024  256  float  sum  -1  10.00  0.10  0.10  0  11.00  0.09  0.09  0\n";

TEST(NcclTestsLog, ReadsTheCurrentFormat) {
  const NcclTestsLog log = load_nccl_tests_log(data("all_reduce_perf_h100_8gpu.log"));
  EXPECT_EQ(log.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(log.ranks, 8);
  EXPECT_EQ(log.nodes, 1);
  ASSERT_EQ(log.rows.size(), 16u);
  // First row, as printed: "2000000 500000 float sum -1 25.40 ..." on line 19 (after 4 header
  // lines, 9 device-list lines, the NCCL version line, "#", and 3 column-header lines).
  EXPECT_EQ(log.rows[0].line, 19);
  EXPECT_EQ(log.rows[0].bytes, 2000000);
  EXPECT_EQ(log.rows[0].count, 500000);
  EXPECT_DOUBLE_EQ(log.rows[0].out_of_place_us, 25.40);
  EXPECT_DOUBLE_EQ(*log.rows[0].in_place_us, 25.40);
  EXPECT_EQ(log.rows[15].bytes, 32000000);
  EXPECT_DOUBLE_EQ(log.rows[15].out_of_place_us, 175.4);
}

TEST(NcclTestsLog, ReadsTheOlderFormatAndSkipsMpiLines) {
  // No root column, "error" columns, no "Collective test starting": the kind is the file name's.
  const NcclTestsLog log = load_nccl_tests_log(data("all_reduce_perf_a100_2node.log"));
  EXPECT_EQ(log.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(log.ranks, 16);
  EXPECT_EQ(log.nodes, 2);
  EXPECT_EQ(log.ranks_per_node, 8);
  EXPECT_TRUE(log.same_ranks_per_node);
  ASSERT_EQ(log.rows.size(), 16u);  // the two "[selene-0101:04321] ..." lines are not rows
  EXPECT_EQ(log.rows[3].bytes, 4 * 960000);
  EXPECT_DOUBLE_EQ(log.rows[3].out_of_place_us, 163.6);
}

TEST(NcclTestsLog, TruncatedRowNamesFileLineAndMissingField) {
  EXPECT_THAT([] { load_nccl_tests_log(data("truncated_all_reduce_perf.log")); },
              ThrowsMessage<Error>(AllOf(HasSubstr("truncated_all_reduce_perf.log:23: 3 fields, "
                                                   "expected 13"),
                                         HasSubstr("field 'redop' missing"))));
}

TEST(NcclTestsLog, MalformedRowsNameLineAndField) {
  auto fails = [](const std::string& text, const std::string& what) {
    EXPECT_THAT([&] { parse_nccl_tests_log(text, "x.log"); },
                ThrowsMessage<Error>(HasSubstr(what)));
  };
  // A non-number in a time field (line 5 = first row).
  fails(small_log("1024  256  float  sum  -1  10.00  0.10  0.10  0  1l.00  0.09  0.09  0\n"),
        "x.log:5: field 'time (in-place)': '1l.00' is not a positive time");
  fails(small_log("1024  256  float  sum  -1  abc  0.10  0.10  0  11.00  0.09  0.09  0\n"),
        "x.log:5: field 'time (out-of-place)': 'abc'");
  // Wrong columns: one too many, and a negative size.
  fails(small_log("1024  256  float  sum  -1  10.00  0.10  0.10  0  11.00  0.09  0.09  0  7\n"),
        "x.log:5: 14 fields, expected 13 as in the column header on line 4 (extra fields)");
  fails(small_log(std::string(kGoodRow) +
                  "-2048  512  float  sum  -1  10.00  0.10  0.10  0  11.00  0.09  0.09  0\n"),
        "x.log:6: field 'size': '-2048' is not a non-negative integer");
  // A row nccl-tests marked wrong.
  fails(small_log("1024  256  float  sum  -1  10.00  0.10  0.10  0  11.00  0.09  0.09  4\n"),
        "x.log:5: field '#wrong (in-place)' is 4: nccl-tests found wrong results");
}

TEST(NcclTestsLog, MissingPartsAreErrors) {
  EXPECT_THAT([] { parse_nccl_tests_log("hello\n# nothing here\n", "x.log"); },
              ThrowsMessage<Error>(HasSubstr("x.log: no nccl-tests column header")));
  EXPECT_THAT([] { parse_nccl_tests_log(small_log(""), "x.log"); },
              ThrowsMessage<Error>(HasSubstr("x.log: no size rows after the column header on "
                                             "line 4")));
  EXPECT_THAT([] { parse_nccl_tests_log(small_log(kGoodRow, ""), "x.log"); },
              ThrowsMessage<Error>(HasSubstr("x.log: no '#  Rank N Group G Pid P on HOST")));
  // Every process calls itself rank 0: nccl-tests built without MPI.
  EXPECT_THAT(
      [] {
        parse_nccl_tests_log(small_log(kGoodRow,
                                       "#  Rank  0 Group  0 Pid 1 on h device  0 [0] G\n"
                                       "#  Rank  0 Group  0 Pid 2 on h device  1 [1] G\n"),
                             "x.log");
      },
      ThrowsMessage<Error>(HasSubstr("x.log:3: rank 0 is listed twice")));
  // Without the "Collective test starting" line the file name must name the test.
  std::string no_kind = small_log(kGoodRow);
  no_kind.erase(0, no_kind.find('\n') + 1);
  EXPECT_EQ(parse_nccl_tests_log(no_kind, "runs/alltoall_perf.txt").kind,
            CollectiveKind::kAllToAll);
  EXPECT_THAT([&] { parse_nccl_tests_log(no_kind, "x.log"); },
              ThrowsMessage<Error>(HasSubstr("x.log: no '# Collective test starting")));
}

TEST(NcclTestsLog, NcclDebugAndBlankLinesAmongRowsAreSkipped) {
  const NcclTestsLog log = parse_nccl_tests_log(
      small_log(std::string(kGoodRow) + "\nhost:12:34 [0] NCCL INFO comm 0x1 rank 0 nranks 2\n" +
                "2048  512  float  sum  -1  12.00  0.17  0.17  N/A  13.00  0.16  0.16  N/A\n"),
      "x.log");
  ASSERT_EQ(log.rows.size(), 2u);
  EXPECT_EQ(log.rows[1].line, 8);
  EXPECT_DOUBLE_EQ(*log.rows[1].in_place_us, 13.0);
}

}  // namespace
}  // namespace shardplan::collectives
