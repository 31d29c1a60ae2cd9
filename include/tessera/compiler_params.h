// File: tessera/compiler_params.h
//
// `pltpu::CompilerParams`: per-kernel settings, as in Pallas'
// `pltpu.CompilerParams(...)`. Written with designated initialisers:
//
//   pltpu::CompilerParams{.vmem_limit_bytes = 32 << 20}
//
// `vmem_limit_bytes` raises (or lowers) the per-core VMEM budget that scratch
// buffers (and, later, pipeline buffers) must fit in. The default budget and
// the largest accepted value are in docs/design.md ("Arenas and the VMEM budget") and
// `tessera info` (vmem_capacity_bytes).
//
// `wait_timeout_ms` bounds every blocking wait of the kernel (`pl::semaphore_wait`,
// a DMA `.wait()`, `pltpu::core_barrier`): a wait still unsatisfied after that
// long throws KernelError (kTimeout) instead of hanging. The default is the
// TESSERA_WAIT_TIMEOUT_MS environment variable, else 10000 ms.
//
// `collective_id` picks the barrier semaphore `pltpu::get_barrier_semaphore()` returns (one of
// 32 per core, persisting across kernels; remote_dma.h) and drops the barrier a kernel of a
// device mesh otherwise starts with; `skip_device_barrier` drops that barrier alone.
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <vector>

#include "tessera/block_spec.h"

namespace tessera::pltpu {

/// Compiler parameters of a kernel. Unset fields take Tessera's defaults. (Each field has a
/// default member initialiser, so that g++'s -Wmissing-field-initializers stays quiet when a
/// designated initialiser names only some of them.)
struct CompilerParams {
  /// `pallas_call`: one entry per grid axis (default all ARBITRARY). PARALLEL axes, a prefix of
  /// the grid, are split over the cores in contiguous chunks; ARBITRARY ones run in order.
  std::vector<GridDimensionSemantics> dimension_semantics = {};
  /// Per-core VMEM budget in bytes (1 .. the arena capacity).
  std::optional<int64_t> vmem_limit_bytes = std::nullopt;
  /// Milliseconds a blocking wait may take before it fails with kTimeout (>= 1).
  std::optional<int64_t> wait_timeout_ms = std::nullopt;
  /// The barrier semaphore of this kernel (0 .. 31): `pltpu::get_barrier_semaphore()` needs it.
  /// A kernel with a collective_id starts without the implicit device barrier: it synchronises
  /// with the devices it talks to through the barrier semaphore itself.
  std::optional<int> collective_id = std::nullopt;
  /// Start without the implicit barrier over the devices of the mesh (kernels that write no
  /// other device's memory, or order their writes themselves).
  bool skip_device_barrier = false;
};

/// Throws UsageError (kInvalidArgument) naming a bad field.
void check_compiler_params(const CompilerParams& params, std::source_location where);

}  // namespace tessera::pltpu
