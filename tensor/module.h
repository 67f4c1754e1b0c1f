// The Module tree: PyTorch's nn.Module on meta tensors. Modules own named parameters, buffers and
// child modules in registration order; names are fully qualified ("layers.0.attn.q_proj.weight").
// A model is built on meta, traced (tensor/op_graph.h), then materialized with to_empty and
// initialized with init_weights, whose values do not depend on how the tensors are sharded.
//   auto mlp = std::make_shared<Sequential>();
//   mlp->push_back(std::make_shared<Linear>(16, 64));
//   mlp->push_back(std::make_shared<GELU>());
//   mlp->push_back(std::make_shared<Linear>(64, 16));
//   Tensor y = mlp->call(empty({2, 4, 16}));         // meta: shapes only
//   to_empty(*mlp, Device::cpu());  init_weights(*mlp, /*seed=*/42);
//
// Note [Module FQNs at call time]
// A module knows its own fully qualified name (`fqn()`), so `call()` can report it to the trace
// sink without a lookup. The name is the one `named_modules()` gives: the first path to the module
// in depth-first registration order ("" for the root). `register_module` renames the child's
// subtree (only it) under the parent's name, so a tree built bottom-up is named correctly once its
// last registration is done. A module shared under two paths may carry the later one until
// `assign_fqns()` on the root settles it (trace_forward, to_empty and init_weights call it).
//
// Note [Tied parameters]
// A tie is one Tensor (one TensorImpl) held under two names, as PyTorch's
// `lm_head.weight = embed.weight`: register or `set_parameter` the same Tensor in both modules, or
// call `tie_parameters(root, "lm_head.weight", "embed.weight")`. Listings de-duplicate by
// TensorImpl identity (PyTorch's remove_duplicate=True): a tied tensor appears once, under its
// first name. to_empty keeps it one tensor, and init_weights gives it the values of that first
// (canonical) name, as Hugging Face's init-then-tie does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace shardplan::tensor {

class Module;
using ModulePtr = std::shared_ptr<Module>;

struct NamedTensor {
  std::string name;  // fully qualified, relative to the module listed from
  Tensor tensor;
};

struct NamedModule {
  std::string name;  // fully qualified; "" for the module listed from
  Module* module;    // non-owning: valid while the tree is alive
};

