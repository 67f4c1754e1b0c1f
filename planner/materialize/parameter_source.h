// Where the values of a materialized parameter come from: the family's init rule through the
// kernels/ fills (InitSource), or a safetensors checkpoint read byte range by byte range
// (CheckpointSource), so that `materialize` and `--verify` treat both alike
// (docs/launching.md "Checkpoints").
//   CheckpointSource ck(layout, read_checkpoint("model.safetensors.index.json"));  // bad input:
//   Error ck.read_box(i, region, dst);       // exactly the bytes of that box, nothing else
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/init_fill.h"
#include "kernels/region.h"
#include "planner/materialize/layout.h"
#include "tensor/safetensors.h"

namespace shardplan::planner {

class ParameterSource {
 public:
  virtual ~ParameterSource() = default;
  // Writes the box `region` of parameter `index` into `dst`, laid out by region.dst_strides.
  virtual void read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) = 0;
  // One element's bits (little-endian, zero-extended), obtained independently of read_box: the
  // reference --verify samples with.
  virtual uint64_t element_bits(size_t index, int64_t global_index) = 0;
  // The fill spec of parameter `index` when its values are computed (a GPU can then fill it
  // itself), nullptr when they are read.
  virtual const kernels::FillSpec* fill_spec(size_t /*index*/) const { return nullptr; }
  // Bytes read_box has read from storage (0 for computed values).
  int64_t bytes_read() const { return bytes_read_; }
  virtual const char* name() const = 0;

 protected:
  int64_t bytes_read_ = 0;
};

// The init rule of every parameter (MaterialLayout's fill specs); element_bits is the scalar
// reference fill (kernels/fill_reference.h), not the bulk fill read_box runs.
class InitSource final : public ParameterSource {
 public:
  explicit InitSource(const MaterialLayout& layout) : layout_(layout) {}
  void read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) override;
  uint64_t element_bits(size_t index, int64_t global_index) override;
  // Null for a parameter with a zero row (Note [Padding row] in parameter_source.cpp).
  const kernels::FillSpec* fill_spec(size_t index) const override;
  const char* name() const override { return "init"; }

 private:
  const MaterialLayout& layout_;
};

// A safetensors file, index or folder (tensor/safetensors.h). Construction reads headers only and
// checks every parameter of the plan is there with its shape and dtype, under the names
// tensor::match_checkpoint accepts (a base model's, a multimodal model's language model, experts
// stored one by one); extra tensors, such as buffers or a vision encoder, are ignored. read_box
// reads exactly the box's bytes, coalescing rows that are adjacent in the file.
class CheckpointSource final : public ParameterSource {
 public:
  CheckpointSource(const MaterialLayout& layout, tensor::Checkpoint checkpoint);
  void read_box(size_t index, const kernels::FillRegion& region, std::byte* dst) override;
  uint64_t element_bits(size_t index, int64_t global_index) override;
  const char* name() const override { return "checkpoint"; }

 private:
  const tensor::ByteReader& reader(size_t file);
  void read(size_t index, int64_t byte_offset, std::byte* dst, int64_t bytes);

  const MaterialLayout& layout_;
  tensor::Checkpoint checkpoint_;
  // Per layout parameter: the checkpoint tensors whose bytes, concatenated, are its bytes.
  std::vector<std::vector<const tensor::CheckpointTensor*>> parts_;
  std::vector<std::unique_ptr<tensor::ByteReader>> readers_;  // per file, opened on first use
};

}  // namespace shardplan::planner
