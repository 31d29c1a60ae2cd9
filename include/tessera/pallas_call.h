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
#include <cstring>
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
#include "tessera/dma.h"
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
template <class T>
OutType<T> out_shape(std::initializer_list<int64_t> dims,
                     std::source_location where = std::source_location::current()) {
  return out_type<T>(Shape(dims), where);
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

/// In place of in_specs / out_specs that were not given: whole-array blocks.
struct NoSpecs {};

/// The memory space a body declares for parameter `K`: ANY for a Ref in HBM or ANY, SMEM or
/// VMEM for those; VMEM when the body is generic or the parameter is not a Ref.
template <class Body, size_t K>
constexpr MemorySpace declared_space() {
  using P = typename BodyParam<Body, K>::type;
  if constexpr (is_ref_v<P>) return P::space == MemorySpace::HBM ? MemorySpace::ANY : P::space;
  return MemorySpace::VMEM;
}

/// One input or output of a pallas_call, as its template knows it.
struct PallasOperand {
  DType dtype;
  Shape shape;
  const pl::BlockSpec* spec;
  bool is_output;
  bool read_only;        // an input the body takes as a ref to const elements
  MemorySpace declared;  // where the body's parameter lives (ANY: it takes the HBM ref)
};
/// One scalar-prefetch operand (copied into SMEM on every core before the grid runs).
struct PallasPrefetch {
  DType dtype;
  Shape shape;
};
/// Everything about a pallas_call but its operands' data and its body.
struct PallasCallSpec {
  std::string name;
  std::source_location where;
  Shape grid;
  pltpu::CompilerParams params;
  std::optional<pltpu::TensorCoreMesh> mesh;
  std::vector<std::pair<int, int>> aliases;  // (input, output); inputs count the prefetch first
  std::optional<pltpu::InterpretParams> interpret;
  std::vector<ScratchRequest> scratch;  // the user's scratch
};
/// What the body gets at one grid step: the SMEM copies of the scalar-prefetch operands; per
/// operand (inputs, then outputs) its window and the window's shape, or for an operand the body
/// takes in HBM its whole array; the user's scratch buffers.
struct PallasStep {
  const RawRef* prefetch;
  const WindowRef* windows;
  const Shape* window_shapes;
  const RawRef* arrays;
  void* const* scratch;
};
/// Runs a pallas_call (src/runtime/pallas_call.cc): validates it before launch (UsageError),
/// launches, and calls `body` at every grid step of every core. `args`: the scalar-prefetch
/// operands, then the inputs; `outputs`: the outputs' buffers, which the call fills.
void run_pallas_call(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                     const std::vector<PallasOperand>& operands, const void* const* args,
                     void* const* outputs, FunctionRef<void(const PallasStep&)> body);

}  // namespace detail

namespace pl {

/// `input_output_aliases={in: out, ...}`: output `out` starts with input `in`'s contents, and
/// inside the kernel both are one buffer (blocks written back are seen by later reads of the
/// input). Input indices count the scalar-prefetch operands first; shapes and dtypes must match.
struct InputOutputAliases {
  std::vector<std::pair<int, int>> pairs;
};
inline InputOutputAliases input_output_aliases(std::initializer_list<std::pair<int, int>> pairs) {
  return InputOutputAliases{std::vector<std::pair<int, int>>(pairs)};
}

/// `pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=NP, grid=..., in_specs=..., out_specs=...,
/// scratch_shapes=...)`: the grid options bundled, plus NP scalar-prefetch operands (see
/// pltpu::PrefetchScalarGridSpec).
template <int NP, class... Opts>
struct GridSpec {
  std::tuple<Opts...> options;
};

/// A pallas_call ready to run: `pl::pallas_call(body, options...)(inputs...)`.
template <class Body, int NP, class Out, class Scr, class In, class OutS>
class PallasCall;

template <class Body, int NP, class... Outs, class... Scrs, class In, class OutS>
class PallasCall<Body, NP, OutType<Outs...>, ScratchTypes<Scrs...>, In, OutS> {
 public:
  PallasCall(Body body, OutType<Outs...> out, ScratchTypes<Scrs...> scratch, In in_specs,
             OutS out_specs, Shape grid, pltpu::CompilerParams params,
             std::optional<pltpu::TensorCoreMesh> mesh, InputOutputAliases aliases,
             std::string name, std::source_location where,
             std::optional<pltpu::InterpretParams> interpret = std::nullopt)
      : body_(std::move(body)),
        out_(std::move(out)),
        scratch_(std::move(scratch)),
        in_specs_(std::move(in_specs)),
        out_specs_(std::move(out_specs)),
        spec_{std::move(name),
              where,
              std::move(grid),
              std::move(params),
              std::move(mesh),
              std::move(aliases.pairs),
              std::move(interpret),
              std::apply(
                  [](const auto&... s) {
                    return std::vector<detail::ScratchRequest>{s.request()...};
                  },
                  scratch_.items)} {
    // Outputs given as ShapeDtypeStructs have no line of their own: they are checked here.
    std::apply(
        [&](const auto&... o) {
          (detail::check_shape(o.shape,
                               int64_t{sizeof(typename std::decay_t<decltype(o)>::value_type)},
                               "pallas_call", "a pallas_call output", where),
           ...);
        },
        out_.outs);
  }