// Options of the named_* listings (PyTorch's keyword arguments).
struct ListOptions {
  bool recurse = true;           // false: this module's own (direct) tensors only
  bool remove_duplicate = true;  // false: a tied tensor or shared module appears under every name
  bool persistent_only = false;  // buffers only: skip non-persistent ones (what a state_dict holds)
};

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // "Linear", "LayerNorm", or what a subclass passed to the constructor.
  const std::string& type_name() const { return type_name_; }
  // See Note [Module FQNs at call time].
  const std::string& fqn() const { return fqn_; }
  // Names every module of this tree from this module as root ("").
  void assign_fqns();

  // ---- Registration (names: non-empty, no '.', unique within this module) ----

  // Marks `t` itself as a parameter (is_parameter, requires_grad) and stores it; returns it. `t`
  // must be a floating-point leaf. An undefined Tensor registers an absent parameter (PyTorch's
  // `register_parameter("bias", None)`): listed nowhere, `parameter()` returns it.
  Tensor register_parameter(std::string name, Tensor t);
  Tensor register_buffer(std::string name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> child) {
    register_module_impl(std::move(name), child);
    return child;
  }
  // Replaces a registered parameter's tensor (a tie when `t` is another module's parameter).
  void set_parameter(std::string_view name, Tensor t);
  void set_buffer(std::string_view name, Tensor t);

  // ---- Direct members (throw shardplan::Error naming the module when absent) ----
  // Returned by value: handles stay valid whatever is registered later.

  Tensor parameter(std::string_view name) const;
  Tensor buffer(std::string_view name) const;
  bool has_parameter(std::string_view name) const;
  bool has_buffer(std::string_view name) const;
  bool is_buffer_persistent(std::string_view name) const;
  ModulePtr child(std::string_view name) const;
  // Children in registration order.
  const std::vector<std::pair<std::string, ModulePtr>>& named_children() const { return children_; }

  // ---- Paths relative to this module: "layers.0.attn", "layers.0.attn.q_proj.weight" ----

  Module& get_submodule(std::string_view path) const;  // "" is this module
  Tensor get_parameter(std::string_view path) const;
  Tensor get_buffer(std::string_view path) const;

  // ---- Listings, depth-first in registration order (PyTorch's order) ----

  std::vector<NamedModule> named_modules(bool remove_duplicate = true) const;
  std::vector<NamedTensor> named_parameters(const ListOptions& opts = {}) const;
  std::vector<NamedTensor> named_buffers(const ListOptions& opts = {}) const;
  // Elements of all parameters, each storage counted once: tied tensors and views of one storage
  // add the union of the element spans they cover (exact for dense tensors, an upper bound for
  // strided views with gaps).
  int64_t parameters_numel() const;
  // The same in bytes (well defined also when tensors of different dtypes share a storage).
  int64_t parameters_nbytes() const;

  // ---- Forward ----

  // The computation on one input; modules with several inputs add their own methods and wrap them
  // in a CallScope. The default throws (ModuleList has no forward, as PyTorch).
  virtual Tensor forward(const Tensor& x);
  // forward() inside a CallScope: what a parent calls, so the trace sees module boundaries.
  Tensor call(const Tensor& x);
  Tensor operator()(const Tensor& x) { return call(x); }

  // Reports on_module_enter(fqn, type) / on_module_exit(fqn) to the active trace sink, if any, for
  // its lifetime (exit also runs when forward throws).
  class CallScope {
   public:
    explicit CallScope(const Module& m);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    const Module* module_ = nullptr;  // null when no sink was active at entry
  };

  // ---- Initialization ----

  // Initializes this module's own direct parameters and buffers only (recurse=False, PyTorch RFC
  // #104187), keyed on each tensor's FQN through tensor/init.h. Meta tensors are skipped (no
  // memory, as nn.init on meta). The default has nothing to initialize.
  virtual void reset_parameters(uint64_t seed);

 protected:
  // A direct parameter or buffer by name.
  Tensor member(std::string_view name) const;
  // The FQN of one of this module's direct tensors: fqn() + "." + name.
  std::string member_fqn(std::string_view name) const;
  // Fills a direct tensor (no-op when it is undefined or on meta), keyed on member_fqn(name).
  void init_member_uniform(std::string_view name, uint64_t seed, double low, double high);
  void init_member_normal(std::string_view name, uint64_t seed, double mean, double std);
  void init_member_constant(std::string_view name, Scalar value);

 private:
  friend void to_empty(Module& root, Device device);

  struct TensorSlot {
    std::string name;
    Tensor tensor;
    bool persistent = true;  // buffers only
  };

  void register_module_impl(std::string name, ModulePtr child);
  void check_new_name(const std::string& name, const char* what) const;
  void assign_fqns_from(const std::string& prefix);
  const TensorSlot* find_slot(const std::vector<TensorSlot>& slots, std::string_view name) const;
  std::vector<NamedTensor> named_members(bool buffers, const ListOptions& opts) const;

  std::string type_name_;
  std::string fqn_;  // See Note [Module FQNs at call time]
  std::vector<TensorSlot> parameters_;
  std::vector<TensorSlot> buffers_;
  std::vector<std::pair<std::string, ModulePtr>> children_;
};

// ---- Whole-tree operations ----

// Allocates uninitialized storage on `device` for every parameter and buffer (non-persistent too),
// PyTorch's Module.to_empty. Tensors are re-pointed in place (the same TensorImpl gets the new
// storage, as PyTorch's `param.data = empty_like(param, device)`), so every handle to them, inside
// or outside the tree, sees the new memory and flags are untouched. Storage sharing is kept: a tied
// tensor stays one tensor, and tensors that shared a storage (views) share one new storage at the
// same offsets and strides. A tensor alone on its storage gets empty_like's preserve-format
// strides. cuda needs a CUDA build and a visible GPU; otherwise throws shardplan::Error.
void to_empty(Module& root, Device device);

// Calls reset_parameters(seed) on every module, children before parents (reverse named_modules
// order), so a tied tensor ends with the values of its first name (Note [Tied parameters]).
void init_weights(Module& root, uint64_t seed);

// Makes `target_path` (a registered parameter) hold the same Tensor as `source_path`, with paths
// relative to `root`. Shapes and dtypes must match.
void tie_parameters(Module& root, std::string_view target_path, std::string_view source_path);

}  // namespace shardplan::tensor
