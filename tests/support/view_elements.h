// Test support: the elements of a strided view, in row-major order of its shape.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/detail/small_vec.h"
#include "tessera/shape.h"

namespace tessera::testing {

/// p[sum(i_d * strides[d])] for every index i of `shape`, the last axis fastest.
template <class T>
std::vector<T> view_elements(const T* p, const Shape& shape, const detail::SmallVec& strides) {
  std::vector<T> out;
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()), 0);
  for (int64_t n = 0; n < shape.size(); ++n) {
    int64_t off = 0;
    for (int d = 0; d < shape.rank(); ++d) off += idx[static_cast<size_t>(d)] * strides[d];
    out.push_back(p[off]);
    for (int d = shape.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

}  // namespace tessera::testing
