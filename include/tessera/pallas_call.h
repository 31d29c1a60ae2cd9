// File: tessera/pallas_call.h
//
// `pl::pallas_call`: a kernel over a grid, with every operand blocked by a BlockSpec and staged
// in VMEM — Pallas' `pl.pallas_call`. Options are typed values in any order:
//
//   auto add = pl::pallas_call(
//       [](pltpu::VmemRef<float> x, pltpu::VmemRef<float> y, pltpu::VmemRef<float> o) {
//         o = x + y;
//       },
//       pl::out_shape<float>({1024, 1024}), pl::grid({8, 8}),
//       pl::in_specs(spec, spec), pl::out_specs(spec),
//       pltpu::CompilerParams{.dimension_semantics = {pltpu::PARALLEL, pltpu::ARBITRARY}});
//   Array<float> o = add(x, y);
//
//   pl::out_shape<T>(shape) / pl::out_shape(ShapeDtypeStruct<T>{...}, ...)   outputs (required)
//   pl::grid({...})                grid (default: one invocation)
//   pl::in_specs(...), pl::out_specs(...)   BlockSpecs (default: whole arrays)
//   pl::scratch_shapes(pltpu::VMEM<float>({8, 128}), ...)   scratch, kept across the grid
//   pltpu::CompilerParams{.dimension_semantics = {...}, .vmem_limit_bytes = ...}
//   pltpu::TensorCoreMesh("core", n)        the cores (default: this machine's)
//   pl::name("add")
//
// The body gets one VMEM ref per input block, per output block, then the scratch refs. The grid
// runs as emit_pipeline's does (see pipeline.h); PARALLEL axes, which must be a prefix of the
// grid, are split over the cores in contiguous chunks, the rest run in order on each core.
// Before any core runs, the blocks' VMEM (window bytes x buffer count, 2 by default) plus the
// scratch must fit `vmem_limit_bytes`: otherwise UsageError (kCapacityExceeded) names the
// largest consumers, their windows and full shapes.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/compiler_params.h"
#include "tessera/kernel.h"
#include "tessera/pipeline.h"
#include "tessera/scratch.h"

namespace tessera {
namespace pl {

/// `out_shape=`: the outputs (the same as pl::out_type).
template <class T>
OutType<T> out_shape(Shape shape, std::source_location where = std::source_location::current()) {
  return out_type<T>(std::move(shape), where);
}
template <class T0, class... Ts>
OutType<T0, Ts...> out_shape(const ShapeDtypeStruct<T0>& first,
                             const ShapeDtypeStruct<Ts>&... rest) {
  return out_type(first, rest...);
}

/// `scratch_shapes=`: the same as pl::scratch_types.
template <class... S>
requires(is_scratch_type_v<S>&&...) ScratchTypes<S...> scratch_shapes(S... s) {
  return scratch_types(std::move(s)...);
}

}  // namespace pl

namespace detail {

/// What pallas_call validates before launching, per operand.
struct PallasOperandInfo {
  DType dtype;
  Shape shape;
  const pl::BlockSpec* spec;
  bool is_output;
};
/// Throws UsageError before launch: the grid, semantics length or order, block ranks and index
/// map arities, the VMEM budget (naming the largest consumers).
void check_pallas_call(const std::vector<PallasOperandInfo>& operands, const Shape& grid,
                       const std::vector<pltpu::GridDimensionSemantics>& semantics,
                       const std::vector<ScratchRequest>& scratch, int64_t vmem_limit,
                       const std::string& name, std::source_location where);

/// In place of in_specs / out_specs that were not given: whole-array blocks.
struct NoSpecs {};

}  // namespace detail

namespace pl {

/// A pallas_call ready to run: `pl::pallas_call(body, options...)(inputs...)`.
template <class Body, class Out, class Scr, class In, class OutS>
class PallasCall;

template <class Body, class... Outs, class... Scrs, class In, class OutS>
class PallasCall<Body, OutType<Outs...>, ScratchTypes<Scrs...>, In, OutS> {
 public:
  PallasCall(Body body, OutType<Outs...> out, ScratchTypes<Scrs...> scratch, In in_specs,
             OutS out_specs, Shape grid, pltpu::CompilerParams params,
             std::optional<pltpu::TensorCoreMesh> mesh, std::string name,
             std::source_location where)
      : body_(std::move(body)),
        out_(std::move(out)),
        scratch_(std::move(scratch)),
        in_specs_(std::move(in_specs)),
        out_specs_(std::move(out_specs)),
        grid_(std::move(grid)),
        params_(std::move(params)),
        mesh_(std::move(mesh)),
        name_(std::move(name)),
        where_(where) {}

