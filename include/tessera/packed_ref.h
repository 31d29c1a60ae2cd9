// File: tessera/packed_ref.h
//
// `pl::PackedRef<T, Space>`: what `x_ref.bitcast<U>()` gives when U's width differs from the
// ref's element type — Pallas' Ref.bitcast as a TPU does it. A bitcast to a type k times
// narrower multiplies the second-minor dim by k, and element (..., k * r + h, c) of the new view
// is part h (h = 0 the lowest bits) of element (..., r, c); a bitcast to a type k times wider
// divides it by k and joins the k rows back.
//
//   Pallas:  x_ref.bitcast(jnp.int16)                 # float32 (8, 128) -> int16 (16, 128)
//   Tessera: x_ref.bitcast<int16_t>()
//   Pallas:  x_ref.at[:8].bitcast(jnp.int16)[...]
//   Tessera: x_ref.at(pl::ds(0, 8)).bitcast<int16_t>()[pl::ellipsis]
//   Pallas:  ref.at[:16, :128];  ref.reshape(2, 8, 128)
//   Tessera: ref.at(pl::ds(0, 16), pl::ds(0, 128));  ref.reshape(2, 8, 128)
//   Pallas:  ref[...] = x;  pltpu.store(ref, pltpu.load(x_ref))
//   Tessera: ref[pl::ellipsis] = x;  pltpu::store(ref, pltpu::load(x_ref))
//   Pallas:  pltpu.async_copy(ref, y_hbm, sem).wait()
//   Tessera: pltpu::async_copy(ref, y_hbm, sem).wait();
//
// The view is made of a few strided views of the bytes ("planes", detail/packed_view.h), so it
// costs nothing to make; a read gathers the planes into a VMEM temporary, a write scatters one,
// and a DMA is one strided copy per plane, all counted on the descriptor's semaphore as one copy.
// Rules (kInvalidArgument at the user's line, as a TPU refuses them): the ref has rank >= 2; to a
// wider type, the second-minor dim times the source width is a multiple of the destination
// width; a slice of the packed rows takes whole groups; a reshape keeps the last dim and a
// second-minor dim that is a multiple of the packing. bool and the sub-byte integers are refused
// by the compiler (their bytes are not a TPU's packed bits).
#pragma once

#include <initializer_list>
#include <source_location>
#include <type_traits>
#include <utility>

#include "tessera/detail/packed_view.h"
#include "tessera/dma.h"
#include "tessera/pipeline.h"
#include "tessera/ref.h"
#include "tessera/value.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_shape.h"

namespace tessera {

template <class R>
inline constexpr bool is_packed_ref_v = false;
template <class T, MemorySpace S>
inline constexpr bool is_packed_ref_v<pl::PackedRef<T, S>> = true;

namespace detail {
template <class T, MemorySpace S>
struct PackedItem;

/// Refuses the bitcasts that no TPU view gives (bool, sub-byte integers).
template <class From, class To>
constexpr bool check_width_bitcast() {
  static_assert(is_element_type_v<To> && !std::is_const_v<To>,
                "tessera: Ref.bitcast<U> needs U to be an element type (see dtype.h)");
  static_assert(!std::is_same_v<std::remove_cv_t<From>, bool> && !std::is_same_v<To, bool>,
                "tessera: a bitcast that changes the element width does not take bool (a bool "
                "element is not bits of a number); compare (x != 0) or astype instead");
  static_assert(dtype_bits(dtype_of<std::remove_cv_t<From>>) ==
                        8 * itemsize(dtype_of<std::remove_cv_t<From>>) &&
                    dtype_bits(dtype_of<To>) == 8 * itemsize(dtype_of<To>),
                "tessera: a bitcast that changes the element width does not take the sub-byte "
                "integers (int4, uint4, int2, uint2 are stored one per byte, not packed as on a "
                "TPU); convert with astype instead");
  return true;
}

/// The packed view of a plain ref or of a PackedRef.
template <class R>
PackedView packed_view_of(const R& r) {
  if constexpr (is_ref_v<R>) {
    return packed_of(r.raw());
  } else {
    return r.view();
  }
}

template <class T, MemorySpace S, class E>
void packed_assign_statement(const pl::PackedRef<T, S>& dst, const E& expr);
}  // namespace detail

namespace pl {

/// A width-changing bitcast view (see the file comment). Made by Ref::bitcast; a value like Ref:
/// copying it copies the view, assigning to it writes its elements.
template <class T, MemorySpace Space>
class PackedRef {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  static constexpr MemorySpace space = Space;
  static constexpr DType dtype = dtype_of<value_type>;

