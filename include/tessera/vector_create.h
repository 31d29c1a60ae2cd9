// File: tessera/vector_create.h
//
// The creation functions of jax.numpy inside a kernel: jnp::full, full_like, zeros, zeros_like,
// ones, ones_like, arange and lax::broadcasted_iota, as expressions (vector_ops.h's nodes), so
// they fuse into the statement that uses them.
#pragma once

#include "tessera/vector_ops.h"

namespace tessera {

// ---- creation functions (jnp.full, jnp.arange, ...) ------------------------------------------
namespace jnp {

/// `jnp.full(shape, value)`: every element `value`, dtype T. Cheap (Pallas: a constant).
template <class T>
detail::FullExpr<T> full(Shape shape, T value,
                         std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), value, where};
}
/// `jnp.full_like(ref, value)`: the ref's shape and dtype, every element `value`.
template <class R, class V>
requires(is_ref_v<R> || detail::is_expr_v<R>) &&
    detail::is_scalar_v<V> auto full_like(
        const R& like, V value, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), detail::weak_cast<T>(value), where};
}
/// `jnp.zeros_like(ref)`.
template <class R>
requires(is_ref_v<R> || detail::is_expr_v<R>) auto zeros_like(
    const R& like, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), static_cast<T>(0), where};
}
/// `jnp.ones_like(ref)`.
template <class R>
requires(is_ref_v<R> || detail::is_expr_v<R>) auto ones_like(
    const R& like, std::source_location where = std::source_location::current()) {
  using T = detail::ValueOf<R>;
  return detail::FullExpr<T>{{}, like.shape(), static_cast<T>(1), where};
}
/// `jnp.zeros(shape, dtype=T)`. Cheap.
template <class T>
detail::FullExpr<T> zeros(Shape shape,
                          std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), static_cast<T>(0), where};
}
/// `jnp.ones(shape, dtype=T)`. Cheap.
template <class T>
detail::FullExpr<T> ones(Shape shape,
                         std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), static_cast<T>(1), where};
}
/// `jnp.arange(n, dtype=T)`: 0, 1, ..., n - 1 as a 1-D expression. Cheap.
template <class T>
detail::IotaExpr<T> arange(int64_t n,
                           std::source_location where = std::source_location::current()) {
  return {{}, Shape{n}, 0, where};
}
/// `jnp.arange(start, stop, step, dtype=T)`: start, start + step, ... below stop (above it for a
/// negative step), as `arange<T>(count) * step + start`. A zero step is kInvalidArgument. Cheap.
template <class T>
auto arange(T start, T stop, T step = T(1),
            std::source_location where = std::source_location::current()) {
  const double span =
      (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step);
  if (!(static_cast<double>(step) != 0.0)) detail::raise_zero_step(where);
  const int64_t n = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  return detail::IotaExpr<T>{{}, Shape{n}, 0, where} * step + start;
}

}  // namespace jnp

namespace lax {
/// `lax.broadcasted_iota(dtype, shape, dimension)`: the index along `dimension` of `shape`.
template <class T>
detail::IotaExpr<T> broadcasted_iota(Shape shape, int dimension,
                                     std::source_location where = std::source_location::current()) {
  return {{}, std::move(shape), dimension, where};
}
}  // namespace lax

}  // namespace tessera
