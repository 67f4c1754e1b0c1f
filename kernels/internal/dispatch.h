// Turns a runtime ElementType into a compile-time one, once per fill rather than per element.
//   dispatch_element_type(type, [&](auto tag) { run<decltype(tag)::value>(...); });
#pragma once

#include <type_traits>

#include "kernels/element_type.h"
#include "kernels/internal/check.h"

namespace shardplan::kernels::internal {

template <ElementType T>
using TypeTag = std::integral_constant<ElementType, T>;

template <class F>
decltype(auto) dispatch_element_type(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kFloat64:
      return f(TypeTag<ElementType::kFloat64>{});
    case ElementType::kFloat32:
      return f(TypeTag<ElementType::kFloat32>{});
    case ElementType::kFloat16:
      return f(TypeTag<ElementType::kFloat16>{});
    case ElementType::kBFloat16:
      return f(TypeTag<ElementType::kBFloat16>{});
    case ElementType::kFloat8E4M3FN:
      return f(TypeTag<ElementType::kFloat8E4M3FN>{});
    case ElementType::kFloat8E5M2:
      return f(TypeTag<ElementType::kFloat8E5M2>{});
    case ElementType::kInt64:
      return f(TypeTag<ElementType::kInt64>{});
    case ElementType::kInt32:
      return f(TypeTag<ElementType::kInt32>{});
    case ElementType::kInt16:
      return f(TypeTag<ElementType::kInt16>{});
    case ElementType::kInt8:
      return f(TypeTag<ElementType::kInt8>{});
    case ElementType::kUInt8:
      return f(TypeTag<ElementType::kUInt8>{});
    case ElementType::kBool:
      return f(TypeTag<ElementType::kBool>{});
    case ElementType::kComplex64:
      return f(TypeTag<ElementType::kComplex64>{});
  }
  check_failed("type is a valid ElementType", "unknown ElementType value", __FILE__, __LINE__);
}

}  // namespace shardplan::kernels::internal
