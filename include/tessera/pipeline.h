// File: tessera/pipeline.h
//
// `pltpu::emit_pipeline`: inside a kernel, walk a grid over HBM refs block by block, with each
// block staged in VMEM for the body — Pallas' `pltpu.emit_pipeline`. Options are typed values
// in any order, as for `pl::kernel`:
//
//   pltpu::emit_pipeline(add_body, pltpu::grid({M / 128, N / 128}),
//                        pl::in_specs(spec, spec), pl::out_specs(spec),
//                        pltpu::core_axis_name("core"),
//                        pltpu::dimension_semantics(pltpu::PARALLEL, pltpu::ARBITRARY))(
//       x_hbm, y_hbm, o_hbm);
//   // add_body: [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float> o) {
//   //   o = x + y; }
//
// As a loop nest, on each core (its share of the grid when `core_axis_name` is given):
//   for each grid point p, in row-major order:
//     for each input k: if p is the first step or block_k(p) != block_k(previous):
//                         copy block_k(p) of input k from HBM into its VMEM window
//     body(windows...)                       // pl::program_id(a) is p[a]
//     for each output k: if p is the last step or block_k(next) != block_k(p):
//                         copy output k's window back to block_k(p) in HBM
// Output windows are never read from HBM: consecutive steps on the same output block see the
// same window (accumulate there, initialising when pl::program_id says so); a block visited
// again after it was written back is an error (KernelError kRevisit). A partial last block
// moves only its in-bounds part; the rest of its window is unspecified and writes there are
// dropped.
//
// Windows are views with strides: do not assume a window is contiguous. The native engine
// skips copies the semantics cannot observe — a full block of an input the body takes as
// `VmemRef<const T>` is read where it lies in HBM, a full output block visited for one step is
// written there directly with streaming stores — and prefetches the next step's input blocks
// while the body computes. Operands whose arrays overlap always go through VMEM copies.
// `pl::Buffered(n)` counts n windows per operand against the VMEM budget (inputs n >= 1,
// outputs 1 or 2; lookahead is for inputs only).
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/block_spec.h"
#include "tessera/detail/options.h"
#include "tessera/detail/runtime.h"
#include "tessera/kernel.h"
#include "tessera/ref.h"

