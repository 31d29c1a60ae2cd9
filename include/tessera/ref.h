// File: tessera/ref.h
//
// `pl::Ref<T, Space>`: a view (pointer, shape, strides) of memory in one memory
// space — the counterpart of a Pallas Ref. Refs do not own memory: kernels
// receive them for their inputs, outputs and scratch buffers.
//
//   Pallas                                Tessera
//   x_ref.at[pl.ds(i * 128, 128)]         x_ref.at(pl::ds(i * 128, 128))
//   x_ref.at[0]                           x_ref.at(0)            // squeezes axis 0
//   x_ref.at[:, pl.ds(0, 128, 2)]         x_ref.at(pl::all, pl::ds(0, 128, 2))
//   v = s_ref[3]; s_ref[3] = v + 1        auto v = s_ref(3); s_ref(3) = v + 1;   // VMEM/SMEM only
//   o_vmem[...] = x_vmem[...] + 1.0       o_vmem = x_vmem + 1.0f;               // VMEM/SMEM only
//
// Rules, checked by the compiler: only refs in VMEM or SMEM have element
// access and may appear in compute expressions or be assigned to; refs in HBM
// or ANY can only be moved by DMA (`pltpu::sync_copy`). A `Ref<T, HBM>`
// converts to `Ref<T, ANY>`, and `Ref<T, S>` to `Ref<const T, S>`.
//
// Assigning to a Ref writes its elements (like `Eigen::Map`), it never rebinds
// the view. `.at(...)` is bounds-checked and throws `KernelError` (inside a
// kernel) or `UsageError` (outside) of kind kOutOfBounds, naming the slice,
// the axis and its extent. Element access is bounds-checked the same way.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <type_traits>

#include "tessera/detail/expr_concepts.h"
#include "tessera/detail/statement.h"
#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/shape.h"
#include "tessera/slice.h"

namespace tessera {

namespace pl {
template <class T, MemorySpace Space>
class PackedRef;  // packed_ref.h
}  // namespace pl

namespace detail {

/// The type-erased form of a Ref, as the runtime (DMA, checks, traces) sees it.
struct RawRef {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  MemorySpace space = MemorySpace::ANY;
  Shape shape;
  SmallVec strides;  // in elements
};

/// True on a core thread whose engine observes element access (the checked engine): refs made
/// there report each element access to it. Read once per ref, when it is made.
inline thread_local bool t_observe_elements = false;
/// Reports an element access (a read, or a write) to the running core's engine
/// (src/runtime/engine.cc).
void observe_element(const void* p, int size, bool read, std::source_location where);

/// An element of a Ref of non-const elements, as `ref(i, j)` returns it: converting it to T reads
/// the element, assigning to it writes it, `+=` and the like do both. Reads and writes are told
/// apart for the checked engine (a counter read before anything set it is a read of garbage).
/// Like a reference, it names the element, not its value: `auto e = ref(0)` keeps reading the
/// element as it changes; write `T v = ref(0)` for the value.
template <class T>
class ElementRef {
 public:
  using value_type = T;
  ElementRef(T* p, std::source_location where, bool observed) noexcept
      : p_(p), where_(where), observed_(observed) {}
  ElementRef(const ElementRef&) = default;

