// File: tessera/resident.h
//
// What a `pl::pallas_call` may leave on the chip for the next call: arrays in VMEM or SMEM and
// semaphores, Pallas' `out_shape=pltpu.VMEM(shape, dtype)` / `pltpu.SMEM(shape, dtype)` and
// `out_shape=pltpu.SemaphoreType.DMA`. A DMA started in one call can then be waited in the next
// (Pallas' tpu_pallas_async_test), also from or into an SMEM array (an SMEM ref made once with
// `pl.empty_ref_like(pltpu.SMEM(...))` and used by several kernels):
//
//   Pallas                                          Tessera
//   out_shape=(pltpu.VMEM((8, 128), jnp.float32),   pl::out_shape(pltpu::VMEM<float>({8, 128}),
//              pltpu.SemaphoreType.DMA(()))                       pltpu::SemaphoreType::DMA)
//   out_specs=(pl.BlockSpec(memory_space=pltpu.VMEM),
//              pl.BlockSpec(memory_space=pltpu.SEMAPHORE))
//                                                   pl::out_specs(pl::BlockSpec(pltpu::VMEM),
//                                                                 pl::BlockSpec(pltpu::SEMAPHORE))
//   out, sem = f(x)                                 auto [out, sem] = f(x);
//   # out: a VMEM array, sem: a semaphore array     // pltpu::VmemArray<float>, DmaSemaphoreArray
//   y_ref = pl.empty_ref_like(                      pl::out_shape(pltpu::SMEM<int32_t>({8})),
//       pltpu.SMEM((8,), jnp.int32))                pl::out_specs(pl::BlockSpec(pltpu::SMEM))
//                                                   // the call returns a pltpu::SmemArray<int32_t>
//
// The body takes a VMEM output as a `pltpu::VmemRef<T>` of the whole array, an SMEM output as a
// `pltpu::SmemRef<T>`, and a semaphore output as a semaphore ref (`pltpu::DmaSemaphoreRef`); a
// later call takes them as inputs with `pl::BlockSpec(pltpu::VMEM)` / `pl::BlockSpec(pltpu::SMEM)`
// (used where they lie, never copied; a kernel that updates one aliases it to an output of the
// same kind) and `pl::BlockSpec(pltpu::SEMAPHORE)`.
//
// Semantics. A VmemArray is an Array whose storage stands for VMEM: a call that takes it in
// VMEM works on it in place, and it counts against that call's VMEM budget. An SmemArray stands
// for SMEM, of which every core has its own: it holds one copy per core of the call that made it
// (the Array itself is core 0's, `core(c)` core c's), core c of a later call works on copy c in
// place (a call on more cores than the array has copies is refused), and each copy counts
// against its core's SMEM with the call's SMEM scratch (a checked chip's SMEM in checked mode).
// A SemaphoreArray is a handle on counters that outlive the call: copies of the handle share
// them, and every core has its own (`value(flat, core)`); a call that takes it starts each core
// from the counts that core left at the previous call (they may be non-zero at that call's
// exit: a copy in flight), and leaves its own counts in it. In checked mode a copy still in
// flight at the end of a call travels with its core's semaphore to the call that waits for it:
// that call must take the copy's source and destination arrays (aliased where it writes them,
// as Pallas' async kernels do), otherwise it raises before its body runs; reading the
// destination, or writing the source, before the wait raises a race as within one kernel.
//
// On the devices of a mesh (jax::shard_map, in process) a remote copy may stay in flight on such
// semaphores too: the call that starts it returns send_sem and recv_sem, a later call waits on
// the sender (wait_send, or a descriptor's .wait() of the copy's size) and one on the receiver
// (wait_recv, taking the destination aliased to an output). Such a call ends on every device
// together, so that everything sent in it has arrived; checked, each half of the copy travels
// with its semaphore, and one no wait took is reported when shard_map returns. Across MPI ranks
// remote operations on these semaphores are refused (docs/devices.md).
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/kernel.h"
#include "tessera/memory_space.h"
#include "tessera/scratch.h"
#include "tessera/semaphore.h"
#include "tessera/shape.h"