  /// Kernels get these from Ref::bitcast; building one by hand is for adapters.
  explicit PackedRef(detail::PackedView v) : v_(std::move(v)) {}
  PackedRef(const PackedRef&) = default;
  PackedRef(PackedRef&&) noexcept = default;

  const Shape& shape() const noexcept { return v_.shape; }
  int rank() const noexcept { return v_.shape.rank(); }
  int64_t size() const noexcept { return v_.shape.size(); }
  int64_t nbytes() const noexcept { return size() * static_cast<int64_t>(sizeof(T)); }
  /// The planes and how they interleave (detail/packed_view.h).
  const detail::PackedView& view() const noexcept { return v_; }

  /// `ref.at[...]`: as Ref.at; a slice of the packed rows takes whole groups (kInvalidArgument).
  PackedRef at(detail::Indexer a, std::source_location w = std::source_location::current()) const {
    return at_n({a}, w);
  }
  PackedRef at(detail::Indexer a, detail::Indexer b,
               std::source_location w = std::source_location::current()) const {
    return at_n({a, b}, w);
  }
  PackedRef at(detail::Indexer a, detail::Indexer b, detail::Indexer c,
               std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c}, w);
  }
  PackedRef at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
               std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c, d}, w);
  }

  /// `ref.reshape(...)`: as Ref.reshape; once rows are packed, the last dim stays and the new
  /// second-minor dim is a multiple of the packing (kInvalidArgument).
  PackedRef reshape(Shape to, std::source_location w = std::source_location::current()) const {
    return PackedRef(detail::packed_reshape(v_, to, w));
  }
  PackedRef reshape(int64_t a, int64_t b,
                    std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b}, w);
  }
  PackedRef reshape(int64_t a, int64_t b, int64_t c,
                    std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b, c}, w);
  }
  PackedRef reshape(int64_t a, int64_t b, int64_t c, int64_t d,
                    std::source_location w = std::source_location::current()) const {
    return reshape(Shape{a, b, c, d}, w);
  }

  /// `ref.bitcast(U)`: a bitcast of this view, by the same rules as Ref.bitcast.
  template <class U>
  auto bitcast(std::source_location w = std::source_location::current()) const {
    static_assert(detail::check_width_bitcast<T, U>());
    using V = std::conditional_t<std::is_const_v<T>, const U, U>;
    return PackedRef<V, Space>(detail::packed_bitcast(v_, dtype_of<U>, w));
  }

  /// `ref[...]`: reads the view where it is used (a VMEM temporary gathered from the planes), or
  /// is written through (`ref[pl::ellipsis] = x;`). VMEM/SMEM only.
  detail::PackedItem<T, Space> operator[](pl::Ellipsis) const {
    return detail::PackedItem<T, Space>(*this);
  }
  detail::PackedItem<T, Space> operator[](detail::Indexer i) const {
    return detail::PackedItem<T, Space>(at_n({i}, {}));
  }
  detail::PackedItem<T, Space> operator[](std::initializer_list<detail::Indexer> ix) const {
    return detail::PackedItem<T, Space>(at_n(ix, {}));
  }

  /// Writes `other`'s elements (a ref, a packed view, an expression, a value or a scalar) into
  /// this view's. VMEM/SMEM only.
  [[gnu::always_inline]] PackedRef& operator=(const PackedRef& other) {
    return *this = detail::PackedItem<T, Space>(other);
  }
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, PackedRef>) [[gnu::always_inline]] PackedRef&
  operator=(E&& e) {
    using X = std::remove_cvref_t<E>;
    static_assert(is_compute_space(Space),
                  "tessera: a bitcast view in HBM/ANY memory cannot be assigned to; copy into it "
                  "with pltpu::sync_copy from a VMEM buffer");
    static_assert(!std::is_const_v<T>,
                  "tessera: this bitcast view is of a ref of const elements "
                  "(an input); write to an output or scratch ref");
    if constexpr (is_packed_ref_v<X>) {
      detail::packed_assign_statement(*this,
                                      detail::PackedItem<typename X::element_type, X::space>(e));
    } else {
      static_assert(detail::Operand<X> || detail::Scalar<X>,
                    "tessera: only a ref, an expression, a value or a scalar can be assigned to "
                    "a bitcast view");
      TESSERA_CHECK_NAMED(E);
      detail::packed_assign_statement(*this, static_cast<const X&>(e));
    }
    detail::keep_return_address();
    return *this;
  }

  /// `ref[...] += e` (and `-=`, `*=`, `/=`): `ref = ref + e`, with Ref's dtype rules.
