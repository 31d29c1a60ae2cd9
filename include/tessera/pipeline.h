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
// outputs 1 or 2; lookahead is for inputs only); without it a block takes 2, or 1 when its index
// never changes over the grid.
//
// Operands may also be refs that already live in the block's space: VMEM refs (scratch,
// run_scoped buffers, the windows of an enclosing pipeline: nested pipelines) walked with VMEM
// specs, and HBM/ANY refs walked with `pltpu::HBM` / `pl::ANY` specs (the body takes an HbmRef).
// Their blocks are used where they lie, as Pallas aliases them, so each block must lie wholly
// inside its ref. A spec in SMEM (`pltpu::SMEM`) stages its blocks in SMEM windows. The body's
// parameter types say which ref each operand gets; they must match the specs' spaces. With
// `pltpu::allocations(...)` last, the windows are BufferedRefs made ahead (buffered_ref.h); an
// input whose spec says `pl::Buffered{..., .prefetched_count = p}` finds its first p blocks in
// windows the caller filled and bound (BufferedRef::with_window_ref), and copies nothing for them.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
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
/// The same by the name of an axis of a named grid (`pl::grid({{"i", 4}, {"j", 8}})`), which
/// `lax::axis_index("i")` also reports, as in Pallas.
int64_t program_id(std::string_view axis_name,
                   std::source_location where = std::source_location::current());
int64_t num_programs(std::string_view axis_name,
                     std::source_location where = std::source_location::current());
}  // namespace pl

