// Pointwise ops: broadcasting, PyTorch type promotion, TensorIterator output strides
// (Note [Pointwise output strides] in tensor_iterator.h). One FLOP per output element.
#include <array>
#include <span>

#include "tensor/ops/common.h"
#include "tensor/ops/tensor_iterator.h"

namespace shardplan::tensor {
namespace {

const DimVector kScalarDims;  // a wrapped number is a 0-dim operand

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
      return "neg";
    case UnaryOp::kAbs:
      return "abs";
    case UnaryOp::kExp:
      return "exp";
    case UnaryOp::kLog:
      return "log";
    case UnaryOp::kSqrt:
      return "sqrt";
    case UnaryOp::kRsqrt:
      return "rsqrt";
    case UnaryOp::kSin:
      return "sin";
    case UnaryOp::kCos:
      return "cos";
    case UnaryOp::kTanh:
      return "tanh";
    case UnaryOp::kSigmoid:
      return "sigmoid";
    case UnaryOp::kRelu:
      return "relu";
    case UnaryOp::kReciprocal:
      return "reciprocal";
    case UnaryOp::kSquare:
      return "square";
    case UnaryOp::kLogicalNot:
      return "logical_not";
    case UnaryOp::kSign:
      return "sign";
    case UnaryOp::kFloor:
      return "floor";
    case UnaryOp::kCeil:
      return "ceil";
    case UnaryOp::kRound:
      return "round";
    case UnaryOp::kErf:
      return "erf";
    case UnaryOp::kBitwiseNot:
      return "bitwise_not";
    case UnaryOp::kIsnan:
      return "isnan";
  }
  return "unary";
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
    case BinaryOp::kPow:
      return "pow";
    case BinaryOp::kMaximum:
      return "maximum";
    case BinaryOp::kMinimum:
      return "minimum";
    case BinaryOp::kEq:
      return "eq";
    case BinaryOp::kNe:
      return "ne";
    case BinaryOp::kLt:
      return "lt";
    case BinaryOp::kLe:
      return "le";
    case BinaryOp::kGt:
      return "gt";
    case BinaryOp::kGe:
      return "ge";
    case BinaryOp::kLogicalAnd:
      return "logical_and";
    case BinaryOp::kLogicalOr:
      return "logical_or";
    case BinaryOp::kBitwiseAnd:
      return "bitwise_and";
    case BinaryOp::kBitwiseOr:
      return "bitwise_or";
    case BinaryOp::kRemainder:
      return "remainder";
    case BinaryOp::kFloorDivide:
      return "floor_divide";
    case BinaryOp::kAtan2:
      return "atan2";
  }
  return "binary";
}

// Unary ops that compute in floating point: integer and bool inputs give the default float.
bool promotes_int_to_float(UnaryOp op) {
  switch (op) {
    case UnaryOp::kExp:
    case UnaryOp::kLog:
    case UnaryOp::kSqrt:
    case UnaryOp::kRsqrt:
    case UnaryOp::kSin:
    case UnaryOp::kCos:
    case UnaryOp::kTanh:
    case UnaryOp::kSigmoid:
    case UnaryOp::kReciprocal:
    case UnaryOp::kErf:
      return true;
    default:
      return false;
  }
}

bool is_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
      return true;
    default:
      return false;
  }
}

DType dtype_of(const Operand& o) {
  return o.is_scalar ? o.scalar.wrapped_dtype() : o.tensor.dtype();
}

// PyTorch's can_cast: no float->integral, complex->non-complex, or non-bool->bool narrowing.
bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && is_integral(to, true)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

// The dtype an op computes in and the dtype of its output.
struct BinaryTypes {
  DType compute;
  DType out;
};

