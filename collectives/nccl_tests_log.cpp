#include "collectives/nccl_tests_log.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"

// Note [nccl-tests output]
// nccl-tests (src/common.cu) prints, per run:
//   # nccl-tests version 2.18.3 nccl-headers=... nccl-library=...     (newer versions)
//   # Collective test starting: all_reduce_perf                       (newer versions)
//   # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
//   # Using devices
//   #  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3
//   ...
//   #                                          out-of-place                       in-place
//   #       size   count   type   redop   root     time   algbw   busbw #wrong     time ...
//   #        (B)  (elements)                       (us)  (GB/s)  (GB/s)            (us) ...
//          8388608   2097152  float  sum  -1   481.51   17.42   32.67      0   490.24 ...
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 18.9974
// Older versions have no "root" column and call "#wrong" "error" (a float, or N/A). So the column
// header (a comment line naming size, count and time) defines the layout; every row must have as
// many fields. mpirun and NCCL print their own lines among the rows ("[host:pid] 15 more
// processes have sent help message ...", "host:1:2 [0] NCCL INFO ..."): a line is taken as a row
// when its first field is an unsigned integer (a size) or it has exactly the header's number of
// fields, and skipped otherwise; a row is then checked field by field. Rows flagged with wrong
// results ("#wrong" > 0) are refused: their times measure a broken run.