  /// Runs the grid over `ins` and returns the output(s), as pl::kernel does.
  template <class... Ins>
  auto operator()(const Array<Ins>&... ins) const {
    if constexpr (!std::is_same_v<In, detail::NoSpecs>) {
      static_assert(std::tuple_size_v<decltype(In::specs)> == sizeof...(Ins),
                    "tessera: pallas_call has a different number of in_specs than inputs");
    }
    if constexpr (!std::is_same_v<OutS, detail::NoSpecs>) {
      static_assert(std::tuple_size_v<decltype(OutS::specs)> == sizeof...(Outs),
                    "tessera: pallas_call has a different number of out_specs than outputs");
    }
    constexpr size_t NI = sizeof...(Ins);
    constexpr size_t NO = sizeof...(Outs);
    std::array<BlockSpec, NI + NO> specs;
    if constexpr (!std::is_same_v<In, detail::NoSpecs>) {
      for (size_t k = 0; k < NI; ++k) specs[k] = in_specs_.specs[k];
    }
    if constexpr (!std::is_same_v<OutS, detail::NoSpecs>) {
      for (size_t k = 0; k < NO; ++k) specs[NI + k] = out_specs_.specs[k];
    }
    std::vector<pltpu::GridDimensionSemantics> semantics = params_.dimension_semantics;
    if (semantics.empty()) semantics.assign(static_cast<size_t>(grid_.rank()), pltpu::ARBITRARY);
    const std::vector<detail::ScratchRequest> scratch = std::apply(
        [](const auto&... s) { return std::vector<detail::ScratchRequest>{s.request()...}; },
        scratch_.items);
    const int64_t limit = params_.vmem_limit_bytes.value_or(detail::default_vmem_limit_bytes());
    const std::vector<detail::PallasOperandInfo> info = operand_info(
        specs, std::index_sequence_for<Ins...>{}, std::index_sequence_for<Outs...>{}, ins...);
    detail::check_pallas_call(info, grid_, semantics, scratch, limit, name_, where_);

    const pltpu::TensorCoreMesh mesh = mesh_ ? *mesh_ : pltpu::TensorCoreMesh("core", where_);
    const std::string axis = mesh.axis_name();
    const Shape grid = grid_;
    const int cores = mesh.num_cores();
    auto k =
        make_kernel(mesh, specs, semantics, axis, grid, cores, std::index_sequence_for<Ins...>{},
                    std::index_sequence_for<Outs...>{}, std::index_sequence_for<Scrs...>{},
                    static_cast<const Array<Ins>*>(nullptr)...);
    return k(ins...);
  }

 private:
  template <size_t... I, size_t... O, class... Ins>
  std::vector<detail::PallasOperandInfo> operand_info(
      const std::array<BlockSpec, sizeof...(Ins) + sizeof...(Outs)>& specs,
      std::index_sequence<I...>, std::index_sequence<O...>, const Array<Ins>&... ins) const {
    return {detail::PallasOperandInfo{dtype_of<Ins>, ins.shape(), &specs[I], false}...,
            detail::PallasOperandInfo{dtype_of<Outs>, std::get<O>(out_.outs).shape,
                                      &specs[sizeof...(Ins) + O], true}...};
  }

  template <size_t... I, size_t... O, size_t... S, class... Ins>
  auto make_kernel(const pltpu::TensorCoreMesh& mesh,
                   const std::array<BlockSpec, sizeof...(Ins) + sizeof...(Outs)>& specs,
                   const std::vector<pltpu::GridDimensionSemantics>& semantics,
                   const std::string& axis, const Shape& grid, int cores, std::index_sequence<I...>,
                   std::index_sequence<O...>, std::index_sequence<S...>,
                   const Array<Ins>*...) const {
    pltpu::CompilerParams kp;
    kp.vmem_limit_bytes = params_.vmem_limit_bytes;
    kp.wait_timeout_ms = params_.wait_timeout_ms;
    const auto* self = this;
    auto per_core = [self, &specs, &semantics, &axis, &grid, cores](
                        pltpu::HbmRef<const Ins>... in_refs, pltpu::HbmRef<Outs>... out_refs,
                        typename Scrs::ref_type... scratch_refs) {
      detail::PipelineConfig cfg;
      cfg.grid = grid;
      cfg.semantics = semantics;
      cfg.where = self->where_;
      cfg.op = "pallas_call";
      const int core = lax::axis_index(axis);
      const detail::IterationRange r =
          detail::pallas_call_core_range(grid, semantics, cores, core, self->where_);
      cfg.range_begin = r.begin;
      cfg.range_end = r.end;
      constexpr size_t NI = sizeof...(Ins);
      std::vector<detail::PipelineOperand> ops{
          detail::PipelineOperand{in_refs.raw(), &specs[I], false}...,
          detail::PipelineOperand{out_refs.raw(), &specs[NI + O], true}...};
      const std::array<Shape, NI> in_shapes{detail::window_shape(specs[I], in_refs.shape())...};
      const std::array<Shape, sizeof...(Outs)> out_shapes{
          detail::window_shape(specs[NI + O], out_refs.shape())...};
      auto step = [&](void* const* windows) {
        self->body_(pltpu::VmemRef<Ins>(static_cast<Ins*>(windows[I]), in_shapes[I])...,
                    pltpu::VmemRef<Outs>(static_cast<Outs*>(windows[NI + O]), out_shapes[O])...,
                    scratch_refs...);
      };
      detail::run_pipeline(cfg, ops, step);
    };
    auto builder = pl::kernel(out_, scratch_, mesh, pl::name(name_), kp);
    return builder(per_core, where_);
  }

