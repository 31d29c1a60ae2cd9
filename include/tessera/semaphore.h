// File: tessera/semaphore.h
//
// Semaphores: counters in per-core SEMAPHORE memory, the counterpart of Pallas'
// `pltpu.SemaphoreType` and `pl.semaphore_signal / semaphore_wait /
// semaphore_read` and `pltpu.core_barrier`.
//
//   Pallas                                       Tessera
//   pltpu.SemaphoreType.REGULAR                  pltpu::SemaphoreType::REGULAR      (one, shape ())
//   pltpu.SemaphoreType.DMA((2,))                pltpu::SemaphoreType::DMA({2})     (an array)
//   sems.at[i]                                   sems.at(i)
//   pl.semaphore_signal(sem)                     pl::semaphore_signal(sem);
//   pl.semaphore_signal(sem, 2, core_index=k)    pl::semaphore_signal(sem, 2, pl::core_index(k));
//   pl.semaphore_wait(sem, 2)                    pl::semaphore_wait(sem, 2);
//   pl.semaphore_read(sem)                       pl::semaphore_read(sem)
//   pltpu.core_barrier(sem, core_axis_name="c")  pltpu::core_barrier(sem, "c");
//
//   auto k = pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
//                       pl::scratch_types(pltpu::VMEM<float>({128}),
//                                         pltpu::SemaphoreType::REGULAR))(
//       [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::SemaphoreRef ready) {
//         if (lax::axis_index("core") == 0) {
//           v = jnp::full_like(v, 1.0f);
//           pltpu::sync_copy(v, o.at(pl::ds(0, 128)));
//           pl::semaphore_signal(ready, 1, pl::core_index(1));  // block 0 is in HBM
//         } else {
//           pl::semaphore_wait(ready);                           // until core 0 signals
//           pltpu::sync_copy(o.at(pl::ds(0, 128)), v);
//           pltpu::sync_copy(v, o.at(pl::ds(128, 128)));
//         }
//       });
//
// Semantics. Each semaphore is a counter, zero when the kernel starts. A signal
// adds to it (on this core, or with `pl::core_index(k)` to the same semaphore
// of core k of the mesh); a wait blocks until the counter is at least the
// awaited value, then subtracts that value atomically. DMA semaphores count
// bytes: an async copy adds its source's byte count when it completes, and
// its `.wait()` takes that many (dma.h). Signals release and waits acquire, so
// what a core wrote before a signal is visible to the core that waited for it.
// Every semaphore must be zero again when the kernel ends.
//
// Errors (KernelError inside a kernel, UsageError outside it, with the call's
// line): an operation on a view that is not a single semaphore (kShapeMismatch);
// `.at(...)` out of range (kOutOfBounds); `core_index` outside the mesh
// (kOutOfBounds); a negative increment or value (kInvalidArgument); a wait not
// satisfied within `CompilerParams::wait_timeout_ms` (kTimeout, naming the
// semaphore, its value and the awaited value); a wait interrupted because
// another core failed (kCancelled; the other core's error is the one the
// launch rethrows); a semaphore not zero at kernel exit (kSemaphoreLeak, the
// kernel returns no output). Using a DMA semaphore with semaphore_signal or
// semaphore_wait, or a REGULAR/BARRIER one for an async copy, does not compile.
//
// Cost: a signal is one atomic add (plus a wake-up when the target core sleeps
// in a wait); a satisfied wait is one compare-and-swap. A blocked core spins
// briefly, then sleeps until a signal, a cancellation or its timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string_view>
#include <utility>

#include "tessera/detail/runtime.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/scratch.h"
#include "tessera/shape.h"

namespace tessera {
namespace detail {
/// One semaphore: a 64-bit counter in a core's semaphore region.
using SemaphoreCell = std::atomic<int64_t>;

// The runtime behind the templates below (src/runtime/semaphore.cc). No `core_index`: the
// calling core.
void semaphore_signal(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind, int64_t inc,
                      std::optional<int> core_index, std::source_location where);
void semaphore_wait(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind, int64_t value,
                    std::source_location where);
int32_t semaphore_read(const SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                       std::source_location where);
void core_barrier(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                  std::string_view axis_name, std::source_location where);
/// Throws kShapeMismatch (naming `op` and the shape) unless `shape` is ().
void check_single_semaphore(const Shape& shape, SemaphoreKind kind, const char* op,
                            std::source_location where);
}  // namespace detail

namespace pltpu {

/// A view of semaphores of one kind (a Ref in SEMAPHORE memory). Kernels receive these for
/// semaphore scratch (`pl::scratch_types(pltpu::SemaphoreType::DMA, ...)`) and from
/// `pl::run_scoped`. Copying the view copies the view; `.at(...)` selects semaphores exactly as
/// `Ref::at` selects elements. Operations need a single semaphore: a view of shape ().
template <SemaphoreKind Kind>
class BasicSemaphoreRef {
 public:
  static constexpr SemaphoreKind kind = Kind;
  static constexpr MemorySpace space = MemorySpace::SEMAPHORE;

