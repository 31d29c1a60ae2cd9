// File: tessera/buffered_ref.h
//
// A pipeline's buffers made ahead of the pipeline: Pallas' `pltpu.BufferedRef` and
// `pltpu.emit_pipeline_with_allocations`. A BufferedRef is a scratch type (for
// `pl::scratch_shapes` or `pl::run_scoped`) holding one operand's windows; a pipeline called with
// `pltpu::allocations(...)` uses those windows instead of allocating its own, so an inner
// pipeline run many times (in a loop, or once per step of an outer grid) allocates once.
//
//   Pallas                                              Tessera
//   pltpu.BufferedRef.input(spec, jnp.float32)          pltpu::BufferedRef<float>::input(spec)
//   pltpu.BufferedRef.input_output(spec, jnp.float32) pltpu::BufferedRef<float>::input_output(spec)
//   pltpu.emit_pipeline(body, grid=g)(                  pltpu::emit_pipeline(body, pltpu::grid(g))(
//       x, y, o, allocations=[xb, yb, ob])                  x, y, o, pltpu::allocations(xb, yb,
//       ob));
//   pipeline, make_allocs =                             auto [pipeline, make_allocs] =
//       pltpu.emit_pipeline_with_allocations(               pltpu::emit_pipeline_with_allocations(
//           body, grid=g, in_specs=..., out_specs=...)          body, pltpu::grid(g), ...);
//   pl.run_scoped(lambda allocs: pipeline(              pl::run_scoped([&](auto allocs) {
//       x, o, allocations=allocs),                          pipeline(x, o,
//       pltpu::allocations(allocs)); make_allocs(x, o))                              },
//       make_allocs(x, o));
//
// With allocations, each operand's BlockSpec, direction and buffer count are its BufferedRef's:
// INPUT blocks are copied in, OUTPUT blocks written back, INPUT_OUTPUT blocks both (copied in at
// the start of each visit, so a block may be visited again: an accumulator kept in HBM). Inputs
// come first, then outputs. Windows live in VMEM.
//
// A window filled before the pipeline starts (Pallas' `pl.Buffered(prefetched_count=)`): an input
// spec with `pl::Buffered{.buffer_count = n, .prefetched_count = p}` says that the caller copies
// the first p blocks the pipeline would fetch into the first p windows itself (typically with an
// async copy started before, or in an earlier pallas_call, and waited before the pipeline runs).
// Its BufferedRef then holds no VMEM of its own: the caller binds its VMEM ref as the windows,
//
//   x_bref, o_bref = allocs                  auto [x_bref, o_bref] = allocs;
//   allocs = (x_bref.with_window_ref(x_vmem),
//             o_bref)                         allocs = {x_bref.with_window_ref(x_vmem), o_bref};
//   pipeline(x, o, allocations=allocs)       pipeline(x, o, pltpu::allocations(allocs));
//
// and the pipeline uses window j for its j-th fetch (j < p) instead of copying the block; later
// blocks are copied into the bound windows as usual (so the pipeline writes that ref). The ref
// holds n windows one after another: shape (n, *window), (n * w,) for a 1-D window of w, or the
// window itself when n is 1. p < n, except for a block that is the whole array at every step
// (a single fetch: p may be 1 with n = 1). Checked mode sees the caller's copy: the body reading
// a prefetched window before that copy was waited is a race (KernelError kRace).
//
// Errors: a spec without a block shape for BufferedRef::input/output (the window's shape is not
// known: emit_pipeline_with_allocations knows the array and takes whole-array specs), a buffer
// count outside 1.. (outputs 1..2), and at the pipeline a window whose shape differs from the
// block the spec takes of the operand. A prefetched_count below 0, on an output, or at least
// the buffer count; a window ref of the wrong shape or not contiguous (with_window_ref); a
// pipeline run with a prefetched input whose windows were never bound ("expected external window
// buffer to be bound for prefetched input", Pallas' words).
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessera/block_spec.h"
#include "tessera/detail/runtime.h"
#include "tessera/pipeline.h"
#include "tessera/run_scoped.h"
#include "tessera/scratch.h"

