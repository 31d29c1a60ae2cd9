// File: tessera/shape.h
//
// `tessera::Shape`: the dimensions of an array, block or view, of any rank
// (rank 0 is a scalar). Pallas writes shapes as Python tuples, `(128,)` or
// `(8, 128)`; Tessera writes `{128}` or `{8, 128}` and prints them the Python
// way.
//
//   tessera::Shape s{8, 128};
//   s.rank();        // 2
//   s[1];            // 128
//   s.size();        // 1024 elements
//   s.to_string();   // "(8, 128)"
//
// Shapes up to rank 6 live inline; larger ranks allocate.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tessera/detail/checked_math.h"
#include "tessera/detail/small_vec.h"

namespace tessera {

/// The dimensions of an array: one non-negative extent per axis, row-major.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) {}
  explicit Shape(detail::SmallVec dims) : dims_(std::move(dims)) {}

  /// Number of axes.
  int rank() const noexcept { return dims_.size(); }
  /// Extent of axis `i` (0 <= i < rank()).
  int64_t operator[](int i) const noexcept { return dims_[i]; }
  int64_t& operator[](int i) noexcept { return dims_[i]; }
  /// Number of elements (1 for rank 0). Every shape a user gives Tessera is validated where it
  /// enters (its count and bytes fit 64 bits); an unvalidated shape whose count would overflow
  /// reads as INT64_MAX rather than wrapping.
  int64_t size() const noexcept { return detail::saturating_product(dims_.begin(), dims_.end()); }
  const int64_t* begin() const noexcept { return dims_.begin(); }
  const int64_t* end() const noexcept { return dims_.end(); }
  const detail::SmallVec& dims() const noexcept { return dims_; }
  detail::SmallVec& dims() noexcept { return dims_; }

  /// Python tuple notation: "()", "(128,)", "(8, 128)".
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) noexcept { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) noexcept { return !(a == b); }

 private:
  detail::SmallVec dims_;
};

/// Row-major (C order) strides, in elements, of a contiguous array of `shape`.
detail::SmallVec row_major_strides(const Shape& shape);

namespace detail {
/// Whether `strides` lay `shape` out row-major without gaps (the strides of extent-1 axes do not
/// matter): the layout a view's elements have when they are one contiguous run, in order.
inline bool is_row_major(const Shape& shape, const SmallVec& strides) noexcept {
  int64_t expect = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}
}  // namespace detail

}  // namespace tessera