#define TESSERA_PACKED_COMPOUND(op_, binop_)                                          \
  template <class E>                                                                  \
  requires(detail::Operand<E> || detail::Scalar<E>) [[gnu::always_inline]] PackedRef& \
  operator op_(E&& e) {                                                               \
    TESSERA_CHECK_NAMED(E);                                                           \
    detail::packed_assign_statement(                                                  \
        *this, detail::PackedItem<T, Space>(*this) binop_ std::forward<E>(e));        \
    detail::keep_return_address();                                                    \
    return *this;                                                                     \
  }
  TESSERA_PACKED_COMPOUND(+=, +)
  TESSERA_PACKED_COMPOUND(-=, -)
  TESSERA_PACKED_COMPOUND(*=, *)
  TESSERA_PACKED_COMPOUND(/=, /)
#undef TESSERA_PACKED_COMPOUND

 private:
  PackedRef at_n(std::initializer_list<detail::Indexer> ix, std::source_location w) const {
    return PackedRef(detail::packed_at(v_, ix.begin(), static_cast<int>(ix.size()), w));
  }

  detail::PackedView v_;
};

}  // namespace pl

namespace detail {

template <class V, MemorySpace S, class T>
pl::PackedRef<V, S> packed_bitcast_of(const pl::Ref<T, S>& r, std::source_location where) {
  static_assert(check_width_bitcast<T, std::remove_cv_t<V>>());
  return pl::PackedRef<V, S>(
      packed_bitcast(packed_of(r.raw()), dtype_of<std::remove_cv_t<V>>, where));
}

/// What `ref[...]` of a PackedRef gives: a leaf that gathers the view's elements into a VMEM
/// temporary where it is used, and that `ref[...] = e` writes through.
template <class T, MemorySpace S>
struct PackedItem : ExprOps<PackedItem<T, S>, std::remove_cv_t<T>> {
  static_assert(is_compute_space(S),
                "tessera: a bitcast view in HBM/ANY memory cannot appear in a compute "
                "expression; copy it into VMEM with pltpu::sync_copy first");
  using value_type = std::remove_cv_t<T>;
  static constexpr bool kPure = false;  // reads the view when evaluated
  pl::PackedRef<T, S> ref;

  explicit PackedItem(pl::PackedRef<T, S> r) : ref(std::move(r)) {}
  PackedItem(const PackedItem&) = default;
  const Shape& shape() const { return ref.shape(); }
  int emit(ExprProgram& p) const {
    ValueStorage s = ValueStorage::allocate(dtype_of<value_type>, ref.shape(), p.where);
    const RawRef tmp{s.data(), dtype_of<value_type>, MemorySpace::VMEM, ref.shape(),
                     row_major_strides(ref.shape())};
    packed_compute_copy(ref.view(), packed_of(tmp), p.where);
    ExprNode& n = p.emplace();
    n.op = OpCode::kLoad;
    n.dtype = tmp.dtype;
    n.data = tmp.data;
    n.space = MemorySpace::VMEM;
    n.shape = tmp.shape;
    n.strides = tmp.strides;
    p.keep.push_back(std::move(s));
    return p.last();
  }

