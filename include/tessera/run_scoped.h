// File: tessera/run_scoped.h
//
// `pl::run_scoped(f, types...)`: buffers and semaphores that exist only while
// `f` runs — Pallas' `pl.run_scoped(f, *types)`. Each type (`pltpu::VMEM<T>(shape)`,
// `pltpu::SMEM<T>(shape)`, `pltpu::SemaphoreType::DMA`, `...::REGULAR({n})`, ...)
// is allocated on the calling core, above the kernel's scratch and any
// enclosing scope; `f` receives one ref per type, in order; run_scoped returns
// what `f` returns (scalars, or a `jnp::Value`, which keeps its own elements;
// not a lazy expression or a ref into the scope) and frees the buffers when `f`
// returns or throws.
//
//   Pallas                                          Tessera
//   def body(tmp, sem): ...                         pl::run_scoped(
//   pl.run_scoped(body,                                 [&](pltpu::VmemRef<float> tmp,
//                 pltpu.VMEM((8, 128), jnp.float32),        pltpu::DmaSemaphoreRef sem) {
//                 pltpu.SemaphoreType.DMA)                pltpu::async_copy(x_hbm, tmp,
//                 sem).wait();
//                                                         ...
//                                                       },
//                                                       pltpu::VMEM<float>({8, 128}),
//                                                       pltpu::SemaphoreType::DMA);
//
// Scopes nest; an inner scope's buffers lie above the outer one's. Buffers
// start uninitialised (as on a TPU); semaphores start at zero and must be zero
// again when the scope ends.
//
// Cores that make the same scopes in the same order get their scoped
// semaphores at the same slot, so one core may signal another's copy
// (`pl::core_index`, `pltpu::core_barrier`). Such a signal must arrive while
// the receiving core is still inside its scope: when every core enters a
// similar scope again (a loop), separate the rounds with a barrier on a
// kernel-scratch semaphore, or a fast core's next-round signal can reach a slow
// core's semaphore before that core's scope ends and fail its zero check.
//
// Errors (KernelError with the run_scoped call's line): outside a kernel,
// UsageError kOutsideKernel; buffers that do not fit what the kernel's scratch
// and the enclosing scopes leave of the VMEM budget (`vmem_limit_bytes`), of
// SMEM or of the core's semaphores, kCapacityExceeded naming the sizes; a
// scoped semaphore not zero when `f` returns, kSemaphoreLeak.
// Cost: a few additions per call; nothing is allocated from the heap.
#pragma once

#include <cstddef>
#include <functional>
#include <source_location>
#include <type_traits>
#include <utility>

#include "tessera/detail/runtime.h"
#include "tessera/scratch.h"
#include "tessera/value.h"

namespace tessera {
namespace detail {

/// The buffers of one run_scoped scope on the calling core (src/runtime/run_scoped.cc).
/// The constructor allocates `n` buffers (throwing before anything is allocated when they do
/// not fit) and writes their addresses to `ptrs`; `close()` checks that the scope's semaphores
/// are zero and frees the scope; the destructor frees it without checks if close() did not run
/// (f threw), zeroing its semaphores for any later scope on this core.
class ScopedScratch {
 public:
  ScopedScratch(const ScratchRequest* requests, int n, void** ptrs, std::source_location where);
  ~ScopedScratch();
  ScopedScratch(const ScopedScratch&) = delete;
  ScopedScratch& operator=(const ScopedScratch&) = delete;
  void close();
  /// Raises kInvalidArgument when `data` lies in a buffer of this scope (a Ref that f returns
  /// would outlive the memory it views).
  void check_escape(const void* data) const;

 private:
  void release(bool zero_semaphores) noexcept;

