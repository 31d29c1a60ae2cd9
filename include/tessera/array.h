// File: tessera/array.h
//
// `tessera::Array<T>`: an owning, contiguous, row-major array in HBM — what a
// JAX user passes to and gets back from a kernel (`jax.Array`). Storage is
// 64-byte aligned. Copies are deep; moves are cheap.
// `tessera::ShapeDtypeStruct<T>` describes an array without storage
// (`jax.ShapeDtypeStruct`), e.g. for a kernel's `out_type`.
//
//   Array<float> z({2, 3});                          // zeros, shape (2, 3)
//   Array<float> a({2, 3}, {1, 2, 3, 4, 5, 6});      // values in row-major order
//   Array<int32_t> f({4}, 7);                        // filled with 7
//   auto v = tessera::array<float>({0.5f, 1.5f});    // 1-D from values (jnp.array)
//   auto w = tessera::array(std::vector<float>(8));  // 1-D from a vector
//   auto m = tessera::array<float>({{1, 2}, {3, 4}});// 2-D from nested lists
//   a(1, 2);                                         // 6, element access on the host
//   std::cout << a;                                  // [[1. 2. 3.]
//                                                    //  [4. 5. 6.]]
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/dtype.h"
#include "tessera/shape.h"

namespace tessera {

/// `jax.ShapeDtypeStruct`: a shape with an element type, no storage.
template <class T>
struct ShapeDtypeStruct {
  static_assert(is_element_type_v<T> && !std::is_const_v<T>,
                "tessera: ShapeDtypeStruct<T> needs T in {float, bfloat16, float16, "
                "float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz, int32_t, int16_t, int8_t, "
                "uint32_t, uint16_t, uint8_t, int4, uint4, int2, uint2, bool}");
  using value_type = T;
  Shape shape;
  static constexpr DType dtype = dtype_of<T>;
};

/// How `Array::to_string` prints, after numpy's print options.
struct PrintOptions {
  int64_t threshold = 1000;  ///< arrays with more elements than this are summarised
  int64_t edgeitems = 3;     ///< items shown at each end of a summarised axis
  int linewidth = 75;        ///< wrap rows longer than this
};

namespace detail {
/// What an allocation is for, named in its out-of-memory error: `what` ("an Array", "output 0
/// of kernel 'k'"), its dtype and shape, and the user's line.
struct HbmRequest {
  const char* what = "an Array";
  DType dtype = DType::kFloat32;
  const Shape* shape = nullptr;
  std::source_location where = {};
};
/// 64-byte aligned storage for HBM arrays; large blocks are page-backed (huge pages where the OS
/// offers them). Never returns null: throws kCapacityExceeded naming the size (and `request`'s
/// array, shape and line) when memory runs out.
void* hbm_allocate(size_t bytes, bool zero, const HbmRequest* request = nullptr);
void hbm_free(void* p, size_t bytes) noexcept;
struct HbmDeleter {
  size_t bytes = 0;
  void operator()(void* p) const noexcept { hbm_free(p, bytes); }
};
/// numpy-style text of a row-major buffer.
std::string format_array(DType dtype, const void* data, const Shape& shape,
                         const PrintOptions& options);
[[noreturn]] void throw_array_size_mismatch(const Shape& shape, size_t values,
                                            std::source_location where);
[[noreturn]] void throw_ragged_rows(int64_t row, int64_t length, int64_t expected,
                                    std::source_location where);
[[noreturn]] void throw_array_index_error(const Shape& shape, int axis, int64_t index, int nindices,
                                          std::source_location where);
/// Throws UsageError (kInvalidArgument) for a negative extent, a rank above 32 or a shape whose
/// element or byte count (at `itemsize` bytes an element) overflows 64 bits.
void check_shape_valid(const Shape& shape, size_t itemsize, std::source_location where);
struct Uninitialized {};
}  // namespace detail

/// An owning, contiguous, row-major array of `T` in HBM, 64-byte aligned.
template <class T>
class Array {
  static_assert(is_element_type_v<T> && !std::is_const_v<T>,
                "tessera: Array<T> needs T in {float, bfloat16, float16, float8_e4m3fn, "
                "float8_e5m2, float8_e4m3b11fnuz, int32_t, int16_t, int8_t, uint32_t, uint16_t, "
                "uint8_t, int4, uint4, int2, uint2, bool}");

 public:
  using value_type = T;

