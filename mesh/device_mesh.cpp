#include "mesh/device_mesh.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "base/checked.h"
#include "base/error.h"
#include "base/json_fields.h"

namespace shardplan::mesh {

// Shapes print as [2, 3] (base/error.h); this namespace's own operator<< would hide it.
using ::shardplan::operator<<;
namespace {

// Product of the mesh extents, each >= 1, checked against int64 overflow.
int64_t checked_mesh_size(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    SP_CHECK(shape[d] >= 1, "mesh shape ", std::span<const int64_t>(shape), ": dim ", d,
             " has size ", shape[d], ", expected >= 1");
    SP_CHECK(mul_into(n, shape[d], n), "mesh shape ", std::span<const int64_t>(shape),
             " has more than 2^63 ranks");
  }
  return n;
}

// Dims of size > 1 by descending stride. The layout is "nested" when every such stride exceeds the
// largest offset reachable with the smaller ones (sum of (size-1)*stride): then each rank has one
// coordinate and division recovers it, like digits of a mixed-radix number with gaps.
bool nested_order(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                  std::vector<int64_t>* order) {
  order->clear();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1) {
      if (strides[d] <= 0) return false;
      order->push_back(static_cast<int64_t>(d));
    }
  }
  std::stable_sort(order->begin(), order->end(),
                   [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t span = 0;  // largest offset the dims after position i reach
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    const int64_t d = *it;
    if (strides[d] <= span) return false;
    int64_t reach = 0;
    if (!mul_into(shape[d] - 1, strides[d], reach) || !add_into(span, reach, span)) {
      return false;
    }
  }
  return true;
}

std::string join(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? sep : "") + names[i];
  return out;
}

}  // namespace

DeviceMesh::DeviceMesh() = default;

DeviceMesh::DeviceMesh(std::vector<int64_t> shape, std::vector<std::string> dim_names)
    : shape_(std::move(shape)), names_(std::move(dim_names)) {
  size_ = checked_mesh_size(shape_);
  check_names();
  // Row-major arange: stride of dim d = product of the extents after it.
  strides_.assign(shape_.size(), 0);
  int64_t s = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    strides_[d] = shape_[d] > 1 ? s : 0;
    s *= shape_[d];
  }
  SP_ASSERT(nested_order(shape_, strides_, &affine_order_));
}

DeviceMesh DeviceMesh::from_strides(std::vector<int64_t> shape, int64_t offset,
                                    std::vector<int64_t> strides,
                                    std::vector<std::string> dim_names) {
  DeviceMesh m;
  m.shape_ = std::move(shape);
  m.names_ = std::move(dim_names);
  m.size_ = checked_mesh_size(m.shape_);
  m.check_names();
  SP_CHECK(strides.size() == m.shape_.size(), "mesh strides ", std::span<const int64_t>(strides),
           ": got ", strides.size(), " strides for a ", m.shape_.size(), "-d mesh");
  SP_CHECK(offset >= 0, "mesh offset ", offset, " is negative, expected a rank >= 0");
  for (size_t d = 0; d < strides.size(); ++d) {
    if (m.shape_[d] == 1) strides[d] = 0;  // canonical: a size-1 dim never steps
  }
  m.offset_ = offset;
  m.strides_ = std::move(strides);
  int64_t span = 0, reach = 0;
  bool ok = nested_order(m.shape_, m.strides_, &m.affine_order_);
  for (size_t d = 0; ok && d < m.shape_.size(); ++d) {
    ok = mul_into(m.shape_[d] - 1, m.strides_[d], reach) && add_into(span, reach, span);
  }
  SP_CHECK(ok && add_into(offset, span, span), "mesh strides ",
           std::span<const int64_t>(m.strides_), " for shape ", std::span<const int64_t>(m.shape_),
           " are not a valid layout, expected positive strides with each larger than the span of "
           "the smaller ones (distinct ranks)");
  return m;
}

