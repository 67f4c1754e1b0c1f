#include "tensor/module.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <unordered_set>

#include "base/error.h"
#include "tensor/init.h"
#include "tensor/trace.h"

#if SHARDPLAN_HAVE_CUDA
#include "kernels/device_memory.h"
#endif

namespace shardplan::tensor {
namespace {

std::string join_name(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  std::string s;
  s.reserve(prefix.size() + 1 + name.size());
  s.append(prefix).append(".").append(name);
  return s;
}

// "a.b.c" -> {"a.b", "c"}; "c" -> {"", "c"}.
std::pair<std::string_view, std::string_view> split_last(std::string_view path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

}  // namespace

// ---- Module ----

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}
Module::~Module() = default;

void Module::check_new_name(const std::string& name, const char* what) const {
  SP_CHECK(!name.empty(), type_name_, ": ", what, " name can't be empty string \"\"");
  SP_CHECK(name.find('.') == std::string::npos, type_name_, ": ", what,
           " name can't contain \".\", got \"", name, "\"");
  const bool taken = find_slot(parameters_, name) != nullptr ||
                     find_slot(buffers_, name) != nullptr ||
                     std::any_of(children_.begin(), children_.end(),
                                 [&](const auto& c) { return c.first == name; });
  SP_CHECK(!taken, type_name_, " '", fqn_, "': attribute '", name, "' already exists");
}

const Module::TensorSlot* Module::find_slot(const std::vector<TensorSlot>& slots,
                                            std::string_view name) const {
  for (const TensorSlot& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

namespace {

// What makes a Tensor a parameter (nn.Parameter's constructor, applied to the tensor itself).
void mark_parameter(const Tensor& t, std::string_view module, std::string_view name) {
  if (!t.defined()) return;
  SP_CHECK(is_floating(t.dtype()) || is_complex(t.dtype()), module, ": parameter '", name,
           "' must have a floating point or complex dtype to require gradients, got ", t.dtype());
  SP_CHECK(t.is_leaf(), module, ": cannot assign non-leaf Tensor to parameter '", name,
           "'. Model parameters must be created explicitly.");
  Tensor handle = t;
  handle.set_requires_grad(true);
  handle.set_is_parameter(true);
}

}  // namespace

Tensor Module::register_parameter(std::string name, Tensor t) {
  check_new_name(name, "parameter");
  mark_parameter(t, type_name_, name);
  parameters_.push_back({std::move(name), std::move(t), true});
  return parameters_.back().tensor;
}

Tensor Module::register_buffer(std::string name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.push_back({std::move(name), std::move(t), persistent});
  return buffers_.back().tensor;
}

void Module::register_module_impl(std::string name, ModulePtr child) {
  check_new_name(name, "module");
  SP_CHECK(child != nullptr, type_name_, ": cannot register a null module as '", name, "'");
  // A cycle would make the tree infinite: `child` must not contain this module.
  std::vector<const Module*> stack{child.get()};
  std::unordered_set<const Module*> seen;
  while (!stack.empty()) {
    const Module* m = stack.back();
    stack.pop_back();
    SP_CHECK(m != this, type_name_, ": registering '", name,
             "' would make the module tree a cycle (the child contains this module)");
    if (!seen.insert(m).second) continue;
    for (const auto& [n, c] : m->children_) stack.push_back(c.get());
  }
  const bool already_child = std::any_of(children_.begin(), children_.end(),
                                         [&](const auto& named) { return named.second == child; });
  children_.emplace_back(std::move(name), std::move(child));
  if (already_child) return;  // shared under an earlier name here: that first name stays
  // Note [Module FQNs at call time]: only the new child's subtree is renamed. Renaming this whole
  // module's subtree made building N layers one registration at a time O(N^2) (a Llama-3-70B
  // build spent 90% of its time here). A module shared with an earlier path gets its first name
  // back from assign_fqns() on the root, which tracing, to_empty and init_weights call.
  const auto& [child_name, added] = children_.back();
  added->assign_fqns_from(join_name(fqn_, child_name));
}

void Module::set_parameter(std::string_view name, Tensor t) {
  auto it = std::find_if(parameters_.begin(), parameters_.end(),
                         [&](const TensorSlot& s) { return s.name == name; });
  SP_CHECK(it != parameters_.end(), type_name_, " '", fqn_, "' has no parameter '", name, "'");
  mark_parameter(t, type_name_, name);
  it->tensor = std::move(t);
}

void Module::set_buffer(std::string_view name, Tensor t) {
  auto it = std::find_if(buffers_.begin(), buffers_.end(),
                         [&](const TensorSlot& s) { return s.name == name; });
  SP_CHECK(it != buffers_.end(), type_name_, " '", fqn_, "' has no buffer '", name, "'");
  it->tensor = std::move(t);
}

Tensor Module::parameter(std::string_view name) const {
  const TensorSlot* s = find_slot(parameters_, name);
  SP_CHECK(s != nullptr, type_name_, " '", fqn_, "' has no parameter '", name, "'");
  return s->tensor;
}

Tensor Module::buffer(std::string_view name) const {
  const TensorSlot* s = find_slot(buffers_, name);
  SP_CHECK(s != nullptr, type_name_, " '", fqn_, "' has no buffer '", name, "'");
  return s->tensor;
}

bool Module::has_parameter(std::string_view name) const {
  return find_slot(parameters_, name) != nullptr;
}
bool Module::has_buffer(std::string_view name) const {
  return find_slot(buffers_, name) != nullptr;
}

bool Module::is_buffer_persistent(std::string_view name) const {
  const TensorSlot* s = find_slot(buffers_, name);
  SP_CHECK(s != nullptr, type_name_, " '", fqn_, "' has no buffer '", name, "'");
  return s->persistent;
}

ModulePtr Module::child(std::string_view name) const {
  for (const auto& [n, c] : children_) {
    if (n == name) return c;
  }
  SP_FAIL(type_name_, " '", fqn_, "' has no submodule '", name, "'");
}

Module& Module::get_submodule(std::string_view path) const {
  const Module* m = this;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string_view head = path.substr(0, dot);
    m = m->child(head).get();
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return const_cast<Module&>(*m);
}

Tensor Module::get_parameter(std::string_view path) const {
  const auto [owner, name] = split_last(path);
  return get_submodule(owner).parameter(name);
}

Tensor Module::get_buffer(std::string_view path) const {
  const auto [owner, name] = split_last(path);
  return get_submodule(owner).buffer(name);
}

void Module::assign_fqns() { assign_fqns_from(""); }

void Module::assign_fqns_from(const std::string& prefix) {
  // Pre-order, first visit wins: the names named_modules() gives, shifted under `prefix`.
  std::unordered_set<const Module*> seen;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& name) {
    if (!seen.insert(&m).second) return;
    m.fqn_ = name;
    for (const auto& [n, c] : m.children_) visit(*c, join_name(name, n));
  };
  visit(*this, prefix);
}

std::vector<NamedModule> Module::named_modules(bool remove_duplicate) const {
  std::vector<NamedModule> out;
  std::unordered_set<const Module*> seen;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& name) {
    if (remove_duplicate && !seen.insert(&m).second) return;
    out.push_back({name, const_cast<Module*>(&m)});
    for (const auto& [n, c] : m.children_) visit(*c, join_name(name, n));
  };
  visit(*this, "");
  return out;
}

std::vector<NamedTensor> Module::named_members(bool buffers, const ListOptions& opts) const {
  // PyTorch's _named_members: modules (de-duplicated alike), then each one's direct tensors.
  std::vector<NamedModule> modules;
  if (opts.recurse) {
    modules = named_modules(opts.remove_duplicate);
  } else {
    modules.push_back({"", const_cast<Module*>(this)});
  }
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const NamedModule& nm : modules) {
    for (const TensorSlot& s : buffers ? nm.module->buffers_ : nm.module->parameters_) {
      if (!s.tensor.defined()) continue;
      if (buffers && opts.persistent_only && !s.persistent) continue;
      if (opts.remove_duplicate && !seen.insert(s.tensor.impl()).second) continue;
      out.push_back({join_name(nm.name, s.name), s.tensor});
    }
  }
  return out;
}

