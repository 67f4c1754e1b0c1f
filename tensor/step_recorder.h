// The TraceSink behind trace_training_step (tensor/training.h): records every op of a traced
// forward, its tensors and storages, and the block (module) each op runs in, into a TrainingStep.
// Internal to tensor/: training.cpp derives saved tensors and costs from what it records.
//   StepRecorder rec(step, block_fqns);  rec.tensor_id(input, TensorRole::kInput);
//   { TraceScope scope(&rec); model.call(input); }
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/tensor.h"
#include "tensor/trace.h"
#include "tensor/training.h"

namespace shardplan::tensor {

// Recording: a lean TraceSink (no per-op strings beyond the op name).

// An address -> index map with open addressing: the recorder looks up every op's tensors and
// storages, and std::unordered_map's heap node per entry was a fifth of a Llama-3-70B trace.
// Keys are never erased; the table doubles at half load.
class AddressIndex {
 public:
  explicit AddressIndex(size_t expected) {
    size_t n = 16;
    while (n < 2 * expected) n *= 2;
    resize(n);
  }
  // The value slot of `key` and whether it was inserted with `value`. The pointer lives until the
  // next insertion.
  std::pair<int64_t*, bool> try_emplace(const void* key, int64_t value) {
    if (2 * (size_ + 1) > slots_.size()) resize(2 * slots_.size());
    Slot& s = slots_[slot_of(key)];
    if (s.key == key) return {&s.value, false};
    s = {key, value};
    ++size_;
    return {&s.value, true};
  }
  bool contains(const void* key) const { return slots_[slot_of(key)].key == key; }
  int64_t& operator[](const void* key) { return *try_emplace(key, 0).first; }