namespace tessera {
namespace detail {
/// The counters of a SemaphoreArray and the copies still in flight on them (runtime-defined).
struct SemaphoreState;
std::shared_ptr<SemaphoreState> make_semaphore_state(int64_t count);
int64_t semaphore_state_value(const SemaphoreState& s, int64_t flat, int core,
                              std::source_location where);
/// Raises kOutOfBounds unless 0 <= core < cores (`what`: "SmemArray.core").
void check_core_index(int core, int cores, const char* what, std::source_location where);
/// Raises kShapeMismatch: an SmemArray whose copy for `core` has another shape than core 0's.
[[noreturn]] void smem_copy_shape_mismatch(const Shape& first, const Shape& copy, int core,
                                           std::source_location where);
}  // namespace detail

namespace pltpu {

/// An array whose storage stands for VMEM: a pallas_call output of `pltpu::VMEM<T>(shape)`,
/// taken by a later call with `pl::BlockSpec(pltpu::VMEM)` where it lies. Otherwise an Array.
template <class T>
class VmemArray : public Array<T> {
 public:
  using Array<T>::Array;
  /// Takes over an Array's storage (it then stands for VMEM).
  explicit VmemArray(Array<T>&& a) noexcept : Array<T>(std::move(a)) {}
};

/// An array whose storage stands for SMEM: a pallas_call output of `pltpu::SMEM<T>(shape)`, taken
/// by a later call with `pl::BlockSpec(pltpu::SMEM)` where it lies. Every core has its own SMEM,
/// so the array holds one copy per core of the call that made it: the Array itself is core 0's,
/// `core(c)` is core c's, and core c of a later call works on copy c. Otherwise an Array.
template <class T>
class SmemArray : public Array<T> {
 public:
  using Array<T>::Array;
  /// Takes over an Array's storage (it then stands for core 0's SMEM).
  explicit SmemArray(Array<T>&& a) noexcept : Array<T>(std::move(a)) {}
  /// `cores` copies of `shape`, their contents unspecified (a pallas_call output).
  SmemArray(detail::Uninitialized u, Shape shape, int cores, std::source_location where,
            const char* what)
      : Array<T>(u, shape, where, what) {
    for (int c = 1; c < cores; ++c) others_.emplace_back(u, shape, where, what);
  }

  /// How many cores have a copy (the cores of the call that made it).
  int num_cores() const noexcept { return 1 + static_cast<int>(others_.size()); }
  /// Core `c`'s copy (core 0's is the array itself).
  const Array<T>& core(int c, std::source_location where = std::source_location::current()) const {
    detail::check_core_index(c, num_cores(), "SmemArray.core", where);
    return c == 0 ? static_cast<const Array<T>&>(*this) : others_[static_cast<size_t>(c - 1)];
  }
  Array<T>& core(int c, std::source_location where = std::source_location::current()) {
    detail::check_core_index(c, num_cores(), "SmemArray.core", where);
    return c == 0 ? static_cast<Array<T>&>(*this) : others_[static_cast<size_t>(c - 1)];
  }

 private:
  std::vector<Array<T>> others_;  // cores 1, 2, ...
};

/// Semaphores that outlive a call: a pallas_call output of `pltpu::SemaphoreType::DMA` (or
/// `::REGULAR`, `::DMA({n})`), passed to a later call with `pl::BlockSpec(pltpu::SEMAPHORE)`.
/// Copying the handle shares the counters.
template <SemaphoreKind Kind>
class SemaphoreArray {
 public:
  static constexpr SemaphoreKind kind = Kind;
  /// `shape` semaphores of this kind, all zero.
  explicit SemaphoreArray(Shape shape)
      : shape_(std::move(shape)), state_(detail::make_semaphore_state(shape_.size())) {}

  const Shape& shape() const noexcept { return shape_; }
  int64_t size() const noexcept { return shape_.size(); }
  /// The count semaphore `flat` (row-major) of core 0 holds between calls: signals not yet
  /// waited, or the bytes of completed copies not yet waited (natively a copy has completed by
  /// the end of the call that started it).
  int64_t value(int64_t flat = 0,
                std::source_location where = std::source_location::current()) const {
    return detail::semaphore_state_value(*state_, flat, 0, where);
  }
  /// The same on core `core` (each core has its own semaphores; a core no call ran on holds 0).
  int64_t value(int64_t flat, int core,
                std::source_location where = std::source_location::current()) const {
    return detail::semaphore_state_value(*state_, flat, core, where);
  }
  /// The runtime's state (for pallas_call).
  detail::SemaphoreState& state() const noexcept { return *state_; }

