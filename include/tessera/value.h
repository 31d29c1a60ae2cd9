// File: tessera/value.h
//
// `jnp::Value<T>`: a named array value inside a kernel — what `x = x_ref[...]`,
// `s = jnp.dot(q, k.T)` or `m = jnp.max(s, axis=1, keepdims=True)` are in a Pallas kernel.
//
//   Pallas                                        Tessera
//   x = x_ref[...]                                jnp::Value x = x_ref[pl::ellipsis];
//   s = jnp.dot(q, k.T)                           jnp::Value s = jnp::dot(q, k.T());
//   m = jnp.max(s, axis=1, keepdims=True)         jnp::Value m = jnp::max(s, 1, true);
//   p = jnp.exp(s - m)                            auto p = jnp::exp(s - m);       // lazy, pure
//   o_ref[...] = p / p.sum(axis=1, keepdims=True) o_ref[pl::ellipsis] = p / p.sum(1, true);
//   idx = y_ref[...].sum()                        int idx = jnp::sum(y_ref[pl::ellipsis]);
//
// A value is computed once, when it is made, and never changes: `jnp::Value x = x_ref[...]` is a
// copy, and writing x_ref afterwards does not change x. Its elements live in the running core's
// VMEM (counted against the kernel's VMEM budget with the scratch, the run_scoped scopes and the
// pipeline windows; an overflow is kCapacityExceeded at the line that made the value) and are
// freed when the last value or expression naming them ends (RAII, in any order). Values are the
// core's own: a value cannot leave the kernel body, move to another core or come in from the host
// (each is an error naming the line). Outside a kernel (host code, tests on hand-made refs) values
// live on the heap.
//
// Expressions and values. Operators and jnp functions build lazy expressions, evaluated where
// they are assigned or made a value, fused into one pass with no temporaries. An expression over
// values, constants and iotas only is pure: naming it (`auto p = jnp::exp(s - m);`) is safe and it
// is evaluated wherever it is used (so a named expression used twice is computed twice; make it a
// value to compute it once). An expression that reads refs (`x_ref * 2`, `x_ref[pl::ellipsis]`)
// would read them where it is used, not where it was written, so a named one cannot be used: the
// compiler says so and suggests `jnp::Value x = ...` (TESSERA_CHECK_NAMED). Rebinding a value
// (`acc = acc + x;`) computes the new elements first, then lets the old ones go.
//
// A value is an operand of every op and of jnp::dot / lax::dot_general / jnp::einsum; it is
// assigned to refs (`o_ref[pl::ellipsis] = v;`, `o_ref = v;`); `v.at(...)` / `v[...]` are views of
// it (values too, sharing its elements); `v(i, j)` reads one element; a one-element value converts
// to its C++ scalar (`float m = v;`, `v.item()`). Methods as on jax arrays: `v.T()`,
// `v.astype<U>()`, `v.reshape({...})`, `v.sum(axis, keepdims)`, `max`, `min`, `mean`, `argmax`,
// `argmin`, `shape()`, `ndim()`, `size()`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <type_traits>
#include <utility>

#include "tessera/detail/value_storage.h"
#include "tessera/ref.h"
#include "tessera/vector_math.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_reduce.h"

namespace tessera {
namespace detail {
/// Reads one element of a value for the calling core (the checked engine counts it as a scalar
/// read): checks that the value may be used here and that `n` indices are in bounds.
void check_value_element(const ValueStorage& s, const Shape& shape, const int64_t* idx, int n,
                         std::source_location where);
void observe_value_read(const void* p, int size, std::source_location where);
/// Evaluates `expr` (an expression, ref, value or dot) into the contiguous VMEM view `dst`.
template <class T, class E>
void materialize(const pl::Ref<T, MemorySpace::VMEM>& dst, const E& expr,
                 std::source_location where) {
  if constexpr (SpecialAssign<E>::value) {
    SpecialAssign<E>::assign(dst, expr);
  } else {
    ExprProgram p;
    p.where = where;
    AsExpr<E>::make(expr).emit(p);
    evaluate(p, dst.raw());
  }
}
}  // namespace detail

namespace jnp {

template <class T>
class Value : public detail::ExprOps<Value<T>, T> {
  static_assert(is_element_type_v<T> && !std::is_const_v<T>,
                "tessera: jnp::Value<T> needs T to be one of the element types (tessera/dtype.h)");

