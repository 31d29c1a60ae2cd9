// File: tessera/gather.h
//
// Gathers inside a kernel: `jnp.take_along_axis` and `lax.gather`, on refs, values and
// expressions.
//
//   Pallas                                              Tessera
//   jnp.take_along_axis(x, idx, axis=0)                 jnp::take_along_axis(x, idx, 0)
//   jnp.take_along_axis(x, idx, 1, mode="clip")         jnp::take_along_axis(x, idx, 1, "clip")
//   lax.gather(lut, idx.reshape(32, 128, 1),            lax::gather(lut, idx.reshape({32, 128, 1}),
//     lax.GatherDimensionNumbers(                         lax::GatherDimensionNumbers{
//       offset_dims=(), collapsed_slice_dims=(0,),          .offset_dims = {},
//       start_index_map=(0,),                               .collapsed_slice_dims = {0},
//       operand_batching_dims=(1,),                         .start_index_map = {0},
//       start_indices_batching_dims=(1,)),                  .operand_batching_dims = {1},
//     slice_sizes=(1, 1),                                   .start_indices_batching_dims = {1}},
//     mode="promise_in_bounds")                           {1, 1}, "promise_in_bounds")
//
// (C++'s designated initializers take GatherDimensionNumbers' fields in their declared order,
// which is jax's.) The operand and the indices are computed into values where the call is made
// (so a named gather is pure), and the gather is one pass that copies each gathered element into
// a new value in the core's VMEM, which the rest of the expression reads. Cost: one scalar step
// per element, not a fused elementwise op.
//
// Semantics are XLA's Gather as jax.lax defines it, the index vector being the last axis of
// `start_indices` (as in jax): every form of GatherDimensionNumbers that jax accepts runs,
// except collapsed or batching dims with slice size 0 (refused). Indices have any integer dtype.
// Out-of-bounds start indices, per `mode`:
// - "clip": clamped so that the slice lies inside the operand (both engines).
// - "fill" (or "drop"): the whole slice is `fill_value`, by default NaN for floats, the minimum
//   of signed integers, the maximum of unsigned ones, true for bool (as jax).
// - "promise_in_bounds": the caller promises they are in bounds. On a TPU a broken promise
//   reads whatever memory lies there; the checked engine reports it (KernelError kOutOfBounds at
//   the gather's line, naming the index and its position); the native engine clamps, as "clip",
//   so that no read leaves the operand.
// lax.gather's default mode is promise_in_bounds; jnp.take_along_axis's is fill, where negative
// indices count from the end (except with promise_in_bounds, as jnp's default
// wrap_negative_indices). The undefined elements of the operand (checked mode) travel into the
// result; an undefined index is an error (a read steered by garbage).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <source_location>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/value.h"
#include "tessera/vector_shape.h"

namespace tessera {

namespace lax {
/// `lax.GatherScatterMode`.
enum class GatherScatterMode { CLIP, FILL_OR_DROP, PROMISE_IN_BOUNDS, ONE_HOT };

/// A gather's `mode` argument: a GatherScatterMode or its name as jax spells it ("clip",
/// "fill", "drop", "promise_in_bounds", "one_hot"), or nothing (the function's default). An
/// unknown name is refused by the gather that receives it (kInvalidArgument at its line).
class GatherMode {
 public:
  GatherMode() = default;
  GatherMode(GatherScatterMode m) : set_(true), mode_(m) {}  // NOLINT: implicit, like mode=...
  GatherMode(const char* name) : GatherMode(std::string_view(name)) {}  // NOLINT
  GatherMode(std::string_view name) : set_(true), name_(name) {         // NOLINT
    if (name == "clip") {
      mode_ = GatherScatterMode::CLIP;
    } else if (name == "fill" || name == "drop") {
      mode_ = GatherScatterMode::FILL_OR_DROP;
    } else if (name == "promise_in_bounds") {
      mode_ = GatherScatterMode::PROMISE_IN_BOUNDS;
    } else if (name == "one_hot") {
      mode_ = GatherScatterMode::ONE_HOT;
    } else {
      known_ = false;
    }
  }
  bool set() const noexcept { return set_; }
  bool known() const noexcept { return known_; }
  GatherScatterMode mode() const noexcept { return mode_; }
  std::string_view name() const noexcept { return name_; }