 private:
  Shape shape_;
  std::shared_ptr<detail::SemaphoreState> state_;
};
using DmaSemaphoreArray = SemaphoreArray<SemaphoreKind::DMA>;
using RegularSemaphoreArray = SemaphoreArray<SemaphoreKind::REGULAR>;

}  // namespace pltpu

namespace detail {
/// Output markers of a pallas_call's out_shape: a VMEM or SMEM array of T, and semaphores of a
/// kind.
template <class T>
struct VmemOut {};
template <class T>
struct SmemOut {};
template <SemaphoreKind K>
struct SemaphoreOut {
  static constexpr SemaphoreKind kind = K;
};

template <class T>
struct OutStorage<VmemOut<T>> {
  using type = pltpu::ScratchType<T, MemorySpace::VMEM>;
};
template <class T>
struct OutStorage<SmemOut<T>> {
  using type = pltpu::ScratchType<T, MemorySpace::SMEM>;
};
template <SemaphoreKind K>
struct OutStorage<SemaphoreOut<K>> {
  using type = pltpu::SemaphoreArrayType<K>;
};

/// What out_shape(item) makes of an item: the OutType parameter (an element type, VmemOut<T> or
/// SemaphoreOut<K>) and its stored description.
template <class O>
struct OutItem {
  static constexpr bool ok = false;
};
template <class T>
struct OutItem<ShapeDtypeStruct<T>> {
  static constexpr bool ok = true;
  using param = T;
  static ShapeDtypeStruct<T> store(const ShapeDtypeStruct<T>& o) { return o; }
  static std::source_location where(const ShapeDtypeStruct<T>&) { return {}; }
};
template <class T>
struct OutItem<pltpu::ScratchType<T, MemorySpace::VMEM>> {
  static constexpr bool ok = true;
  using param = VmemOut<T>;
  static pltpu::ScratchType<T, MemorySpace::VMEM> store(
      const pltpu::ScratchType<T, MemorySpace::VMEM>& o) {
    return o;
  }
  static std::source_location where(const pltpu::ScratchType<T, MemorySpace::VMEM>& o) {
    return o.where;
  }
};
template <class T>
struct OutItem<pltpu::ScratchType<T, MemorySpace::SMEM>> {
  static constexpr bool ok = true;
  using param = SmemOut<T>;
  static pltpu::ScratchType<T, MemorySpace::SMEM> store(
      const pltpu::ScratchType<T, MemorySpace::SMEM>& o) {
    return o;
  }
  static std::source_location where(const pltpu::ScratchType<T, MemorySpace::SMEM>& o) {
    return o.where;
  }
};
template <SemaphoreKind K>
struct OutItem<pltpu::SemaphoreTypeTag<K>> {
  static constexpr bool ok = true;
  using param = SemaphoreOut<K>;
  static pltpu::SemaphoreArrayType<K> store(const pltpu::SemaphoreTypeTag<K>&) {
    return {Shape{}, {}};
  }
  static std::source_location where(const pltpu::SemaphoreTypeTag<K>&) { return {}; }
};
template <SemaphoreKind K>
struct OutItem<pltpu::SemaphoreArrayType<K>> {
  static constexpr bool ok = true;
  using param = SemaphoreOut<K>;
  static pltpu::SemaphoreArrayType<K> store(const pltpu::SemaphoreArrayType<K>& o) { return o; }
  static std::source_location where(const pltpu::SemaphoreArrayType<K>& o) { return o.where; }
};

/// What a pallas_call returns for an output: an Array, a VmemArray, an SmemArray or a
/// SemaphoreArray.
template <class O>
struct OutResult {
  using type = Array<O>;
};
template <class T>
struct OutResult<VmemOut<T>> {
  using type = pltpu::VmemArray<T>;
};
template <class T>
struct OutResult<SmemOut<T>> {
  using type = pltpu::SmemArray<T>;
};
template <SemaphoreKind K>
struct OutResult<SemaphoreOut<K>> {
  using type = pltpu::SemaphoreArray<K>;
};
}  // namespace detail
}  // namespace tessera