  operator T() const {  // NOLINT: reads like the element it names
    if (observed_) [[unlikely]]
      observe_element(p_, static_cast<int>(sizeof(T)), true, where_);
    return *p_;
  }
  /// The element's value (a read).
  T get() const { return static_cast<T>(*this); }
  ElementRef& operator=(const T& v) {
    if (observed_) [[unlikely]]
      observe_element(p_, static_cast<int>(sizeof(T)), false, where_);
    *p_ = v;
    return *this;
  }
  /// `a(i) = b(j)`: reads b's element, writes a's.
  ElementRef& operator=(const ElementRef& o) { return *this = o.get(); }
  template <class U>
  ElementRef& operator+=(const U& v) {
    return *this = static_cast<T>(get() + v);
  }
  template <class U>
  ElementRef& operator-=(const U& v) {
    return *this = static_cast<T>(get() - v);
  }
  template <class U>
  ElementRef& operator*=(const U& v) {
    return *this = static_cast<T>(get() * v);
  }
  template <class U>
  ElementRef& operator/=(const U& v) {
    return *this = static_cast<T>(get() / v);
  }
  template <class U>
  ElementRef& operator%=(const U& v) {
    return *this = static_cast<T>(get() % v);
  }
  template <class U>
  ElementRef& operator&=(const U& v) {
    return *this = static_cast<T>(get() & v);
  }
  template <class U>
  ElementRef& operator|=(const U& v) {
    return *this = static_cast<T>(get() | v);
  }
  template <class U>
  ElementRef& operator^=(const U& v) {
    return *this = static_cast<T>(get() ^ v);
  }
  ElementRef& operator++() { return *this += 1; }
  ElementRef& operator--() { return *this -= 1; }
  T operator++(int) {
    const T old = get();
    *this = static_cast<T>(old + 1);
    return old;
  }
  T operator--(int) {
    const T old = get();
    *this = static_cast<T>(old - 1);
    return old;
  }

 private:
  T* p_;
  std::source_location where_;
  bool observed_;
};

template <class T>
inline constexpr bool is_element_ref_v = false;
template <class T>
inline constexpr bool is_element_ref_v<ElementRef<T>> = true;
/// An integer, or an element of a Ref of integers (`s_ref(i)` used as an index).
template <class I>
concept IndexValue = std::is_integral_v<I> ||
    (is_element_ref_v<I>&& std::is_integral_v<typename I::value_type>);

/// One indexer of `Ref::at`: an integer (squeeze), a `pl::Slice`, or `pl::all`.
struct Indexer {
  enum class Kind : uint8_t { kIndex, kSlice, kAll };
  Kind kind = Kind::kAll;
  pl::Slice slice{};  // for kIndex: start = the index

  template <class I>
  requires IndexValue<I> Indexer(I i)  // NOLINT: an index reads like one
      : kind(Kind::kIndex), slice{static_cast<int64_t>(i), 1, 1} {}
  Indexer(pl::Slice s) noexcept : kind(Kind::kSlice), slice(s) {}  // NOLINT
  Indexer(pl::All) noexcept {}                                     // NOLINT
};

/// Applies indexers to (data, shape, strides) in place; throws kOutOfBounds with `where`.
/// Returns the new data pointer offset in elements.
int64_t apply_indexers(Shape& shape, SmallVec& strides, const Indexer* ix, int n, MemorySpace space,
                       std::source_location where);
/// Makes (shape, strides) the view of the same elements in row-major order with shape `to` (one
/// extent may be -1); throws kInvalidArgument, naming `where`, when the count differs or the
/// view's layout cannot express the new shape.
void reshape_view(Shape& shape, SmallVec& strides, const Shape& to, MemorySpace space,
                  std::source_location where);
/// Throws kOutOfBounds for element access with a wrong index or index count.
[[noreturn]] void throw_element_index_error(const Shape& shape, const int64_t* idx, int n,
                                            MemorySpace space, std::source_location where);

/// A width-changing bitcast of `r` (packed_ref.h).
template <class V, MemorySpace S, class T>
pl::PackedRef<V, S> packed_bitcast_of(const pl::Ref<T, S>& r, std::source_location where);

template <class T, MemorySpace Space>
inline constexpr bool kComputeCheck = [] {
  static_assert(is_compute_space(Space),
                "tessera: this Ref is in HBM/ANY memory, which kernels cannot read, write or "
                "compute on; copy it into a VMEM buffer first with pltpu::sync_copy (or a "
                "BlockSpec), then use the VMEM ref");
  return true;
}();

}  // namespace detail

namespace pl {

/// A view of `T` elements in memory space `Space` (see the file comment).
template <class T, MemorySpace Space>
class Ref {
  static_assert(is_element_type_v<T>,
                "tessera: Ref<T, Space> needs T in {float, bfloat16, float16, float8_e4m3fn, "
                "float8_e5m2, float8_e4m3b11fnuz, int32_t, int16_t, int8_t, uint32_t, uint16_t, "
                "uint8_t, int4, uint4, int2, uint2, bool} (optionally const)");

 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  static constexpr MemorySpace space = Space;
  static constexpr DType dtype = dtype_of<T>;

