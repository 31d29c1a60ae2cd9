// File: tessera/dma.h
//
// DMA between any two memory spaces — the only way data moves between HBM and
// VMEM/SMEM. `pltpu::sync_copy(src, dst)` copies and waits; an async copy
// (`pltpu.make_async_copy` / `pltpu.async_copy` in Pallas) is started, and later
// waited on through a DMA semaphore:
//
//   pltpu::sync_copy(x_hbm.at(pl::ds(i * 128, 128)), x_vmem);   // HBM -> VMEM
//   o_vmem = x_vmem + 1.0f;                                      // compute in VMEM
//   pltpu::sync_copy(o_vmem, o_hbm.at(pl::ds(i * 128, 128)));   // VMEM -> HBM
//
//   // scratch: pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA
//   auto in = pltpu::make_async_copy(x_hbm.at(pl::ds(0, 128)), x_vmem, sem);
//   in.start();                                   // the copy is issued
//   ...                                           // other work
//   in.wait();                                    // x_vmem now holds the block
//   pltpu::async_copy(x_vmem, o_hbm.at(pl::ds(0, 128)), sem).wait();   // make + start, wait
//
// Source and destination must have the same dtype (checked by the compiler) and
// the same shape (checked at run time: kShapeMismatch naming both). Views may be
// strided and of any rank; contiguous runs are copied with memcpy.
// Out-of-bounds views cannot be formed: `Ref::at` rejects them first.
//
// DMA semaphores count bytes. A started copy adds its source's byte count to
// its semaphore when it completes; `.wait()` blocks until the semaphore holds at
// least the byte count of the descriptor's *source* and then subtracts it. So
// several copies may share one semaphore (each waited by its own descriptor),
// and one wait on a descriptor of a larger source can absorb several smaller
// transfers, as in Pallas. In the native engine the calling core makes the copy:
// at `start()`, or, for a contiguous copy of up to 64 KiB, together with the next
// three such copies (their lines interleaved, so that scattered pages are read in
// parallel) or at the first wait, semaphore read, signal or scope end before that.
// A wait therefore always finds its bytes; code must still wait, both for the
// semaphore to be zero at kernel exit and to be correct on a TPU, and only after
// the wait may it read the destination.
//
// Cost: one strided copy of `src.nbytes()` bytes on the calling core, plus one
// atomic add (start) and one compare-and-swap (wait) for async copies.
#pragma once

#include <cstdint>
#include <source_location>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/semaphore.h"

namespace tessera {
namespace detail {
/// Copies src to dst (same dtype, checked shapes); raises kShapeMismatch naming both.
void dma_copy(const RawRef& src, const RawRef& dst, const char* op, std::source_location where);
template <class S, MemorySpace SS, class D, MemorySpace DS, SemaphoreKind K>
constexpr bool check_async_copy() {
  static_assert(K == SemaphoreKind::DMA,
                "tessera: make_async_copy needs a DMA semaphore (pltpu::SemaphoreType::DMA); "
                "REGULAR and BARRIER semaphores are signalled with pl::semaphore_signal and "
                "waited with pl::semaphore_wait");
  static_assert(std::is_same_v<std::remove_cv_t<S>, D>,
                "tessera: make_async_copy needs source and destination of the same dtype (and a "
                "non-const destination); check the element types of both refs");
  static_assert(SS != MemorySpace::SEMAPHORE && DS != MemorySpace::SEMAPHORE,
                "tessera: semaphores cannot be copied");
  return true;
}
}  // namespace detail

namespace pltpu {

/// Copies `src` into `dst` and returns when the copy is complete.
template <class S, MemorySpace SS, class D, MemorySpace DS>
void sync_copy(const pl::Ref<S, SS>& src, const pl::Ref<D, DS>& dst,
               std::source_location where = std::source_location::current()) {
  static_assert(std::is_same_v<std::remove_cv_t<S>, D>,
                "tessera: sync_copy needs source and destination of the same dtype (and a "
                "non-const destination); check the element types of both refs");
  static_assert(SS != MemorySpace::SEMAPHORE && DS != MemorySpace::SEMAPHORE,
                "tessera: semaphores cannot be copied");
  detail::dma_copy(src.raw(), dst.raw(), "sync_copy", where);
}

/// An async copy, `pltpu.AsyncCopyDescriptor` in Pallas: a source view, a destination view and
/// a single DMA semaphore. Made by `pltpu::make_async_copy` (or `pltpu::async_copy`, which also
/// starts it). A descriptor is a value; it may be started again once its previous start has
/// been waited on through it.
class AsyncCopyDescriptor {
 public:
  AsyncCopyDescriptor(detail::RawRef src, detail::RawRef dst, detail::SemaphoreCell* sem,
                      std::source_location made);
  /// A copy made of several strided copies (source, destination) — the planes of a bitcast
  /// view (packed_ref.h) — started together and waited as one copy of all their bytes.
  AsyncCopyDescriptor(std::vector<std::pair<detail::RawRef, detail::RawRef>> parts,
                      detail::SemaphoreCell* sem, std::source_location made);

