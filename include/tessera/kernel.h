// File: tessera/kernel.h
//
// `pl::kernel`: turn a body into a function that runs on every core of a
// mesh, callable with `Array`s — Pallas' `@pl.kernel(out_type=..., mesh=...,
// scratch_types=...)`. Options are typed values, in any order:
//
//   pl::out_type<float>({128})                   one output, float32 (128,)
//   pl::out_type(ShapeDtypeStruct<float>{{8}}, ShapeDtypeStruct<int32_t>{{4}})   two outputs
//   pltpu::TensorCoreMesh("core"[, n])          the mesh (required)
//   pl::scratch_types(pltpu::VMEM<float>({128}), ...)   per-core scratch, in order
//   pl::name("fill_42")                          the kernel's name in errors and traces
//   pltpu::CompilerParams{.vmem_limit_bytes = 32 << 20}
//
//   auto fill_42 = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core"),
//                             pl::scratch_types(pltpu::VMEM<float>({128})))(
//       [](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
//         o_vmem = jnp::full_like(o_vmem, 42.0f);
//         pltpu::sync_copy(o_vmem, o_ref);
//       });
//   Array<float> result = fill_42();
//
// The body receives, in Pallas' order: one read-only HBM ref per input
// (`pltpu::HbmRef<const T>`, or `AnyRef<const T>`), one HBM ref per output
// (`pltpu::HbmRef<T>`), then one ref per scratch type. Calling the kernel
// allocates the outputs (their contents start unspecified, as on a TPU), runs
// the body on every core concurrently and returns the output(s): one `Array`,
// a `std::tuple` of them, or nothing.
//
// Errors: a body whose parameters do not fit fails to compile with a message
// naming the position; scratch over the VMEM/SMEM capacity throws UsageError
// before any core runs; an exception in any core's body is rethrown on the
// caller's thread after every core has stopped, and no output is returned.
// Thread safety: kernels may be called from several host threads at once
// (launches are serialised on the core pool); a kernel body must not launch a
// kernel.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tessera/array.h"
#include "tessera/compiler_params.h"
#include "tessera/detail/callable_traits.h"
#include "tessera/detail/options.h"
#include "tessera/detail/runtime.h"
#include "tessera/interpret.h"
#include "tessera/mesh.h"
#include "tessera/ref.h"
#include "tessera/scratch.h"

