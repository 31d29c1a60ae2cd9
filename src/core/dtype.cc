// dtype_name: numpy's names for the element types.
#include "tessera/dtype.h"

namespace tessera {

const char* dtype_name(DType d) noexcept {
  switch (d) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kInt8:
      return "int8";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

}  // namespace tessera