  /// Issues the copy: checks the shapes (kShapeMismatch, naming both), copies, then adds the
  /// source's byte count to the semaphore. Throws kInvalidArgument when this descriptor was
  /// started and has not been waited since (each start needs its own wait).
  void start(std::source_location where = std::source_location::current());
  /// Blocks until the semaphore holds at least the source's byte count, then subtracts it. May
  /// be called on a descriptor that was never started, to wait for a copy another descriptor
  /// of the same size started. Throws kTimeout after the kernel's `wait_timeout_ms` (naming the
  /// semaphore, what it holds and the bytes awaited), kCancelled when another core fails.
  void wait(std::source_location where = std::source_location::current());

  /// The bytes a wait takes from the semaphore (the source's size in bytes).
  int64_t nbytes() const noexcept;
  /// The source and destination (of a copy of several parts, the first part's).
  const detail::RawRef& src() const noexcept { return src_; }
  const detail::RawRef& dst() const noexcept { return dst_; }

 private:
  detail::RawRef src_;
  detail::RawRef dst_;
  std::vector<std::pair<detail::RawRef, detail::RawRef>> more_;  // the other parts, if any
  detail::SemaphoreCell* sem_;
  std::source_location made_;
  std::source_location started_at_;
  bool in_flight_ = false;  // started and not waited through this descriptor since
};

/// `pltpu.make_async_copy(src, dst, sem)`: a descriptor of a copy from `src` to `dst` whose
/// completion is counted on `sem`, a single DMA semaphore (kShapeMismatch otherwise). Nothing
/// is copied until `.start()`.
template <class S, MemorySpace SS, class D, MemorySpace DS, SemaphoreKind K>
[[nodiscard]] AsyncCopyDescriptor make_async_copy(
    const pl::Ref<S, SS>& src, const pl::Ref<D, DS>& dst, const BasicSemaphoreRef<K>& sem,
    std::source_location where = std::source_location::current()) {
  static_assert(detail::check_async_copy<S, SS, D, DS, K>());
  detail::check_single_semaphore(sem.shape(), K, "pltpu::make_async_copy", where);
  return AsyncCopyDescriptor(src.raw(), dst.raw(), sem.data(), where);
}

/// `pltpu.async_copy(src, dst, sem)`: `make_async_copy(src, dst, sem)` and `.start()`; returns
/// the started descriptor, to `.wait()` on later.
template <class S, MemorySpace SS, class D, MemorySpace DS, SemaphoreKind K>
AsyncCopyDescriptor async_copy(const pl::Ref<S, SS>& src, const pl::Ref<D, DS>& dst,
                               const BasicSemaphoreRef<K>& sem,
                               std::source_location where = std::source_location::current()) {
  static_assert(detail::check_async_copy<S, SS, D, DS, K>());
  detail::check_single_semaphore(sem.shape(), K, "pltpu::async_copy", where);
  AsyncCopyDescriptor copy(src.raw(), dst.raw(), sem.data(), where);
  copy.start(where);
  return copy;
}

}  // namespace pltpu
}  // namespace tessera