  std::source_location where_;
  // Where the core's stack stood before the scope (the runtime's stack mark, kept here as
  // plain words so that this header needs none of the runtime's types).
  int64_t saved_mark_[12] = {};
  size_t saved_scoped_ = 0;
  bool open_ = false;
};

template <class F, class... S, size_t... I>
std::invoke_result_t<F&, typename S::ref_type...> run_scoped_impl(std::source_location where, F& f,
                                                                  std::index_sequence<I...>,
                                                                  const S&... types) {
  using R = std::invoke_result_t<F&, typename S::ref_type...>;
  // A jnp::Value is computed when it is made and keeps its own elements (value.h), so it may
  // leave the scope; a lazy expression would read the scope's buffers after they are freed.
  static_assert(!is_expr_v<std::remove_cvref_t<R>> || is_value_v<std::remove_cvref_t<R>>,
                "tessera: the function passed to pl::run_scoped returns a lazy expression; it "
                "reads the scope's buffers when it is evaluated, after run_scoped has freed "
                "them: assign it to a ref inside the scope, or return a jnp::Value (computed "
                "inside the scope) or a scalar");
  static_assert(!is_element_ref_v<std::remove_cvref_t<R>>,
                "tessera: the function passed to pl::run_scoped returns an element of a ref "
                "(an ElementRef names the element, which may be in the scope's freed buffers): "
                "return its value, e.g. `T v = ref(i); return v;` or `return ref(i).get();`");
  const ScratchRequest requests[sizeof...(S) + 1] = {types.request()..., ScratchRequest{}};
  void* ptrs[sizeof...(S) + 1] = {};
  ScopedScratch scope(requests, static_cast<int>(sizeof...(S)), ptrs, where);
  if constexpr (std::is_void_v<R>) {
    std::invoke(f, types.make_ref(ptrs[I])...);
    scope.close();
  } else {
    R result = std::invoke(f, types.make_ref(ptrs[I])...);
    if constexpr (is_ref_v<std::remove_cvref_t<R>>) scope.check_escape(result.data());
    scope.close();
    return result;  // moved (or, for a reference, the same reference)
  }
}

}  // namespace detail

namespace pl {

/// `pl.run_scoped(f, *types)`: calls `f(refs...)` with one ref per scratch type, allocated on
/// the calling core for the duration of the call, and returns f's result (see the file
/// comment). Overloads take up to eight types, then an optional location.
template <class F>
decltype(auto) run_scoped(F&& f, std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence<>{});
}
template <class F, class A>
requires is_scratch_type_v<A>
decltype(auto) run_scoped(F&& f, const A& a,
                          std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A>{}, a);
}
template <class F, class A, class B>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B>{}, a, b);
}
template <class F, class A, class B, class C>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C>{}, a, b, c);
}
template <class F, class A, class B, class C, class D>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>&&
             is_scratch_type_v<D>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c, const D& d,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C, D>{}, a, b, c, d);
}
template <class F, class A, class B, class C, class D, class E>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>&& is_scratch_type_v<D>&&
             is_scratch_type_v<E>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c, const D& d, const E& e,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C, D, E>{}, a, b, c, d, e);
}
template <class F, class A, class B, class C, class D, class E, class G>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>&& is_scratch_type_v<D>&&
             is_scratch_type_v<E>&& is_scratch_type_v<G>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c, const D& d, const E& e, const G& g,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C, D, E, G>{}, a, b, c, d,
                                 e, g);
}
template <class F, class A, class B, class C, class D, class E, class G, class H>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>&& is_scratch_type_v<D>&&
             is_scratch_type_v<E>&& is_scratch_type_v<G>&& is_scratch_type_v<H>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c, const D& d, const E& e, const G& g,
               const H& h, std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C, D, E, G, H>{}, a, b, c,
                                 d, e, g, h);
}
template <class F, class A, class B, class C, class D, class E, class G, class H, class J>
requires(is_scratch_type_v<A>&& is_scratch_type_v<B>&& is_scratch_type_v<C>&& is_scratch_type_v<D>&&
             is_scratch_type_v<E>&& is_scratch_type_v<G>&& is_scratch_type_v<H>&&
                 is_scratch_type_v<J>) decltype(auto)
    run_scoped(F&& f, const A& a, const B& b, const C& c, const D& d, const E& e, const G& g,
               const H& h, const J& j,
               std::source_location where = std::source_location::current()) {
  return detail::run_scoped_impl(where, f, std::index_sequence_for<A, B, C, D, E, G, H, J>{}, a, b,
                                 c, d, e, g, h, j);
}

}  // namespace pl
}  // namespace tessera