namespace pltpu {
/// The grid of a pipeline: one extent per axis, each at least 1, and for a named grid one name
/// per axis. Its call site is the pipeline's location in errors.
struct Grid {
  Shape dims;
  std::source_location where;
  std::vector<std::string> names;  // empty: the axes have no names
};
// (A braced list of extents converts to Shape; `pl::grid({})`, Pallas' `grid=()`, is the empty
// named grid below: no axes.)
inline Grid grid(Shape dims, std::source_location where = std::source_location::current()) {
  return Grid{std::move(dims), where, {}};
}
/// A named grid, Pallas' `grid=(("i", 4), ("j", 8))`: `pl::grid({{"i", 4}, {"j", 8}})`. Inside
/// the body `lax::axis_index("i")` (or `pl::program_id("i")`) is the step's index on axis "i".
inline Grid grid(std::initializer_list<std::pair<std::string, int64_t>> named_dims,
                 std::source_location where = std::source_location::current()) {
  Grid g{Shape{}, where, {}};
  detail::SmallVec dims;
  for (const auto& [name, extent] : named_dims) {
    g.names.push_back(name);
    dims.push_back(extent);
  }
  g.dims = Shape(std::move(dims));
  return g;
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

namespace pltpu {
template <class T>
class BufferedRef;  // tessera/buffered_ref.h
/// `pltpu.BufferType`: which way a BufferedRef's blocks move (tessera/buffered_ref.h).
enum class BufferType { INPUT, OUTPUT, INPUT_OUTPUT };
}  // namespace pltpu

namespace detail {
/// The allocations a pipeline is called with (pltpu::allocations): one BufferedRef per operand.
template <class... T>
struct Allocations {
  std::tuple<pltpu::BufferedRef<T>...> refs;
  std::source_location where{};  // the pltpu::allocations(tuple) call (none for the list form)
};
template <class T>
inline constexpr bool is_allocations_v = false;
template <class... T>
inline constexpr bool is_allocations_v<Allocations<T...>> = true;
/// Whether the last of R is pltpu::allocations(...).
template <class... R>
constexpr bool last_is_allocations() {
  if constexpr (sizeof...(R) == 0) {
    return false;
  } else {
    return is_allocations_v<std::tuple_element_t<sizeof...(R) - 1, std::tuple<R...>>>;
  }
}

/// How an emit_pipeline operand reaches the pipeline: a ref as it is. packed_ref.h specialises
/// it for bitcast views, which go through a VMEM copy (kStaged).
template <class R>
struct PipelineStage {
  static constexpr bool kStaged = false;
  const R& r;
  PipelineStage(const R& ref, bool, std::source_location) : r(ref) {}
  const R& ref() const { return r; }
  void finish() const {}
};

/// One operand of a pipeline as the runtime sees it.
struct PipelineOperand {
  RawRef hbm;  // the whole ref (in HBM, ANY, VMEM or SMEM)
  const pl::BlockSpec* spec = nullptr;
  bool is_output = false;
  /// An input the body takes as a ref to const elements: it cannot write its window, so the
  /// native engine may let the body read a full block where it lies in HBM instead of copying it.
  bool read_only = false;
  /// Where the body's parameter lives (ANY for an HBM/ANY ref); checked against the spec.
  MemorySpace declared = MemorySpace::VMEM;
  /// A BufferedRef's windows (pltpu::allocations): `storage_buffers` windows at `storage`, used
  /// instead of windows on the core's stack; `input_output`: an output copied in at each visit.
  void* storage = nullptr;
  int storage_buffers = 0;
  bool input_output = false;
  Shape storage_window;  // the BufferedRef's window shape, checked against the block's
  /// Where pltpu::allocations(...) was called (line 0: unknown), for a prefetched input whose
  /// windows were never bound.
  std::source_location allocations_where{};
};

/// The buffers a pipeline gives a block of `spec` over `grid` by default: 2, or 1 when its index
/// never changes over the grid (pl::Buffered overrides both). For make_allocations.
int default_buffer_count(const pl::BlockSpec& spec, const Shape& grid);
/// BufferedRef's checks (src/runtime/pipeline.cc): a buffer count of 1.. (outputs 1..2) and
/// windows in VMEM; a spec without a block shape.
void check_buffered_ref(int buffer_count, bool is_output, MemorySpace space,
                        std::source_location where);
[[noreturn]] void buffered_ref_needs_block_shape(std::source_location where);
/// pl::Buffered(prefetched_count=) on a BufferedRef (src/runtime/prefetched_window.cc): 0 or
/// more, on an input only, at most the buffer count.
void check_prefetched_count(int prefetched, int buffer_count, bool is_input,
                            std::source_location where);
/// The same against the operand's array and the grid (make_allocations): fewer than the buffer
/// count unless the block is the whole array at every step (trivial windowing).
void check_prefetched_block(const pl::BlockSpec& spec, int buffer_count, const Shape& array,
                            const Shape& grid, std::source_location where);
/// BufferedRef::with_window_ref: a VMEM ref of `shape` and `strides` that holds `buffer_count`
/// windows of `window` one after another, contiguously.
void check_window_ref(const Shape& shape, const SmallVec& strides, int buffer_count,
                      const Shape& window, std::source_location where);

/// What the body sees of one operand at a step: its window's first element and its element
/// strides (row-major for a window in VMEM; the array's own strides for a block read or
/// written in place).
struct WindowRef {
  void* data = nullptr;
  const SmallVec* strides = nullptr;
};

struct PipelineConfig {
  Shape grid;
  std::vector<std::string> grid_names;  // a named grid's axis names (empty: none)
  std::string core_axis;                // empty: no split
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

template <class P>
struct UnwrapOptional {
  using type = P;
};
template <class R>
struct UnwrapOptional<std::optional<R>> {
  using type = R;
};

/// The memory space a body declares for parameter `K`: ANY for a Ref in HBM or ANY, SMEM or
/// VMEM for those (through a std::optional); VMEM when the body is generic or the parameter is
/// not a Ref.
template <class Body, size_t K>
constexpr MemorySpace declared_space() {
  using P = typename UnwrapOptional<typename BodyParam<Body, K>::type>::type;
  if constexpr (is_ref_v<P>) return P::space == MemorySpace::HBM ? MemorySpace::ANY : P::space;
  return MemorySpace::VMEM;
}

/// HBM and ANY as one space (both are "in HBM" for a block).
constexpr MemorySpace canonical_space(MemorySpace s) noexcept {
  return s == MemorySpace::HBM ? MemorySpace::ANY : s;
}

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

}  // namespace detail

namespace pltpu {

/// A pipeline waiting for its operands: `emit_pipeline(...)(refs...)`.
template <class Body, size_t NIn, size_t NOut>
class Pipeline {
 public:
  Pipeline(Body body, pl::InSpecs<NIn> in, pl::OutSpecs<NOut> out, detail::PipelineConfig cfg)
      : body_(std::move(body)), in_(std::move(in)), out_(std::move(out)), cfg_(std::move(cfg)) {}

  /// Runs the pipeline over `refs` (inputs then outputs): refs in HBM or ANY, whose blocks are
  /// copied into windows in the spec's space (VMEM, or SMEM), or refs that already live in the
  /// spec's space (a VMEM ref, a window of an enclosing pipeline; an HBM ref with an HBM/ANY
  /// BlockSpec), whose blocks the body gets where they lie.
  ///
  /// `pipeline(refs..., pltpu::allocations(brefs...))` runs it with BufferedRefs' windows, their
  /// specs and directions (tessera/buffered_ref.h).
  template <class... R>
  void operator()(const R&... args) const {
    if constexpr (detail::last_is_allocations<R...>()) {
      const auto all = std::forward_as_tuple(args...);
      run_allocated(std::make_index_sequence<sizeof...(R) - 1>{}, all);
    } else {
      static_assert(sizeof...(R) == NIn + NOut,
                    "tessera: emit_pipeline(...) is called with one ref per in_spec and "
                    "out_spec, inputs first (or with pltpu::allocations(...) last)");
      if constexpr ((detail::PipelineStage<R>::kStaged || ...)) {
        run_staged(std::index_sequence_for<R...>{}, args...);
      } else {
        static_assert(((is_ref_v<R> && R::space != MemorySpace::SEMAPHORE) && ...),
                      "tessera: emit_pipeline operands are refs (in HBM, ANY, VMEM or SMEM)");
        run(std::index_sequence_for<R...>{}, static_cast<const std::nullptr_t*>(nullptr),
            std::source_location{}, args...);
      }
    }
  }

  /// The BufferedRefs of `refs` (inputs, then outputs) for emit_pipeline_with_allocations.
  template <class... R>
  auto make_allocations(const R&... refs) const {
    static_assert(sizeof...(R) == NIn + NOut,
                  "tessera: make_allocations takes one ref per in_spec and out_spec");
    return make_allocations_at(std::index_sequence_for<R...>{}, refs...);
  }

 private:
  const pl::BlockSpec& spec(size_t k) const { return k < NIn ? in_.specs[k] : out_.specs[k - NIn]; }

  int buffer_count(size_t k) const {
    return spec(k).has_pipeline_mode() ? spec(k).pipeline_mode().buffer_count
                                       : detail::default_buffer_count(spec(k), cfg_.grid);
  }
  template <size_t... K, class... R>
  auto make_allocations_at(std::index_sequence<K...>, const R&... refs) const {
    using std::remove_cv_t;
    auto allocs = std::tuple<pltpu::BufferedRef<remove_cv_t<typename R::element_type>>...>{
        pltpu::BufferedRef<remove_cv_t<typename R::element_type>>(
            spec(K), K < NIn ? pltpu::BufferType::INPUT : pltpu::BufferType::OUTPUT,
            buffer_count(K), refs.shape(), cfg_.where)...};
    (detail::check_prefetched_block(spec(K), buffer_count(K), refs.shape(), cfg_.grid, cfg_.where),
     ...);
    return allocs;
  }

  // Operands that are not strided views (a bitcast view, packed_ref.h) run through a VMEM copy
  // of their elements: inputs are gathered into it first, outputs scattered from it after.
  template <size_t... K, class... R>
  void run_staged(std::index_sequence<K...>, const R&... args) const {
    std::tuple<detail::PipelineStage<R>...> staged{
        detail::PipelineStage<R>(args, K >= NIn, cfg_.where)...};
    (*this)(std::get<K>(staged).ref()...);
    (std::get<K>(staged).finish(), ...);
  }

  template <size_t... K, class All>
  void run_allocated(std::index_sequence<K...>, const All& all) const {
    const auto& alloc = std::get<sizeof...(K)>(all).refs;
    static_assert(std::tuple_size_v<std::decay_t<decltype(alloc)>> == sizeof...(K),
                  "tessera: pltpu::allocations(...) gives one BufferedRef per operand");
    run(std::index_sequence<K...>{}, &alloc, std::get<sizeof...(K)>(all).where,
        std::get<K>(all)...);
  }

  // Operand K's description; with allocations (`alloc` a tuple of BufferedRefs), its spec,
  // direction and windows are the BufferedRef's.
  template <size_t K, class R, class Alloc>
  detail::PipelineOperand operand(const R& ref, const Alloc* alloc,
                                  std::source_location alloc_where) const {
    static_cast<void>(alloc_where);  // unused without allocations
    detail::PipelineOperand op;
    op.hbm = ref.raw();
    op.declared = detail::declared_space<Body, K>();
    if constexpr (std::is_same_v<Alloc, std::nullptr_t>) {
      op.spec = &spec(K);
      op.is_output = K >= NIn;
      op.read_only = K < NIn && detail::param_is_const_ref<Body, K>();
      return op;
    } else {
      const auto& b = std::get<K>(*alloc);
      static_assert(std::is_same_v<typename std::decay_t<decltype(b)>::value_type,
                                   std::remove_cv_t<typename R::element_type>>,
                    "tessera: a BufferedRef's dtype differs from its operand's");
      const bool input = b.buffer_type() == pltpu::BufferType::INPUT;
      op.spec = &b.spec();
      op.is_output = !input;
      op.read_only = input && detail::param_is_const_ref<Body, K>();
      op.storage = b.window();
      op.storage_buffers = b.buffer_count();
      op.input_output = b.buffer_type() == pltpu::BufferType::INPUT_OUTPUT;
      op.storage_window = b.window_shape();
      op.allocations_where = alloc_where;
      return op;
    }
  }
  template <size_t K, class R, class Alloc>
  const pl::BlockSpec& spec_of(const Alloc* alloc) const {
    if constexpr (std::is_same_v<Alloc, std::nullptr_t>) {
      return spec(K);
    } else {
      return std::get<K>(*alloc).spec();
    }
  }

  // The body's ref for operand K (a ref R) at a step: in the space its parameter declares; a
  // block used where it lies keeps R's element constness, a window is the pipeline's own. A
  // parameter declared const gets a const ref made as such (no converting copy per step).
  template <size_t K, class R>
  static auto window_ref(const detail::WindowRef& w, const Shape& shape) {
    constexpr MemorySpace S = detail::declared_space<Body, K>();
    using E = typename R::element_type;
    using Own = std::conditional_t<detail::canonical_space(R::space) == S, E, std::remove_cv_t<E>>;
    using T =
        std::conditional_t<detail::param_is_const_ref<Body, K>(), const std::remove_cv_t<E>, Own>;
    if constexpr (S == MemorySpace::ANY) {
      return pltpu::HbmRef<T>(static_cast<T*>(w.data), shape, *w.strides);
    } else {
      return pl::Ref<T, S>(static_cast<T*>(w.data), shape, *w.strides);
    }
  }

  template <size_t... K, class Alloc, class... R>
  void run(std::index_sequence<K...>, const Alloc* alloc, std::source_location alloc_where,
           const R&... refs) const {
    static_cast<void>(alloc);  // unused without operands
    static_cast<void>(alloc_where);
    std::vector<detail::PipelineOperand> ops{operand<K, R>(refs, alloc, alloc_where)...};
    const std::array<Shape, sizeof...(R)> shapes{
        detail::window_shape(spec_of<K, R>(alloc), refs.shape())...};
    auto per_step = [&](const detail::WindowRef* windows) {
      body_(window_ref<K, R>(windows[K], shapes[K])...);
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
          cfg.grid_names = o.names;
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
