// File: tessera/memory_space.h
//
// The memory spaces of the TPU model. In Pallas a Ref lives in `pl.ANY`,
// `pltpu.HBM`, `pltpu.VMEM`, `pltpu.SMEM` or `pltpu.SEMAPHORE`; in Tessera the
// space is part of the Ref's type, `pl::Ref<T, Space>`, so that the compiler
// rejects compute on HBM.
//
//   HBM  large and slow: kernel inputs and outputs. Move data only by DMA.
//   ANY  "wherever the caller put it" (HBM here). DMA only, like HBM.
//   VMEM small and fast, per core: where vector compute happens.
//   SMEM small, per core: scalars (indices, counters), read and written element-wise.
//
//   pl::Ref<float, pltpu::HBM> o_ref;                      // same as pltpu::HbmRef<float>
//   pl::Ref<float, pltpu::MemorySpace::VMEM> o_vmem;       // same as pltpu::VmemRef<float>
//
// SEMAPHORE memory holds counters, one kind per buffer (`pltpu::SemaphoreKind`,
// Pallas' `pltpu.SemaphoreType`); see semaphore.h.
#pragma once

#include <cstdint>

namespace tessera {

/// Where a buffer lives. Spelled as in Pallas' `pltpu.MemorySpace`.
enum class MemorySpace { ANY, HBM, VMEM, SMEM, SEMAPHORE };

/// "HBM", "VMEM", ... as Pallas prints them.
constexpr const char* to_string(MemorySpace s) noexcept {
  switch (s) {
    case MemorySpace::ANY:
      return "ANY";
    case MemorySpace::HBM:
      return "HBM";
    case MemorySpace::VMEM:
      return "VMEM";
    case MemorySpace::SMEM:
      return "SMEM";
    case MemorySpace::SEMAPHORE:
      return "SEMAPHORE";
  }
  return "?";
}

/// What a semaphore counts (Pallas' `pltpu.SemaphoreType`). REGULAR and BARRIER semaphores count
/// signals (`pl::semaphore_signal` / `pl::semaphore_wait`); DMA semaphores count the bytes of
/// async copies (`pltpu::make_async_copy(...).start()` / `.wait()`).
enum class SemaphoreKind : uint8_t { REGULAR, DMA, BARRIER };

/// "REGULAR", "DMA", "BARRIER", as Pallas spells the enumerators.
constexpr const char* to_string(SemaphoreKind k) noexcept {
  switch (k) {
    case SemaphoreKind::REGULAR:
      return "REGULAR";
    case SemaphoreKind::DMA:
      return "DMA";
    case SemaphoreKind::BARRIER:
      return "BARRIER";
  }
  return "?";
}

/// True where kernels may read and write elements and compute: VMEM and SMEM.
constexpr bool is_compute_space(MemorySpace s) noexcept {
  return s == MemorySpace::VMEM || s == MemorySpace::SMEM;
}

namespace detail {
/// What `pltpu::VMEM` / `pltpu::SMEM` name when they are not called: the memory space alone, as
/// in Pallas' `pl.BlockSpec(memory_space=pltpu.SMEM)` (tessera/scratch.h declares the functions;
/// a BlockSpec takes their address).
template <MemorySpace S>
struct SpaceMarker {};
using VmemMarkerFn = SpaceMarker<MemorySpace::VMEM> (*)();
using SmemMarkerFn = SpaceMarker<MemorySpace::SMEM> (*)();
}  // namespace detail

namespace pltpu {
using tessera::MemorySpace;
using tessera::SemaphoreKind;
/// `pltpu.HBM`: the chip's main memory.
inline constexpr MemorySpace HBM = MemorySpace::HBM;
/// `pltpu.SEMAPHORE`: semaphore memory.
inline constexpr MemorySpace SEMAPHORE = MemorySpace::SEMAPHORE;
}  // namespace pltpu

namespace pl {
using tessera::MemorySpace;
/// `pl.ANY`: memory the caller chose (HBM in Tessera); DMA only.
inline constexpr MemorySpace ANY = MemorySpace::ANY;
}  // namespace pl

}  // namespace tessera