namespace tessera {
namespace pltpu {

/// One operand's pipeline windows, made ahead of the pipeline (see the file comment).
template <class T>
class BufferedRef {
  static_assert(is_element_type_v<T> && !std::is_const_v<T>,
                "tessera: BufferedRef<T> holds float, bfloat16, int32_t, int8_t or bool");

 public:
  using value_type = T;
  using ref_type = BufferedRef;
  static constexpr MemorySpace space = MemorySpace::VMEM;

  /// No windows (a placeholder until assigned).
  BufferedRef() = default;
  /// `BufferedRef.input(spec, dtype, buffer_count=2)`: blocks copied in.
  static BufferedRef input(pl::BlockSpec spec, int buffer_count = 2,
                           std::source_location where = std::source_location::current()) {
    return BufferedRef(std::move(spec), BufferType::INPUT, buffer_count, where);
  }
  /// `BufferedRef.output(spec, dtype, buffer_count=2)`: blocks written back.
  static BufferedRef output(pl::BlockSpec spec, int buffer_count = 2,
                            std::source_location where = std::source_location::current()) {
    return BufferedRef(std::move(spec), BufferType::OUTPUT, buffer_count, where);
  }
  /// `BufferedRef.input_output(spec, dtype, buffer_count=2)`: copied in at the start of each
  /// visit and written back at its end.
  static BufferedRef input_output(pl::BlockSpec spec, int buffer_count = 2,
                                  std::source_location where = std::source_location::current()) {
    return BufferedRef(std::move(spec), BufferType::INPUT_OUTPUT, buffer_count, where);
  }
  /// The windows of a whole-array or other block of `array` (emit_pipeline_with_allocations).
  BufferedRef(pl::BlockSpec spec, BufferType type, int buffer_count, const Shape& array,
              std::source_location where)
      : spec_(std::move(spec)), type_(type), count_(buffer_count), where_(where) {
    window_ = detail::window_shape(spec_, array);
    validate();
  }

  const pl::BlockSpec& spec() const noexcept { return spec_; }
  BufferType buffer_type() const noexcept { return type_; }
  int buffer_count() const noexcept { return count_; }
  /// `pl.Buffered(prefetched_count=)` of the spec: how many windows the caller fills.
  int prefetched_count() const noexcept { return prefetched_; }

  /// `BufferedRef.with_window_ref(ref)`: this BufferedRef with `ref`'s VMEM as its windows
  /// (buffer_count of them, one after another: see the file comment). For a prefetched input the
  /// caller has copied its first blocks into the first windows; the pipeline writes the rest.
  template <class U>
  BufferedRef with_window_ref(const pl::Ref<U, MemorySpace::VMEM>& ref,
                              std::source_location where = std::source_location::current()) const {
    static_assert(std::is_same_v<U, T>,
                  "tessera: with_window_ref takes a VmemRef<T> of the BufferedRef's dtype with "
                  "mutable elements (the pipeline copies its later blocks into the windows)");
    detail::check_window_ref(ref.shape(), ref.strides(), count_, window_, where);
    BufferedRef r = *this;
    r.window_data_ = ref.data();
    return r;
  }
  /// One window's shape (the block without squeezed axes).
  const Shape& window_shape() const noexcept { return window_; }
  /// The windows (`buffer_count` of them, one after another), null until allocated.
  T* window() const noexcept { return window_data_; }

  // As a scratch type: buffer_count windows in VMEM; none for a prefetched input, whose windows
  // the caller binds (with_window_ref).
  detail::ScratchRequest request() const {
    if (prefetched_ > 0) return detail::ScratchRequest{MemorySpace::VMEM, dtype_of<T>, Shape{0}, 0};
    return detail::ScratchRequest{MemorySpace::VMEM, dtype_of<T>, buffers_shape(),
                                  buffers_shape().size() * static_cast<int64_t>(sizeof(T))};
  }
  BufferedRef make_ref(void* p) const {
    BufferedRef r = *this;
    if (prefetched_ == 0) r.window_data_ = static_cast<T*>(p);
    return r;
  }