BinaryTypes binary_types(BinaryOp op, const Operand& a, const Operand& b, const Scalar& alpha) {
  const char* name = binary_name(op);
  ResultType rt;
  for (const Operand* o : {&a, &b}) {
    if (o->is_scalar) {
      rt.add_scalar(o->scalar);
    } else {
      rt.add_tensor(o->tensor.dtype(), o->tensor.dim() == 0);
    }
  }
  DType common = rt.result();
  const DType da = dtype_of(a), db = dtype_of(b);
  switch (op) {
    case BinaryOp::kSub:
      SP_CHECK(
          da != DType::kBool || db != DType::kBool,
          "sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
          "`^` or `logical_xor()` operator instead.");
      SP_CHECK(
          da != DType::kBool && db != DType::kBool,
          "sub: Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
          "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      [[fallthrough]];
    case BinaryOp::kAdd:
      if (is_integral(common, true)) {
        SP_CHECK(
            alpha.kind == Scalar::Kind::kInt || alpha.kind == Scalar::Kind::kBool, name,
            ": For integral input tensors, argument alpha must not be a floating point number.");
      }
      SP_CHECK(alpha.kind != Scalar::Kind::kBool || common == DType::kBool, name,
               ": Boolean alpha only supported for Boolean results.");
      break;
    case BinaryOp::kDiv:
    case BinaryOp::kAtan2:
      // True division: integer (and bool) operands give the default float type.
      if (is_integral(common, true)) common = kDefaultFloat;
      break;
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      SP_CHECK(!is_complex(common), name,
               ": ordering comparisons are not defined for complex "
               "tensors (got ",
               common, ")");
      break;
    case BinaryOp::kPow:
      // The one value check PyTorch makes before computing: an integer base cannot take a
      // negative integer exponent given as a number.
      SP_CHECK(!(is_integral(common, true) && b.is_scalar && b.scalar.kind == Scalar::Kind::kInt &&
                 b.scalar.i < 0),
               name, ": Integers to negative integer powers are not allowed (exponent ", b.scalar.i,
               ")");
      break;
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum:
    case BinaryOp::kRemainder:
    case BinaryOp::kFloorDivide:
      SP_CHECK(!is_complex(common), name, ": not implemented for complex tensors (got ", common,
               ")");
      break;
    case BinaryOp::kBitwiseAnd:
    case BinaryOp::kBitwiseOr:
      SP_CHECK(is_integral(common, true), name,
               ": only integral and bool tensors are supported, "
               "got ",
               common);
      break;
    default:
      break;
  }
  return {common, is_comparison(op) ? DType::kBool : common};
}

// At most three operands (where); a fixed array keeps the per-op path free of heap allocations.
struct IterOperands {
  std::array<detail::IterOperand, 3> items;
  size_t count = 0;
  std::span<const detail::IterOperand> span() const { return {items.data(), count}; }
};

IterOperands iter_operands(std::initializer_list<const Operand*> ops) {
  SP_ASSERT(ops.size() <= 3);
  IterOperands out;
  for (const Operand* o : ops) {
    if (o->is_scalar) {
      out.items[out.count++] = {&kScalarDims, &kScalarDims, true};
    } else {
      out.items[out.count++] = {&o->tensor.sizes(), &o->tensor.strides(),
                                o->tensor.is_contiguous()};
    }
  }
  return out;
}

// Device of the result: that of the tensor operands, which must agree and be meta.
Device check_tensor_operands(std::initializer_list<const Operand*> ops, const char* op) {
  const Tensor* first = nullptr;
  for (const Operand* o : ops) {
    if (o->is_scalar) continue;
    SP_CHECK(o->tensor.defined(), op, ": got an undefined tensor operand");
    detail::require_meta(o->tensor, op);
    if (first != nullptr) detail::require_same_device(*first, o->tensor, op);
    first = &o->tensor;
  }
  SP_CHECK(first != nullptr, op, ": needs at least one tensor operand");
  return first->device();
}

Tensor pointwise_out(std::initializer_list<const Operand*> ops, DType out_dtype, const char* op) {
  const Device device = check_tensor_operands(ops, op);
  const IterOperands iops = iter_operands(ops);
  if (const DimVector* shape = detail::contiguous_output_shape(iops.span())) {
    return make_fresh_contiguous(*shape, out_dtype, device, op);  // no stride inference needed
  }
  DimVector shape = detail::broadcast_all(iops.span(), op);
  checked_numel(shape, op);
  DimVector strides = detail::pointwise_output_strides(shape, iops.span());
  return make_fresh(std::move(shape), std::move(strides), out_dtype, device, op);
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  const char* name = unary_name(op);
  DType dtype = x.dtype();
  if (promotes_int_to_float(op) && is_integral(dtype, true)) dtype = kDefaultFloat;
  switch (op) {
    case UnaryOp::kNeg:
      SP_CHECK(x.dtype() != DType::kBool,
               "neg: Negation, the `-` operator, on a bool tensor is not "
               "supported. If you are trying to invert a mask, use the `~` or `logical_not()` "
               "operator instead.");
      break;
    case UnaryOp::kSquare:
      // square is pow(x, 2): a bool tensor with an int exponent promotes to int64.
      if (dtype == DType::kBool) dtype = DType::kInt64;
      break;
    case UnaryOp::kLogicalNot:
    case UnaryOp::kIsnan:
      dtype = DType::kBool;
      break;
    case UnaryOp::kBitwiseNot:
      SP_CHECK(is_integral(x.dtype(), true),
               "bitwise_not: only integral and bool tensors are "
               "supported, got ",
               x.dtype());
      break;
    case UnaryOp::kAbs:
      SP_CHECK(x.dtype() != DType::kBool, "abs: \"abs\" not implemented for bool tensors");
      [[fallthrough]];
    case UnaryOp::kRelu:
      SP_CHECK(x.dtype() != DType::kBool || op != UnaryOp::kRelu,
               "relu: Boolean inputs not supported for relu");
      [[fallthrough]];
    case UnaryOp::kSign:
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
      SP_CHECK(!is_complex(x.dtype()) || op == UnaryOp::kAbs, name,
               ": not supported for complex tensors");
      if (op == UnaryOp::kAbs && is_complex(dtype)) dtype = to_real(dtype);
      break;
    default:
      break;
  }
  const Operand a(x);
  Tensor out = pointwise_out({&a}, dtype, name);
  detail::propagate_grad(out, {&x});
  detail::trace_op(name, {x}, out, static_cast<double>(out.numel()));
  return out;
}

Tensor neg(const Tensor& x) { return unary(UnaryOp::kNeg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::kAbs, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::kExp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::kLog, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::kSqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::kRsqrt, x); }
Tensor sin(const Tensor& x) { return unary(UnaryOp::kSin, x); }
Tensor cos(const Tensor& x) { return unary(UnaryOp::kCos, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::kTanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::kSigmoid, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::kRelu, x); }
Tensor reciprocal(const Tensor& x) { return unary(UnaryOp::kReciprocal, x); }
Tensor square(const Tensor& x) { return unary(UnaryOp::kSquare, x); }

Tensor binary(BinaryOp op, const Operand& a, const Operand& b, Scalar alpha) {
  const char* name = binary_name(op);
  const BinaryTypes types = binary_types(op, a, b, alpha);
  Tensor out = pointwise_out({&a, &b}, types.out, name);
  detail::propagate_grad(out,
                         {a.is_scalar ? nullptr : &a.tensor, b.is_scalar ? nullptr : &b.tensor});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins;
    if (!a.is_scalar) ins.push_back(a.tensor);
    if (!b.is_scalar) ins.push_back(b.tensor);
    detail::emit_op(name, ins, {&out, 1}, static_cast<double>(out.numel()), 0, false);
  }
  return out;
}

