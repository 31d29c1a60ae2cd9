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
//   pl::out_shape<T>(shape) / pl::out_shape(ShapeDtypeStruct<T>{...}, ...)   outputs (none:
//                                  the call returns nothing); pltpu::VMEM<T>(shape),
//                                  pltpu::SMEM<T>(shape) and pltpu::SemaphoreType::DMA outputs
//                                  stay for the next call (resident.h)
//   pl::grid({...})                grid (default: one invocation); pl::grid({{"i", 4}}) named
//   pl::in_specs(...), pl::out_specs(...)   BlockSpecs (default: whole arrays)
//   pl::scratch_shapes(pltpu::VMEM<float>({8, 128}), ...)   scratch, kept across the grid
//   pltpu::CompilerParams{.dimension_semantics = {...}, .vmem_limit_bytes = ...}
//   pltpu::TensorCoreMesh("core", n)        the cores (default: this machine's)
//   pl::name("add")
//
// The call takes the scalar-prefetch operands (an Array, or a std::tuple of Arrays: a grouped
// operand), then the inputs (an Array, a VmemArray or SmemArray, a std::optional<Array> or
// std::nullopt for an operand that may be absent, a SemaphoreArray). The body gets the SMEM refs
// of the prefetch operands (a std::tuple of them for a group), one ref per input block (a
// std::optional ref for an optional input), per output block, then the scratch refs. The grid
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
#include "tessera/detail/pallas_args.h"
#include "tessera/dma.h"
#include "tessera/kernel.h"
#include "tessera/pipeline.h"
#include "tessera/resident.h"
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
/// Several outputs, or one described by a value: ShapeDtypeStruct<T>{shape} (an array),
/// pltpu::VMEM<T>(shape) (a VMEM array, pltpu::VmemArray<T>), pltpu::SMEM<T>(shape) (an SMEM
/// array, one copy per core, pltpu::SmemArray<T>), pltpu::SemaphoreType::DMA or
/// ::DMA({n}) (semaphores, pltpu::SemaphoreArray; tessera/resident.h). No outputs:
/// `pl::out_shape()`, or leave out_shape out.
template <class... O>
requires(detail::OutItem<O>::ok&&...) OutType<typename detail::OutItem<O>::param...> out_shape(
    const O&... o) {
  // The first item that knows where it was made locates the call's errors (when pl::grid does
  // not): pltpu::VMEM<T>(shape) and SemaphoreType::DMA({n}) do, a ShapeDtypeStruct does not.
  std::source_location where{};
  ((where = where.line() != 0 ? where : detail::OutItem<O>::where(o)), ...);
  return {{detail::OutItem<O>::store(o)...}, where};
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

/// One array operand of a pallas_call (an input or output the grid walks), as its template knows
/// it: `index` is its position for input_output_aliases (inputs: among the call's input leaves,
/// scalar prefetch first; outputs: among the outputs); `source` where its array lives (HBM, or
/// VMEM or SMEM for a VmemArray / SmemArray / such an output); `data` the caller's array
/// (outputs: the fresh one).
struct PallasOperand {
  DType dtype;
  Shape shape;
  const pl::BlockSpec* spec;
  bool is_output;
  bool read_only;        // an input the body takes as a ref to const elements
  MemorySpace declared;  // where the body's parameter lives (ANY: it takes the HBM ref)
  MemorySpace source = MemorySpace::HBM;
  const void* data = nullptr;
  int index = 0;
  int position = 0;  // among the call's input arguments (after the prefetch), or its outputs
  /// An SMEM array: every core's copy (core c's at [c], [0] is `data`); empty: one array that
  /// every core shares.
  std::vector<const void*> copies = {};
};
/// One scalar-prefetch array (copied into SMEM on every core before the grid runs); `group` is
/// the call argument it belongs to (a grouped operand, a std::tuple of arrays, has several).
struct PallasPrefetch {
  DType dtype;
  Shape shape;
  int group = 0;
  const void* data = nullptr;
};
/// A semaphore operand (a SemaphoreArray input, or a semaphore output): its counts live on core
/// 0 for the call, starting from and returning to `state`.
struct PallasSemaphore {
  SemaphoreKind kind;
  Shape shape;
  SemaphoreState* state;
  const pl::BlockSpec* spec;
  bool is_output;
  int index = 0;
};
/// Everything about a pallas_call but its operands' data and its body.
struct PallasCallSpec {
  std::string name;
  std::source_location where;
  Shape grid;
  std::vector<std::string> grid_names;  // a named grid's axis names (empty: none)
  pltpu::CompilerParams params;
  std::optional<pltpu::TensorCoreMesh> mesh;
  std::vector<std::pair<int, int>> aliases;  // (input, output); inputs count the prefetch first
  std::optional<pltpu::InterpretParams> interpret;
  std::vector<ScratchRequest> scratch;  // the user's scratch
};
/// The number of cores a pallas_call runs on: its mesh's, else the checked chip's TensorCores
/// (at most this machine's cores), else this machine's cores.
int pallas_call_num_cores(const PallasCallSpec& call);
/// Runs a pallas_call (src/runtime/pallas_call.cc): validates it before launch (UsageError),
/// launches, and calls `body` at every grid step of every core. The operands' `data` are the
/// caller's arrays, the outputs' the fresh arrays the call fills.
void run_pallas_call(const PallasCallSpec& call, const std::vector<PallasPrefetch>& prefetch,
                     const std::vector<PallasOperand>& operands,
                     const std::vector<PallasSemaphore>& semaphores,
                     FunctionRef<void(const PallasStep&)> body);

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
             OutS out_specs, pltpu::Grid grid, pltpu::CompilerParams params,
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
              std::move(grid.dims),
              std::move(grid.names),
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
    std::apply([&](const auto&... o) { (check_output(o), ...); }, out_.outs);
  }

  /// Runs the grid over `args` (the NP scalar-prefetch operands, then the inputs) and returns
  /// the output(s), as pl::kernel does. An argument is an Array (or a VmemArray or SmemArray), for
  /// a scalar-prefetch operand also a std::tuple of Arrays, for an input also a
  /// std::optional<Array> or std::nullopt (no operand, Pallas' None) or a SemaphoreArray.
  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert(sizeof...(Args) >= static_cast<size_t>(NP),
                  "tessera: a pallas_call with PrefetchScalarGridSpec<n> takes the n "
                  "scalar-prefetch arrays first, then its inputs");
    return call(std::index_sequence_for<Args...>{}, std::index_sequence_for<Outs...>{},
                std::index_sequence_for<Scrs...>{}, args...);
  }

 private:
  static constexpr size_t NO = sizeof...(Outs);
  template <class A>
  using Arg = detail::PallasArg<A>;

  template <class S>
  void check_output(const S& o) const {
    if constexpr (requires { typename S::value_type; }) {
      detail::check_shape(o.shape, int64_t{sizeof(typename S::value_type)}, "pallas_call",
                          "a pallas_call output", spec_.where);
    }
  }

  // The parameter the body gets for argument K of type A, and for output O.
  template <size_t K, class A>
  static constexpr auto arg_param() {
    if constexpr (K < static_cast<size_t>(NP)) {
      static_assert(Arg<A>::prefetch,
                    "tessera: a scalar-prefetch operand is an Array or a std::tuple of Arrays");
      return std::type_identity<typename Arg<A>::prefetch_param>{};
    } else {
      static_assert(Arg<A>::input,
                    "tessera: a pallas_call input is an Array, a VmemArray, an SmemArray, a "
                    "std::optional<Array> or std::nullopt (no operand), or a SemaphoreArray");
      return std::type_identity<typename Arg<A>::template param<Body, K>>{};
    }
  }
  template <size_t K, class O>
  static constexpr auto out_param() {
    return std::type_identity<typename detail::PallasOut<O>::template param<Body, K>>{};
  }

  // The body's argument K at a step.
  template <size_t K, class A>
  auto make_arg(const detail::PallasStep& s, const detail::PallasSlot& slot, const A& a) const {
    if constexpr (K < static_cast<size_t>(NP)) {
      return Arg<A>::make_prefetch(s, slot.leaf);
    } else if constexpr (detail::is_semaphore_arg_v<A>) {
      return pltpu::BasicSemaphoreRef<A::kind>(s.semaphores[slot.semaphore], a.shape());
    } else {
      return Arg<A>::template make<Body, K>(s, slot);
    }
  }
  template <size_t K, size_t O>
  auto make_out(const detail::PallasStep& s, const detail::PallasSlot& slot) const {
    using Ot = std::tuple_element_t<O, std::tuple<Outs...>>;
    if constexpr (detail::is_semaphore_out_v<Ot>) {
      return pltpu::BasicSemaphoreRef<Ot::kind>(s.semaphores[slot.semaphore],
                                                std::get<O>(out_.outs).shape);
    } else {
      return detail::PallasOut<Ot>::template make<Body, K>(s, slot);
    }
  }

  // The call's operands, prefetch arrays and semaphores, and where each argument and output is.
  struct Plan {
    std::vector<detail::PallasPrefetch> prefetch;
    std::vector<detail::PallasOperand> operands;
    std::vector<detail::PallasSemaphore> semaphores;
    std::vector<detail::PallasSlot> slots;  // per argument, then per output
    int input_leaves = 0;                   // the alias index of the next input
  };
  template <size_t K, class A>
  void plan_arg(Plan& p, const A& a, const pl::BlockSpec* spec) const {
    detail::PallasSlot& slot = p.slots[K];
    if constexpr (K < static_cast<size_t>(NP)) {
      slot.leaf = static_cast<int>(p.prefetch.size());
      if constexpr (requires { a.shape(); }) {
        p.prefetch.push_back(
            detail::PallasPrefetch{A::dtype(), a.shape(), static_cast<int>(K), a.data()});
      } else {
        const auto add = [&](const auto& e) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(e)>, std::nullopt_t>) {
            p.prefetch.push_back(
                detail::PallasPrefetch{e.dtype(), e.shape(), static_cast<int>(K), e.data()});
          }
        };
        std::apply([&](const auto&... e) { (add(e), ...); }, a);
      }
      p.input_leaves += Arg<A>::leaves;
    } else if constexpr (detail::is_semaphore_arg_v<A>) {
      slot.semaphore = static_cast<int>(p.semaphores.size());
      p.semaphores.push_back(
          detail::PallasSemaphore{A::kind, a.shape(), &a.state(), spec, false, p.input_leaves++});
    } else if constexpr (!std::is_same_v<A, std::nullopt_t>) {
      if (const auto* arr = Arg<A>::array(a)) {
        using T = typename std::decay_t<decltype(*arr)>::value_type;
        slot.operand = static_cast<int>(p.operands.size());
        p.operands.push_back(detail::PallasOperand{
            dtype_of<T>, arr->shape(), spec, false, detail::param_is_const_ref<Body, K>(),
            detail::declared_space<Body, K>(), Arg<A>::source, arr->data(), p.input_leaves++,
            static_cast<int>(K) - NP, detail::core_copies(a, spec_.where)});
      }
    }
  }
  template <size_t K, size_t O, class R>
  void plan_out(Plan& p, R& result, const pl::BlockSpec* spec) const {
    using Ot = std::tuple_element_t<O, std::tuple<Outs...>>;
    detail::PallasSlot& slot = p.slots[K];
    if constexpr (detail::is_semaphore_out_v<Ot>) {
      slot.semaphore = static_cast<int>(p.semaphores.size());
      p.semaphores.push_back(detail::PallasSemaphore{R::kind, result.shape(), &result.state(), spec,
                                                     true, static_cast<int>(O)});
    } else {
      using T = typename R::value_type;
      slot.operand = static_cast<int>(p.operands.size());
      p.operands.push_back(detail::PallasOperand{
          dtype_of<T>, result.shape(), spec, true, false, detail::declared_space<Body, K>(),
          detail::PallasOut<Ot>::source, result.data(), static_cast<int>(O), static_cast<int>(O),
          detail::core_copies(result, spec_.where)});
    }
  }

  template <size_t O>
  auto make_result() const {
    using Ot = std::tuple_element_t<O, std::tuple<Outs...>>;
    using R = typename detail::OutResult<Ot>::type;
    const auto& d = std::get<O>(out_.outs);
    if constexpr (detail::is_semaphore_out_v<Ot>) {
      return R(d.shape);
    } else if constexpr (std::is_same_v<Ot, detail::SmemOut<typename R::value_type>>) {
      // One copy per core: each core has its own SMEM.
      return R(detail::Uninitialized{}, d.shape, detail::pallas_call_num_cores(spec_), spec_.where,
               "a pallas_call output");
    } else {
      return R(detail::Uninitialized{}, d.shape, spec_.where, "a pallas_call output");
    }
  }

  // I: argument positions (scalar prefetch first), O: outputs, S: user scratch.
  template <size_t... I, size_t... O, size_t... S, class... Args>
  auto call(std::index_sequence<I...>, std::index_sequence<O...>, std::index_sequence<S...>,
            const Args&... args) const {
    constexpr size_t NA = sizeof...(Args);
    constexpr size_t NI = NA - static_cast<size_t>(NP);
    using ArgT = std::tuple<Args...>;
    constexpr bool body_fits = detail::check_pallas_body<
        Body, typename decltype(arg_param<I, std::tuple_element_t<I, ArgT>>())::type...,
        typename decltype(out_param<NA + O, Outs>())::type..., typename Scrs::ref_type...>();
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
      // The specs of the inputs (after the prefetch), then of the outputs: this call's own, which
      // the cores read at every call. Not copies: a copy is made anew by every call, and the
      // other cores' first reads of it then miss in their caches.
      static const BlockSpec whole;  // no specs given: the whole array
      std::array<const BlockSpec*, NI + NO + 1> specs;
      specs.fill(&whole);
      if constexpr (!std::is_same_v<In, detail::NoSpecs>) {
        for (size_t k = 0; k < NI; ++k) specs[k] = &in_specs_.specs[k];
      }
      if constexpr (!std::is_same_v<OutS, detail::NoSpecs>) {
        for (size_t k = 0; k < NO; ++k) specs[NI + k] = &out_specs_.specs[k];
      }
      auto spec_of = [&](size_t k) {
        return k < static_cast<size_t>(NP) ? nullptr : specs[k - static_cast<size_t>(NP)];
      };
      std::tuple<typename detail::OutResult<Outs>::type...> outs{make_result<O>()...};
      Plan plan;
      plan.slots.resize(NA + NO);
      (plan_arg<I>(plan, args, spec_of(I)), ...);
      (plan_out<NA + O, O>(plan, std::get<O>(outs), specs[NI + O]), ...);
      const auto argv = std::forward_as_tuple(args...);
      static_cast<void>(argv);  // unused when there are no arguments
      auto step = [&](const detail::PallasStep& s) {
        body_(make_arg<I>(s, plan.slots[I], std::get<I>(argv))...,
              make_out<NA + O, O>(s, plan.slots[NA + O])...,
              std::get<S>(scratch_.items).make_ref(s.scratch[S])...);
      };
      detail::run_pallas_call(spec_, plan.prefetch, plan.operands, plan.semaphores, step);
      return finish(std::move(outs));
    }
  }

  template <class... R>
  static auto finish(std::tuple<R...>&& outs) {
    if constexpr (sizeof...(R) == 0) {
      return;
    } else if constexpr (sizeof...(R) == 1) {
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
  Out out{};
  Scr scratch{};
  In in{};
  OutS outs{};
  pltpu::Grid grid{};
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
          grid = o;
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
  if (where.line() == 0) where = out.where;              // no grid: errors point at pl::out_shape
  if (where.line() == 0 && mesh) where = mesh->where();  // nor out_shape: at the mesh
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