namespace tessera {
namespace pl {
/// The input BlockSpecs of a pipeline, in order.
template <size_t N>
struct InSpecs {
  std::array<BlockSpec, N> specs;
};
template <class... S>
requires(std::is_same_v<std::decay_t<S>, BlockSpec>&&...) InSpecs<sizeof...(S)> in_specs(S&&... s) {
  return {{std::forward<S>(s)...}};
}
/// The output BlockSpecs of a pipeline, in order.
template <size_t N>
struct OutSpecs {
  std::array<BlockSpec, N> specs;
};
template <class... S>
requires(std::is_same_v<std::decay_t<S>, BlockSpec>&&...) OutSpecs<sizeof...(S)> out_specs(
    S&&... s) {
  return {{std::forward<S>(s)...}};
}

/// `pl.program_id(axis)`: the index of the running step along `axis` of the innermost grid.
/// Throws outside a grid, or for an axis the grid does not have.
int64_t program_id(int axis, std::source_location where = std::source_location::current());
/// `pl.num_programs(axis)`: the extent of the innermost grid along `axis`.
int64_t num_programs(int axis, std::source_location where = std::source_location::current());
}  // namespace pl

namespace pltpu {
/// The grid of a pipeline: one extent per axis, each at least 1. Its call site is the
/// pipeline's location in errors.
struct Grid {
  Shape dims;
  std::source_location where;
};
inline Grid grid(std::initializer_list<int64_t> dims,
                 std::source_location where = std::source_location::current()) {
  return Grid{Shape(dims), where};
}
inline Grid grid(Shape dims, std::source_location where = std::source_location::current()) {
  return Grid{std::move(dims), where};
}

/// `core_axis_name=`: split the grid over the cores of this mesh axis.
struct CoreAxisName {
  std::string name;
};
inline CoreAxisName core_axis_name(std::string name) { return {std::move(name)}; }

/// `dimension_semantics=`: one per grid axis (default: all ARBITRARY).
struct DimensionSemantics {
  std::vector<GridDimensionSemantics> values;
};
template <class... S>
requires(std::is_same_v<S, GridDimensionSemantics>&&...) DimensionSemantics
    dimension_semantics(S... s) {
  return {{s...}};
}
}  // namespace pltpu

namespace pl {
// pallas_call spells its grid `grid=` in Pallas' generic namespace.
using pltpu::grid;
using pltpu::Grid;
}  // namespace pl

namespace detail {

/// One operand of a pipeline as the runtime sees it.
struct PipelineOperand {
  RawRef hbm;
  const pl::BlockSpec* spec = nullptr;
  bool is_output = false;
  /// An input the body takes as a ref to const elements: it cannot write its window, so the
  /// native engine may let the body read a full block where it lies in HBM instead of copying it.
  bool read_only = false;
};

/// What the body sees of one operand at a step: its window's first element and its element
/// strides (row-major for a window in VMEM; the array's own strides for a block read or
/// written in place).
struct WindowRef {
  void* data = nullptr;
  const SmallVec* strides = nullptr;
};

struct PipelineConfig {
  Shape grid;
  std::string core_axis;  // empty: no split
  std::vector<pltpu::GridDimensionSemantics> semantics;
  std::source_location where;
  // pallas_call: only the linear steps [range_begin, range_end) of the grid run on this core
  // (range_end < 0: all of them).
  int64_t range_begin = 0;
  int64_t range_end = -1;
  // pallas_call: the op name in errors.
  const char* op = "emit_pipeline";
  // pallas_call with PrefetchScalarGridSpec: the SMEM refs passed to every index map.
  std::vector<RawRef> scalar_prefetch;
};

/// Runs the pipeline on the calling core: `body(windows)` gets one window per operand, whose
/// shape is `window_shape(spec, array)`.
void run_pipeline(const PipelineConfig& config, const std::vector<PipelineOperand>& operands,
                  FunctionRef<void(const WindowRef*)> body);

/// True when parameter `K` of `Body` is declared as a Ref to const elements (a non-generic
/// lambda or function); such a window is only read.
template <class Body, size_t K>
constexpr bool param_is_const_ref() {
  using P = typename BodyParam<Body, K>::type;
  if constexpr (is_ref_v<P>) return std::is_const_v<typename P::element_type>;
  return false;
}

/// The shape of an operand's VMEM window: the block shape without squeezed axes (the whole
/// array for a default BlockSpec).
Shape window_shape(const pl::BlockSpec& spec, const Shape& array);

template <class T>
inline constexpr bool is_hbm_ref_v = false;
template <class T, MemorySpace S>
inline constexpr bool is_hbm_ref_v<pl::Ref<T, S>> = S == MemorySpace::HBM || S == MemorySpace::ANY;

}  // namespace detail

namespace pltpu {

/// A pipeline waiting for its operands: `emit_pipeline(...)(refs...)`.
template <class Body, size_t NIn, size_t NOut>
class Pipeline {
 public:
  Pipeline(Body body, pl::InSpecs<NIn> in, pl::OutSpecs<NOut> out, detail::PipelineConfig cfg)
      : body_(std::move(body)), in_(std::move(in)), out_(std::move(out)), cfg_(std::move(cfg)) {}

  /// Runs the pipeline over `refs` (inputs then outputs, in HBM or ANY).
  template <class... R>
  void operator()(const R&... refs) const {
    static_assert(sizeof...(R) == NIn + NOut,
                  "tessera: emit_pipeline(...) is called with one HBM ref per in_spec and "
                  "out_spec, inputs first");
    static_assert((detail::is_hbm_ref_v<R> && ...),
                  "tessera: emit_pipeline operands are refs in HBM or ANY (the pipeline stages "
                  "their blocks in VMEM for the body)");
    run(std::index_sequence_for<R...>{}, refs...);
  }

 private:
  const pl::BlockSpec& spec(size_t k) const { return k < NIn ? in_.specs[k] : out_.specs[k - NIn]; }