Tensor& binary_(BinaryOp op, Tensor& self, const Operand& other, Scalar alpha) {
  const char* name = binary_name(op);
  const Operand s(self);
  const BinaryTypes types = binary_types(op, s, other, alpha);
  SP_CHECK(can_cast(types.out, self.dtype()), name, "_: result type ", types.out,
           " can't be cast to the desired output type ", self.dtype());
  check_tensor_operands({&s, &other}, name);
  const DimVector shape =
      broadcast_shapes(self.sizes(), other.is_scalar ? kScalarDims : other.tensor.sizes(), name);
  SP_CHECK(shape == self.sizes(), name, "_: output with shape ", self.sizes(),
           " doesn't match the broadcast shape ", shape);
  // PyTorch's assert_no_internal_overlap: writing through a stride-0 (expanded) dim would write
  // one memory location several times.
  if (!compute_non_overlapping_and_dense(self.sizes(), self.strides())) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      SP_CHECK(self.sizes()[d] <= 1 || self.strides()[d] != 0, name,
               "_: unsupported operation: "
               "more than one element of the written-to tensor (sizes ",
               self.sizes(), ", strides ", self.strides(),
               ") refers to a single memory location. Please "
               "clone() the tensor before performing the operation.");
    }
  }
  detail::propagate_grad(self, {other.is_scalar ? nullptr : &other.tensor});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins{self};
    if (!other.is_scalar) ins.push_back(other.tensor);
    detail::emit_op(name, ins, {&self, 1}, static_cast<double>(self.numel()), 0, false);
  }
  return self;
}

