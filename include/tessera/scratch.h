// File: tessera/scratch.h
//
// Scratch buffer types: `pltpu::VMEM<T>(shape)` and `pltpu::SMEM<T>(shape)`,
// the counterparts of `pltpu.VMEM(shape, dtype)` and `pltpu.SMEM(shape, dtype)`.
// Listed in `pl::scratch_types(...)`, each becomes one buffer per core, in that
// core's VMEM or SMEM arena, passed to the kernel body after the outputs, in
// order. Scratch starts uninitialised (as on a TPU).
//
//   pl::scratch_types(pltpu::VMEM<float>({8, 128}), pltpu::SMEM<int32_t>({16}))
//   // body(..., pltpu::VmemRef<float> buf, pltpu::SmemRef<int32_t> idx)
#pragma once

#include <source_location>
#include <type_traits>

#include "tessera/detail/runtime.h"
#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/shape.h"

namespace tessera {
namespace detail {
/// Validates a buffer's shape (detail::check_shape) naming the call that made it (pltpu::VMEM,
/// out_type, ...).
void check_scratch_shape(const Shape& shape, int64_t itemsize, MemorySpace space,
                         std::source_location where);
}  // namespace detail

namespace pltpu {

/// A scratch buffer of `T` elements with `shape` in memory space `Space`.
template <class T, MemorySpace Space>
struct ScratchType {
  static_assert(is_element_type_v<T> && !std::is_const_v<T>,
                "tessera: scratch buffers hold float, bfloat16, float16, float8_e4m3fn, "
                "float8_e5m2, float8_e4m3b11fnuz, int32_t, int16_t, int8_t, uint32_t, uint16_t, "
                "uint8_t, int4, uint4, int2, uint2 or bool");
  static_assert(Space == MemorySpace::VMEM || Space == MemorySpace::SMEM,
                "tessera: scratch buffers live in VMEM or SMEM");
  using value_type = T;
  using ref_type = pl::Ref<T, Space>;
  static constexpr MemorySpace space = Space;
  Shape shape;
  std::source_location where;

  detail::ScratchRequest request() const {
    return detail::ScratchRequest{Space, dtype_of<T>, shape,
                                  shape.size() * static_cast<int64_t>(sizeof(T))};
  }
  ref_type make_ref(void* p) const { return ref_type(static_cast<T*>(p), shape); }
};

/// `pltpu.VMEM(shape, dtype)`: a per-core VMEM scratch buffer.
template <class T>
ScratchType<T, MemorySpace::VMEM> VMEM(
    Shape shape, std::source_location where = std::source_location::current()) {
  detail::check_scratch_shape(shape, int64_t{sizeof(T)}, MemorySpace::VMEM, where);
  return {std::move(shape), where};
}
/// `pltpu.SMEM(shape, dtype)`: a per-core SMEM scratch buffer (32-bit or narrower scalars).
template <class T>
ScratchType<T, MemorySpace::SMEM> SMEM(
    Shape shape, std::source_location where = std::source_location::current()) {
  detail::check_scratch_shape(shape, int64_t{sizeof(T)}, MemorySpace::SMEM, where);
  return {std::move(shape), where};
}

/// `pltpu.VMEM` / `pltpu.SMEM` as a memory space (not called): `pl::BlockSpec(pltpu::SMEM)`,
/// `pl::BlockSpec({8, 128}, map, pltpu::VMEM)`. Calling them gives the marker, which names
/// nothing else.
inline detail::SpaceMarker<MemorySpace::VMEM> VMEM() noexcept { return {}; }
inline detail::SpaceMarker<MemorySpace::SMEM> SMEM() noexcept { return {}; }

}  // namespace pltpu

template <class S>
inline constexpr bool is_scratch_type_v = false;
template <class T, MemorySpace Sp>
inline constexpr bool is_scratch_type_v<pltpu::ScratchType<T, Sp>> = true;

}  // namespace tessera
