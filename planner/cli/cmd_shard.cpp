// `shardplan shard`: where each rank's shard of one tensor lies (mesh/shard_spec.h): its mesh
// coordinate, local shape, global offset and local bytes, at any scale (docs/user-guide.md
// "shard").
//   shardplan shard --shape 10,5 --dtype bf16 --mesh 2x2 [--mesh-names dp,tp] --placements S0,S0
//       [--ranks all | --rank R | --coord i,j] [--json]
// Ranks are grouped into classes that share a local shape (mesh/shard_classes.h), computed
// without walking the ranks. Up to kRankListThreshold ranks every rank is listed too; above it
// only with --ranks all, streamed row by row. --json prints {"shape", "dtype", "mesh",
// "placements", "ranks" (when listed): [{"rank", "coord", "local_shape", "global_offset",
// "bytes"}], "classes": [{"count", "local_shape", "bytes", "coords", "global_offset"}]}, or with
// --rank / --coord {..., "rank": {...}}. Like PyTorch's distribute_tensor, more shards than
// elements on a dim is a valid layout: the trailing ranks hold empty shards whose global offset
// is the dim's size (docs/semantics.md §2.4). Anything make_shard_spec rejects is bad input, and
// so is a mesh of more than 10^15 ranks.
#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/checked.h"
#include "base/error.h"
#include "mesh/shard_classes.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/mesh_args.h"
#include "planner/cli/placement_args.h"
#include "planner/cli/text_format.h"