  /// A row-major view of `shape` semaphores at `data` (the runtime makes these).
  BasicSemaphoreRef(detail::SemaphoreCell* data, Shape shape)
      : data_(data), shape_(std::move(shape)), strides_(row_major_strides(shape_)) {}

  /// The view's shape; () for a single semaphore.
  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  /// Number of semaphores in the view.
  int64_t size() const noexcept { return shape_.size(); }
  /// Strides in semaphores, one per axis.
  const detail::SmallVec& strides() const noexcept { return strides_; }
  /// The first semaphore of the view (for the runtime).
  detail::SemaphoreCell* data() const noexcept { return data_; }

  /// A sub-view, `sems.at[i]` in Pallas: an integer picks one semaphore on its axis (and drops
  /// the axis), `pl::ds(...)` slices it, `pl::all` keeps it. Chainable (`sems.at(i).at(j)`).
  /// Throws kOutOfBounds naming the index, the axis and its extent.
  BasicSemaphoreRef at(detail::Indexer a,
                       std::source_location w = std::source_location::current()) const {
    return at_n({a}, w);
  }
  BasicSemaphoreRef at(detail::Indexer a, detail::Indexer b,
                       std::source_location w = std::source_location::current()) const {
    return at_n({a, b}, w);
  }
  BasicSemaphoreRef at(detail::Indexer a, detail::Indexer b, detail::Indexer c,
                       std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c}, w);
  }
  BasicSemaphoreRef at(detail::Indexer a, detail::Indexer b, detail::Indexer c, detail::Indexer d,
                       std::source_location w = std::source_location::current()) const {
    return at_n({a, b, c, d}, w);
  }

 private:
  BasicSemaphoreRef at_n(std::initializer_list<detail::Indexer> ix, std::source_location w) const {
    BasicSemaphoreRef r = *this;
    const int64_t off = detail::apply_indexers(r.shape_, r.strides_, ix.begin(),
                                               static_cast<int>(ix.size()), space, w);
    r.data_ = data_ + off;
    return r;
  }

  detail::SemaphoreCell* data_;
  Shape shape_;
  detail::SmallVec strides_;
};

/// A REGULAR semaphore view: `pl::semaphore_signal` / `pl::semaphore_wait`.
using SemaphoreRef = BasicSemaphoreRef<SemaphoreKind::REGULAR>;
/// A DMA semaphore view: counts the bytes of async copies (dma.h).
using DmaSemaphoreRef = BasicSemaphoreRef<SemaphoreKind::DMA>;
/// A BARRIER semaphore view: used like a REGULAR one (e.g. by `pltpu::core_barrier`).
using BarrierSemaphoreRef = BasicSemaphoreRef<SemaphoreKind::BARRIER>;

/// The scratch type of an array of semaphores, `pltpu.SemaphoreType.DMA((n,))` in Pallas: made
/// by `pltpu::SemaphoreType::DMA({n})` (and REGULAR, BARRIER). One array per core.
template <SemaphoreKind Kind>
struct SemaphoreArrayType {
  using ref_type = BasicSemaphoreRef<Kind>;
  static constexpr MemorySpace space = MemorySpace::SEMAPHORE;
  static constexpr SemaphoreKind kind = Kind;
  Shape shape;
  std::source_location where;

  detail::ScratchRequest request() const {
    return detail::ScratchRequest{MemorySpace::SEMAPHORE, DType::kInt32, shape,
                                  shape.size() * int64_t{sizeof(detail::SemaphoreCell)}, Kind};
  }
  ref_type make_ref(void* p) const {
    return ref_type(static_cast<detail::SemaphoreCell*>(p), shape);
  }
};

/// The scratch type of one semaphore (shape ()), `pltpu.SemaphoreType.DMA` in Pallas; called
/// with a shape it gives an array: `pltpu::SemaphoreType::DMA({4})`.
template <SemaphoreKind Kind>
struct SemaphoreTypeTag {
  using ref_type = BasicSemaphoreRef<Kind>;
  static constexpr MemorySpace space = MemorySpace::SEMAPHORE;
  static constexpr SemaphoreKind kind = Kind;

  detail::ScratchRequest request() const {
    return detail::ScratchRequest{MemorySpace::SEMAPHORE, DType::kInt32, Shape{},
                                  int64_t{sizeof(detail::SemaphoreCell)}, Kind};
  }
  ref_type make_ref(void* p) const {
    return ref_type(static_cast<detail::SemaphoreCell*>(p), Shape{});
  }
  /// An array of `shape` semaphores of this kind. Throws UsageError for a negative extent.
  SemaphoreArrayType<Kind> operator()(
      Shape shape, std::source_location where = std::source_location::current()) const {
    detail::check_scratch_shape(shape, int64_t{sizeof(detail::SemaphoreCell)},
                                MemorySpace::SEMAPHORE, where);
    return {std::move(shape), where};
  }
};

