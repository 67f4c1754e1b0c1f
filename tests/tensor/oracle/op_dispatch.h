// The PyTorch oracle's op table: case op name -> a call into shardplan::tensor with the case's
// inputs and keyword args (format: the docstring of scripts/gen_meta_oracle.py).
//   const OpTable& ops = op_table();
//   std::vector<Tensor> outs = ops.at("view")(inputs, Args(case["args"]));
// Header-only on purpose: tests/CMakeLists.txt globs only *_test.cpp, and this is included by
// tests/tensor/meta_ops_oracle_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/ops.h"

namespace shardplan::tensor::oracle {

using Json = nlohmann::json;

// A case uses something shardplan's API cannot express (an argument or an op it lacks). The test
// reports it as skipped with this reason, never as passed.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One positional operand: a tensor, a Python number, or an absent optional tensor.
struct Input {
  enum class Kind { kTensor, kScalar, kNone };
  Kind kind = Kind::kNone;
  Tensor tensor;
  Scalar scalar;
};

// A JSON number as the Python number it was: bool, int or float.
inline Scalar json_scalar(const Json& j) {
  if (j.is_boolean()) return Scalar(j.get<bool>());
  if (j.is_number_integer()) return Scalar(j.get<int64_t>());
  if (j.is_number()) return Scalar(j.get<double>());
  throw std::invalid_argument("oracle: not a number: " + j.dump());
}

inline DimVector json_dims(const Json& j) {
  DimVector d;
  for (const Json& v : j) d.push_back(v.get<int64_t>());
  return d;
}

// Builds an input as the generator does: a 1-d storage tensor of storage_numel elements viewed
// with as_strided(sizes, strides, offset) (so it is itself a view), or a fresh contiguous tensor.
inline Input build_input(const Json& spec) {
  Input in;
  if (spec.contains("scalar")) {
    in.kind = Input::Kind::kScalar;
    in.scalar = Scalar(spec["scalar"].get<double>());
  } else if (spec.contains("scalar_int")) {
    in.kind = Input::Kind::kScalar;
    in.scalar = Scalar(spec["scalar_int"].get<int64_t>());
  } else if (spec.contains("scalar_bool")) {
    in.kind = Input::Kind::kScalar;
    in.scalar = Scalar(spec["scalar_bool"].get<bool>());
  } else if (spec.contains("scalar_complex")) {
    in.kind = Input::Kind::kScalar;
    in.scalar = Scalar::complex(spec["scalar_complex"][0].get<double>(),
                                spec["scalar_complex"][1].get<double>());
  } else if (spec.contains("none")) {
    in.kind = Input::Kind::kNone;
  } else {
    in.kind = Input::Kind::kTensor;
    const TensorOptions opts{parse_dtype(spec["dtype"].get<std::string>())};
    const DimVector sizes = json_dims(spec["sizes"]);
    if (spec.value("fresh", false)) {
      in.tensor = empty(sizes, opts);
    } else {
      const Tensor storage = empty_strided({spec["storage_numel"].get<int64_t>()}, {1}, opts);
      in.tensor = as_strided(storage, sizes, json_dims(spec["strides"]),
                             spec["offset"].get<int64_t>());
    }
  }
  return in;
}

// The case's keyword args. Every key must be read by the op's entry (or explicitly ignored with a
// reason): finish() turns a key nobody read into Unsupported, so an argument the C++ API lacks
// can never be dropped silently and pass.
class Args {
 public:
  explicit Args(const Json& j) : j_(j) {}