DeviceMesh DeviceMesh::from_ranks(std::vector<int64_t> shape, std::vector<int64_t> ranks,
                                  std::vector<std::string> dim_names) {
  DeviceMesh m;
  m.shape_ = std::move(shape);
  m.names_ = std::move(dim_names);
  m.size_ = checked_mesh_size(m.shape_);
  m.check_names();
  SP_CHECK(static_cast<int64_t>(ranks.size()) == m.size_, "mesh shape ",
           std::span<const int64_t>(m.shape_), " holds ", m.size_, " ranks but the rank list has ",
           ranks.size());
  m.set_ranks(std::move(ranks));
  return m;
}

void DeviceMesh::check_names() const {
  if (names_.empty()) return;
  SP_CHECK(names_.size() == shape_.size(), "mesh dim names (", join(names_, ","), "): got ",
           names_.size(), " names for a ", shape_.size(), "-d mesh, expected one per mesh dim");
  std::unordered_set<std::string> seen;
  for (const std::string& n : names_) {
    SP_CHECK(!n.empty(), "mesh dim names (", join(names_, ","), "): a name is empty");
    SP_CHECK(seen.insert(n).second, "mesh dim names (", join(names_, ","), "): '", n,
             "' appears twice, expected unique names");
  }
}

void DeviceMesh::set_ranks(std::vector<int64_t> ranks) {
  // Try the affine form first: offset = rank at the origin, stride d = step along dim d.
  offset_ = ranks.empty() ? 0 : ranks[0];
  strides_.assign(shape_.size(), 0);
  int64_t unit = 1;  // row-major flat index of the unit coordinate e_d
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] > 1) strides_[d] = ranks[static_cast<size_t>(unit)] - offset_;
    unit *= shape_[d];
  }
  bool affine = offset_ >= 0 && nested_order(shape_, strides_, &affine_order_);
  if (affine) {
    // Verify every rank, walking the coordinate row-major with a running rank value.
    MeshCoord c(shape_.size(), 0);
    int64_t r = offset_;
    for (int64_t i = 0; i < size_ && affine; ++i) {
      affine = ranks[static_cast<size_t>(i)] == r;
      for (size_t d = shape_.size(); d-- > 0;) {
        if (++c[d] < shape_[d]) {
          r += strides_[d];
          break;
        }
        r -= (shape_[d] - 1) * strides_[d];
        c[d] = 0;
      }
    }
  }
  if (affine) {
    explicit_.reset();
    return;
  }
  // Explicit: validate (non-negative, distinct) and index by rank for coordinate lookup.
  auto e = std::make_shared<Explicit>();
  e->sorted.reserve(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    SP_CHECK(ranks[i] >= 0, "mesh rank list: rank ", ranks[i], " at position ", i,
             " is negative, expected ranks >= 0");
    e->sorted.emplace_back(ranks[i], static_cast<int64_t>(i));
  }
  std::sort(e->sorted.begin(), e->sorted.end());
  for (size_t i = 1; i < e->sorted.size(); ++i) {
    SP_CHECK(e->sorted[i].first != e->sorted[i - 1].first, "mesh rank list: rank ",
             e->sorted[i].first, " appears at positions ", e->sorted[i - 1].second, " and ",
             e->sorted[i].second, ", expected distinct ranks");
  }
  e->ranks = std::move(ranks);
  explicit_ = std::move(e);
  offset_ = 0;
  strides_.assign(shape_.size(), 0);
  affine_order_.clear();
}

int64_t DeviceMesh::normalize_dim(int64_t mesh_dim) const {
  const int64_t n = ndim();
  SP_CHECK(mesh_dim >= -n && mesh_dim < n, "mesh dim ", mesh_dim, " out of range for a ", n,
           "-d mesh, expected [", -n, ", ", n - 1, "]");
  return mesh_dim < 0 ? mesh_dim + n : mesh_dim;
}

int64_t DeviceMesh::size(int64_t mesh_dim) const {
  return shape_[static_cast<size_t>(normalize_dim(mesh_dim))];
}

