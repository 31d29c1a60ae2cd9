// Shape printing (Python tuple notation) and row-major strides.
#include "tessera/shape.h"

#include <cstdint>
#include <string>

namespace tessera {

std::string Shape::to_string() const {
  // Python: () for rank 0, (n,) for rank 1, (a, b, ...) otherwise.
  std::string s = "(";
  for (int i = 0; i < rank(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (rank() == 1) s += ",";
  s += ")";
  return s;
}

detail::SmallVec row_major_strides(const Shape& shape) {
  const int r = shape.rank();
  detail::SmallVec strides;
  strides.resize_for_overwrite(r);  // every element is written below
  int64_t stride = 1;
  for (int i = r - 1; i >= 0; --i) {
    strides[i] = stride;
    // Saturates instead of wrapping: a validated shape never gets there.
    if (!detail::checked_mul(stride, shape[i], &stride)) stride = INT64_MAX;
  }
  return strides;
}

}  // namespace tessera
