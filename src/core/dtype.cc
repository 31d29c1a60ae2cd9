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
    case DType::kInt16:
      return "int16";
    case DType::kUInt8:
      return "uint8";
    case DType::kUInt16:
      return "uint16";
    case DType::kUInt32:
      return "uint32";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat8E4M3B11FNUZ:
      return "float8_e4m3b11fnuz";
    case DType::kInt4:
      return "int4";
    case DType::kUInt4:
      return "uint4";
    case DType::kInt2:
      return "int2";
    case DType::kUInt2:
      return "uint2";
  }
  return "unknown";
}

}  // namespace tessera