namespace tessera {
namespace detail {
/// How an output is described: ShapeDtypeStruct<T> for an array of T; pallas_call's VMEM and
/// semaphore outputs specialise it (tessera/resident.h).
template <class T>
struct OutStorage {
  using type = ShapeDtypeStruct<T>;
};
}  // namespace detail

namespace pl {

/// The outputs of a kernel: shapes and dtypes (`out_type=` in Pallas).
template <class... Ts>
struct OutType {
  std::tuple<typename detail::OutStorage<Ts>::type...> outs;
  std::source_location where = {};  // where it was made (one-output form)
};
/// One output of dtype T and `shape`.
template <class T>
OutType<T> out_type(Shape shape, std::source_location where = std::source_location::current()) {
  detail::check_scratch_shape(shape, int64_t{sizeof(T)}, MemorySpace::HBM, where);
  return {{ShapeDtypeStruct<T>{std::move(shape)}}, where};
}
/// The same from braces: `out_type<float>({8, 128})`, and `out_type<float>({})` for a scalar.
template <class T>
OutType<T> out_type(std::initializer_list<int64_t> dims,
                    std::source_location where = std::source_location::current()) {
  return out_type<T>(Shape(dims), where);
}
/// Several outputs, in order.
template <class T0, class... Ts>
OutType<T0, Ts...> out_type(const ShapeDtypeStruct<T0>& first,
                            const ShapeDtypeStruct<Ts>&... rest) {
  return {{first, rest...}, {}};
}

/// The per-core scratch buffers (`scratch_types=` in Pallas), passed to the body in order.
template <class... S>
struct ScratchTypes {
  std::tuple<S...> items;
};
template <class... S>
requires(is_scratch_type_v<S>&&...) ScratchTypes<S...> scratch_types(S... s) {
  return {{std::move(s)...}};
}

/// The kernel's name, shown in errors and traces (`name=` in Pallas).
struct Name {
  std::string value;
};
inline Name name(std::string n) { return Name{std::move(n)}; }

}  // namespace pl

namespace detail {

template <class T>
inline constexpr bool is_out_type_v = false;
template <class... Ts>
inline constexpr bool is_out_type_v<pl::OutType<Ts...>> = true;
template <class T>
inline constexpr bool is_scratch_types_v = false;
template <class... S>
inline constexpr bool is_scratch_types_v<pl::ScratchTypes<S...>> = true;

/// pl::kernel's options (detail/options.h).
struct KernelOptions {
  template <class T>
  static constexpr bool accepts =
      is_out_type_v<T> || is_scratch_types_v<T> || std::is_same_v<T, pltpu::TensorCoreMesh> ||
      std::is_same_v<T, pl::Name> || std::is_same_v<T, pltpu::CompilerParams> ||
      std::is_same_v<T, pltpu::InterpretParams>;
  template <class T>
  static constexpr void reject() {
    static_assert(sizeof(T) == 0,
                  "tessera: pl::kernel options are pl::out_type(...), a pltpu::TensorCoreMesh, "
                  "pl::scratch_types(...), pl::name(...), pltpu::CompilerParams{...} and "
                  "pltpu::InterpretParams{...}");
  }
};

/// The first type in Ts that satisfies Pred, else Default.
template <template <class> class Pred, class Default, class... Ts>
struct FindType {
  using type = Default;
};
template <template <class> class Pred, class Default, class T, class... Ts>
struct FindType<Pred, Default, T, Ts...> {
  using type = std::conditional_t<Pred<T>::value, T, typename FindType<Pred, Default, Ts...>::type>;
};
template <class T>
struct IsOutType : std::bool_constant<is_out_type_v<T>> {};
template <class T>
struct IsScratchTypes : std::bool_constant<is_scratch_types_v<T>> {};

// ---- body signature diagnostics ------------------------------------------------------------
/// The declared type of parameter `K` of `Body`, without reference or cv; void when the body is
/// generic or has fewer parameters.
template <class Body, size_t K, class Sig = CallableTraits<Body>>
struct BodyParam {
  using type = void;
};
template <class Body, size_t K, class Sig>
requires(Sig::known&& K < std::tuple_size_v<typename Sig::params>) struct BodyParam<Body, K, Sig> {
  using type = std::remove_cvref_t<std::tuple_element_t<K, typename Sig::params>>;
};

/// Instantiated once per body parameter; its name in a compiler error shows the position, the
/// ref type Tessera passes and the parameter type the body declared.
template <size_t Position, class Passed, class Declared>
struct KernelBodyParameter {
  static constexpr bool ok = std::is_convertible_v<Passed, Declared>;
  static_assert(ok,
                "tessera: kernel body parameter does not accept the ref Tessera passes at this "
                "position (see KernelBodyParameter<position, passed, declared> above); "
                "pl::kernel passes inputs as HbmRef<const T>, then outputs as HbmRef<T>, then "
                "scratch refs; pl::pallas_call passes the scalar-prefetch SmemRefs, then the "
                "input and output blocks (VmemRef, SmemRef, or the HBM ref of a pl::ANY "
                "BlockSpec), then scratch refs");
};

template <class Declared, class Passed, size_t... I>
constexpr bool check_params(std::index_sequence<I...>) {
  return (KernelBodyParameter<I, std::tuple_element_t<I, Passed>,
                              std::tuple_element_t<I, Declared>>::ok &&
          ...);
}

/// A body's results are its output refs: a body that returns a value (Pallas raises "should
/// return None") is refused, so a value computed and returned instead of stored is not lost.
template <class Body, class... Passed>
constexpr void check_body_returns_nothing() {
  if constexpr (std::is_invocable_v<const Body&, Passed...>) {
    static_assert(std::is_void_v<std::invoke_result_t<const Body&, Passed...>>,
                  "tessera: the kernel body returns a value; a kernel's results are what it "
                  "writes to its output refs, so its body returns nothing (assign the value to "
                  "an output ref instead, e.g. o[pl::ellipsis] = value)");
  }
}

template <class Body, class... Passed>
constexpr bool check_body() {
  check_body_returns_nothing<Body, Passed...>();
  using Sig = CallableTraits<Body>;
  if constexpr (Sig::known) {
    static_assert(!Sig::mutable_call,
                  "tessera: the kernel body is a mutable lambda; it runs on every core at once, "
                  "so state it changes would be shared between cores (a data race): keep "
                  "per-core state in scratch refs, and drop `mutable`");
    using Declared = typename Sig::params;
    constexpr size_t n = std::tuple_size_v<Declared>;
    static_assert(n == sizeof...(Passed),
                  "tessera: the kernel body takes a different number of parameters than "
                  "inputs + outputs + scratch buffers; it is called as body(input refs..., "
                  "output refs..., scratch refs...)");
    if constexpr (n == sizeof...(Passed)) {
      return check_params<Declared, std::tuple<Passed...>>(std::make_index_sequence<n>{});
    }
    return false;
  } else {
    static_assert(std::is_invocable_v<const Body&, Passed...>,
                  "tessera: the kernel body cannot be called as body(input refs..., output "
                  "refs..., scratch refs...) with the refs Tessera passes");
    return true;
  }
}

/// The same check for a pallas_call's body, called as body(scalar-prefetch SMEM refs..., input
/// blocks..., output blocks..., scratch refs...).
template <class Body, class... Passed>
constexpr bool check_pallas_body() {
  check_body_returns_nothing<Body, Passed...>();
  using Sig = CallableTraits<Body>;
  if constexpr (Sig::known) {
    static_assert(!Sig::mutable_call,
                  "tessera: the pallas_call body is a mutable lambda; it runs on every core at "
                  "once, so state it changes would be shared between cores (a data race): keep "
                  "per-core state in scratch refs, and drop `mutable`");
    using Declared = typename Sig::params;
    constexpr size_t n = std::tuple_size_v<Declared>;
    static_assert(n == sizeof...(Passed),
                  "tessera: the pallas_call body takes a different number of parameters than "
                  "scalar-prefetch operands + inputs + outputs + scratch buffers; it is called as "
                  "body(scalar-prefetch SMEM refs..., input refs..., output refs..., scratch "
                  "refs...)");
    if constexpr (n == sizeof...(Passed)) {
      return check_params<Declared, std::tuple<Passed...>>(std::make_index_sequence<n>{});
    }
    return false;
  } else {
    static_assert(std::is_invocable_v<const Body&, Passed...>,
                  "tessera: the pallas_call body cannot be called as body(scalar-prefetch SMEM "
                  "refs..., input refs..., output refs..., scratch refs...) with the refs "
                  "Tessera passes");
    return true;
  }
}

std::string default_kernel_name(std::source_location where);

}  // namespace detail

namespace pl {

/// A kernel ready to call: the body plus its options. Made by `pl::kernel(...)(body)`.
template <class Body, class Out, class Scr>
class Kernel;

template <class Body, class... Outs, class... Scrs>
class Kernel<Body, OutType<Outs...>, ScratchTypes<Scrs...>> {
 public:
  Kernel(Body body, OutType<Outs...> out, ScratchTypes<Scrs...> scratch, pltpu::TensorCoreMesh mesh,
         std::string name, pltpu::CompilerParams params, std::source_location where,
         std::optional<pltpu::InterpretParams> interpret = std::nullopt)
      : body_(std::move(body)), out_(std::move(out)), scratch_(std::move(scratch)) {
    spec_.name = std::move(name);
    spec_.axis_name = mesh.axis_name();
    spec_.num_cores = mesh.num_cores();
    spec_.vmem_limit_bytes = params.vmem_limit_bytes.value_or(0);
    spec_.wait_timeout_ms = params.wait_timeout_ms.value_or(0);
    spec_.collective_id = params.collective_id.value_or(-1);
    spec_.skip_device_barrier = params.skip_device_barrier;
    spec_.where = where;
    spec_.interpret = std::move(interpret);
    // Outputs given as ShapeDtypeStructs have no line of their own: they are checked here.
    std::apply(
        [&](const auto&... o) {
          (detail::check_shape(o.shape,
                               int64_t{sizeof(typename std::decay_t<decltype(o)>::value_type)},
                               "pl::kernel", "a kernel output", where),
           ...);
        },
        out_.outs);
    spec_.scratch = std::apply(
        [](const auto&... s) { return std::vector<detail::ScratchRequest>{s.request()...}; },
        scratch_.items);
    detail::prepare_launch(spec_);
  }