Tensor add(const Operand& a, const Operand& b, Scalar alpha) {
  return binary(BinaryOp::kAdd, a, b, alpha);
}
Tensor sub(const Operand& a, const Operand& b, Scalar alpha) {
  return binary(BinaryOp::kSub, a, b, alpha);
}
Tensor mul(const Operand& a, const Operand& b) { return binary(BinaryOp::kMul, a, b); }
Tensor div(const Operand& a, const Operand& b) { return binary(BinaryOp::kDiv, a, b); }
Tensor div(const Operand& a, const Operand& b, std::string_view rounding_mode) {
  SP_CHECK(rounding_mode == "trunc" || rounding_mode == "floor",
           "div: div expected rounding_mode "
           "to be one of None, 'trunc', or 'floor' but found '",
           rounding_mode, "'");
  // A rounded quotient is typed like floor_divide: no promotion to float, no complex.
  return binary(BinaryOp::kFloorDivide, a, b);
}
Tensor pow(const Operand& a, const Operand& b) { return binary(BinaryOp::kPow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMaximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMinimum, a, b); }
Tensor eq(const Operand& a, const Operand& b) { return binary(BinaryOp::kEq, a, b); }
Tensor ne(const Operand& a, const Operand& b) { return binary(BinaryOp::kNe, a, b); }
Tensor lt(const Operand& a, const Operand& b) { return binary(BinaryOp::kLt, a, b); }
Tensor le(const Operand& a, const Operand& b) { return binary(BinaryOp::kLe, a, b); }
Tensor gt(const Operand& a, const Operand& b) { return binary(BinaryOp::kGt, a, b); }
Tensor ge(const Operand& a, const Operand& b) { return binary(BinaryOp::kGe, a, b); }
Tensor& add_(Tensor& self, const Operand& other, Scalar alpha) {
  return binary_(BinaryOp::kAdd, self, other, alpha);
}
Tensor& sub_(Tensor& self, const Operand& other, Scalar alpha) {
  return binary_(BinaryOp::kSub, self, other, alpha);
}
Tensor& mul_(Tensor& self, const Operand& other) { return binary_(BinaryOp::kMul, self, other); }
Tensor& div_(Tensor& self, const Operand& other) { return binary_(BinaryOp::kDiv, self, other); }

Tensor where(const Tensor& condition, const Operand& a, const Operand& b) {
  SP_CHECK(condition.dtype() == DType::kBool,
           "where: where expected condition to be a boolean "
           "tensor, but got a tensor with dtype ",
           condition.dtype());
  ResultType rt;
  for (const Operand* o : {&a, &b}) {
    if (o->is_scalar) {
      rt.add_scalar(o->scalar);
    } else {
      rt.add_tensor(o->tensor.dtype(), o->tensor.dim() == 0);
    }
  }
  const Operand c(condition);
  Tensor out = pointwise_out({&c, &a, &b}, rt.result(), "where");
  detail::propagate_grad(out,
                         {a.is_scalar ? nullptr : &a.tensor, b.is_scalar ? nullptr : &b.tensor});
  if (active_trace_sink() != nullptr) {
    std::vector<Tensor> ins{condition};
    if (!a.is_scalar) ins.push_back(a.tensor);
    if (!b.is_scalar) ins.push_back(b.tensor);
    detail::emit_op("where", ins, {&out, 1}, static_cast<double>(out.numel()), 0, false);
  }
  return out;
}

Tensor to(const Tensor& x, DType dtype, bool copy) {
  if (dtype == x.dtype() && !copy) return x;
  detail::require_meta(x, "to");
  Tensor out = empty_like(x, dtype);
  detail::propagate_grad(out, {&x});
  detail::trace_op("to", {x}, out, 0);
  return out;
}

}  // namespace shardplan::tensor