int64_t DeviceMesh::dim_index(const std::string& name) const {
  SP_CHECK(has_dim_names(), "mesh dim '", name, "': the mesh has no dim names (give --mesh-names)");
  for (size_t d = 0; d < names_.size(); ++d) {
    if (names_[d] == name) return static_cast<int64_t>(d);
  }
  SP_FAIL("mesh dim '", name, "' is unknown, expected one of: ", join(names_, ", "));
}

bool DeviceMesh::is_row_major_arange() const {
  if (explicit_ || offset_ != 0) return false;
  int64_t s = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] > 1 && strides_[d] != s) return false;
    s *= shape_[d];
  }
  return true;
}

MeshCoord DeviceMesh::unravel(int64_t flat_index) const {
  MeshCoord c(shape_.size(), 0);
  for (size_t d = shape_.size(); d-- > 0;) {
    c[d] = flat_index % shape_[d];
    flat_index /= shape_[d];
  }
  return c;
}

int64_t DeviceMesh::rank_at(std::span<const int64_t> coord) const {
  SP_CHECK(coord.size() == shape_.size(), "mesh coordinate ", coord, " has ", coord.size(),
           " entries, expected ", shape_.size(), " (one per mesh dim)");
  int64_t flat = 0, r = offset_;
  for (size_t d = 0; d < coord.size(); ++d) {
    SP_CHECK(coord[d] >= 0 && coord[d] < shape_[d], "mesh coordinate ", coord, ": entry ", d,
             " is out of range for mesh shape ", std::span<const int64_t>(shape_));
    flat = flat * shape_[d] + coord[d];
    r += coord[d] * strides_[d];
  }
  return explicit_ ? explicit_->ranks[static_cast<size_t>(flat)] : r;
}

int64_t DeviceMesh::rank_at_flat_index(int64_t flat_index) const {
  SP_CHECK(flat_index >= 0 && flat_index < size_, "mesh position ", flat_index,
           " out of range for ", size_, " ranks");
  if (explicit_) return explicit_->ranks[static_cast<size_t>(flat_index)];
  const MeshCoord c = unravel(flat_index);
  return rank_at(c);
}

std::optional<MeshCoord> DeviceMesh::coordinate_of(int64_t rank) const {
  if (explicit_) {
    const auto& s = explicit_->sorted;
    auto it = std::lower_bound(s.begin(), s.end(), std::make_pair(rank, int64_t{0}));
    if (it == s.end() || it->first != rank) return std::nullopt;
    return unravel(it->second);
  }
  // Affine: peel off the largest stride first (see nested_order).
  int64_t r = rank - offset_;
  if (r < 0) return std::nullopt;
  MeshCoord c(shape_.size(), 0);
  for (int64_t d : affine_order_) {
    const int64_t q = r / strides_[static_cast<size_t>(d)];
    if (q >= shape_[static_cast<size_t>(d)]) return std::nullopt;
    c[static_cast<size_t>(d)] = q;
    r -= q * strides_[static_cast<size_t>(d)];
  }
  if (r != 0) return std::nullopt;
  return c;
}

std::vector<int64_t> DeviceMesh::ranks() const {
  if (explicit_) return explicit_->ranks;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) out.push_back(rank_at_flat_index(i));
  return out;
}

std::vector<int64_t> DeviceMesh::group_ranks(int64_t mesh_dim, int64_t rank) const {
  const size_t d = static_cast<size_t>(normalize_dim(mesh_dim));
  std::optional<MeshCoord> c = coordinate_of(rank);
  SP_CHECK(c.has_value(), "rank ", rank, " is not in ", to_string(*this));
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(shape_[d]));
  for (int64_t i = 0; i < shape_[d]; ++i) {
    (*c)[d] = i;
    out.push_back(rank_at(*c));
  }
  return out;
}

int64_t DeviceMesh::num_groups(int64_t mesh_dim) const { return size_ / size(mesh_dim); }