  /// Runs the grid over `args` (the NP scalar-prefetch operands, then the inputs) and returns
  /// the output(s), as pl::kernel does.
  template <class... Args>
  auto operator()(const Array<Args>&... args) const {
    static_assert(sizeof...(Args) >= static_cast<size_t>(NP),
                  "tessera: a pallas_call with PrefetchScalarGridSpec<n> takes the n "
                  "scalar-prefetch arrays first, then its inputs");
    return call(std::make_index_sequence<static_cast<size_t>(NP)>{},
                std::make_index_sequence<sizeof...(Args) - static_cast<size_t>(NP)>{},
                std::index_sequence_for<Outs...>{}, std::index_sequence_for<Scrs...>{}, args...);
  }

 private:
  static constexpr size_t NO = sizeof...(Outs);

  // The ref the body gets at a step for operand `k`, whose body parameter is declared in
  // `Space`: the HBM ref itself (ANY: not pipelined), or its window in VMEM or SMEM.
  template <MemorySpace Space, class T, bool IsOutput>
  static auto operand_ref(const detail::PallasStep& s, size_t k) {
    if constexpr (Space == MemorySpace::ANY) {
      using E = std::conditional_t<IsOutput, T, const T>;
      const detail::RawRef& a = s.arrays[k];
      return pltpu::HbmRef<E>(static_cast<E*>(a.data), a.shape, a.strides);
    } else {
      return pl::Ref<T, Space>(static_cast<T*>(s.windows[k].data), s.window_shapes[k],
                               *s.windows[k].strides);
    }
  }

  // The ref a body parameter declared in `Space` receives for an operand of T (inputs read-only).
  template <MemorySpace Space, class T, bool IsOutput>
  using passed_ref = std::conditional_t<Space == MemorySpace::ANY,
                                        pltpu::HbmRef<std::conditional_t<IsOutput, T, const T>>,
                                        pl::Ref<T, Space>>;