/// `pltpu.SemaphoreType`: `SemaphoreType::REGULAR`, `::DMA`, `::BARRIER` are scratch types of one
/// semaphore; `SemaphoreType::DMA({2, 3})` is an array.
struct SemaphoreType {
  static constexpr SemaphoreTypeTag<SemaphoreKind::REGULAR> REGULAR{};
  static constexpr SemaphoreTypeTag<SemaphoreKind::DMA> DMA{};
  static constexpr SemaphoreTypeTag<SemaphoreKind::BARRIER> BARRIER{};
};

}  // namespace pltpu

template <SemaphoreKind K>
inline constexpr bool is_scratch_type_v<pltpu::SemaphoreTypeTag<K>> = true;
template <SemaphoreKind K>
inline constexpr bool is_scratch_type_v<pltpu::SemaphoreArrayType<K>> = true;

/// True for the semaphore view types.
template <class R>
inline constexpr bool is_semaphore_ref_v = false;
template <SemaphoreKind K>
inline constexpr bool is_semaphore_ref_v<pltpu::BasicSemaphoreRef<K>> = true;

namespace detail {
template <SemaphoreKind K>
void signal_ref(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc, std::optional<int> core,
                std::source_location where) {
  static_assert(K != SemaphoreKind::DMA,
                "tessera: pl::semaphore_signal needs a REGULAR or BARRIER semaphore; a DMA "
                "semaphore counts the bytes of async copies and is waited with the copy's "
                ".wait()");
  semaphore_signal(sem.data(), sem.shape(), K, inc, core, where);
}
}  // namespace detail

namespace pl {

/// The `core_index=` option of `pl::semaphore_signal`: signal the semaphore of core `value` of
/// the mesh instead of the calling core's.
struct CoreIndex {
  int value = 0;
};
/// `core_index=k`: `pl::semaphore_signal(sem, 1, pl::core_index(k))`.
constexpr CoreIndex core_index(int k) noexcept { return CoreIndex{k}; }

/// `pl.semaphore_signal(sem, inc=1, core_index=None)`: adds `inc` (>= 0) to a single REGULAR or
/// BARRIER semaphore of this core, or with `pl::core_index(k)` to the same semaphore of core k
/// (0 <= k < the mesh's cores). Releases this core's earlier writes to whoever waits for it.
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem,
                      std::source_location where = std::source_location::current()) {
  detail::signal_ref(sem, 1, std::nullopt, where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc,
                      std::source_location where = std::source_location::current()) {
  detail::signal_ref(sem, inc, std::nullopt, where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc, CoreIndex core,
                      std::source_location where = std::source_location::current()) {
  detail::signal_ref(sem, inc, core.value, where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, CoreIndex core,
                      std::source_location where = std::source_location::current()) {
  detail::signal_ref(sem, 1, core.value, where);
}

/// `pl.semaphore_wait(sem, value=1)`: blocks until a single REGULAR or BARRIER semaphore of this
/// core holds at least `value` (>= 0), then subtracts `value` atomically. Acquires the writes
/// the signalling cores made before their signals. Throws kTimeout after the kernel's
/// `wait_timeout_ms`, kCancelled when another core of the launch fails meanwhile.
template <SemaphoreKind K>
void semaphore_wait(const pltpu::BasicSemaphoreRef<K>& sem, int64_t value = 1,
                    std::source_location where = std::source_location::current()) {
  static_assert(K != SemaphoreKind::DMA,
                "tessera: pl::semaphore_wait needs a REGULAR or BARRIER semaphore; a DMA "
                "semaphore is waited with the copy descriptor's .wait() "
                "(pltpu::make_async_copy(...).wait())");
  detail::semaphore_wait(sem.data(), sem.shape(), K, value, where);
}

/// `pl.semaphore_read(sem)`: the current value of a single semaphore of any kind (a DMA
/// semaphore holds the bytes of completed copies not yet waited). Pallas reads an int32; a value
/// beyond its range (over 2 GiB of copies not yet waited) reads as INT32_MAX.
template <SemaphoreKind K>
int32_t semaphore_read(const pltpu::BasicSemaphoreRef<K>& sem,
                       std::source_location where = std::source_location::current()) {
  return detail::semaphore_read(sem.data(), sem.shape(), K, where);
}

}  // namespace pl

namespace pltpu {
/// `pltpu.core_barrier(sem, core_axis_name=...)`: no core passes until every core of the mesh
/// axis has reached the barrier. On n > 1 cores it signals `sem` on every other core, then waits
/// for n - 1 signals (a single REGULAR or BARRIER semaphore, the same one on every core); on one
/// core it does nothing. Throws kUnknownAxis for a name the mesh does not have.
template <SemaphoreKind K>
void core_barrier(const BasicSemaphoreRef<K>& sem, std::string_view core_axis_name,
                  std::source_location where = std::source_location::current()) {
  static_assert(K != SemaphoreKind::DMA,
                "tessera: pltpu::core_barrier needs a REGULAR or BARRIER semaphore, not a DMA "
                "semaphore");
  detail::core_barrier(sem.data(), sem.shape(), K, core_axis_name, where);
}
}  // namespace pltpu

}  // namespace tessera