  // `ref[...] = e`, `ref[...] = other[...]`: writes the view.
  [[gnu::always_inline]] PackedItem& operator=(PackedItem&& other) {
    this->ref = std::move(other);
    return *this;
  }
  PackedItem& operator=(const PackedItem& other) {
    static_assert(sizeof(T) == 0,
                  "tessera: this named ref[...] reads the view where it is used, not where it "
                  "was written; keep a copy with jnp::Value x = ref[pl::ellipsis];");
    return *this = PackedItem(other);
  }
  template <class E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, PackedItem>) [[gnu::always_inline]] PackedItem&
  operator=(E&& e) {
    this->ref = std::forward<E>(e);
    return *this;
  }
#define TESSERA_PACKED_ITEM_COMPOUND(op_)                  \
  template <class E>                                       \
  [[gnu::always_inline]] PackedItem& operator op_(E&& e) { \
    this->ref op_ std::forward<E>(e);                      \
    return *this;                                          \
  }
  TESSERA_PACKED_ITEM_COMPOUND(+=)
  TESSERA_PACKED_ITEM_COMPOUND(-=)
  TESSERA_PACKED_ITEM_COMPOUND(*=)
  TESSERA_PACKED_ITEM_COMPOUND(/=)
#undef TESSERA_PACKED_ITEM_COMPOUND
};

/// The body of a PackedRef's assignment: evaluates `expr` into a VMEM temporary of the view's
/// shape (jnp's broadcasting and dtype rules, as Ref's assignment), then scatters it into the
/// planes. Not inlined, so that errors name the user's statement.
template <class T, MemorySpace S, class E>
[[gnu::noinline]] void packed_assign_statement(const pl::PackedRef<T, S>& dst, const E& expr) {
  const StatementScope statement(__builtin_return_address(0));
  using V = std::remove_cv_t<T>;
  ValueStorage s = ValueStorage::allocate(dtype_of<V>, dst.shape(), {});
  const pl::Ref<V, MemorySpace::VMEM> tmp(reinterpret_cast<V*>(s.data()), dst.shape());
  assign_statement(tmp, expr);
  packed_compute_copy(packed_of(tmp.raw()), dst.view(), {});
}

/// A bitcast view as an emit_pipeline operand (pipeline.h): its elements in a VMEM buffer of its
/// shape (counted against the VMEM budget), gathered first for an input and scattered back at
/// the end for an output, which the pipeline must write whole.
template <class T, MemorySpace S>
struct PipelineStage<pl::PackedRef<T, S>> {
  static_assert(S == MemorySpace::VMEM,
                "tessera: a bitcast view is an emit_pipeline operand only in VMEM (a window of "
                "an enclosing pipeline, a scratch); for one in HBM, pipeline over the plain ref "
                "and bitcast the windows in the body");
  static constexpr bool kStaged = true;
  using V = std::remove_cv_t<T>;
  pl::PackedRef<T, S> packed;
  ValueStorage storage;
  pl::Ref<T, S> buffer;
  bool output;
  PipelineStage(const pl::PackedRef<T, S>& r, bool is_output, std::source_location where)
      : packed(r),
        storage(ValueStorage::allocate(dtype_of<V>, r.shape(), where)),
        buffer(reinterpret_cast<T*>(storage.data()), r.shape()),
        output(is_output) {
    if (!output) packed_compute_copy(packed.view(), packed_of(buffer.raw()), where);
  }
  const pl::Ref<T, S>& ref() const { return buffer; }
  void finish() const {
    if constexpr (!std::is_const_v<T>) {
      if (output) packed_compute_copy(packed_of(buffer.raw()), packed.view(), {});
    }
  }
};

template <class R>
inline constexpr bool is_view_v = is_ref_v<R> || is_packed_ref_v<R>;
template <class S, class D>
concept PackedCopyPair = is_view_v<S> && is_view_v<D> &&(is_packed_ref_v<S> || is_packed_ref_v<D>);

template <class S, class D>
constexpr bool check_packed_copy() {
  static_assert(std::is_same_v<typename S::value_type, typename D::element_type>,
                "tessera: a copy needs source and destination of the same dtype (and a "
                "non-const destination); check the element types of both views");
  static_assert(S::space != MemorySpace::SEMAPHORE && D::space != MemorySpace::SEMAPHORE,
                "tessera: semaphores cannot be copied");
  return true;
}

}  // namespace detail