  static_assert((is_element_type_v<Outs> && ...),
                "tessera: pl::kernel outputs are arrays (pl::out_type); VMEM, SMEM and "
                "semaphore outputs are for pl::pallas_call");

  /// Runs the kernel on every core and returns its outputs (see the file comment).
  template <class... Ins>
  auto operator()(const Array<Ins>&... ins) const {
    static_assert(detail::check_body<Body, pltpu::HbmRef<const Ins>..., pltpu::HbmRef<Outs>...,
                                     typename Scrs::ref_type...>(),
                  "tessera: kernel body signature mismatch");
    std::tuple<Array<Outs>...> outs = make_outputs(std::index_sequence_for<Outs...>{});
    run(outs, std::index_sequence_for<Outs...>{}, std::index_sequence_for<Scrs...>{}, ins...);
    if constexpr (sizeof...(Outs) == 0) {
      return;
    } else if constexpr (sizeof...(Outs) == 1) {
      return std::move(std::get<0>(outs));
    } else {
      return outs;
    }
  }

  /// Runs the kernel into outputs the caller made, reading each input from `ins` (anything with
  /// `value_type`, `data()` and `shape()`, such as an Array). For pallas_call's aliasing.
  template <class... In>
  void run_into(std::tuple<Array<Outs>...>& outs, const In&... ins) const {
    run(outs, std::index_sequence_for<Outs...>{}, std::index_sequence_for<Scrs...>{}, ins...);
  }