std::vector<NamedTensor> Module::named_parameters(const ListOptions& opts) const {
  return named_members(/*buffers=*/false, opts);
}

std::vector<NamedTensor> Module::named_buffers(const ListOptions& opts) const {
  return named_members(/*buffers=*/true, opts);
}

namespace {

// Bytes covered by the tensors, per storage, with the itemsize of the first tensor seen on it:
// the spans [offset, offset + extent) are merged, so each stored byte counts once however many
// tensors (ties, views) cover it.
std::vector<std::pair<int64_t, int64_t>> covered_bytes_per_storage(
    const std::vector<NamedTensor>& tensors) {
  std::map<const StorageImpl*, std::vector<std::pair<int64_t, int64_t>>> spans;
  std::map<const StorageImpl*, int64_t> itemsize;
  std::vector<const StorageImpl*> order;
  for (const NamedTensor& p : tensors) {
    const Tensor& t = p.tensor;
    if (t.numel() == 0) continue;
    const int64_t elems =
        required_storage_elements(t.sizes(), t.strides(), t.storage_offset(), "parameters_numel");
    const StorageImpl* s = t.storage().get();
    if (itemsize.emplace(s, t.itemsize()).second) order.push_back(s);
    spans[s].emplace_back(t.storage_offset() * t.itemsize(), elems * t.itemsize());
  }
  std::vector<std::pair<int64_t, int64_t>> out;  // (bytes, itemsize)
  for (const StorageImpl* s : order) {
    auto& list = spans[s];
    std::sort(list.begin(), list.end());
    int64_t total = 0, begin = list.front().first, end = list.front().second;
    for (const auto& [b, e] : list) {
      if (b > end) {
        total += end - begin;
        begin = b;
      }
      end = std::max(end, e);
    }
    total += end - begin;
    out.emplace_back(total, itemsize[s]);
  }
  return out;
}

}  // namespace