std::vector<int64_t> DeviceMesh::group_ranks_by_index(int64_t mesh_dim, int64_t group_index) const {
  const size_t d = static_cast<size_t>(normalize_dim(mesh_dim));
  const int64_t groups = size_ / shape_[d];
  SP_CHECK(group_index >= 0 && group_index < groups, "group ", group_index, " along mesh dim ", d,
           " out of range, expected [0, ", groups, ")");
  // Unravel the group number row-major over the dims other than d.
  MeshCoord c(shape_.size(), 0);
  for (size_t e = shape_.size(); e-- > 0;) {
    if (e == d) continue;
    c[e] = group_index % shape_[e];
    group_index /= shape_[e];
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(shape_[d]));
  for (int64_t i = 0; i < shape_[d]; ++i) {
    c[d] = i;
    out.push_back(rank_at(c));
  }
  return out;
}

DeviceMesh DeviceMesh::derived(std::vector<int64_t> shape, std::vector<std::string> names,
                               const std::function<int64_t(const MeshCoord&)>& rank_of) const {
  const int64_t n = checked_mesh_size(shape);
  std::vector<int64_t> ranks;
  ranks.reserve(static_cast<size_t>(n));
  MeshCoord c(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    ranks.push_back(rank_of(c));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
  return from_ranks(std::move(shape), std::move(ranks), std::move(names));
}

DeviceMesh DeviceMesh::slice(const std::vector<std::string>& names, int64_t rank) const {
  SP_CHECK(has_dim_names(), "mesh slice [", join(names, ","),
           "]: the mesh has no dim names, expected a mesh built with dim names");
  std::vector<int64_t> dims;
  for (const std::string& n : names) dims.push_back(dim_index(n));
  return slice_dims(dims, rank);
}

std::vector<int64_t> DeviceMesh::distinct_dims(const std::vector<int64_t>& mesh_dims,
                                               const char* what, std::vector<bool>& used) const {
  SP_CHECK(!mesh_dims.empty(), "mesh ", what, ": no dims requested, expected at least one");
  std::vector<int64_t> dims;
  for (int64_t md : mesh_dims) {
    const int64_t d = normalize_dim(md);
    SP_CHECK(!used[static_cast<size_t>(d)], "mesh ", what, ": mesh dim ",
             has_dim_names() ? names_[static_cast<size_t>(d)] : std::to_string(d),
             " requested twice, expected each dim once");
    used[static_cast<size_t>(d)] = true;
    dims.push_back(d);
  }
  return dims;
}

DeviceMesh DeviceMesh::slice_dims(const std::vector<int64_t>& mesh_dims, int64_t rank) const {
  std::vector<bool> used(shape_.size(), false);
  const std::vector<int64_t> dims = distinct_dims(mesh_dims, "slice", used);
  const std::optional<MeshCoord> at = coordinate_of(rank);
  SP_CHECK(at.has_value(), "mesh slice: rank ", rank, " is not in ", to_string(*this));
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (int64_t d : dims) {
    shape.push_back(shape_[static_cast<size_t>(d)]);
    if (has_dim_names()) names.push_back(names_[static_cast<size_t>(d)]);
  }
  if (!explicit_) {
    // Affine stays affine: fixed dims fold into the offset, kept dims keep their strides (a
    // permutation of a nested layout is nested).
    DeviceMesh m;
    m.shape_ = std::move(shape);
    m.names_ = std::move(names);
    m.size_ = checked_mesh_size(m.shape_);
    m.offset_ = offset_;
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (!used[d]) m.offset_ += (*at)[d] * strides_[d];
    }
    for (int64_t d : dims) m.strides_.push_back(strides_[static_cast<size_t>(d)]);
    SP_ASSERT(nested_order(m.shape_, m.strides_, &m.affine_order_));
    return m;
  }
  return derived(std::move(shape), std::move(names), [&](const MeshCoord& c) {
    MeshCoord parent = *at;
    for (size_t i = 0; i < dims.size(); ++i) parent[static_cast<size_t>(dims[i])] = c[i];
    return rank_at(parent);
  });
}

DeviceMesh DeviceMesh::flatten_dims(const std::vector<std::string>& names,
                                    std::string new_name) const {
  SP_CHECK(has_dim_names(), "mesh flatten [", join(names, ","),
           "]: the mesh has no dim names, expected a mesh built with dim names");
  std::vector<int64_t> dims;
  for (const std::string& n : names) dims.push_back(dim_index(n));
  return flatten_dims(dims, std::move(new_name));
}