  /// The kernel's name (`pl::name`, or "kernel@file:line").
  const std::string& name() const noexcept { return spec_.name; }
  /// The number of cores it runs on.
  int num_cores() const noexcept { return spec_.num_cores; }

 private:
  // Outputs are indexed by position: several may share a dtype.
  template <size_t... O>
  std::tuple<Array<Outs>...> make_outputs(std::index_sequence<O...>) const {
    return std::tuple<Array<Outs>...>{Array<Outs>(
        detail::Uninitialized{}, std::get<O>(out_.outs).shape, spec_.where, "a kernel output")...};
  }

  template <size_t... O, size_t... S, class... Ins>
  void run(std::tuple<Array<Outs>...>& outs, std::index_sequence<O...>, std::index_sequence<S...>,
           const Ins&... ins) const {
    // What the cores read: output pointers copied into the closure, shapes from this kernel
    // (not from the freshly written `outs`), so a core starts with few cache-line transfers.
    void* const out_data[sizeof...(Outs) + 1] = {static_cast<void*>(std::get<O>(outs).data())...,
                                                 nullptr};
    static_cast<void>(out_data);
    auto per_core = [this, out_data, &ins...](int /*core*/, void* const* scratch_ptrs) {
      static_cast<void>(scratch_ptrs);
      body_(pltpu::HbmRef<const typename Ins::value_type>(ins.data(), ins.shape())...,
            pltpu::HbmRef<Outs>(static_cast<Outs*>(out_data[O]), std::get<O>(out_.outs).shape)...,
            std::get<S>(scratch_.items).make_ref(scratch_ptrs[S])...);
    };
    // The arrays, for an engine that keeps books of them (the checked engine's shadow state).
    auto buffers = [&](std::vector<detail::LaunchBuffer>& out) {
      (out.push_back(detail::LaunchBuffer{
           ins.data(), ins.shape().size() * int64_t{sizeof(typename Ins::value_type)},
           dtype_of<typename Ins::value_type>, ins.shape(), false, 0}),
       ...);
      (out.push_back(detail::LaunchBuffer{
           out_data[O], std::get<O>(out_.outs).shape.size() * int64_t{sizeof(Outs)}, dtype_of<Outs>,
           std::get<O>(out_.outs).shape, true, static_cast<int>(O)}),
       ...);
    };
    detail::launch(spec_, per_core, buffers);
  }