  template <size_t... K, class... R>
  void run(std::index_sequence<K...>, const R&... refs) const {
    std::vector<detail::PipelineOperand> ops{detail::PipelineOperand{
        refs.raw(), &spec(K), K >= NIn, K < NIn && detail::param_is_const_ref<Body, K>()}...};
    const std::array<Shape, sizeof...(R)> shapes{detail::window_shape(spec(K), refs.shape())...};
    auto per_step = [&](const detail::WindowRef* windows) {
      body_(pltpu::VmemRef<std::remove_cv_t<typename R::element_type>>(
          static_cast<std::remove_cv_t<typename R::element_type>*>(windows[K].data), shapes[K],
          *windows[K].strides)...);
    };
    detail::run_pipeline(cfg_, ops, per_step);
  }

  Body body_;
  pl::InSpecs<NIn> in_;
  pl::OutSpecs<NOut> out_;
  detail::PipelineConfig cfg_;
};

namespace detail_pipeline {
template <class T>
struct IsInSpecs : std::false_type {};
template <size_t N>
struct IsInSpecs<pl::InSpecs<N>> : std::true_type {};
template <class T>
struct IsOutSpecs : std::false_type {};
template <size_t N>
struct IsOutSpecs<pl::OutSpecs<N>> : std::true_type {};
template <class T>
inline constexpr size_t count_of = 0;
template <size_t N>
inline constexpr size_t count_of<pl::InSpecs<N>> = N;
template <size_t N>
inline constexpr size_t count_of<pl::OutSpecs<N>> = N;

/// emit_pipeline's options (detail/options.h).
struct PipelineOptions {
  template <class O>
  static constexpr bool accepts =
      std::is_same_v<O, Grid> || std::is_same_v<O, CoreAxisName> ||
      std::is_same_v<O, DimensionSemantics> || IsInSpecs<O>::value || IsOutSpecs<O>::value;
  template <class O>
  static constexpr void reject() {
    static_assert(sizeof(O) == 0,
                  "tessera: emit_pipeline options are pltpu::grid, pl::in_specs, "
                  "pl::out_specs, pltpu::core_axis_name and pltpu::dimension_semantics");
  }
};
}  // namespace detail_pipeline

/// `pltpu.emit_pipeline(body, grid=..., in_specs=..., out_specs=..., core_axis_name=...,
/// dimension_semantics=...)`. Options in any order; `pltpu::grid` is required.
template <class Body, class... Opts>
auto emit_pipeline(Body&& body, Opts&&... opts) {
  using In = typename detail::FindType<detail_pipeline::IsInSpecs, pl::InSpecs<0>,
                                       std::decay_t<Opts>...>::type;
  using Out = typename detail::FindType<detail_pipeline::IsOutSpecs, pl::OutSpecs<0>,
                                        std::decay_t<Opts>...>::type;
  static_assert(detail::check_options<detail_pipeline::PipelineOptions, std::decay_t<Opts>...>());
  static_assert(detail::count_v<Grid, std::decay_t<Opts>...> == 1,
                "tessera: emit_pipeline needs exactly one pltpu::grid({...})");
  In in{};
  Out out{};
  detail::PipelineConfig cfg;
  (
      [&](auto&& o) {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, Grid>) {
          cfg.grid = o.dims;
          cfg.where = o.where;
        } else if constexpr (std::is_same_v<O, CoreAxisName>)
          cfg.core_axis = o.name;
        else if constexpr (std::is_same_v<O, DimensionSemantics>)
          cfg.semantics = o.values;
        else if constexpr (std::is_same_v<O, In>)
          in = o;
        else if constexpr (std::is_same_v<O, Out>)
          out = o;
      }(std::forward<Opts>(opts)),
      ...);
  return Pipeline<std::decay_t<Body>, detail_pipeline::count_of<In>,
                  detail_pipeline::count_of<Out>>(std::forward<Body>(body), std::move(in),
                                                  std::move(out), std::move(cfg));
}

}  // namespace pltpu
}  // namespace tessera