  /// A view of `data` with `shape` and element `strides`. Kernels get refs from Tessera;
  /// building one by hand is for tests and adapters.
  Ref(T* data, const Shape& shape, const detail::SmallVec& strides)
      : data_(data), shape_(shape), strides_(strides) {}
  Ref(T* data, Shape&& shape, detail::SmallVec&& strides) noexcept
      : data_(data), shape_(std::move(shape)), strides_(std::move(strides)) {}
  /// A contiguous row-major view of `data` with `shape`.
  Ref(T* data, Shape shape) : data_(data), shape_(std::move(shape)) {
    strides_ = row_major_strides(shape_);
  }

  Ref(const Ref&) = default;
  Ref(Ref&&) noexcept = default;

  /// Adds const, or widens HBM to ANY.
  template <class U, MemorySpace S2>
  requires((std::is_same_v<U, T> ||
            std::is_same_v<const U, T>)&&(S2 == Space ||
                                          (S2 == MemorySpace::HBM && Space == MemorySpace::ANY)) &&
           !(std::is_same_v<U, T> && S2 == Space)) Ref(const Ref<U, S2>& o)
  noexcept  // NOLINT: implicit, like T* -> const T*
      : data_(o.data()), shape_(o.shape()), strides_(o.strides()), observed_(o.observed_) {}

  /// Writes the elements of `other` into this ref (shapes must match). VMEM/SMEM only.
  Ref& operator=(const Ref& other);
  /// Writes an expression, a value, a ref or a scalar into this ref's elements. VMEM/SMEM only.
  /// Defined in vector_ops.h.
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, Ref>) Ref& operator=(E&& expr);

  /// `a += e` is `a = a + e` (Pallas: `a_ref[...] += e`), and likewise `-=`, `*=`, `/=`: `e`
  /// is a ref, an elementwise expression, a value or a scalar, and `a op e` must have a's dtype
  /// (an int32 ref cannot take `/=`, which is true division). VMEM/SMEM only; one fused pass.
  /// Defined in vector_ops.h.
  template <class E>
  requires(detail::Operand<E> || detail::Scalar<E>) Ref& operator+=(E&& e);
  template <class E>
  requires(detail::Operand<E> || detail::Scalar<E>) Ref& operator-=(E&& e);
  template <class E>
  requires(detail::Operand<E> || detail::Scalar<E>) Ref& operator*=(E&& e);
  template <class E>
  requires(detail::Operand<E> || detail::Scalar<E>) Ref& operator/=(E&& e);

  /// Pallas' subscript: `x_ref[pl::ellipsis]` is `x_ref[...]`, `x_ref[i]` / `x_ref[pl::ds(0,
  /// 8)]` index the first axis, `x_ref[{pl::ds(0, 8), pl::all}]` is `x_ref[0:8, :]`. What it
  /// gives reads the ref where it is used: assign to it (`o_ref[pl::ellipsis] = x;`, `+=`), use
  /// it in an expression (`o = x_ref[pl::ellipsis] + 1;`), or keep its elements as a value
  /// (`jnp::Value x = x_ref[pl::ellipsis];`, a copy). VMEM/SMEM only. Defined in vector_ops.h.
  auto operator[](pl::Ellipsis) const;
  auto operator[](detail::Indexer index) const;
  auto operator[](std::initializer_list<detail::Indexer> indices) const;