  /// An empty 1-D array, shape (0,).
  Array() : Array(Shape{0}) {}
  /// Zero-filled array of `shape`. Throws UsageError for a negative extent or a shape too big
  /// to count, and kCapacityExceeded when the memory cannot be had.
  explicit Array(Shape shape, std::source_location where = std::source_location::current())
      : shape_(std::move(shape)) {
    detail::check_shape_valid(shape_, sizeof(T), where);
    allocate(true, where);
  }
  /// Array of `shape` with every element `fill`.
  Array(Shape shape, T fill, std::source_location where = std::source_location::current())
      : shape_(std::move(shape)) {
    detail::check_shape_valid(shape_, sizeof(T), where);
    allocate(false, where);
    // The count taken once: size() is a checked product of the extents, and a loop bounded by
    // it recomputed that product for every element (GCC 12, -O3) and stored one at a time.
    std::fill_n(data(), size(), fill);
  }
  /// Array of `shape` holding `values` in row-major order; their count must equal the size.
  Array(Shape shape, std::initializer_list<T> values,
        std::source_location where = std::source_location::current())
      : shape_(std::move(shape)) {
    init_from(values.begin(), values.size(), where);
  }
  /// Array of `shape` holding `values` in row-major order; their count must equal the size.
  Array(Shape shape, const std::vector<T>& values,
        std::source_location where = std::source_location::current())
      : shape_(std::move(shape)) {
    init_from(values.begin(), values.size(), where);  // iterators: std::vector<bool> has no data()
  }
  /// Array of `shape` whose contents are unspecified (kernel outputs start like this); `what` and
  /// `where` name it in an out-of-memory error.
  Array(detail::Uninitialized, Shape shape, std::source_location where = {},
        const char* what = "an Array")
      : shape_(std::move(shape)) {
    detail::check_shape_valid(shape_, sizeof(T), where);
    allocate(false, where, what);
  }

  Array(const Array& o) : shape_(o.shape_) {
    allocate(false);
    if (bytes() != 0) std::memcpy(data(), o.data(), bytes());
  }
  Array(Array&&) noexcept = default;
  Array& operator=(const Array& o) {
    if (this != &o) *this = Array(o);
    return *this;
  }
  Array& operator=(Array&&) noexcept = default;

  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  /// Number of elements.
  int64_t size() const noexcept { return shape_.size(); }
  /// Bytes of storage (`size() * sizeof(T)`).
  size_t bytes() const noexcept { return static_cast<size_t>(size()) * sizeof(T); }
  static constexpr DType dtype() noexcept { return dtype_of<T>; }