  Body body_;
  OutType<Outs...> out_;
  ScratchTypes<Scrs...> scratch_;
  detail::LaunchSpec spec_;
};

/// The options of a kernel, waiting for its body: `pl::kernel(options...)(body)`.
template <class Out, class Scr>
class KernelBuilder {
 public:
  explicit KernelBuilder(pltpu::TensorCoreMesh mesh) : mesh_(std::move(mesh)) {}
  void set(Out o) { out_ = std::move(o); }
  void set(Scr s) { scratch_ = std::move(s); }
  void set(const pltpu::TensorCoreMesh& m) { mesh_ = m; }
  void set(Name n) { name_ = std::move(n.value); }
  void set(const pltpu::CompilerParams& p) { params_ = p; }
  void set(const pltpu::InterpretParams& p) { interpret_ = p; }

  /// Binds the body. `where` (the line of this call) is the kernel's location in errors.
  template <class Body>
  Kernel<std::decay_t<Body>, Out, Scr> operator()(
      Body&& body, std::source_location where = std::source_location::current()) const {
    return bind(std::forward<Body>(body), where);
  }
  /// The same for the body-first form, whose location is the mesh's (the call's own line
  /// cannot be captured after a pack of options).
  template <class Body>
  Kernel<std::decay_t<Body>, Out, Scr> bind_at_mesh(Body&& body) const {
    return bind(std::forward<Body>(body), mesh_.where());
  }

 private:
  template <class Body>
  Kernel<std::decay_t<Body>, Out, Scr> bind(Body&& body, std::source_location where) const {
    pltpu::check_compiler_params(params_, where);
    std::string nm = name_.empty() ? detail::default_kernel_name(where) : name_;
    return Kernel<std::decay_t<Body>, Out, Scr>(std::forward<Body>(body), out_, scratch_, mesh_,
                                                std::move(nm), params_, where, interpret_);
  }

  Out out_{};
  Scr scratch_{};
  pltpu::TensorCoreMesh mesh_;
  std::string name_;
  pltpu::CompilerParams params_{};
  std::optional<pltpu::InterpretParams> interpret_;
};

namespace detail_kernel {
template <class... Opts>
auto make_builder(Opts&&... opts);
}  // namespace detail_kernel

/// `pl.kernel(out_type=..., mesh=..., scratch_types=..., compiler_params=..., name=...)`: the
/// options, then `(body)` binds the body, as Pallas' decorator `@pl.kernel(...)` does.
///
/// `pl.kernel(body, out_type=..., mesh=...)`: the body first, then the options, gives the kernel
/// at once. Its location in errors is the mesh's (`pltpu::TensorCoreMesh("core")` on the same
/// statement), since a call cannot capture its own line after a pack of options.
template <class First, class... Opts>
auto kernel(First&& first, Opts&&... opts) {
  using F = std::decay_t<First>;
  if constexpr (!detail::KernelOptions::accepts<F> &&
                detail::count_v<pltpu::TensorCoreMesh, std::decay_t<Opts>...> == 1) {
    static_assert(std::is_class_v<F> || std::is_function_v<std::remove_pointer_t<F>>,
                  "tessera: pl::kernel(body, options...) takes the kernel body first: a lambda, "
                  "function object or function");
    return detail_kernel::make_builder(std::forward<Opts>(opts)...)
        .bind_at_mesh(std::forward<First>(first));
  } else {
    return detail_kernel::make_builder(std::forward<First>(first), std::forward<Opts>(opts)...);
  }
}

namespace detail_kernel {
template <class... Opts>
auto make_builder(Opts&&... opts) {
  static_assert(detail::check_options<detail::KernelOptions, std::decay_t<Opts>...>());
  static_assert(detail::count_v<pltpu::TensorCoreMesh, std::decay_t<Opts>...> == 1,
                "tessera: pl::kernel needs exactly one mesh, e.g. pltpu::TensorCoreMesh(\"core\")");
  using Out = typename detail::FindType<detail::IsOutType, OutType<>, std::decay_t<Opts>...>::type;
  using Scr = typename detail::FindType<detail::IsScratchTypes, ScratchTypes<>,
                                        std::decay_t<Opts>...>::type;
  const pltpu::TensorCoreMesh* mesh = nullptr;
  (
      [&](const auto& o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, pltpu::TensorCoreMesh>) mesh = &o;
      }(opts),
      ...);
  KernelBuilder<Out, Scr> b(*mesh);
  (b.set(std::forward<Opts>(opts)), ...);
  return b;
}
}  // namespace detail_kernel

}  // namespace pl
}  // namespace tessera
