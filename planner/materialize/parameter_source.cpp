#include "planner/materialize/parameter_source.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "base/error.h"
#include "kernels/fill_reference.h"
#include "kernels/init_fill.h"
#include "tensor/models/models.h"

namespace shardplan::planner {

namespace {

// The global indices [begin, end) of parameter m's zero row (Note [Padding row]); empty if none.
std::pair<int64_t, int64_t> zero_range(const MaterialParameter& m) {
  if (m.init.zero_row < 0 || m.plan->shape.empty() || m.plan->shape[0] == 0) return {0, 0};
  const int64_t row = m.numel / m.plan->shape[0];
  return {m.init.zero_row * row, (m.init.zero_row + 1) * row};
}

// Zeroes the elements of the box whose global index lies in [begin, end): dim by dim, skipping
// every sub-box whose global indices miss the range, so a row costs its own size.
void zero_in_box(std::byte* dst, size_t elem, const kernels::FillRegion& r, int dim, int64_t global,
                 int64_t local, int64_t begin, int64_t end) {
  if (dim == r.ndim) {
    if (global >= begin && global < end)
      std::memset(dst + static_cast<size_t>(local) * elem, 0, elem);
    return;
  }
  // The smallest and largest global index of one slice of this dim (strides are non-negative).
  int64_t span = 0;
  for (int d = dim + 1; d < r.ndim; ++d) {
    if (r.sizes[d] == 0) return;
    span += (r.sizes[d] - 1) * r.global_strides[d];
  }
  for (int64_t i = 0; i < r.sizes[dim]; ++i) {
    const int64_t g = global + i * r.global_strides[dim];
    if (g + span < begin || g >= end) continue;
    zero_in_box(dst, elem, r, dim + 1, g, local + i * r.dst_strides[dim], begin, end);
  }
}

}  // namespace

// Note [Padding row]
// An embedding built with padding_idx (the Llama-shaped families pass config.pad_token_id) starts
// with that row zero: the fill keyed on the global index, then the row's elements set to 0. The
// reference (element_bits) says 0 there too, and a GPU fills such a parameter through the host
// path (fill_spec is null), so every device and every check sees the same bits.
void InitSource::read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) {
  const MaterialParameter& m = layout_.parameters()[index];
  kernels::fill_cpu(dst, m.type, region, m.fill);
  const auto [begin, end] = zero_range(m);
  if (begin < end) {
    zero_in_box(dst, kernels::element_size(m.type), region, 0, region.global_offset, 0, begin, end);
  }
}

uint64_t InitSource::element_bits(size_t index, int64_t global_index) {
  const MaterialParameter& m = layout_.parameters()[index];
  const auto [begin, end] = zero_range(m);
  if (global_index >= begin && global_index < end) return 0;
  return kernels::fill_reference_bits(m.type, m.fill, static_cast<uint64_t>(global_index));
}

const kernels::FillSpec* InitSource::fill_spec(size_t index) const {
  const MaterialParameter& m = layout_.parameters()[index];
  return m.init.zero_row >= 0 ? nullptr : &m.fill;
}

CheckpointSource::CheckpointSource(const MaterialLayout& layout, tensor::Checkpoint checkpoint)
    : layout_(layout), checkpoint_(std::move(checkpoint)) {
  const std::string where = checkpoint_.source.string();
  const tensor::CheckpointMatch match = tensor::match_checkpoint(
      checkpoint_, *tensor::build_model(layout_.file().model),
      {.beyond_model_prefixes = {}, .quant_method = "", .quantized_forms = true});
  for (const MaterialParameter& m : layout_.parameters()) {
    const std::string& n = m.plan->name;
    const std::vector<size_t>* parts = match.parts_of(n);
    if (const auto bad = match.mis_shaped.find(n);
        parts == nullptr && bad != match.mis_shaped.end()) {
      const tensor::CheckpointReport::Mismatch& m = bad->second;
      SP_FAIL("checkpoint ", where, ": '", m.name, "' has shape ",
              std::span<const int64_t>(m.actual_shape), ", expected ",
              std::span<const int64_t>(m.expected_shape));
    }
    // Note [Quantized checkpoints] (tensor/safetensors_check.cpp).
    const std::vector<std::string>& quantized = match.report.stored_quantized;
    SP_CHECK(parts != nullptr || !std::binary_search(quantized.begin(), quantized.end(), n),
             "checkpoint ", where, " stores '", n,
             "' quantized: materialize loads a checkpoint in the plan's dtype, expected an "
             "unquantized (dequantized) checkpoint");
    SP_CHECK(parts != nullptr, "checkpoint ", where, " has no tensor '", n,
             "', expected every parameter of ", layout_.file().model_name);
    std::vector<const tensor::CheckpointTensor*>& mine = parts_.emplace_back();
    int64_t numel = 0;
    for (const size_t i : *parts) {
      const tensor::CheckpointTensor& t = checkpoint_.tensors[i];
      // A fused tensor stored one expert at a time: each slice's shape was checked against the
      // model's (tensor::match_checkpoint); a whole tensor is checked here against the plan's.
      SP_CHECK(match.sliced.count(n) ||
                   std::vector<int64_t>(t.shape.begin(), t.shape.end()) == m.plan->shape,
               "checkpoint ", where, ": '", t.name, "' has shape ",
               std::span<const int64_t>(t.shape), ", expected ",
               std::span<const int64_t>(m.plan->shape));
      SP_CHECK(t.dtype == m.plan->dtype, "checkpoint ", where, ": '", t.name, "' is ", t.dtype,
               ", expected ", m.plan->dtype, " (the plan's dtype)");
      numel += tensor::checked_numel(t.shape, "materialize");
      mine.push_back(&t);
    }
    SP_CHECK(numel == m.numel, "checkpoint ", where, ": the parts of '", n, "' hold ", numel,
             " elements, expected ", m.numel);
  }
  readers_.resize(checkpoint_.files.size());
}

