#include "planner/parameter_source.h"

#include <cstring>
#include <string>

#include "kernels/fill_reference.h"
#include "kernels/init_fill.h"
#include "tensor/base/error.h"

namespace shardplan::planner {

void InitSource::read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) {
  const MaterialParameter& m = layout_.parameters()[index];
  kernels::fill_cpu(dst, m.type, region, m.fill);
}

uint64_t InitSource::element_bits(size_t index, int64_t global_index) {
  const MaterialParameter& m = layout_.parameters()[index];
  return kernels::fill_reference_bits(m.type, m.fill, static_cast<uint64_t>(global_index));
}

CheckpointSource::CheckpointSource(const MaterialLayout& layout, tensor::Checkpoint checkpoint)
    : layout_(layout), checkpoint_(std::move(checkpoint)) {
  const std::string where = checkpoint_.source.string();
  for (const MaterialParameter& m : layout_.parameters()) {
    const tensor::CheckpointTensor* t = checkpoint_.find(m.plan->name);
    SP_CHECK(t != nullptr, "checkpoint ", where, " has no tensor '", m.plan->name,
             "', expected every parameter of ", layout_.file().model_name);
    SP_CHECK(std::vector<int64_t>(t->shape.begin(), t->shape.end()) == m.plan->shape, "checkpoint ",
             where, ": '", m.plan->name, "' has shape ", std::span<const int64_t>(t->shape),
             ", expected ", std::span<const int64_t>(m.plan->shape));
    SP_CHECK(t->dtype == m.plan->dtype, "checkpoint ", where, ": '", m.plan->name, "' is ",
             t->dtype, ", expected ", m.plan->dtype, " (the plan's dtype)");
    tensors_.push_back(t);
  }
  readers_.resize(checkpoint_.files.size());
}

const tensor::ByteReader& CheckpointSource::reader(size_t file) {
  if (!readers_[file]) readers_[file] = tensor::open_file_reader(checkpoint_.files[file].path);
  return *readers_[file];
}

void CheckpointSource::read(size_t index, int64_t byte_offset, std::byte* dst, int64_t bytes) {
  const tensor::CheckpointTensor& t = *tensors_[index];
  if (bytes == 0) return;
  SP_ASSERT(byte_offset >= 0 && byte_offset + bytes <= t.nbytes, "read beyond ", t.name);
  try {
    reader(t.file).read_at(t.offset + byte_offset, std::span<char>(reinterpret_cast<char*>(dst),
                                                                   static_cast<size_t>(bytes)));
  } catch (const Error& e) {
    // The headers were fine when the job started: a failing read now is a run-time failure.
    throw RuntimeFailure(e.what());
  }
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