 private:
  struct Slot {
    const void* key = nullptr;
    int64_t value = 0;
  };
  // The slot holding `key`, or the empty slot where it would go.
  size_t slot_of(const void* key) const {
    // Fibonacci hashing of the address: its top bits pick the slot.
    size_t i = (reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[i].key != nullptr && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
    return i;
  }
  void resize(size_t n) {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(n));
    shift_ = 64 - std::countr_zero(n);
    for (const Slot& s : old) {
      if (s.key != nullptr) slots_[slot_of(s.key)] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
  int shift_ = 64;
};

class StepRecorder : public TraceSink {
 public:
  // `expected`: about how many ops and tensors the trace will record, so that it neither rehashes
  // nor reallocates (expected_entries); more is fine, it grows.
  StepRecorder(TrainingStep& step, const std::unordered_set<std::string_view>& block_fqns,
               size_t expected)
      : step_(step), block_fqns_(block_fqns), ids_(expected), buffer_of_(expected) {
    held_.reserve(expected);
    step_.ops.reserve(expected);
    step_.tensors.reserve(expected);
    step_.buffers.reserve(expected);
  }

  // Ops and tensors a model of `blocks` repeated blocks records: a dense transformer block about
  // 45 tensors and 36 ops (Llama-3-70B: 3,622 tensors, 2,895 ops over 80 blocks), plus the ends;
  // MoE blocks record more and grow the tables. Reserving for a whole model when tracing one block
  // (the planner traces hundreds) cost more than the trace itself.
  static size_t expected_entries(size_t blocks) { return 48 * (blocks + 2); }

  int64_t tensor_id(const Tensor& t, TensorRole role_if_new) {
    const int64_t id = static_cast<int64_t>(step_.tensors.size());
    const auto [known, inserted] = ids_.try_emplace(t.impl(), id);
    if (!inserted) return *known;
    held_.push_back(t);
    StepTensor st;
    st.sizes = t.sizes();
    st.dtype = t.dtype();
    st.nbytes = t.nbytes();
    st.role = t.is_parameter() ? TensorRole::kParameter : role_if_new;
    st.requires_grad = t.requires_grad();
    const auto [buffer, new_buffer] =
        buffer_of_.try_emplace(t.storage().get(), static_cast<int64_t>(step_.buffers.size()));
    st.buffer = *buffer;
    if (new_buffer) {
      StepBuffer b;
      b.bytes = t.storage()->nbytes();
      // A storage first seen as an op's output is an activation that op created.
      if (role_if_new == TensorRole::kActivation && !t.is_parameter()) {
        b.producer = current_op_;
        b.is_activation = true;
      }
      step_.buffers.push_back(b);
    }
    step_.tensors.push_back(std::move(st));
    return id;
  }

  void on_op(const OpEvent& e) override {
    current_op_ = static_cast<int64_t>(step_.ops.size());
    TrainingOp op;
    op.op = std::string(e.op);
    op.call = open_.empty() ? -1 : open_.back();
    op.block = open_block_;
    op.flops = e.flops;
    op.matmul_flops = e.matmul_flops;
    op.bytes_read = e.bytes_read;
    op.bytes_written = e.bytes_written;
    op.is_view = e.is_view;
    op.no_grad = !grad_enabled();  // Note [No-grad regions] in tensor/trace.h
    op.inputs.reserve(e.inputs.size());
    for (const Tensor& t : e.inputs) {
      if (t.defined()) op.inputs.push_back(tensor_id(t, TensorRole::kOther));
    }
    // Dropout switched off (TraceOptions::dropout): the identity, so its output is its input's
    // storage for every later op and view.
    op.skipped = !dropout_ && op.op == "dropout" && !op.inputs.empty();
    for (const Tensor& t : e.outputs) {
      if (!t.defined()) continue;
      if (op.skipped && !ids_.contains(t.impl())) {
        buffer_of_[t.storage().get()] = step_.tensors[static_cast<size_t>(op.inputs[0])].buffer;
      }
      const int64_t id = tensor_id(t, TensorRole::kActivation);
      step_.tensors[static_cast<size_t>(id)].producer = current_op_;  // latest writer (in place)
      op.outputs.push_back(id);
    }
    step_.ops.push_back(std::move(op));
  }

  void on_module_enter(std::string_view fqn, std::string_view type) override {
    StepCall c;
    c.fqn = std::string(fqn);
    c.type = std::string(type);
    c.parent = open_.empty() ? -1 : open_.back();
    c.first_op = static_cast<int64_t>(step_.ops.size());
    const int id = static_cast<int>(step_.calls.size());
    // Blocks are outermost: a block inside a block is part of it.
    if (open_block_ < 0 && block_fqns_.count(fqn) != 0) {
      open_block_ = static_cast<int>(step_.blocks.size());
      block_call_ = id;
      StepBlock b;
      b.fqn = c.fqn;
      b.type = c.type;
      b.first_op = c.first_op;
      step_.blocks.push_back(std::move(b));
    }
    step_.calls.push_back(std::move(c));
    open_.push_back(id);
  }

  void on_module_exit(std::string_view fqn) override {
    SP_ASSERT(!open_.empty(), "module exit '", fqn, "' without an enter");
    const int id = open_.back();
    open_.pop_back();
    step_.calls[static_cast<size_t>(id)].end_op = static_cast<int64_t>(step_.ops.size());
    if (id == block_call_) {
      step_.blocks[static_cast<size_t>(open_block_)].end_op =
          static_cast<int64_t>(step_.ops.size());
      open_block_ = -1;
      block_call_ = -1;
    }
  }

  void set_dropout(bool on) { dropout_ = on; }

 private:
  TrainingStep& step_;
  const std::unordered_set<std::string_view>& block_fqns_;
  AddressIndex ids_;          // TensorImpl -> StepTensor id
  AddressIndex buffer_of_;    // StorageImpl -> StepBuffer id
  std::vector<Tensor> held_;  // keeps every seen TensorImpl alive: its address stays its key
  std::vector<int> open_;
  int open_block_ = -1;
  int block_call_ = -1;
  int64_t current_op_ = -1;
  bool dropout_ = true;
};

}  // namespace shardplan::tensor