namespace shardplan::collectives {
namespace {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::optional<double> to_double(std::string_view s) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The column layout from the header line (without its leading '#').
struct Columns {
  int64_t line = 0;
  std::vector<std::string> names;
  int size = -1, count = -1;
  int time[2] = {-1, -1};   // out-of-place, in-place
  int wrong[2] = {-1, -1};  // "#wrong" or "error" after each time
};

std::optional<Columns> column_header(std::string_view comment, int64_t line) {
  Columns c;
  c.line = line;
  int times = 0;
  for (std::string_view f : fields(comment)) {
    const int at = static_cast<int>(c.names.size());
    if (f == "size" && c.size < 0) c.size = at;
    if (f == "count" && c.count < 0) c.count = at;
    if (f == "time" && times < 2) c.time[times++] = at;
    if ((f == "#wrong" || f == "error") && times >= 1 && c.wrong[times - 1] < 0) {
      c.wrong[times - 1] = at;
    }
    c.names.emplace_back(f);
  }
  if (c.size < 0 || c.count < 0 || c.time[0] < 0) return std::nullopt;
  return c;
}

// The collective named by a test binary somewhere in `s` ("all_reduce_perf", "alltoall_perf.log").
std::optional<CollectiveKind> kind_in(std::string_view s) {
  const size_t at = s.find("_perf");
  if (at == std::string_view::npos) return std::nullopt;
  size_t start = at;
  while (start > 0 &&
         (std::isalpha(static_cast<unsigned char>(s[start - 1])) || s[start - 1] == '_')) {
    --start;
  }
  try {
    return parse_collective_kind(s.substr(start, at - start));
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

NcclTestsLog parse_nccl_tests_log(std::string_view text, std::string_view origin) {
  NcclTestsLog log;
  log.origin = std::string(origin);
  std::optional<Columns> cols;
  std::optional<CollectiveKind> kind;
  std::map<int64_t, std::string> rank_host;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> f = fields(line);
    if (f.empty()) continue;
    if (f[0].front() == '#') {
      std::string_view comment = line.substr(line.find('#') + 1);
      const std::vector<std::string_view> c = fields(comment);
      if (c.size() >= 4 && c[0] == "Collective" && c[1] == "test" && c[2] == "starting:") {
        const std::optional<CollectiveKind> k = kind_in(c[3]);
        SP_CHECK(k.has_value(), origin, ":", line_no, ": unknown collective test '", c[3],
                 "', expected one of nccl-tests' *_perf binaries");
        kind = k;
      } else if (c.size() >= 8 && c[0] == "Rank" && c[4] == "Pid" && c[6] == "on") {
        // "#  Rank  0 Group  0 Pid  6899 on host device 0 [...] name"
        const std::optional<int64_t> r = to_int(c[1]);
        SP_CHECK(r && *r >= 0, origin, ":", line_no, ": field 'Rank': '", c[1],
                 "' is not a rank number");
        SP_CHECK(log.rows.empty(), origin, ":", line_no,
                 ": a second nccl-tests run starts here, expected one run per log file (split "
                 "the file)");
        SP_CHECK(rank_host.emplace(*r, std::string(c[7])).second, origin, ":", line_no, ": rank ",
                 *r,
                 " is listed twice: the ranks did not form one job (nccl-tests built without "
                 "MPI=1 runs one independent test per process), expected each rank once");
      } else if (std::optional<Columns> h = column_header(comment, line_no)) {
        cols = std::move(h);
      }
      continue;
    }
    if (!cols) continue;  // before the header: mpirun's and the shell's own output
    const bool looks_like_row = all_digits(f[0]) || f.size() == cols->names.size();
    if (!looks_like_row) continue;
    // "time (in-place)": which block a repeated column name belongs to.
    auto field_name = [&](size_t i) {
      const int at = static_cast<int>(i);
      if (cols->time[1] < 0 || at < cols->time[0]) return cols->names[i];
      return cols->names[i] + (at >= cols->time[1] ? " (in-place)" : " (out-of-place)");
    };
    SP_CHECK(f.size() == cols->names.size(), origin, ":", line_no, ": ", f.size(),
             " fields, expected ", cols->names.size(), " as in the column header on line ",
             cols->line,
             (f.size() < cols->names.size()
                  ? " (truncated row: field '" + field_name(f.size()) + "' missing)"
                  : std::string(" (extra fields)")));
    NcclTestsRow row;
    row.line = line_no;
    auto integer = [&](int i) {
      const std::optional<int64_t> v = to_int(f[static_cast<size_t>(i)]);
      SP_CHECK(v && *v >= 0, origin, ":", line_no, ": field '", field_name(static_cast<size_t>(i)),
               "': '", f[static_cast<size_t>(i)], "' is not a non-negative integer");
      return *v;
    };
    auto time = [&](int i) {
      const std::optional<double> v = to_double(f[static_cast<size_t>(i)]);
      SP_CHECK(v && *v > 0, origin, ":", line_no, ": field '", field_name(static_cast<size_t>(i)),
               "': '", f[static_cast<size_t>(i)], "' is not a positive time in microseconds");
      return *v;
    };
    auto check_wrong = [&](int i) {
      if (i < 0) return;
      const std::string_view w = f[static_cast<size_t>(i)];
      if (w == "N/A") return;  // validation off (-c 0)
      const std::optional<double> v = to_double(w);
      SP_CHECK(v.has_value(), origin, ":", line_no, ": field '", field_name(static_cast<size_t>(i)),
               "': '", w, "' is not a number or N/A");
      SP_CHECK(*v == 0, origin, ":", line_no, ": field '", field_name(static_cast<size_t>(i)),
               "' is ", w, ": nccl-tests found wrong results, expected 0 (a correct run)");
    };
    row.bytes = integer(cols->size);
    row.count = integer(cols->count);
    row.out_of_place_us = time(cols->time[0]);
    check_wrong(cols->wrong[0]);
    if (cols->time[1] >= 0) {
      row.in_place_us = time(cols->time[1]);
      check_wrong(cols->wrong[1]);
    }
    // Every other column (type, redop, root, algbw, busbw) is text or derived: left as printed.
    log.rows.push_back(row);
  }
  SP_CHECK(cols.has_value(), origin,
           ": no nccl-tests column header ('#  size  count  type ... time  algbw  busbw') found, "
           "expected the standard output of an nccl-tests binary");
  SP_CHECK(!log.rows.empty(), origin, ": no size rows after the column header on line ", cols->line,
           ", expected at least one");
  if (!kind) kind = kind_in(origin);
  SP_CHECK(kind.has_value(), origin,
           ": no '# Collective test starting: <name>_perf' line and no test name in the file "
           "name, expected one of them (name the file after the test, e.g. all_reduce_perf.log)");
  log.kind = *kind;
  SP_CHECK(!rank_host.empty(), origin,
           ": no '#  Rank N Group G Pid P on HOST device D' lines, expected nccl-tests' device "
           "list (it tells how many ranks ran on how many nodes)");
  std::map<std::string, int64_t> per_host;
  for (const auto& [rank, host] : rank_host) ++per_host[host];
  log.ranks = static_cast<int64_t>(rank_host.size());
  log.nodes = static_cast<int64_t>(per_host.size());
  for (const auto& [host, n] : per_host) {
    log.ranks_per_node = std::max(log.ranks_per_node, n);
    log.same_ranks_per_node = log.same_ranks_per_node && n == per_host.begin()->second;
  }
  return log;
}

NcclTestsLog load_nccl_tests_log(const std::filesystem::path& path) {
  return parse_nccl_tests_log(read_text_file(path, "nccl-tests log"), path.string());
}

}  // namespace shardplan::collectives
