// `shardplan shard`: where every rank's shard of one tensor lies (mesh/shard_spec.h): its mesh
// coordinate, local shape, global offset and local bytes, one row per rank in rank order.
//   shardplan shard --shape 10,5 --dtype bf16 --mesh 2x2 [--mesh-names dp,tp] --placements S0,S0
// --json prints {"shape":[10,5],"dtype":"bfloat16","mesh":{"shape":[2,2]},"placements":"S0,S0",
// "ranks":[{"rank":0,"coord":[0,0],"local_shape":[3,5],"global_offset":[0,0],
// "bytes":30},...]}. Like PyTorch's distribute_tensor, more shards than elements on a dim is a
// valid layout: the trailing ranks hold empty shards whose global offset is the dim's size
// (docs/semantics.md §2.4). is_tensor_shardable only filters op strategies, it does not refuse a
// layout. Anything make_shard_spec rejects is bad input.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mesh/shard_spec.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/mesh_args.h"
#include "planner/cli/text_format.h"

namespace shardplan::cli {
namespace {

struct ShardOptions {
  TensorMeshArgs tensor_mesh;
  std::string placements;  // --placements S0,R
};

// The rank rows, walked in rank order of the mesh array (row-major positions).
template <typename Row>
void for_each_rank(const mesh::ShardSpec& spec, Row&& row) {
  for (int64_t i = 0; i < spec.mesh.size(); ++i) {
    const int64_t rank = spec.mesh.rank_at_flat_index(i);
    const mesh::MeshCoord coord = *spec.mesh.coordinate_of(rank);
    row(rank, coord, mesh::local_shape_and_offset(spec, coord));
  }
}

void print_json(const mesh::ShardSpec& spec) {
  // Written piecewise: a mesh of 100,000 ranks would make a large nlohmann tree for nothing. The
  // inputs come first, as in every verb's document.
  nlohmann::ordered_json head = tensor_mesh_json(spec);
  head["placements"] = to_string(spec.placements);
  std::string out = head.dump();
  out.pop_back();  // the closing brace: the ranks follow
  out += ",\"ranks\":[";
  bool first = true;
  const int64_t itemsize = tensor::itemsize(spec.dtype);
  for_each_rank(spec, [&](int64_t rank, const mesh::MeshCoord& coord, const mesh::LocalShard& s) {
    nlohmann::ordered_json row;
    row["rank"] = rank;
    row["coord"] = coord.vec();
    row["local_shape"] = s.shape.vec();
    row["global_offset"] = s.offset.vec();
    int64_t bytes = itemsize;
    for (int64_t n : s.shape) bytes *= n;
    row["bytes"] = bytes;
    out += (first ? "" : ",") + row.dump();
    first = false;
  });
  std::cout << out << "]}\n";
}

void print_text(const mesh::ShardSpec& spec) {
  std::vector<std::vector<std::string>> rows;
  const int64_t itemsize = tensor::itemsize(spec.dtype);
  for_each_rank(spec, [&](int64_t rank, const mesh::MeshCoord& coord, const mesh::LocalShard& s) {
    int64_t bytes = itemsize;
    for (int64_t n : s.shape) bytes *= n;
    rows.push_back({std::to_string(rank), bracketed(coord), bracketed(s.shape),
                    bracketed(s.offset), std::to_string(bytes)});
  });
  std::cout << "tensor     " << bracketed(spec.shape) << ' ' << spec.dtype << '\n'
            << "mesh       " << spec.mesh << '\n'
            << "placements " << to_string(spec.placements) << "\n\n";
  const std::vector<std::string> header = {"rank", "coord", "local_shape", "global_offset",
                                           "bytes"};
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  // Numbers (rank, bytes) right-aligned, lists left-aligned.
  auto print_row = [&](const std::vector<std::string>& r) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      const bool right = c == 0 || c == 4;
      line += (c ? "  " : "") + (right ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : ""));
    }
    std::cout << line << '\n';
  };
  print_row(header);
  for (const auto& r : rows) print_row(r);
}

}  // namespace

void register_shard(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "shard",
                           "Show every rank's shard of a tensor laid out on a device mesh (local "
                           "shape, global offset, bytes)");
  auto opts = std::make_shared<ShardOptions>();
  add_tensor_mesh_options(cmd, opts->tensor_mesh);
  cmd.add_option("--placements", opts->placements,
                 "One placement per mesh dim: S<dim>, R, P, Psum/Pavg/Pmax/Pmin/Pprod, "
                 "SS<dim>:<split_factor>; e.g. S0,R")
      ->required()
      ->type_name("P,P,...");
  cmd.callback([&ctx, opts] {
    const mesh::ShardSpec spec =
        opts->tensor_mesh.shard_spec(parse_placements_option(opts->placements, "--placements"));
    ctx.json ? print_json(spec) : print_text(spec);
  });
}

}  // namespace shardplan::cli