  Body body_;
  OutType<Outs...> out_;
  ScratchTypes<Scrs...> scratch_;
  In in_specs_;
  OutS out_specs_;
  Shape grid_;
  pltpu::CompilerParams params_;
  std::optional<pltpu::TensorCoreMesh> mesh_;
  std::string name_;
  std::source_location where_;
};

namespace detail_pallas {
template <class T>
struct IsIn : std::false_type {};
template <size_t N>
struct IsIn<InSpecs<N>> : std::true_type {};
template <class T>
struct IsOut : std::false_type {};
template <size_t N>
struct IsOut<OutSpecs<N>> : std::true_type {};
}  // namespace detail_pallas

/// `pl.pallas_call(body, out_shape=..., grid=..., in_specs=..., out_specs=...,
/// scratch_shapes=..., compiler_params=..., name=...)`, options in any order (see the file
/// comment). The result is called with the input Arrays.
template <class Body, class... Opts>
auto pallas_call(Body&& body, Opts&&... opts) {
  using Out = typename detail::FindType<detail::IsOutType, OutType<>, std::decay_t<Opts>...>::type;
  using Scr = typename detail::FindType<detail::IsScratchTypes, ScratchTypes<>,
                                        std::decay_t<Opts>...>::type;
  using In =
      typename detail::FindType<detail_pallas::IsIn, detail::NoSpecs, std::decay_t<Opts>...>::type;
  using OutS =
      typename detail::FindType<detail_pallas::IsOut, detail::NoSpecs, std::decay_t<Opts>...>::type;
  static_assert(!std::is_same_v<Out, OutType<>>,
                "tessera: pallas_call needs its outputs: pl::out_shape<T>({...})");
  Out out{};
  Scr scratch{};
  In in{};
  OutS outs{};
  Shape grid{};
  std::source_location where{};
  pltpu::CompilerParams params{};
  std::optional<pltpu::TensorCoreMesh> mesh;
  std::string name;
  (
      [&](auto&& o) {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, Out>)
          out = o;
        else if constexpr (std::is_same_v<O, Scr>)
          scratch = o;
        else if constexpr (std::is_same_v<O, In>)
          in = o;
        else if constexpr (std::is_same_v<O, OutS>)
          outs = o;
        else if constexpr (std::is_same_v<O, pltpu::Grid>) {
          grid = o.dims;
          where = o.where;
        } else if constexpr (std::is_same_v<O, pltpu::CompilerParams>)
          params = o;
        else if constexpr (std::is_same_v<O, pltpu::TensorCoreMesh>)
          mesh = o;
        else if constexpr (std::is_same_v<O, Name>)
          name = o.value;
        else
          static_assert(sizeof(O) == 0,
                        "tessera: pallas_call options are pl::out_shape, pl::grid, "
                        "pl::in_specs, pl::out_specs, pl::scratch_shapes, "
                        "pltpu::CompilerParams, pltpu::TensorCoreMesh and pl::name");
      }(std::forward<Opts>(opts)),
      ...);
  if (name.empty()) name = detail::default_kernel_name(where);
  return PallasCall<std::decay_t<Body>, Out, Scr, In, OutS>(
      std::forward<Body>(body), std::move(out), std::move(scratch), std::move(in), std::move(outs),
      std::move(grid), std::move(params), std::move(mesh), std::move(name), where);
}

}  // namespace pl
}  // namespace tessera