namespace shardplan::cli {
namespace {

// Meshes up to this many ranks list every rank by default (docs/user-guide.md "shard").
constexpr int64_t kRankListThreshold = 1024;

struct ShardOptions {
  TensorMeshArgs tensor_mesh;
  std::string placements;  // --placements S0,R
  std::string ranks;       // --ranks all
  int64_t rank = -1;       // --rank R
  std::string coord;       // --coord i,j,k
};

struct Layout {
  mesh::LayoutShape shape;
  tensor::DType dtype = tensor::DType::kFloat32;
  std::vector<std::string> names;
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int64_t shard_bytes(const Layout& l, const DimVector& local) {
  // Cannot overflow: a shard is no larger than the global tensor, checked by layout_shape.
  int64_t bytes = tensor::itemsize(l.dtype);
  for (int64_t n : local) bytes *= n;
  return bytes;
}

nlohmann::ordered_json head_json(const Layout& l) {
  nlohmann::ordered_json mesh_doc;
  mesh_doc["shape"] = l.shape.mesh_shape;
  if (!l.names.empty()) mesh_doc["names"] = l.names;
  return {{"shape", l.shape.shape.vec()},
          {"dtype", tensor::dtype_name(l.dtype)},
          {"mesh", mesh_doc},
          {"placements", to_string(l.shape.placements)}};
}

nlohmann::ordered_json rank_json(const Layout& l, int64_t rank) {
  const std::vector<int64_t> coord = mesh::coord_of_rank(l.shape, rank);
  const mesh::LocalShard s = mesh::rank_shard(l.shape, coord);
  nlohmann::ordered_json row;
  row["rank"] = rank;
  row["coord"] = coord;
  row["local_shape"] = s.shape.vec();
  row["global_offset"] = s.offset.vec();
  row["bytes"] = shard_bytes(l, s.shape);
  return row;
}

// The document, written piecewise so that --ranks all on a large mesh streams: the rows go to
// stdout one by one and are never held together.
void print_json(const Layout& l, bool list_ranks) {
  std::string head = head_json(l).dump();
  head.pop_back();  // the closing brace: ranks and classes follow
  std::cout << head;
  if (list_ranks) {
    std::cout << ",\"ranks\":[";
    for (int64_t r = 0; r < l.shape.ranks; ++r) {
      std::cout << (r ? "," : "") << rank_json(l, r).dump();
    }
    std::cout << "]";
  }
  std::cout << ",\"classes\":" << shard_classes_json(l.shape, l.dtype).dump() << "}\n";
}

void print_text(const Layout& l, const std::vector<mesh::ShardClass>& cs, bool list_ranks) {
  std::cout << "tensor     " << bracketed(l.shape.shape) << ' ' << l.dtype << '\n'
            << "mesh       " << bracketed(DimVector(l.shape.mesh_shape)) << " ("
            << with_commas(l.shape.ranks) << " ranks"
            << (l.names.empty() ? std::string() : ", dims " + joined(l.names)) << ")\n"
            << "placements " << to_string(l.shape.placements) << "\n\n";
  if (list_ranks) {
    // Streamed: one line per rank, widths from the classes (every rank's values are a class's).
    std::vector<std::vector<std::string>> rows;
    for (int64_t r = 0; r < l.shape.ranks; ++r) {
      const nlohmann::ordered_json row = rank_json(l, r);
      rows.push_back({std::to_string(r),
                      bracketed(DimVector(row["coord"].get<std::vector<int64_t>>())),
                      bracketed(DimVector(row["local_shape"].get<std::vector<int64_t>>())),
                      bracketed(DimVector(row["global_offset"].get<std::vector<int64_t>>())),
                      std::to_string(row["bytes"].get<int64_t>())});
      if (rows.size() == 4096) {
        print_table({"rank", "coord", "local_shape", "global_offset", "bytes"}, rows,
                    {true, false, false, false, true});
        rows.clear();
      }
    }
    if (!rows.empty()) {
      print_table({"rank", "coord", "local_shape", "global_offset", "bytes"}, rows,
                  {true, false, false, false, true});
    }
    std::cout << '\n';
  }
  std::vector<std::vector<std::string>> rows;
  for (const mesh::ShardClass& c : cs) {
    rows.push_back({with_commas(c.count), bracketed(c.local_shape),
                    std::to_string(shard_bytes(l, c.local_shape)),
                    bracketed(DimVector(c.first_coord))});
  }
  std::cout << cs.size() << " class(es) of ranks by local shape:\n";
  print_table({"ranks", "local_shape", "bytes", "first coord"}, rows, {true, false, true, false});
}

}  // namespace

void register_shard(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "shard",
                           "Show where each rank's shard of a tensor lies on a device mesh (local "
                           "shape, global offset, bytes), grouped into classes at any scale");
  auto opts = std::make_shared<ShardOptions>();
  add_tensor_mesh_options(cmd, opts->tensor_mesh);
  cmd.add_option("--placements", opts->placements,
                 "One placement per mesh dim: S<dim>, R, P, Psum/Pavg/Pmax/Pmin/Pprod, "
                 "SS<dim>:<split_factor>; e.g. S0,R")
      ->required()
      ->type_name("P,P,...");
  auto* all = cmd.add_option("--ranks", opts->ranks,
                             "all: list every rank (streamed); by default only meshes of up to "
                             "1,024 ranks list them")
                  ->check(CLI::IsMember({"all"}))
                  ->type_name("all");
  auto* one = cmd.add_option("--rank", opts->rank, "Show one rank (row-major position)")
                  ->check(count_in(0, std::numeric_limits<int64_t>::max(), "a rank of the mesh"))
                  ->type_name("R");
  auto* at = cmd.add_option("--coord", opts->coord, "Show the rank at this mesh coordinate")
                 ->type_name("i,j,...");
  one->excludes(at)->excludes(all);
  at->excludes(all);
  cmd.callback([&ctx, opts] {
    Layout l;
    l.dtype = opts->tensor_mesh.tensor_dtype();
    const std::vector<int64_t> mesh_shape = parse_mesh_shape(opts->tensor_mesh.mesh);
    l.names = parse_name_list(opts->tensor_mesh.mesh_names);
    SP_CHECK(l.names.empty() || l.names.size() == mesh_shape.size(), "--mesh-names '",
             opts->tensor_mesh.mesh_names, "' has ", l.names.size(), " names for the ",
             mesh_shape.size(), "-d mesh '", opts->tensor_mesh.mesh,
             "', expected one name per mesh dim");
    const std::vector<int64_t> shape = opts->tensor_mesh.tensor_shape();
    l.shape = mesh::layout_shape(shape, mesh_shape,
                                 parse_placements_option(opts->placements, "--placements"));
    if (opts->rank >= 0 || !opts->coord.empty()) {
      int64_t rank = opts->rank;
      if (!opts->coord.empty()) {
        const std::vector<int64_t> c = parse_int_list(opts->coord, "--coord");
        (void)mesh::rank_shard(l.shape, c);  // checks the coordinate
        rank = mesh::rank_of_coord(l.shape, c);
      }
      const nlohmann::ordered_json row = rank_json(l, rank);
      if (ctx.json) {
        nlohmann::ordered_json doc = head_json(l);
        doc["rank"] = row;
        print_json_document(doc);
      } else {
        std::cout << "rank " << rank << " at " << row["coord"].dump() << ": local shape "
                  << row["local_shape"].dump() << ", global offset " << row["global_offset"].dump()
                  << ", " << row["bytes"] << " bytes\n";
      }
      return;
    }
    const bool list = opts->ranks == "all" || l.shape.ranks <= kRankListThreshold;
    ctx.json ? print_json(l, list) : print_text(l, mesh::shard_classes(l.shape), list);
  });
}

}  // namespace shardplan::cli
