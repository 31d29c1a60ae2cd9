// File: tessera/dma.h
//
// `pltpu::sync_copy(src, dst)`: a DMA between any two memory spaces, waiting
// for it to finish — the only way data moves between HBM and VMEM/SMEM.
//
//   pltpu::sync_copy(x_hbm.at(pl::ds(i * 128, 128)), x_vmem);   // HBM -> VMEM
//   o_vmem = x_vmem + 1.0f;                                      // compute in VMEM
//   pltpu::sync_copy(o_vmem, o_hbm.at(pl::ds(i * 128, 128)));   // VMEM -> HBM
//
// Source and destination must have the same dtype (checked by the compiler) and
// the same shape (checked at run time: KernelError kShapeMismatch naming both).
// Views may be strided and of any rank; contiguous runs are copied with memcpy.
// Out-of-bounds views cannot be formed: `Ref::at` rejects them first.
// Cost: one strided copy of `src.nbytes()` bytes on the calling core.
#pragma once

#include <source_location>
#include <type_traits>

#include "tessera/memory_space.h"
#include "tessera/ref.h"

namespace tessera {
namespace detail {
/// Copies src to dst (same dtype, checked shapes); raises kShapeMismatch naming both.
void dma_copy(const RawRef& src, const RawRef& dst, const char* op, std::source_location where);
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

}  // namespace pltpu
}  // namespace tessera