  // P: prefetch positions, I: input positions (after the prefetch args), O: outputs, S: user
  // scratch.
  template <size_t... P, size_t... I, size_t... O, size_t... S, class... Args>
  auto call(std::index_sequence<P...>, std::index_sequence<I...>, std::index_sequence<O...>,
            std::index_sequence<S...>, const Array<Args>&... args) const {
    using ArgT = std::tuple<Args...>;
    constexpr size_t NI = sizeof...(I);
    constexpr size_t NPs = sizeof...(P);
    constexpr bool body_fits = detail::check_pallas_body<
        Body, pltpu::SmemRef<std::tuple_element_t<P, ArgT>>...,
        passed_ref<detail::declared_space<Body, NPs + I>(), std::tuple_element_t<NPs + I, ArgT>,
                   false>...,
        passed_ref<detail::declared_space<Body, NPs + NI + O>(), Outs, true>...,
        typename Scrs::ref_type...>();
    if constexpr (!body_fits) {
      return;  // check_pallas_body said why; nothing below would compile
    } else {
      if constexpr (!std::is_same_v<In, detail::NoSpecs>) {
        static_assert(std::tuple_size_v<decltype(In::specs)> == NI,
                      "tessera: pallas_call has a different number of in_specs than inputs");
      }
      if constexpr (!std::is_same_v<OutS, detail::NoSpecs>) {
        static_assert(std::tuple_size_v<decltype(OutS::specs)> == NO,
                      "tessera: pallas_call has a different number of out_specs than outputs");
      }
      const auto argv = std::forward_as_tuple(args...);
      static_cast<void>(argv);  // unused when there are no inputs
      std::array<BlockSpec, NI + NO> specs;
      if constexpr (!std::is_same_v<In, detail::NoSpecs>) {
        for (size_t k = 0; k < NI; ++k) specs[k] = in_specs_.specs[k];
      }
      if constexpr (!std::is_same_v<OutS, detail::NoSpecs>) {
        for (size_t k = 0; k < NO; ++k) specs[NI + k] = out_specs_.specs[k];
      }
      const std::vector<detail::PallasOperand> operands{
          detail::PallasOperand{dtype_of<std::tuple_element_t<NPs + I, ArgT>>,
                                std::get<NPs + I>(argv).shape(), &specs[I], false,
                                detail::param_is_const_ref<Body, NPs + I>(),
                                detail::declared_space<Body, NPs + I>()}...,
          detail::PallasOperand{dtype_of<Outs>, std::get<O>(out_.outs).shape, &specs[NI + O], true,
                                false, detail::declared_space<Body, NPs + NI + O>()}...};
      const std::vector<detail::PallasPrefetch> prefetch{detail::PallasPrefetch{
          dtype_of<std::tuple_element_t<P, ArgT>>, std::get<P>(argv).shape()}...};
      std::tuple<Array<Outs>...> outs{Array<Outs>(detail::Uninitialized{},
                                                  std::get<O>(out_.outs).shape, spec_.where,
                                                  "a pallas_call output")...};
      const void* arg_data[sizeof...(Args) + 1] = {static_cast<const void*>(args.data())...,
                                                   nullptr};
      void* const out_data[NO + 1] = {static_cast<void*>(std::get<O>(outs).data())..., nullptr};
      auto step = [this](const detail::PallasStep& s) {
        body_(pltpu::SmemRef<std::tuple_element_t<P, ArgT>>(
                  static_cast<std::tuple_element_t<P, ArgT>*>(s.prefetch[P].data),
                  s.prefetch[P].shape)...,
              operand_ref<detail::declared_space<Body, NPs + I>(),
                          std::tuple_element_t<NPs + I, ArgT>, false>(s, I)...,
              operand_ref<detail::declared_space<Body, NPs + NI + O>(), Outs, true>(s, NI + O)...,
              std::get<S>(scratch_.items).make_ref(s.scratch[S])...);
      };
      detail::run_pallas_call(spec_, prefetch, operands, arg_data, out_data, step);
      return finish(std::move(outs));
    }
  }

  static auto finish(std::tuple<Array<Outs>...>&& outs) {
    if constexpr (NO == 0) {
      return;
    } else if constexpr (NO == 1) {
      return std::move(std::get<0>(outs));
    } else {
      return std::move(outs);
    }
  }