  bool has(const std::string& k) {
    used_.insert(k);
    return j_.contains(k) && !j_[k].is_null();
  }
  const Json& at(const std::string& k) {
    used_.insert(k);
    return j_.at(k);
  }
  int64_t i(const std::string& k, std::optional<int64_t> def = {}) {
    if (has(k)) return at(k).get<int64_t>();
    if (!def) throw std::invalid_argument("oracle: missing arg " + k);
    return *def;
  }
  std::optional<int64_t> opt_i(const std::string& k) {
    return has(k) ? std::optional<int64_t>(at(k).get<int64_t>()) : std::nullopt;
  }
  bool b(const std::string& k, bool def) { return has(k) ? at(k).get<bool>() : def; }
  double d(const std::string& k, double def) { return has(k) ? at(k).get<double>() : def; }
  std::optional<double> opt_d(const std::string& k) {
    return has(k) ? std::optional<double>(at(k).get<double>()) : std::nullopt;
  }
  std::string s(const std::string& k, const std::string& def) {
    return has(k) ? at(k).get<std::string>() : def;
  }
  DimVector dims(const std::string& k) { return json_dims(at(k)); }
  // An int or a list of ints as a dim list; absent/null -> empty (= all dims).
  DimVector dim_list(const std::string& k) {
    if (!has(k)) return {};
    const Json& v = at(k);
    return v.is_array() ? json_dims(v) : DimVector{v.get<int64_t>()};
  }
  std::optional<DType> dtype(const std::string& k = "dtype") {
    return has(k) ? std::optional<DType>(parse_dtype(at(k).get<std::string>())) : std::nullopt;
  }
  Scalar scalar(const std::string& k, Scalar def) { return has(k) ? json_scalar(at(k)) : def; }
  // Reads a key whose value the C++ API has no use for, because it cannot change metadata.
  void ignore(const std::string& k) { used_.insert(k); }
  // Accepts `k` only when absent or equal to one of `allowed` (a default the API implies).
  void only_default(const std::string& k, const std::set<std::string>& allowed,
                    const std::string& what) {
    if (has(k) && !allowed.contains(at(k).get<std::string>())) {
      throw Unsupported(what + ": " + k + "=" + at(k).dump() + " is not in the C++ API");
    }
  }
  void finish() const {
    for (const auto& [k, v] : j_.items()) {
      if (!used_.contains(k)) throw Unsupported("argument '" + k + "' is not in the C++ API");
    }
  }