const tensor::ByteReader& CheckpointSource::reader(size_t file) {
  if (!readers_[file]) readers_[file] = tensor::open_file_reader(checkpoint_.files[file].path);
  return *readers_[file];
}

void CheckpointSource::read(size_t index, int64_t byte_offset, std::byte* dst, int64_t bytes) {
  if (bytes == 0) return;
  // The parameter's bytes are its parts' bytes one after another: read the range part by part.
  int64_t start = 0;  // the first byte of the current part within the parameter
  for (const tensor::CheckpointTensor* t : parts_[index]) {
    const int64_t end = start + t->nbytes;
    if (byte_offset < end) {
      const int64_t n = std::min(bytes, end - byte_offset);
      try {
        reader(t->file).read_at(
            t->offset + (byte_offset - start),
            std::span<char>(reinterpret_cast<char*>(dst), static_cast<size_t>(n)));
      } catch (const Error& e) {
        // The headers were fine when the job started: a failing read now is a run-time failure.
        throw RuntimeFailure(e.what());
      }
      dst += n;
      byte_offset += n;
      bytes -= n;
      if (bytes == 0) return;
    }
    start = end;
  }
  SP_ASSERT(false, "read beyond the parts of parameter ", index);
}

void CheckpointSource::read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) {
  const int64_t elem =
      static_cast<int64_t>(kernels::element_size(layout_.parameters()[index].type));
  const int n = region.ndim;
  if (n == 0) {
    read(index, region.global_offset * elem, dst, elem);
    bytes_read_ += elem;
    return;
  }
  for (int d = 0; d < n; ++d) {
    if (region.sizes[d] == 0) return;
  }
  // Rows along the last dim (contiguous in the file and, for materialize's dense shards, in
  // dst); a run of rows adjacent in both is one read.
  const int64_t row = region.sizes[n - 1];
  SP_ASSERT(region.global_strides[n - 1] == 1 && region.dst_strides[n - 1] == 1,
            "read_box needs rows contiguous in the file and in memory");
  std::vector<int64_t> i(static_cast<size_t>(n - 1), 0);
  int64_t run_global = -1, run_dst = 0, run_len = 0;
  while (true) {
    int64_t g = region.global_offset;
    int64_t o = 0;
    for (int d = 0; d + 1 < n; ++d) {
      g += i[static_cast<size_t>(d)] * region.global_strides[d];
      o += i[static_cast<size_t>(d)] * region.dst_strides[d];
    }
    if (run_len > 0 && g == run_global + run_len && o == run_dst + run_len) {
      run_len += row;
    } else {
      if (run_len > 0) read(index, run_global * elem, dst + run_dst * elem, run_len * elem);
      run_global = g;
      run_dst = o;
      run_len = row;
    }
    int d = n - 2;
    for (; d >= 0; --d) {
      if (++i[static_cast<size_t>(d)] < region.sizes[d]) break;
      i[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) break;
  }
  read(index, run_global * elem, dst + run_dst * elem, run_len * elem);
  int64_t total = elem;
  for (int d = 0; d < n; ++d) total *= region.sizes[d];
  bytes_read_ += total;
}

uint64_t CheckpointSource::element_bits(size_t index, int64_t global_index) {
  const int64_t elem =
      static_cast<int64_t>(kernels::element_size(layout_.parameters()[index].type));
  std::byte buf[8] = {};
  read(index, global_index * elem, buf, elem);
  uint64_t bits = 0;
  std::memcpy(&bits, buf, static_cast<size_t>(elem));
  return bits;
}

}  // namespace shardplan::planner