  Body body_;
  OutType<Outs...> out_;
  ScratchTypes<Scrs...> scratch_;
  In in_specs_;
  OutS out_specs_;
  detail::PallasCallSpec spec_;
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
template <class T>
struct IsGridSpec : std::false_type {};
template <int NP, class... O>
struct IsGridSpec<GridSpec<NP, O...>> : std::true_type {};
template <class T>
inline constexpr int num_prefetch_of = 0;
template <int NP, class... O>
inline constexpr int num_prefetch_of<GridSpec<NP, O...>> = NP;

// The options of a pallas_call, with a GridSpec bundle unpacked in its place.
template <class O>
auto flatten(O&& o) {
  if constexpr (IsGridSpec<std::decay_t<O>>::value) {
    return o.options;
  } else {
    return std::tuple<std::decay_t<O>>(std::forward<O>(o));
  }
}

/// pallas_call's options, a grid spec's unpacked in its place (detail/options.h).
struct PallasCallOptions {
  template <class O>
  static constexpr bool accepts =
      detail::is_out_type_v<O> || detail::is_scratch_types_v<O> || IsIn<O>::value ||
      IsOut<O>::value || std::is_same_v<O, pltpu::Grid> ||
      std::is_same_v<O, pltpu::CompilerParams> || std::is_same_v<O, pltpu::TensorCoreMesh> ||
      std::is_same_v<O, InputOutputAliases> || std::is_same_v<O, Name> ||
      std::is_same_v<O, pltpu::InterpretParams>;
  template <class O>
  static constexpr void reject() {
    static_assert(sizeof(O) == 0,
                  "tessera: pallas_call options are pl::out_shape, pl::grid, pl::in_specs, "
                  "pl::out_specs, pl::scratch_shapes, pl::input_output_aliases, "
                  "pltpu::PrefetchScalarGridSpec, pltpu::CompilerParams, pltpu::TensorCoreMesh, "
                  "pl::name and pltpu::InterpretParams");
  }
};

template <int NP, class Body, class... Opts>
auto make_pallas_call(Body&& body, Opts&&... opts) {
  static_assert(detail::check_options<PallasCallOptions, std::decay_t<Opts>...>());
  using Out = typename detail::FindType<detail::IsOutType, OutType<>, std::decay_t<Opts>...>::type;
  using Scr = typename detail::FindType<detail::IsScratchTypes, ScratchTypes<>,
                                        std::decay_t<Opts>...>::type;
  using In = typename detail::FindType<IsIn, detail::NoSpecs, std::decay_t<Opts>...>::type;
  using OutS = typename detail::FindType<IsOut, detail::NoSpecs, std::decay_t<Opts>...>::type;
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
  InputOutputAliases aliases;
  std::string name;
  std::optional<pltpu::InterpretParams> interpret;
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
        else if constexpr (std::is_same_v<O, InputOutputAliases>)
          aliases = o;
        else if constexpr (std::is_same_v<O, Name>)
          name = o.value;
        else if constexpr (std::is_same_v<O, pltpu::InterpretParams>)
          interpret = o;
      }(std::forward<Opts>(opts)),
      ...);
  if (where.line() == 0) where = out.where;  // no grid: errors point at pl::out_shape
  if (name.empty()) name = detail::default_kernel_name(where);
  return PallasCall<std::decay_t<Body>, NP, Out, Scr, In, OutS>(
      std::forward<Body>(body), std::move(out), std::move(scratch), std::move(in), std::move(outs),
      std::move(grid), std::move(params), std::move(mesh), std::move(aliases), std::move(name),
      where, std::move(interpret));
}
}  // namespace detail_pallas

/// `pl.pallas_call(body, out_shape=..., grid=..., in_specs=..., out_specs=...,
/// scratch_shapes=..., input_output_aliases=..., compiler_params=..., name=...)`, options in any
/// order (see the file comment); `pltpu::PrefetchScalarGridSpec<n>(...)` may stand for the grid
/// options. The result is called with the input Arrays (the scalar-prefetch ones first).
template <class Body, class... Opts>
auto pallas_call(Body&& body, Opts&&... opts) {
  constexpr int kGridSpecs =
      (0 + ... + (detail_pallas::IsGridSpec<std::decay_t<Opts>>::value ? 1 : 0));
  static_assert(kGridSpecs <= 1, "tessera: pallas_call takes at most one grid spec");
  constexpr int NP = (0 + ... + detail_pallas::num_prefetch_of<std::decay_t<Opts>>);
  return std::apply(
      [&](auto&&... o) {
        return detail_pallas::make_pallas_call<NP>(std::forward<Body>(body),
                                                   std::forward<decltype(o)>(o)...);
      },
      std::tuple_cat(detail_pallas::flatten(std::forward<Opts>(opts))...));
}

}  // namespace pl

namespace pltpu {
/// `pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=NP, grid=..., in_specs=..., out_specs=...,
/// scratch_shapes=...)`: the first NP arguments of the call are copied into SMEM on every core
/// before the grid runs; their SMEM refs are passed to every index map after the grid indices
/// and to the body before the input refs.
///
///   auto f = pl::pallas_call(
///       [](pltpu::SmemRef<int32_t> s, pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
///         o = x;
///       },
///       pl::out_shape<float>({64, 128}),
///       pltpu::PrefetchScalarGridSpec<1>(
///           pl::grid({8}),
///           pl::in_specs(pl::BlockSpec({8, 128}, [](int i, pltpu::SmemRef<int32_t> s) {
///             return pl::idx(s(i), 0); })),
///           pl::out_specs(pl::BlockSpec({8, 128}, [](int i, pltpu::SmemRef<int32_t>) {
///             return pl::idx(i, 0); }))));
///   Array<float> o = f(s, x);   // s: Array<int32_t>({8})
template <int NP, class... Opts>
pl::GridSpec<NP, std::decay_t<Opts>...> PrefetchScalarGridSpec(Opts&&... opts) {
  static_assert(NP >= 0, "tessera: num_scalar_prefetch must be >= 0");
  return {std::tuple<std::decay_t<Opts>...>(std::forward<Opts>(opts)...)};
}
}  // namespace pltpu
}  // namespace tessera