int64_t Module::parameters_nbytes() const {
  int64_t total = 0;
  for (const auto& [bytes, item] : covered_bytes_per_storage(named_parameters())) total += bytes;
  return total;
}

int64_t Module::parameters_numel() const {
  // In elements of the first dtype seen on each storage: parameters sharing a storage share a
  // dtype in every model we build (parameters_nbytes is exact regardless).
  int64_t total = 0;
  for (const auto& [bytes, item] : covered_bytes_per_storage(named_parameters())) {
    total += bytes / item;
  }
  return total;
}

Tensor Module::forward(const Tensor& /*x*/) {
  SP_FAIL(type_name_, " '", fqn_, "' has no single-input forward");
}

Tensor Module::call(const Tensor& x) {
  CallScope scope(*this);
  return forward(x);
}

Module::CallScope::CallScope(const Module& m) {
  TraceSink* sink = active_trace_sink();
  if (sink == nullptr) return;
  module_ = &m;
  sink->on_module_enter(m.fqn_, m.type_name_);
}

Module::CallScope::~CallScope() {
  if (module_ == nullptr) return;
  // The sink installed at entry is still the active one: TraceScope nests strictly.
  if (TraceSink* sink = active_trace_sink()) sink->on_module_exit(module_->fqn_);
}

void Module::reset_parameters(uint64_t /*seed*/) {}

std::string Module::member_fqn(std::string_view name) const { return join_name(fqn_, name); }

Tensor Module::member(std::string_view name) const {
  const TensorSlot* s = find_slot(parameters_, name);
  if (s == nullptr) s = find_slot(buffers_, name);
  SP_CHECK(s != nullptr, type_name_, " '", fqn_, "' has no parameter or buffer '", name, "'");
  return s->tensor;
}

// Absent (undefined) and meta tensors have no memory to fill: skipped, as nn.init on meta.
void Module::init_member_uniform(std::string_view name, uint64_t seed, double low, double high) {
  const Tensor t = member(name);
  if (!t.defined() || t.is_meta()) return;
  const std::string key = member_fqn(name);
  init_uniform(t, InitKey{seed, key}, low, high);
}

void Module::init_member_normal(std::string_view name, uint64_t seed, double mean, double std) {
  const Tensor t = member(name);
  if (!t.defined() || t.is_meta()) return;
  const std::string key = member_fqn(name);
  init_normal(t, InitKey{seed, key}, mean, std);
}