namespace pltpu {

/// `pltpu.sync_copy(src, dst)` where either side is a bitcast view: one strided copy per plane.
template <class S, class D>
requires detail::PackedCopyPair<S, D>
void sync_copy(const S& src, const D& dst,
               std::source_location where = std::source_location::current()) {
  static_assert(detail::check_packed_copy<S, D>());
  detail::packed_dma_copy(detail::packed_view_of(src), detail::packed_view_of(dst), "sync_copy",
                          where);
}

/// `pltpu.make_async_copy(src, dst, sem)` where either side is a bitcast view: the copies of its
/// planes, started together and waited as one copy of all their bytes.
template <class S, class D, SemaphoreKind K>
requires detail::PackedCopyPair<S, D>
[[nodiscard]] AsyncCopyDescriptor make_async_copy(
    const S& src, const D& dst, const BasicSemaphoreRef<K>& sem,
    std::source_location where = std::source_location::current()) {
  static_assert(detail::check_packed_copy<S, D>());
  static_assert(detail::check_async_copy<typename S::element_type, S::space,
                                         typename D::element_type, D::space, K>());
  detail::check_single_semaphore(sem.shape(), K, "pltpu::make_async_copy", where);
  return AsyncCopyDescriptor(
      detail::packed_pairs(detail::packed_view_of(src), detail::packed_view_of(dst),
                           "pltpu::make_async_copy", where),
      sem.data(), where);
}

/// `pltpu.async_copy(src, dst, sem)` where either side is a bitcast view.
template <class S, class D, SemaphoreKind K>
requires detail::PackedCopyPair<S, D> AsyncCopyDescriptor
async_copy(const S& src, const D& dst, const BasicSemaphoreRef<K>& sem,
           std::source_location where = std::source_location::current()) {
  AsyncCopyDescriptor copy = make_async_copy(src, dst, sem, where);
  copy.start(where);
  return copy;
}

/// `pltpu.load(ref)` of a bitcast view: its elements as a value.
template <class T, MemorySpace S>
auto load(const pl::PackedRef<T, S>& ref,
          std::source_location where = std::source_location::current()) {
  return jnp::Value<std::remove_cv_t<T>>(detail::PackedItem<T, S>(ref), where);
}

/// `pltpu.store(ref, val)` of a bitcast view: writes val (broadcast to the view's shape).
template <class T, MemorySpace S, class V>
requires(detail::Operand<V> || detail::Scalar<V>) void store(const pl::PackedRef<T, S>& ref,
                                                             V&& val) {
  pl::PackedRef<T, S> r(ref);
  r = std::forward<V>(val);
}

/// `pltpu.bitcast(x, U)`: the bits of the value (or expression, or ref) x as elements of type U,
/// packed as a TPU packs them: to a type k times narrower the second-minor dim grows k times
/// (element (..., k * r + h, c) is part h, the lowest bits first, of element (..., r, c)); to
/// a type k times wider it shrinks k times; of one width it is lax.bitcast_convert_type.
/// kInvalidArgument for rank < 2 or a second-minor dim that does not pack. A new value (copies).
template <class U, class E>
requires detail::Operand<E> jnp::Value<U> bitcast(
    E&& x, std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(E);
  using T = detail::ValueOf<std::remove_cvref_t<E>>;
  static_assert(detail::check_width_bitcast<T, U>());
  const jnp::Value<T> v = [&] {
    if constexpr (detail::is_value_v<std::remove_cvref_t<E>>) {
      return x;  // a value already: its elements, no copy
    } else {
      return jnp::Value<T>(std::forward<E>(x), where);
    }
  }();
  const pl::PackedRef<const U, MemorySpace::VMEM> view(
      detail::packed_bitcast(detail::packed_of(v.raw()), dtype_of<U>, where, "pltpu.bitcast"));
  return jnp::Value<U>(detail::PackedItem<const U, MemorySpace::VMEM>(view), where);
}

}  // namespace pltpu

}  // namespace tessera