 private:
  BufferedRef(pl::BlockSpec spec, BufferType type, int buffer_count, std::source_location where)
      : spec_(std::move(spec)), type_(type), count_(buffer_count), where_(where) {
    if (spec_.is_whole_array()) detail::buffered_ref_needs_block_shape(where_);
    window_ = detail::window_shape(spec_, Shape{});
    validate();
  }
  void validate() {
    detail::check_buffered_ref(count_, type_ != BufferType::INPUT, spec_.memory_space(), where_);
    prefetched_ = spec_.has_pipeline_mode() ? spec_.pipeline_mode().prefetched_count : 0;
    detail::check_prefetched_count(prefetched_, count_, type_ == BufferType::INPUT, where_);
    detail::check_scratch_shape(buffers_shape(), int64_t{sizeof(T)}, MemorySpace::VMEM, where_);
  }
  Shape buffers_shape() const {
    detail::SmallVec s{count_};
    for (int64_t e : window_) s.push_back(e);
    return Shape(std::move(s));
  }

  pl::BlockSpec spec_;
  BufferType type_ = BufferType::INPUT;
  int count_ = 0;
  int prefetched_ = 0;
  std::source_location where_;
  Shape window_;
  T* window_data_ = nullptr;
};

}  // namespace pltpu

template <class T>
inline constexpr bool is_scratch_type_v<pltpu::BufferedRef<T>> = true;

namespace detail {
template <class T>
inline constexpr bool is_buffered_ref_v = false;
template <class T>
inline constexpr bool is_buffered_ref_v<pltpu::BufferedRef<T>> = true;
}  // namespace detail

namespace pltpu {
/// `allocations=[...]`: the BufferedRefs of a pipeline's operands, in order (or a std::tuple of
/// them, as make_allocations gives and pl::run_scoped passes on).
template <class... T>
detail::Allocations<T...> allocations(const BufferedRef<T>&... refs) {
  return {std::tuple<BufferedRef<T>...>(refs...)};
}
template <class... T>
detail::Allocations<T...> allocations(
    const std::tuple<BufferedRef<T>...>& refs,
    std::source_location where = std::source_location::current()) {
  return {refs, where};
}

/// `emit_pipeline_with_allocations(body, grid=..., in_specs=..., out_specs=...)`: the pipeline
/// and a function of its operands' refs that makes their BufferedRefs (inputs, then outputs;
/// buffer counts from the specs' pl::Buffered, else 2, or 1 for a block that never changes).
template <class Body, class... Opts>
auto emit_pipeline_with_allocations(Body&& body, Opts&&... opts) {
  auto pipeline = emit_pipeline(std::forward<Body>(body), std::forward<Opts>(opts)...);
  auto make_allocations = [pipeline](const auto&... refs) {
    return pipeline.make_allocations(refs...);
  };
  return std::pair{pipeline, make_allocations};
}
}  // namespace pltpu

namespace pl {
/// `pl.run_scoped(f, allocations)` with a std::tuple of scratch types (make_allocations'
/// BufferedRefs): `f` gets one std::tuple of their refs, as Pallas passes the pytree.
template <class F, class... S>
requires(is_scratch_type_v<S>&&...) decltype(auto)
    run_scoped(F&& f, const std::tuple<S...>& group,
               std::source_location where = std::source_location::current()) {
  auto as_tuple = [&f](typename S::ref_type... refs) -> decltype(auto) {
    return f(std::tuple<typename S::ref_type...>(refs...));
  };
  return std::apply(
      [&](const S&... s) -> decltype(auto) {
        return detail::run_scoped_impl(where, as_tuple, std::index_sequence_for<S...>{}, s...);
      },
      group);
}
}  // namespace pl
}  // namespace tessera