  T* data() noexcept { return static_cast<T*>(storage_.get()); }
  const T* data() const noexcept { return static_cast<const T*>(storage_.get()); }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size(); }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }

  /// Element `i` of the row-major storage (no bounds check).
  T& operator[](int64_t i) noexcept { return data()[i]; }
  const T& operator[](int64_t i) const noexcept { return data()[i]; }

  /// Element at a full multi-index, bounds-checked: throws UsageError for a wrong count of
  /// indices or an index outside its axis.
  // One overload per rank (0 to 6), so that each can take the caller's location as a default
  // argument; indices may be of any integral type.
  T& operator()(std::source_location w = std::source_location::current()) {
    return data()[offset_of({}, w)];
  }
  const T& operator()(std::source_location w = std::source_location::current()) const {
    return data()[offset_of({}, w)];
  }
  template <std::integral I0>
  T& operator()(I0 i0, std::source_location w = std::source_location::current()) {
    return data()[offset_of({static_cast<int64_t>(i0)}, w)];
  }
  template <std::integral I0>
  const T& operator()(I0 i0, std::source_location w = std::source_location::current()) const {
    return data()[offset_of({static_cast<int64_t>(i0)}, w)];
  }
  template <std::integral I0, std::integral I1>
  T& operator()(I0 i0, I1 i1, std::source_location w = std::source_location::current()) {
    return data()[offset_of({static_cast<int64_t>(i0), static_cast<int64_t>(i1)}, w)];
  }
  template <std::integral I0, std::integral I1>
  const T& operator()(I0 i0, I1 i1,
                      std::source_location w = std::source_location::current()) const {
    return data()[offset_of({static_cast<int64_t>(i0), static_cast<int64_t>(i1)}, w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2>
  T& operator()(I0 i0, I1 i1, I2 i2, std::source_location w = std::source_location::current()) {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2)}, w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2>
  const T& operator()(I0 i0, I1 i1, I2 i2,
                      std::source_location w = std::source_location::current()) const {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2)}, w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3>
  T& operator()(I0 i0, I1 i1, I2 i2, I3 i3,
                std::source_location w = std::source_location::current()) {
    return data()[offset_of({static_cast<int64_t>(i0), static_cast<int64_t>(i1),
                             static_cast<int64_t>(i2), static_cast<int64_t>(i3)},
                            w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3>
  const T& operator()(I0 i0, I1 i1, I2 i2, I3 i3,
                      std::source_location w = std::source_location::current()) const {
    return data()[offset_of({static_cast<int64_t>(i0), static_cast<int64_t>(i1),
                             static_cast<int64_t>(i2), static_cast<int64_t>(i3)},
                            w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3,
            std::integral I4>
  T& operator()(I0 i0, I1 i1, I2 i2, I3 i3, I4 i4,
                std::source_location w = std::source_location::current()) {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2),
         static_cast<int64_t>(i3), static_cast<int64_t>(i4)},
        w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3,
            std::integral I4>
  const T& operator()(I0 i0, I1 i1, I2 i2, I3 i3, I4 i4,
                      std::source_location w = std::source_location::current()) const {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2),
         static_cast<int64_t>(i3), static_cast<int64_t>(i4)},
        w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3,
            std::integral I4, std::integral I5>
  T& operator()(I0 i0, I1 i1, I2 i2, I3 i3, I4 i4, I5 i5,
                std::source_location w = std::source_location::current()) {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2),
         static_cast<int64_t>(i3), static_cast<int64_t>(i4), static_cast<int64_t>(i5)},
        w)];
  }
  template <std::integral I0, std::integral I1, std::integral I2, std::integral I3,
            std::integral I4, std::integral I5>
  const T& operator()(I0 i0, I1 i1, I2 i2, I3 i3, I4 i4, I5 i5,
                      std::source_location w = std::source_location::current()) const {
    return data()[offset_of(
        {static_cast<int64_t>(i0), static_cast<int64_t>(i1), static_cast<int64_t>(i2),
         static_cast<int64_t>(i3), static_cast<int64_t>(i4), static_cast<int64_t>(i5)},
        w)];
  }

  /// The values as a std::vector, in row-major order.
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  /// numpy-style text: "[0. 1. 2.]", summarised with "..." past `options.threshold` elements.
  std::string to_string(const PrintOptions& options = {}) const {
    return detail::format_array(dtype(), data(), shape_, options);
  }

 private:
  void allocate(bool zero, std::source_location where = {}, const char* what = "an Array") {
    const size_t n = bytes();
    const detail::HbmRequest request{what, dtype(), &shape_, where};
    storage_ = std::unique_ptr<void, detail::HbmDeleter>(detail::hbm_allocate(n, zero, &request),
                                                         detail::HbmDeleter{n});
  }
  template <class It>
  void init_from(It values, size_t count, std::source_location where) {
    detail::check_shape_valid(shape_, sizeof(T), where);
    if (static_cast<int64_t>(count) != shape_.size()) {
      detail::throw_array_size_mismatch(shape_, count, where);
    }
    allocate(false, where);
    for (size_t i = 0; i < count; ++i, ++values) data()[i] = *values;
  }
  int64_t offset_of(std::initializer_list<int64_t> idx, std::source_location where) const {
    const int n = static_cast<int>(idx.size());
    if (n != rank()) detail::throw_array_index_error(shape_, -1, 0, n, where);
    int64_t off = 0;
    int axis = 0;
    for (int64_t i : idx) {
      if (i < 0 || i >= shape_[axis]) detail::throw_array_index_error(shape_, axis, i, n, where);
      off = off * shape_[axis] + i;
      ++axis;
    }
    return off;
  }

  Shape shape_;
  std::unique_ptr<void, detail::HbmDeleter> storage_;
};

/// 1-D array from values, like `jnp.array([...])`.
template <class T>
Array<T> array(std::initializer_list<T> values) {
  return Array<T>(Shape{static_cast<int64_t>(values.size())}, values);
}
/// 1-D array from a vector (a constructor would make `Array<float>({128})` ambiguous).
template <class T>
Array<T> array(const std::vector<T>& values) {
  return Array<T>(Shape{static_cast<int64_t>(values.size())}, values);
}
/// 2-D array from nested lists, like `jnp.array([[...], [...]])`; rows must have equal length.
template <class T>
Array<T> array(std::initializer_list<std::initializer_list<T>> rows,
               std::source_location where = std::source_location::current()) {
  const int64_t r = static_cast<int64_t>(rows.size());
  const int64_t c = r == 0 ? 0 : static_cast<int64_t>(rows.begin()->size());
  std::vector<T> flat;
  flat.reserve(static_cast<size_t>(r * c));
  int64_t index = 0;
  for (const auto& row : rows) {
    if (static_cast<int64_t>(row.size()) != c) {
      detail::throw_ragged_rows(index, static_cast<int64_t>(row.size()), c, where);
    }
    ++index;
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return Array<T>(Shape{r, c}, flat, where);
}

template <class T>
std::ostream& operator<<(std::ostream& os, const Array<T>& a) {
  return os << a.to_string();
}

}  // namespace tessera