 public:
  using value_type = T;
  static constexpr bool kPure = true;

  /// A value that holds nothing yet (assign it before use: `jnp::Value<float> v; v = ...;`).
  Value() = default;
  /// A scalar value, shape ().
  Value(T scalar, std::source_location where = std::source_location::current())  // NOLINT
      : Value(detail::ScalarExpr<T>{{}, scalar}, where) {}
  /// The elements of `e` — an expression, a ref, `x_ref[...]`, a dot — computed now, in the
  /// core's VMEM. The dtype must be T (convert with astype; nothing narrows silently).
  template <class E>
  requires(detail::Operand<E> && !std::is_same_v<std::remove_cvref_t<E>, Value>)
      Value(E&& e, std::source_location where = std::source_location::current()) {  // NOLINT
    TESSERA_CHECK_NAMED(E);
    using X = std::remove_cvref_t<E>;
    static_assert(std::is_same_v<detail::ValueOf<X>, T>,
                  "tessera: the expression's dtype differs from the value's; convert it with "
                  "astype, or write jnp::Value v = ... to take the expression's dtype");
    shape_ = e.shape();
    storage_ = detail::ValueStorage::allocate(dtype_of<T>, shape_, where);
    data_ = reinterpret_cast<T*>(storage_.data());
    strides_ = row_major_strides(shape_);
    detail::materialize(pl::Ref<T, MemorySpace::VMEM>(const_cast<T*>(data_), shape_, strides_),
                        static_cast<const X&>(e), where);
  }
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;

  /// Rebinds the name to new elements (Python's `v = v + x`): computes them first, then lets
  /// the old elements go.
  Value& operator=(const Value&) & = default;
  Value& operator=(Value&&) & noexcept = default;
  template <class E>
  requires((detail::Operand<E> ||
            detail::Scalar<E>)&&!std::is_same_v<std::remove_cvref_t<E>, Value>) Value&
  operator=(E&& e) & {
    if constexpr (detail::Scalar<E>) {
      Value tmp(detail::weak_cast<T>(e));
      swap(tmp);
    } else {
      Value tmp(std::forward<E>(e));
      swap(tmp);
    }
    return *this;
  }
  /// `v.at(i) = x` would write a copy: values never change (write a ref, or make a new value
  /// with jnp::where).
  template <class E>
  Value& operator=(E&&) && {
    static_assert(sizeof(E) == 0,
                  "tessera: a jnp::Value never changes, and v.at(...) / v[...] is a new value, "
                  "not a place to write; write into a ref, or build a new value (jnp::where)");
    return *this;
  }

  void swap(Value& o) noexcept {
    storage_.swap(o.storage_);
    std::swap(data_, o.data_);
    std::swap(shape_, o.shape_);
    std::swap(strides_, o.strides_);
  }

  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  /// Element strides (a view made by at() or operator[] may be strided).
  const detail::SmallVec& strides() const noexcept { return strides_; }
  /// Pointer to element (0, ..., 0), for adapters and tests; null for an empty value.
  const T* data() const noexcept { return data_; }
  /// True when the value holds elements.
  bool has_value() const noexcept { return static_cast<bool>(storage_); }

  /// One element (bounds-checked), as a C++ scalar.
  T operator()(std::source_location w = std::source_location::current()) const {
    return element(nullptr, 0, w);
  }
  T operator()(int64_t i, std::source_location w = std::source_location::current()) const {
    const int64_t idx[] = {i};
    return element(idx, 1, w);
  }
  T operator()(int64_t i, int64_t j,
               std::source_location w = std::source_location::current()) const {
    const int64_t idx[] = {i, j};
    return element(idx, 2, w);
  }
  T operator()(int64_t i, int64_t j, int64_t k,
               std::source_location w = std::source_location::current()) const {
    const int64_t idx[] = {i, j, k};
    return element(idx, 3, w);
  }
  /// The one element (kInvalidArgument unless the value has exactly one).
  T item(std::source_location w = std::source_location::current()) const {
    detail::check_value_element(storage_, shape_, nullptr, -1, w);
    detail::observe_value_read(data_, static_cast<int>(sizeof(T)), w);
    return *data_;
  }

