// fuzz_cli_args: the command-line values the verbs parse themselves (planner/cli/mesh_args.h,
// planner/cli/byte_size.h, mesh/placement.h). The input is up to six lines:
//   --shape, --dtype, --mesh, --mesh-names, --placements, a byte size (--bytes, -b/-e)
// Each line goes to its parser; when the first five parse, the shard spec `shardplan shard` would
// print is made and a few ranks' shards are computed. Placements and byte sizes must round-trip
// through their printed forms.
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "mesh/placement.h"
#include "mesh/shard_spec.h"
#include "planner/cli/byte_size.h"
#include "planner/cli/mesh_args.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string_view> lines = fuzz::split(fuzz::as_text(data, size), "\n", 6);
  lines.resize(6);
  cli::TensorMeshArgs args;
  args.shape = lines[0];
  args.dtype = lines[1];
  args.mesh = lines[2];
  args.mesh_names = lines[3];

  fuzz::run([&] { (void)cli::parse_int_list(lines[0], "--shape"); });
  fuzz::run([&] { (void)args.tensor_dtype(); });
  fuzz::run([&] { (void)cli::parse_mesh_shape(lines[2]); });
  fuzz::run([&] { (void)cli::parse_name_list(lines[3]); });
  fuzz::run([&] { (void)args.device_mesh(); });

  std::vector<mesh::Placement> placements;
  const bool placements_ok = fuzz::run([&] {
    placements = cli::parse_placements_option(lines[4], "--placements");
  });
  if (placements_ok) {
    FUZZ_CHECK(!placements.empty());
    std::vector<mesh::Placement> back;
    FUZZ_CHECK(fuzz::run([&] { back = mesh::parse_placements(mesh::to_string(placements)); }));
    FUZZ_CHECK(back == placements);
    for (const mesh::Placement& p : placements) {
      FUZZ_CHECK(mesh::parse_placement(mesh::to_string(p)) == p);
    }
  }

  int64_t bytes = -1;
  if (fuzz::run([&] { bytes = cli::parse_byte_size(lines[5], "--bytes"); })) {
    FUZZ_CHECK(bytes >= 0);
    // A plain count of bytes ("123", "123B") is taken exactly, not through a double.
    std::string_view digits = lines[5];
    while (!digits.empty() && (digits.back() == 'B' || std::isspace(static_cast<unsigned char>(digits.back())))) {
      digits.remove_suffix(1);
    }
    while (!digits.empty() && std::isspace(static_cast<unsigned char>(digits.front()))) {
      digits.remove_prefix(1);
    }
    int64_t exact = -1;
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos &&
        std::from_chars(digits.data(), digits.data() + digits.size(), exact).ec == std::errc()) {
      FUZZ_CHECK(bytes == exact);
    }
    const std::string text = cli::format_byte_size(bytes);
    // The printed form reads back, up to the largest unit parse_byte_size knows (TiB).
    if (bytes < (int64_t{1} << 50)) {
      int64_t back = -1;
      FUZZ_CHECK(fuzz::run([&] { back = cli::parse_byte_size(text, "--bytes"); }));
      FUZZ_CHECK(back == bytes);
    }
  }

  if (!placements_ok) return 0;
  mesh::ShardSpec spec;
  if (!fuzz::run([&] { spec = args.shard_spec(placements); })) return 0;
  // Listing the index ranges of a strided shard costs one range per piece: only when small.
  bool cheap_to_list = true;
  for (int64_t n : spec.shape) cheap_to_list = cheap_to_list && n <= 4096;
  for (const mesh::Placement& p : spec.placements) {
    cheap_to_list = cheap_to_list && (!p.is_any_shard() || p.split_factor() <= 4096);
  }
  fuzz::run([&] {
    (void)mesh::to_string(spec);
    (void)mesh::is_shardable(spec);
    (void)mesh::is_evenly_shardable(spec);
    (void)mesh::num_shards(spec);
    const int64_t n = spec.mesh.size();
    for (int64_t flat : {int64_t{0}, n / 2, n - 1}) {
      const int64_t rank = spec.mesh.rank_at_flat_index(flat);
      const std::optional<mesh::MeshCoord> coord = spec.mesh.coordinate_of(rank);
      FUZZ_CHECK(coord.has_value());
      const mesh::LocalShard s = mesh::local_shape_and_offset(spec, *coord);
      FUZZ_CHECK(mesh::local_shape_and_offset_for_rank(spec, rank) == s);
      FUZZ_CHECK(s.shape.size() == spec.shape.size());
      for (size_t d = 0; d < s.shape.size(); ++d) {
        FUZZ_CHECK(s.shape[d] >= 0 && s.shape[d] <= spec.shape[d]);
      }
      // The local shape and offset (closed form) agree with the listed ranges.
      if (cheap_to_list) {
        const auto lists = mesh::global_index_ranges(spec, *coord);
        for (size_t d = 0; d < lists.size(); ++d) {
          int64_t held = 0;
          for (const mesh::IndexRange& r : lists[d]) held += r.size();
          FUZZ_CHECK(held == s.shape[d]);
          FUZZ_CHECK(s.offset[d] == (lists[d].empty() ? spec.shape[d] : lists[d][0].begin));
        }
      }
      (void)mesh::local_strides(spec, *coord);
      (void)mesh::local_bytes(spec, *coord);
    }
  });
  const nlohmann::json j = spec;
  mesh::ShardSpec back;
  FUZZ_CHECK(fuzz::run([&] { back = j.get<mesh::ShardSpec>(); }));
  FUZZ_CHECK(back == spec);
  return 0;
}