void Module::init_member_constant(std::string_view name, Scalar value) {
  const Tensor t = member(name);
  if (!t.defined() || t.is_meta()) return;
  fill_constant(t, value);
}

// ---- Whole-tree operations ----

namespace {

void check_device_available(const Device& device) {
  if (!device.is_cuda()) return;
#if SHARDPLAN_HAVE_CUDA
  const int count = kernels::cuda_device_count();
  SP_CHECK(count > 0, "to_empty: cannot allocate on ", device, ": no CUDA device is visible");
  SP_CHECK(device.index < count, "to_empty: cannot allocate on ", device, ": only ", count,
           " CUDA device(s) are visible");
#else
  SP_FAIL("to_empty: cannot allocate on ", device, ": shardplan was built without CUDA");
#endif
}

}  // namespace

void to_empty(Module& root, Device device) {
  check_device_available(device);
  // Every tensor of the tree once (a tie is one TensorImpl), plus the bases of views, grouped by
  // the storage they share now.
  std::vector<std::shared_ptr<TensorImpl>> impls;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const std::shared_ptr<TensorImpl>& impl) {
    if (impl != nullptr && seen.insert(impl.get()).second) impls.push_back(impl);
  };
  for (const NamedModule& nm : root.named_modules()) {
    for (const auto* slots : {&nm.module->parameters_, &nm.module->buffers_}) {
      for (const Module::TensorSlot& s : *slots) {
        if (!s.tensor.defined()) continue;
        add(s.tensor.impl_ptr());
        add(s.tensor.impl()->view_base);
      }
    }
  }
  std::map<const StorageImpl*, std::vector<std::shared_ptr<TensorImpl>>> by_storage;
  std::vector<const StorageImpl*> order;  // first-seen order, so allocation order is stable
  for (const auto& impl : impls) {
    auto [it, inserted] = by_storage.try_emplace(impl->storage.get());
    if (inserted) order.push_back(impl->storage.get());
    it->second.push_back(impl);
  }
  // Allocate everything first, then re-point (cannot fail): an allocation error leaves the tree
  // untouched.
  struct Move {
    std::shared_ptr<TensorImpl> impl;
    StoragePtr storage;
    DimVector strides;
    int64_t offset;
  };
  std::vector<Move> moves;
  moves.reserve(impls.size());
  for (const StorageImpl* old : order) {
    const auto& group = by_storage[old];
    if (group.size() == 1 && group.front()->view_base == nullptr) {
      // Alone on its storage: PyTorch's empty_like(t, device=...) with preserve_format.
      const Tensor alone(group.front());
      const Tensor fresh = empty_like(alone, alone.dtype(), device);
      moves.push_back({group.front(), fresh.storage(), fresh.strides(), 0});
      continue;
    }
    // Shared (views, or several tensors on one storage): one new storage of the same size, every
    // tensor at its old offset and strides, so aliasing is exactly what it was.
    StoragePtr storage = make_storage(old->nbytes(), device);
    for (const auto& impl : group) {
      moves.push_back({impl, storage, impl->strides, impl->storage_offset});
    }
  }
  for (Move& m : moves) {
    Tensor t(m.impl);
    set_storage(t, std::move(m.storage), std::move(m.strides), m.offset);
  }
}

void init_weights(Module& root, uint64_t seed) {
  root.assign_fqns();
  const std::vector<NamedModule> modules = root.named_modules();
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) it->module->reset_parameters(seed);
}

void tie_parameters(Module& root, std::string_view target_path, std::string_view source_path) {
  const Tensor source = root.get_parameter(source_path);
  const Tensor target = root.get_parameter(target_path);
  SP_CHECK(source.defined() && target.defined(), "tie_parameters: '", target_path, "' and '",
           source_path, "' must both be defined parameters");
  SP_CHECK(source.sizes() == target.sizes() && source.dtype() == target.dtype(),
           "tie_parameters: '", target_path, "' ", target.sizes(), " ", target.dtype(),
           " cannot share '", source_path, "' ", source.sizes(), " ", source.dtype());
  const auto [owner, name] = split_last(target_path);
  root.get_submodule(owner).set_parameter(name, source);
}

}  // namespace shardplan::tensor