DeviceMesh DeviceMesh::flatten_dims(const std::vector<int64_t>& mesh_dims,
                                    std::string new_name) const {
  std::vector<bool> used(shape_.size(), false);
  const std::vector<int64_t> dims = distinct_dims(mesh_dims, "flatten", used);
  if (has_dim_names() && new_name.empty()) {
    std::vector<std::string> parts;
    for (int64_t d : dims) parts.push_back(names_[static_cast<size_t>(d)]);
    new_name = join(parts, "_");
  }
  SP_CHECK(!has_dim_names() || !new_name.empty(), "mesh flatten: the new dim name is empty");
  SP_CHECK(has_dim_names() || new_name.empty(), "mesh flatten: name '", new_name,
           "' given for a mesh without dim names, expected no name");
  // The merged dim takes the lowest position among the merged dims; the others keep their order.
  const int64_t merged_pos = *std::min_element(dims.begin(), dims.end());
  int64_t merged_size = 1;
  for (int64_t d : dims) merged_size *= shape_[static_cast<size_t>(d)];
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> source;  // parent dim of each new dim, -1 for the merged one
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (static_cast<int64_t>(d) == merged_pos) {
      shape.push_back(merged_size);
      if (has_dim_names()) names.push_back(new_name);
      source.push_back(-1);
    } else if (!used[d]) {
      shape.push_back(shape_[d]);
      if (has_dim_names()) names.push_back(names_[d]);
      source.push_back(static_cast<int64_t>(d));
    }
  }
  // The merged dim's coordinate, split row-major over `dims` in the order given.
  auto parent_of = [&](const MeshCoord& c) {
    MeshCoord parent(shape_.size(), 0);
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] >= 0) {
        parent[static_cast<size_t>(source[i])] = c[i];
        continue;
      }
      int64_t v = c[i];
      for (size_t k = dims.size(); k-- > 0;) {
        const size_t pd = static_cast<size_t>(dims[k]);
        parent[pd] = v % shape_[pd];
        v /= shape_[pd];
      }
    }
    return parent;
  };
  if (!explicit_) {
    // Affine stays affine when the merged dims step like one row-major dim: each stride equals the
    // next (non-trivial) dim's stride times its size.
    bool mergeable = true;
    int64_t merged_stride = 0, expect = -1;
    for (size_t k = dims.size(); k-- > 0;) {
      const size_t pd = static_cast<size_t>(dims[k]);
      if (shape_[pd] == 1) continue;
      if (expect >= 0 && strides_[pd] != expect) mergeable = false;
      if (merged_stride == 0) merged_stride = strides_[pd];
      expect = strides_[pd] * shape_[pd];
    }
    if (mergeable) {
      DeviceMesh m;
      m.shape_ = std::move(shape);
      m.names_ = std::move(names);
      m.size_ = size_;
      m.offset_ = offset_;
      for (size_t i = 0; i < source.size(); ++i) {
        const bool trivial = m.shape_[i] == 1;
        m.strides_.push_back(trivial         ? 0
                             : source[i] < 0 ? merged_stride
                                             : strides_[static_cast<size_t>(source[i])]);
      }
      m.check_names();
      SP_ASSERT(nested_order(m.shape_, m.strides_, &m.affine_order_));
      return m;
    }
  }
  DeviceMesh out = derived(shape, names, [&](const MeshCoord& c) { return rank_at(parent_of(c)); });
  return out;
}

DeviceMesh DeviceMesh::flatten(std::string new_name) const {
  if (ndim() == 0) return *this;
  std::vector<int64_t> all(shape_.size());
  std::iota(all.begin(), all.end(), 0);
  return flatten_dims(all, std::move(new_name));
}

bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
  // Layouts are canonical (affine whenever the ranks are affine, see set_ranks), so comparing the
  // representation compares the rank arrays.
  if (a.shape_ != b.shape_ || a.names_ != b.names_) return false;
  if (static_cast<bool>(a.explicit_) != static_cast<bool>(b.explicit_)) return false;
  if (a.explicit_) return a.explicit_ == b.explicit_ || a.explicit_->ranks == b.explicit_->ranks;
  return a.offset_ == b.offset_ && a.strides_ == b.strides_;
}

size_t DeviceMesh::hash() const {
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (int64_t s : shape_) mix(std::hash<int64_t>{}(s));
  for (const std::string& n : names_) mix(std::hash<std::string>{}(n));
  if (explicit_) {
    for (int64_t r : explicit_->ranks) mix(std::hash<int64_t>{}(r));
  } else {
    mix(std::hash<int64_t>{}(offset_));
    for (int64_t s : strides_) mix(std::hash<int64_t>{}(s));
  }
  return h;
}

std::ostream& operator<<(std::ostream& os, const DeviceMesh& m) {
  // Small meshes print their nested rank array like PyTorch; large ones only their shape.
  constexpr int64_t kPrintLimit = 64;
  os << "DeviceMesh(";
  if (m.size() <= kPrintLimit) {
    const std::vector<int64_t> ranks = m.ranks();
    const auto& shape = m.shape();
    // Row-major walk; open a bracket for every dim whose coordinate is 0 and close when it wraps.
    std::function<void(size_t, int64_t&)> emit = [&](size_t d, int64_t& next) {
      if (d == shape.size()) {
        os << ranks[static_cast<size_t>(next++)];
        return;
      }
      os << '[';
      for (int64_t i = 0; i < shape[d]; ++i) {
        if (i) os << ", ";
        emit(d + 1, next);
      }
      os << ']';
    };
    int64_t next = 0;
    emit(0, next);
  } else {
    os << "shape=" << std::span<const int64_t>(m.shape())
       << (m.is_row_major_arange() ? ", ranks=arange" : "");
  }
  if (m.has_dim_names()) os << ", dim_names=(" << join(m.dim_names(), ", ") << ")";
  return os << ")";
}

std::string to_string(const DeviceMesh& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

void to_json(nlohmann::json& j, const DeviceMesh& m) {
  j = nlohmann::json::object();
  j["shape"] = m.shape();
  if (m.has_dim_names()) j["dim_names"] = m.dim_names();
  if (m.is_row_major_arange()) return;
  // Strided layouts are two small fields; only a truly arbitrary layout lists every rank.
  if (m.is_strided()) {
    j["offset"] = m.layout_offset();
    j["strides"] = m.layout_strides();
  } else {
    j["ranks"] = m.ranks();
  }
}

DeviceMesh device_mesh_from_json(const nlohmann::json& j, std::string_view origin,
                                 std::string_view path) {
  JsonFields f(j, std::string(origin), std::string(path));
  std::vector<int64_t> shape = f.integers("shape", 1);
  std::vector<std::string> names;
  if (f.has("dim_names")) names = f.strings("dim_names");
  if (f.has("ranks") && f.has("strides")) {
    f.fail("strides", "given with \"ranks\", expected at most one layout");
  }
  if (f.has("offset") && !f.has("strides")) f.fail("offset", "given without \"strides\"");
  std::optional<std::vector<int64_t>> ranks, strides;
  int64_t offset = 0;
  if (f.has("ranks")) ranks = f.integers("ranks", 0);
  if (f.has("strides")) strides = f.integers("strides");
  if (f.has("offset")) offset = f.integer("offset", 0);
  f.done();
  // The constructors check what crosses fields (the rank count, distinct ranks, one name per dim).
  try {
    if (ranks) return DeviceMesh::from_ranks(std::move(shape), std::move(*ranks), std::move(names));
    if (strides) {
      return DeviceMesh::from_strides(std::move(shape), offset, std::move(*strides),
                                      std::move(names));
    }
    return DeviceMesh(std::move(shape), std::move(names));
  } catch (const Error& e) {
    f.fail_object(e.what());
  }
}

void from_json(const nlohmann::json& j, DeviceMesh& m) { m = device_mesh_from_json(j); }

}  // namespace shardplan::mesh