 private:
  bool set_ = false;
  bool known_ = true;
  GatherScatterMode mode_ = GatherScatterMode::PROMISE_IN_BOUNDS;
  std::string_view name_;
};

/// `lax.GatherDimensionNumbers`, its fields in jax's order (XLA's meaning): the output dims that
/// hold a slice's offset dims; the operand dims each slice drops (slice size 1); the operand dim
/// each component of an index vector starts; the operand dims that pair with the
/// start_indices_batching_dims (their indices select the same batch element). Negative dims are
/// refused, as jax refuses them. Fields left out are empty (their defaults let designated
/// initializers name only the fields a gather uses).
struct GatherDimensionNumbers {
  std::vector<int> offset_dims = {};
  std::vector<int> collapsed_slice_dims = {};
  std::vector<int> start_index_map = {};
  std::vector<int> operand_batching_dims = {};
  std::vector<int> start_indices_batching_dims = {};
};
}  // namespace lax

namespace detail {

/// A validated gather: the operand and the indices as views of `operand_view` and
/// `indices_view` shape (the index vector last; extents the values lack are broadcast), the
/// dims normalised, the result's shape, the mode and the fill element's bytes.
struct GatherPlan {
  SmallVec offset_dims;
  SmallVec collapsed;
  SmallVec start_index_map;
  SmallVec operand_batching;
  SmallVec indices_batching;
  SmallVec slice_sizes;
  Shape operand_view;
  Shape indices_view;
  Shape out;
  lax::GatherScatterMode mode = lax::GatherScatterMode::PROMISE_IN_BOUNDS;
  bool wrap_negative = false;  // negative indices count from the end (jnp.take_along_axis)
  bool zeros = false;          // take_along_axis over an empty axis: zeros, as jnp
  alignas(8) std::byte fill[8] = {};
  const char* op = "lax.gather";
  std::source_location where;
};

/// Validates lax.gather's arguments (XLA's rules) into `plan` (all but the fill); throws
/// kInvalidArgument at `where` naming the field, its value and the rule.
void gather_plan(const Shape& operand, const Shape& indices, const lax::GatherDimensionNumbers& dn,
                 const std::vector<int64_t>& slice_sizes, const lax::GatherMode& mode,
                 GatherPlan& plan);
/// Validates jnp.take_along_axis's arguments into `plan` (a gather with a batching dim for each
/// axis but `axis`, operand and indices broadcast against each other there).
void take_along_axis_plan(const Shape& x, const Shape& indices, int axis,
                          const lax::GatherMode& mode, GatherPlan& plan);
/// Computes the gather of `plan` over `operand` and `indices` into a new block of the core's VMEM
/// and appends its load to `p`.
int emit_gather(ExprProgram& p, const GatherPlan& plan, const RawRef& operand,
                const RawRef& indices);

/// jax's default fill for dtype T, or `value` converted to T.
template <class T>
void set_fill(GatherPlan& plan, std::optional<double> value) {
  T v{};
  if (value) {
    if constexpr (is_floating(dtype_of<T>)) {
      v = static_cast<T>(static_cast<float>(*value));
    } else if constexpr (std::is_same_v<T, bool>) {
      v = *value != 0.0;
    } else {
      v = static_cast<T>(static_cast<int64_t>(*value));
    }
  } else if constexpr (is_floating(dtype_of<T>)) {
    v = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  } else if constexpr (std::is_same_v<T, bool>) {
    v = true;
  } else if constexpr (std::is_signed_v<T>) {
    v = std::numeric_limits<T>::min();
  } else {
    v = std::numeric_limits<T>::max();
  }
  std::memcpy(plan.fill, &v, sizeof(T));
}

/// A gather of values (see the file comment): pure, its operands computed at the call.
template <class T, class I>
struct GatherExpr : ExprOps<GatherExpr<T, I>, T> {
  using value_type = T;
  static constexpr bool kPure = true;
  jnp::Value<T> operand;
  jnp::Value<I> indices;
  GatherPlan plan;
  const Shape& shape() const { return plan.out; }
  int emit(ExprProgram& p) const {
    if (p.where.line() == 0) p.where = plan.where;
    return emit_gather(p, plan, operand.raw(), indices.raw());
  }
};

template <class I>
constexpr void check_index_dtype() {
  static_assert(!is_floating(dtype_of<I>) && !std::is_same_v<I, bool>,
                "tessera: gather indices must have an integer dtype (int8/16/32 or uint8/16/32), "
                "as in jax; convert them with astype<int32_t>() first");
}

}  // namespace detail

namespace jnp {

/// `jnp.take_along_axis(x, indices, axis, mode=None, fill_value=None)`: out[..., i, ...] =
/// x[..., indices[..., i, ...], ...] along `axis` (negative counts from the end). x and indices
/// have one rank and broadcast against each other on every other axis; the result has
/// indices' extent along `axis`. `mode`: "fill" (the default), "clip" or "promise_in_bounds"
/// (see the file comment); negative indices count from the end except with promise_in_bounds.
/// Integer indices of any width.
template <class X, class Idx>
requires detail::Operand<X> && detail::Operand<Idx>
auto take_along_axis(X&& x, Idx&& indices, int axis, lax::GatherMode mode = {},
                     std::optional<double> fill_value = std::nullopt,
                     std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(Idx);
  using T = detail::ValueOf<X>;
  using I = detail::ValueOf<Idx>;
  detail::check_index_dtype<I>();
  detail::GatherPlan plan;
  plan.op = "jnp.take_along_axis";
  plan.where = where;
  detail::take_along_axis_plan(x.shape(), indices.shape(), axis, mode, plan);
  detail::set_fill<T>(plan, fill_value);
  return detail::GatherExpr<T, I>{
      {}, detail::part_value<T>(x, where), detail::part_value<I>(indices, where), std::move(plan)};
}

}  // namespace jnp

namespace lax {

/// `lax.gather(operand, start_indices, dimension_numbers, slice_sizes, mode=None,
/// fill_value=None)`: XLA's Gather, the index vector being the last axis of `start_indices`
/// (see the file comment). `mode` defaults to promise_in_bounds, as in jax. jax's
/// `unique_indices` and `indices_are_sorted` are performance hints; Tessera needs neither.
template <class X, class Idx>
requires detail::Operand<X> && detail::Operand<Idx>
auto gather(X&& operand, Idx&& start_indices, const GatherDimensionNumbers& dimension_numbers,
            const std::vector<int64_t>& slice_sizes, GatherMode mode = {},
            std::optional<double> fill_value = std::nullopt,
            std::source_location where = std::source_location::current()) {
  TESSERA_CHECK_NAMED(X);
  TESSERA_CHECK_NAMED(Idx);
  using T = detail::ValueOf<X>;
  using I = detail::ValueOf<Idx>;
  detail::check_index_dtype<I>();
  detail::GatherPlan plan;
  plan.where = where;
  detail::gather_plan(operand.shape(), start_indices.shape(), dimension_numbers, slice_sizes, mode,
                      plan);
  detail::set_fill<T>(plan, fill_value);
  return detail::GatherExpr<T, I>{{},
                                  detail::part_value<T>(operand, where),
                                  detail::part_value<I>(start_indices, where),
                                  std::move(plan)};
}

}  // namespace lax

}  // namespace tessera