 private:
  const Json& j_;
  std::set<std::string> used_;
};

using Inputs = std::vector<Input>;
using OpFn = std::function<std::vector<Tensor>(Inputs&, Args&)>;
using OpTable = std::map<std::string, OpFn>;

namespace detail {

inline const Tensor& tensor_at(const Inputs& in, size_t i) {
  if (i >= in.size() || in[i].kind != Input::Kind::kTensor) {
    throw std::invalid_argument("oracle: input " + std::to_string(i) + " must be a tensor");
  }
  return in[i].tensor;
}
// An optional tensor operand: absent or {"none": true} -> undefined Tensor.
inline Tensor opt_tensor(const Inputs& in, size_t i) {
  return i < in.size() && in[i].kind == Input::Kind::kTensor ? in[i].tensor : Tensor();
}
inline Operand operand_at(const Inputs& in, size_t i) {
  if (i >= in.size() || in[i].kind == Input::Kind::kNone) {
    throw std::invalid_argument("oracle: input " + std::to_string(i) + " missing");
  }
  return in[i].kind == Input::Kind::kScalar ? Operand(in[i].scalar) : Operand(in[i].tensor);
}
inline std::vector<Tensor> all_tensors(const Inputs& in) {
  std::vector<Tensor> ts;
  for (size_t i = 0; i < in.size(); ++i) ts.push_back(tensor_at(in, i));
  return ts;
}
inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

inline TensorOptions options(Args& a) {
  TensorOptions o;
  o.dtype = a.dtype();
  return o;
}

// torch's memory_format names -> MemoryFormat.
inline MemoryFormat memory_format(Args& a, const std::string& def) {
  const std::string f = a.s("memory_format", def);
  if (f == "contiguous_format") return MemoryFormat::kContiguous;
  if (f == "channels_last") return MemoryFormat::kChannelsLast;
  if (f == "preserve_format") return MemoryFormat::kPreserve;
  throw Unsupported("memory_format=" + f + " is not in the C++ API");
}

// zeros/ones/randn(size, dtype=, memory_format=): the C++ factories make contiguous tensors.
inline OpFn factory(Tensor (*fn)(const DimVector&, const TensorOptions&)) {
  return [fn](Inputs&, Args& a) {
    const DimVector size = a.dims("size");
    const TensorOptions o = options(a);
    a.only_default("memory_format", {"contiguous_format"}, "factory memory_format");
    a.finish();
    return one(fn(size, o));
  };
}

inline OpFn unary_fn(Tensor (*fn)(const Tensor&)) {
  return [fn](Inputs& in, Args& a) {
    a.finish();
    return one(fn(tensor_at(in, 0)));
  };
}

inline OpFn binary_fn(BinaryOp op, bool has_alpha) {
  return [op, has_alpha](Inputs& in, Args& a) {
    const Scalar alpha = has_alpha ? a.scalar("alpha", Scalar(int64_t{1})) : Scalar(int64_t{1});
    a.finish();
    return one(binary(op, operand_at(in, 0), operand_at(in, 1), alpha));
  };
}

inline OpFn inplace_fn(BinaryOp op, bool has_alpha) {
  return [op, has_alpha](Inputs& in, Args& a) {
    const Scalar alpha = has_alpha ? a.scalar("alpha", Scalar(int64_t{1})) : Scalar(int64_t{1});
    a.finish();
    Tensor self = tensor_at(in, 0);  // same TensorImpl as the input: same_object is checked
    return one(binary_(op, self, operand_at(in, 1), alpha));
  };
}

inline OpFn tensor_pair(Tensor (*fn)(const Tensor&, const Tensor&)) {
  return [fn](Inputs& in, Args& a) {
    a.finish();
    return one(fn(tensor_at(in, 0), tensor_at(in, 1)));
  };
}

// sum/mean(x, dim=int|list|None, keepdim, dtype).
inline OpFn reduce_fn(Tensor (*fn)(const Tensor&, const DimVector&, bool, std::optional<DType>)) {
  return [fn](Inputs& in, Args& a) {
    const DimVector dims = a.dim_list("dim");
    const bool keepdim = a.b("keepdim", false);
    const auto dt = a.dtype();
    a.finish();
    return one(fn(tensor_at(in, 0), dims, keepdim, dt));
  };
}

inline OpFn softmax_fn(Tensor (*fn)(const Tensor&, int64_t, std::optional<DType>)) {
  return [fn](Inputs& in, Args& a) {
    const int64_t dim = a.i("dim");
    const auto dt = a.dtype();
    a.finish();
    return one(fn(tensor_at(in, 0), dim, dt));
  };
}

}  // namespace detail

// Every op name the generator emits. Ops the C++ API lacks map to an entry throwing Unsupported.
inline const OpTable& op_table() {
  using namespace detail;  // NOLINT: local to this table
  static const OpTable table = [] {
    OpTable tab;
    // ---- factories ----
    tab["empty"] = [](Inputs&, Args& a) {
      const DimVector size = a.dims("size");
      const TensorOptions o = options(a);
      const MemoryFormat f = memory_format(a, "contiguous_format");
      a.finish();
      return one(empty(size, o, f));
    };
    tab["zeros"] = factory(&zeros);
    tab["ones"] = factory(&ones);
    tab["randn"] = factory(&randn);
    tab["empty_strided"] = [](Inputs&, Args& a) {
      const DimVector size = a.dims("size"), stride = a.dims("stride");
      const TensorOptions o = options(a);
      a.finish();
      return one(empty_strided(size, stride, o));
    };
    tab["full"] = [](Inputs&, Args& a) {
      const DimVector size = a.dims("size");
      const Scalar value = json_scalar(a.at("fill_value"));
      const TensorOptions o = options(a);
      a.finish();
      return one(full(size, value, o));
    };
    tab["empty_like"] = [](Inputs& in, Args& a) {
      const auto dt = a.dtype();
      const MemoryFormat f = memory_format(a, "preserve_format");
      a.finish();
      return one(empty_like(tensor_at(in, 0), dt, {}, f));
    };
    // ---- views ----
    tab["view"] = [](Inputs& in, Args& a) {
      const DimVector size = a.dims("size");
      a.finish();
      return one(view(tensor_at(in, 0), size));
    };
    tab["reshape"] = [](Inputs& in, Args& a) {
      const DimVector size = a.dims("size");
      a.finish();
      return one(reshape(tensor_at(in, 0), size));
    };
    tab["transpose"] = [](Inputs& in, Args& a) {
      const int64_t d0 = a.i("dim0"), d1 = a.i("dim1");
      a.finish();
      return one(transpose(tensor_at(in, 0), d0, d1));
    };
    tab["t"] = unary_fn(&tensor::t);
    tab["permute"] = [](Inputs& in, Args& a) {
      const DimVector dims = a.dims("dims");
      a.finish();
      return one(permute(tensor_at(in, 0), dims));
    };
    tab["expand"] = [](Inputs& in, Args& a) {
      const DimVector size = a.dims("size");
      a.finish();
      return one(expand(tensor_at(in, 0), size));
    };
    tab["squeeze"] = [](Inputs& in, Args& a) {
      const auto dim = a.opt_i("dim");
      a.finish();
      return one(dim ? squeeze(tensor_at(in, 0), *dim) : squeeze(tensor_at(in, 0)));
    };
    tab["unsqueeze"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim");
      a.finish();
      return one(unsqueeze(tensor_at(in, 0), dim));
    };
    tab["flatten"] = [](Inputs& in, Args& a) {
      const int64_t s = a.i("start_dim", 0), e = a.i("end_dim", -1);
      a.finish();
      return one(flatten(tensor_at(in, 0), s, e));
    };
    tab["unflatten"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim");
      const DimVector sizes = a.dims("sizes");
      a.finish();
      return one(unflatten(tensor_at(in, 0), dim, sizes));
    };
    tab["narrow"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim"), start = a.i("start"), length = a.i("length");
      a.finish();
      return one(narrow(tensor_at(in, 0), dim, start, length));
    };
    tab["slice"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim", 0), step = a.i("step", 1);
      const auto start = a.opt_i("start"), end = a.opt_i("end");
      a.finish();
      return one(slice(tensor_at(in, 0), dim, start, end, step));
    };
    tab["select"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim"), index = a.i("index");
      a.finish();
      return one(select(tensor_at(in, 0), dim, index));
    };
    tab["chunk"] = [](Inputs& in, Args& a) {
      const int64_t chunks = a.i("chunks"), dim = a.i("dim", 0);
      a.finish();
      return chunk(tensor_at(in, 0), chunks, dim);
    };
    tab["split"] = [](Inputs& in, Args& a) {
      const Json& size = a.at("split_size");
      const int64_t dim = a.i("dim", 0);
      a.finish();
      if (size.is_array()) return split_with_sizes(tensor_at(in, 0), json_dims(size), dim);
      return split(tensor_at(in, 0), size.get<int64_t>(), dim);
    };
    tab["unbind"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim", 0);
      a.finish();
      return unbind(tensor_at(in, 0), dim);
    };
    tab["as_strided"] = [](Inputs& in, Args& a) {
      const DimVector size = a.dims("size"), stride = a.dims("stride");
      const auto offset = a.opt_i("storage_offset");
      a.finish();
      return one(as_strided(tensor_at(in, 0), size, stride, offset));
    };
    tab["contiguous"] = [](Inputs& in, Args& a) {
      const MemoryFormat f = memory_format(a, "contiguous_format");
      a.finish();
      return one(contiguous(tensor_at(in, 0), f));
    };
    tab["view_as_real"] = unary_fn(&view_as_real);
    // ---- pointwise ----
    tab["neg"] = unary_fn(&neg);
    tab["exp"] = unary_fn(&tensor::exp);
    tab["log"] = unary_fn(&tensor::log);
    tab["abs"] = unary_fn(&tensor::abs);
    tab["sqrt"] = unary_fn(&tensor::sqrt);
    tab["rsqrt"] = unary_fn(&rsqrt);
    tab["sigmoid"] = unary_fn(&sigmoid);
    tab["tanh"] = unary_fn(&tensor::tanh);
    tab["relu"] = unary_fn(&relu);
    tab["sin"] = unary_fn(&tensor::sin);
    tab["cos"] = unary_fn(&tensor::cos);
    tab["reciprocal"] = unary_fn(&reciprocal);
    tab["logical_not"] = [](Inputs& in, Args& a) {
      a.finish();
      return one(unary(UnaryOp::kLogicalNot, tensor_at(in, 0)));
    };
    tab["add"] = binary_fn(BinaryOp::kAdd, true);
    tab["sub"] = binary_fn(BinaryOp::kSub, true);
    tab["mul"] = binary_fn(BinaryOp::kMul, false);
    tab["div"] = [](Inputs& in, Args& a) {
      const std::string mode = a.s("rounding_mode", "");
      a.finish();
      if (mode.empty()) return one(div(operand_at(in, 0), operand_at(in, 1)));
      return one(div(operand_at(in, 0), operand_at(in, 1), mode));
    };
    tab["pow"] = binary_fn(BinaryOp::kPow, false);
    tab["maximum"] = tensor_pair(&maximum);
    tab["minimum"] = tensor_pair(&minimum);
    tab["eq"] = binary_fn(BinaryOp::kEq, false);
    tab["ne"] = binary_fn(BinaryOp::kNe, false);
    tab["lt"] = binary_fn(BinaryOp::kLt, false);
    tab["le"] = binary_fn(BinaryOp::kLe, false);
    tab["gt"] = binary_fn(BinaryOp::kGt, false);
    tab["ge"] = binary_fn(BinaryOp::kGe, false);
    tab["add_"] = inplace_fn(BinaryOp::kAdd, true);
    tab["sub_"] = inplace_fn(BinaryOp::kSub, true);
    tab["mul_"] = inplace_fn(BinaryOp::kMul, false);
    tab["div_"] = inplace_fn(BinaryOp::kDiv, false);
    tab["where"] = [](Inputs& in, Args& a) {
      a.finish();
      return one(where(tensor_at(in, 0), operand_at(in, 1), operand_at(in, 2)));
    };
    tab["to"] = [](Inputs& in, Args& a) {
      const bool copy = a.b("copy", false);
      if (a.has("device")) {
        const Device dev = parse_device(a.at("device").get<std::string>());
        a.finish();
        if (copy) throw Unsupported("to(device, copy=True) is not in the C++ API");
        return one(to_device(tensor_at(in, 0), dev));
      }
      const DType dt = *a.dtype();
      a.finish();
      return one(to(tensor_at(in, 0), dt, copy));
    };
    // ---- reductions ----
    tab["sum"] = reduce_fn(&sum);
    tab["mean"] = reduce_fn(&mean);
    tab["amax"] = [](Inputs& in, Args& a) {
      const DimVector dims = a.dim_list("dim");
      const bool keepdim = a.b("keepdim", false);
      a.finish();
      return one(amax(tensor_at(in, 0), dims, keepdim));
    };
    tab["argmax"] = [](Inputs& in, Args& a) {
      const auto dim = a.opt_i("dim");
      const bool keepdim = a.b("keepdim", false);
      a.finish();
      return one(argmax(tensor_at(in, 0), dim, keepdim));
    };
    tab["var"] = [](Inputs& in, Args& a) {
      // dim=None -> all dims; unbiased=True/False is correction=1/0.
      std::optional<DimVector> dims;
      if (a.has("dim")) dims = a.dim_list("dim");
      double correction = a.b("unbiased", true) ? 1.0 : 0.0;
      correction = a.d("correction", correction);
      const bool keepdim = a.b("keepdim", false);
      a.finish();
      return one(var(tensor_at(in, 0), dims, correction, keepdim));
    };
    tab["var_mean"] = [](Inputs& in, Args& a) {
      std::optional<DimVector> dims;
      if (a.has("dim")) dims = a.dim_list("dim");
      double correction = a.b("unbiased", true) ? 1.0 : 0.0;
      correction = a.d("correction", correction);
      const bool keepdim = a.b("keepdim", false);
      a.finish();
      auto [v, m] = var_mean(tensor_at(in, 0), dims, correction, keepdim);
      return std::vector<Tensor>{v, m};
    };
    // ---- matrix products ----
    tab["matmul"] = tensor_pair(&matmul);
    tab["mm"] = tensor_pair(&mm);
    tab["bmm"] = tensor_pair(&bmm);
    tab["addmm"] = [](Inputs& in, Args& a) {
      const Scalar beta = a.scalar("beta", Scalar(int64_t{1}));
      const Scalar alpha = a.scalar("alpha", Scalar(int64_t{1}));
      a.finish();
      return one(addmm(tensor_at(in, 0), tensor_at(in, 1), tensor_at(in, 2), beta, alpha));
    };
    tab["baddbmm"] = [](Inputs& in, Args& a) {
      const Scalar beta = a.scalar("beta", Scalar(int64_t{1}));
      const Scalar alpha = a.scalar("alpha", Scalar(int64_t{1}));
      a.finish();
      return one(baddbmm(tensor_at(in, 0), tensor_at(in, 1), tensor_at(in, 2), beta, alpha));
    };
    tab["linear"] = [](Inputs& in, Args& a) {
      a.finish();
      return one(linear(tensor_at(in, 0), tensor_at(in, 1), opt_tensor(in, 2)));
    };
    // ---- joining ----
    tab["cat"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim", 0);
      a.finish();
      return one(cat(all_tensors(in), dim));
    };
    tab["stack"] = [](Inputs& in, Args& a) {
      const int64_t dim = a.i("dim", 0);
      a.finish();
      return one(stack(all_tensors(in), dim));
    };
    // ---- nn ----
    tab["embedding"] = [](Inputs& in, Args& a) {
      // padding_idx only zeroes a row's gradient: no effect on metadata.
      a.ignore("padding_idx");
      a.finish();
      // torch: F.embedding(indices, weight); shardplan: embedding(weight, indices).
      return one(embedding(tensor_at(in, 1), tensor_at(in, 0)));
    };
    tab["layer_norm"] = [](Inputs& in, Args& a) {
      const DimVector shape = a.dims("normalized_shape");
      const double eps = a.d("eps", 1e-5);
      a.finish();
      return one(layer_norm(tensor_at(in, 0), shape, opt_tensor(in, 1), opt_tensor(in, 2), eps));
    };
    tab["conv1d"] = [](Inputs& in, Args& a) {
      const int64_t stride = a.i("stride", 1), padding = a.i("padding", 0);
      const int64_t dilation = a.i("dilation", 1), groups = a.i("groups", 1);
      a.finish();
      return one(conv1d(tensor_at(in, 0), tensor_at(in, 1), opt_tensor(in, 2), stride, padding,
                        dilation, groups));
    };
    tab["rms_norm"] = [](Inputs& in, Args& a) {
      const DimVector shape = a.dims("normalized_shape");
      const auto eps = a.opt_d("eps");
      a.finish();
      return one(rms_norm(tensor_at(in, 0), shape, opt_tensor(in, 1), eps));
    };
    tab["softmax"] = softmax_fn(&softmax);
    tab["log_softmax"] = softmax_fn(&log_softmax);
    tab["gelu"] = [](Inputs& in, Args& a) {
      const std::string approximate = a.s("approximate", "none");
      a.finish();
      return one(gelu(tensor_at(in, 0), approximate));
    };
    tab["silu"] = unary_fn(&silu);
    tab["dropout"] = [](Inputs& in, Args& a) {
      const double p = a.d("p", 0.5);
      const bool train = a.b("train", true);
      a.finish();
      return one(dropout(tensor_at(in, 0), p, train));
    };
    tab["cross_entropy"] = [](Inputs& in, Args& a) {
      const std::string reduction = a.s("reduction", "mean");
      const int64_t ignore_index = a.i("ignore_index", -100);
      const double smoothing = a.d("label_smoothing", 0.0);
      a.finish();
      return one(cross_entropy(tensor_at(in, 0), tensor_at(in, 1), opt_tensor(in, 2), reduction,
                               ignore_index, smoothing));
    };
    tab["scaled_dot_product_attention"] = [](Inputs& in, Args& a) {
      const double dropout_p = a.d("dropout_p", 0.0);
      const bool causal = a.b("is_causal", false);
      const auto scale = a.opt_d("scale");
      const bool gqa = a.b("enable_gqa", false);
      a.finish();
      return one(scaled_dot_product_attention(tensor_at(in, 0), tensor_at(in, 1),
                                              tensor_at(in, 2), opt_tensor(in, 3), dropout_p,
                                              causal, scale, gqa));
    };
    // ---- data-dependent / copy-out ----
    tab["nonzero"] = unary_fn(&nonzero);
    tab["item"] = [](Inputs& in, Args& a) -> std::vector<Tensor> {
      a.finish();
      (void)item(tensor_at(in, 0));
      return {};  // no tensor output; on meta item() must have thrown
    };
    tab["index_mask"] = [](Inputs& in, Args& a) {
      a.finish();
      return one(index_with_mask(tensor_at(in, 0), tensor_at(in, 1)));
    };
    tab["cpu"] = [](Inputs& in, Args& a) {
      a.finish();
      return one(to_device(tensor_at(in, 0), Device::cpu()));
    };
    return tab;
  }();
  return table;
}

}  // namespace shardplan::tensor::oracle