  /// A view of the value, as `x[0:8, :]` (a value sharing these elements): integers squeeze an
  /// axis, `pl::ds` slices it, `pl::all` keeps it. kOutOfBounds for a slice outside an axis.
  Value at(detail::Indexer a, std::source_location w = std::source_location::current()) const {
    return view({a}, w);
  }
  Value at(detail::Indexer a, detail::Indexer b,
           std::source_location w = std::source_location::current()) const {
    return view({a, b}, w);
  }
  Value at(detail::Indexer a, detail::Indexer b, detail::Indexer c,
           std::source_location w = std::source_location::current()) const {
    return view({a, b, c}, w);
  }
  Value at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
           std::source_location w = std::source_location::current()) const {
    return view({a, b, c, d}, w);
  }
  /// at() with a run-time number of indexers (one per leading axis, at most the rank).
  Value at(const detail::Indexer* ix, int n,
           std::source_location w = std::source_location::current()) const {
    storage_.check_usable("jnp::Value.at", w);
    Value v(*this);
    v.data_ = data_ + detail::apply_indexers(v.shape_, v.strides_, ix, n, MemorySpace::VMEM, w);
    return v;
  }
  /// Pallas' subscript on values: `x[pl::ellipsis]`, `x[i]`, `x[{pl::ds(0, 8), pl::all}]`.
  /// `jnp.diagonal(v, offset)` of a 2-D value: a strided view of its elements (no copy); an
  /// offset past the edge gives an empty view.
  Value diagonal_view(int64_t offset) const {
    Value v(*this);
    const int64_t n = shape_.rank() == 2 ? shape_[0] : 0, m = shape_.rank() == 2 ? shape_[1] : 0;
    const int64_t len = offset >= 0 ? std::min(n, m - offset) : std::min(n + offset, m);
    v.shape_ = Shape{std::max<int64_t>(len, 0)};
    v.strides_ = detail::SmallVec(1, strides_[0] + strides_[1]);
    if (len > 0) v.data_ = data_ + (offset >= 0 ? offset * strides_[1] : -offset * strides_[0]);
    return v;
  }
  const Value& operator[](pl::Ellipsis) const noexcept { return *this; }
  Value operator[](detail::Indexer i) const { return view({i}, {}); }
  Value operator[](std::initializer_list<detail::Indexer> ix) const { return view(ix, {}); }

  /// The expression leaf: a load of the elements.
  int emit(detail::ExprProgram& p) const {
    storage_.check_usable("a jnp::Value in an expression", p.where);
    detail::ExprNode& n = p.emplace();
    n.op = detail::OpCode::kLoad;
    n.dtype = dtype_of<T>;
    n.data = data_;
    n.space = MemorySpace::VMEM;
    n.shape = shape_;
    n.strides = strides_;
    return p.last();
  }
  /// The view the runtime reads (for jnp::dot).
  detail::RawRef raw() const {
    return detail::RawRef{const_cast<T*>(data_), dtype_of<T>, MemorySpace::VMEM, shape_, strides_};
  }
  /// The storage that keeps the elements alive.
  const detail::ValueStorage& storage() const noexcept { return storage_; }

 private:
  T element(const int64_t* idx, int n, std::source_location w) const {
    detail::check_value_element(storage_, shape_, idx, n, w);
    int64_t off = 0;
    for (int a = 0; a < n; ++a) off += idx[a] * strides_[a];
    detail::observe_value_read(data_ + off, static_cast<int>(sizeof(T)), w);
    return data_[off];
  }
  Value view(std::initializer_list<detail::Indexer> ix, std::source_location w) const {
    return at(ix.begin(), static_cast<int>(ix.size()), w);
  }

  detail::ValueStorage storage_;
  const T* data_ = nullptr;
  Shape shape_;
  detail::SmallVec strides_;
};

template <class E>
requires detail::Operand<E> Value(E&&)
->Value<detail::ValueOf<E>>;
template <class E>
requires detail::Operand<E> Value(E&&, std::source_location)
->Value<detail::ValueOf<E>>;

}  // namespace jnp

namespace detail {
template <class T>
inline constexpr bool is_value_v = false;
template <class T>
inline constexpr bool is_value_v<jnp::Value<T>> = true;
}  // namespace detail

}  // namespace tessera