  /// `x_ref[...].astype(U)`: an expression of this ref's elements converted to U (see
  /// jnp::astype in vector_math.h). Cheap (one VPU op). Defined in vector_math.h.
  template <class U>
  auto astype() const;

  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  int64_t size() const noexcept { return shape_.size(); }
  /// Bytes covered by the view (`size() * sizeof(T)`).
  int64_t nbytes() const noexcept { return size() * static_cast<int64_t>(sizeof(T)); }
  /// Strides in elements, one per axis.
  const detail::SmallVec& strides() const noexcept { return strides_; }
  /// Pointer to element (0, ..., 0).
  T* data() const noexcept { return data_; }
  /// True when the elements are contiguous in row-major order.
  bool is_contiguous() const noexcept { return detail::is_row_major(shape_, strides_); }

  /// A sub-view, `ref.at[...]` in Pallas: one indexer per leading axis (an integer squeezes
  /// the axis, `pl::ds(start, size[, stride])` slices it, `pl::all` keeps it); missing
  /// trailing indexers keep their axes. Throws kOutOfBounds when a slice leaves the axis.
  Ref at(detail::Indexer a, std::source_location w = std::source_location::current()) const {
    return at_n({a}, w);
  }
  Ref at(detail::Indexer a, detail::Indexer b,
         std::source_location w = std::source_location::current()) const {
    return at_n({a, b}, w);
  }
  Ref at(detail::Indexer a, detail::Indexer b, detail::Indexer c,
         std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c}, w);
  }
  Ref at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
         std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c, d}, w);
  }
  Ref at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
         detail::Indexer e, std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c, d, e}, w);
  }
  Ref at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
         detail::Indexer e, detail::Indexer f,
         std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c, d, e, f}, w);
  }

  /// `x_ref.reshape(4, -1)` (Pallas' Ref.reshape): a view of the same elements, in row-major
  /// order, with a new shape; one extent may be -1. Any contiguous ref can be reshaped; a
  /// strided view (a window's rows) only where the axes that merge or split are contiguous
  /// among themselves; otherwise, or when the element count differs, kInvalidArgument. Free.
  Ref reshape(Shape to, std::source_location w = std::source_location::current()) const {
    Ref r(*this, 0);
    detail::reshape_view(r.shape_, r.strides_, to, Space, w);
    return r;
  }
  Ref reshape(int64_t a, std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a}, w);
  }
  Ref reshape(int64_t a, int64_t b,
              std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b}, w);
  }
  Ref reshape(int64_t a, int64_t b, int64_t c,
              std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b, c}, w);
  }
  Ref reshape(int64_t a, int64_t b, int64_t c, int64_t d,
              std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b, c, d}, w);
  }

  /// `x_ref.bitcast(jnp.uint32)` (Pallas' Ref.bitcast). To a type of T's size: a view of the
  /// same bytes as elements of type U, same shape and strides (free); to bool only from bool (a
  /// bool byte must be 0 or 1). To a type of another width: a `pl::PackedRef<U, Space>`
  /// (packed_ref.h), whose second-minor dim is scaled by the ratio of the widths as on a TPU;
  /// kInvalidArgument for rank < 2 or a second-minor dim that does not pack.
  template <class U>
  auto bitcast(std::source_location w = std::source_location::current()) const {
    static_assert(is_element_type_v<U> && !std::is_const_v<U>,
                  "tessera: Ref.bitcast<U> needs U to be an element type (see dtype.h)");
    using V = std::conditional_t<std::is_const_v<T>, const U, U>;
    if constexpr (dtype_bits(dtype_of<U>) == dtype_bits(dtype_of<value_type>)) {
      static_assert(!std::is_same_v<U, bool> || std::is_same_v<value_type, bool>,
                    "tessera: Ref.bitcast<bool> is only allowed from bool (a bool byte must be 0 "
                    "or 1); compare instead (x != 0)");
      Ref<V, Space> r(reinterpret_cast<V*>(data_), shape_, strides_);
      r.observed_ = observed_;
      return r;
    } else {
      return detail::packed_bitcast_of<V>(*this, w);
    }
  }

  /// What element access gives: the element itself for a ref of const elements, else an
  /// ElementRef (a reference-like proxy that tells reads from writes).
  using element_access = std::conditional_t<std::is_const_v<T>, T&, detail::ElementRef<T>>;

  /// Element access (VMEM/SMEM only), one index per axis, bounds-checked.
  element_access operator()(std::source_location w = std::source_location::current())
      const requires detail::kComputeCheck<T, Space> {
    return elem({}, 0, w);
  }
  element_access operator()(int64_t i, std::source_location w = std::source_location::current())
      const requires detail::kComputeCheck<T, Space> {
    const int64_t idx[] = {i};
    return elem(idx, 1, w);
  }
  element_access operator()(int64_t i, int64_t j,
                            std::source_location w = std::source_location::current())
      const requires detail::kComputeCheck<T, Space> {
    const int64_t idx[] = {i, j};
    return elem(idx, 2, w);
  }
  element_access operator()(int64_t i, int64_t j, int64_t k,
                            std::source_location w = std::source_location::current())
      const requires detail::kComputeCheck<T, Space> {
    const int64_t idx[] = {i, j, k};
    return elem(idx, 3, w);
  }
  element_access operator()(int64_t i, int64_t j, int64_t k, int64_t l,
                            std::source_location w = std::source_location::current())
      const requires detail::kComputeCheck<T, Space> {
    const int64_t idx[] = {i, j, k, l};
    return elem(idx, 4, w);
  }

  /// The type-erased view the runtime uses.
  detail::RawRef raw() const {
    return detail::RawRef{const_cast<std::remove_cv_t<T>*>(data_), dtype, Space, shape_, strides_};
  }

 private:
  Ref at_n(std::initializer_list<detail::Indexer> ix, std::source_location w) const {
    Ref r(*this, 0);
    const int64_t off = detail::apply_indexers(r.shape_, r.strides_, ix.begin(),
                                               static_cast<int>(ix.size()), Space, w);
    r.data_ = data_ + off;
    return r;
  }
  // Private copy that does not go through the element-writing assignment.
  Ref(const Ref& o, int)
      : data_(o.data_), shape_(o.shape_), strides_(o.strides_), observed_(o.observed_) {}

  element_access elem(const int64_t* idx, int n, std::source_location w) const {
    if (n != rank()) detail::throw_element_index_error(shape_, idx, n, Space, w);
    int64_t off = 0;
    for (int a = 0; a < n; ++a) {
      if (idx[a] < 0 || idx[a] >= shape_[a]) {
        detail::throw_element_index_error(shape_, idx, n, Space, w);
      }
      off += idx[a] * strides_[a];
    }
    if constexpr (std::is_const_v<T>) {
      if (observed_) [[unlikely]] {
        detail::observe_element(data_ + off, static_cast<int>(sizeof(T)), true, w);
      }
      return data_[off];
    } else {
      return detail::ElementRef<T>(data_ + off, w, observed_);
    }
  }

  template <class U, MemorySpace S2>
  friend class Ref;

  T* data_;
  Shape shape_;
  detail::SmallVec strides_;
  bool observed_ = detail::t_observe_elements;
};

}  // namespace pl

namespace pltpu {
template <class T>
using HbmRef = pl::Ref<T, MemorySpace::HBM>;
template <class T>
using AnyRef = pl::Ref<T, MemorySpace::ANY>;
template <class T>
using VmemRef = pl::Ref<T, MemorySpace::VMEM>;
template <class T>
using SmemRef = pl::Ref<T, MemorySpace::SMEM>;
}  // namespace pltpu

}  // namespace tessera
