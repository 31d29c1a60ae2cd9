// File: tessera/interpret.h
//
// Checked mode: the same kernel source under a TPU-faithful simulator that raises — the
// counterpart of Pallas' `interpret=pltpu.InterpretParams(...)` (TPU interpret mode). Pass the
// params as one more option to `pl::kernel(...)` or `pl::pallas_call(...)`, or set
// `TESSERA_INTERPRET=1` in the environment to run every kernel checked with default params
// (`TESSERA_INTERPRET=v5e`: against that chip):
//
//   pltpu::InterpretParams params;
//   params.dma_execution_mode = pltpu::DmaExecutionMode::eager;
//   params.chip = "v5e";
//   auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
//                       pl::scratch_types(pltpu::VMEM<float>({128})), params)(body);
//
// A checked kernel raises tessera::KernelError (kind, message, the user's file:line, kernel,
// core, grid step) for: races (compute vs an in-flight DMA, DMA vs DMA, core vs core on HBM,
// with vector clocks), out-of-bounds slices and blocks, VMEM / SMEM capacity and block-shape
// rules of a TPU generation, semaphores left non-zero, deadlocks, non-consecutive output revisits
// and, with `allow_uninitialized_reads = false`, garbage from never-written memory that reaches an
// output. See docs/checked-mode.md for every diagnostic.
//
// Cost: the native engine is unchanged (hooks are at coarse points: launch, DMA, semaphore ops,
// pipeline steps, the top of each vector assignment); a checked run does real window copies,
// poisons fresh buffers and keeps shadow state, typically a few times slower than native.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace tessera::pltpu {

/// When a started async copy moves its bytes (Pallas' `dma_execution_mode`).
enum class DmaExecutionMode {
  eager,    ///< at .start()
  on_wait,  ///< as late as possible: when a wait needs its bytes, in any order (default)
  random,   ///< at .start() or at a wait, chosen by `random_seed`; waits pick copies at random
};

/// What fresh outputs, scratch, run_scoped buffers, pipeline windows and the padding of partial
/// edge blocks hold before they are written: the values of Pallas' TPU interpret mode
/// (`uninitialized_memory="nan"` / `"zero"`; docs/pallas-parity.md compares Pallas' others).
enum class UninitializedMemory {
  nan,   ///< NaN for floats, the largest value for integers, true for bool (the default)
  zero,  ///< zeros
};

/// `pltpu.InterpretParams`: turns on checked mode for one kernel. The defaults are those of
/// Pallas' `pltpu.InterpretParams()` except `detect_races` (on) and the order of PARALLEL axes
/// (in order unless `parallel_order_seed` is set); docs/pallas-parity.md lists every field of
/// Pallas' and what Tessera does with it.
struct InterpretParams {
  DmaExecutionMode dma_execution_mode = DmaExecutionMode::on_wait;
  /// Seed of DmaExecutionMode::random.
  uint64_t random_seed = 0;
  /// When set, the points of PARALLEL grid axes run in an order permuted by this seed (each
  /// core still runs a contiguous share), so a kernel cannot depend on the order.
  std::optional<uint64_t> parallel_order_seed = std::nullopt;
  UninitializedMemory uninitialized_memory = UninitializedMemory::nan;
  /// true (as Pallas): reading never-written memory sees the poison. false: garbage is tracked
  /// and raises kUninitialized where it matters (it reaches an HBM output, a reduction, a dot or
  /// a scalar read; docs/checked-mode.md).
  bool allow_uninitialized_reads = true;
  /// Report races (kRace). Off: no vector clocks are kept.
  bool detect_races = true;
  /// A TPU generation ("v5e", "v4", ...; see pltpu::get_tpu_info_for_chip): its VMEM/SMEM per
  /// core, TensorCores per chip, matmul dtypes and block-shape tiling rules are checked. Empty:
  /// this machine's limits, and blocks of any shape.
  std::string chip = {};
  /// Pallas' `grid_point_recorder`: when set, called with the grid point of every step of a
  /// pallas_call or emit_pipeline and the core that runs it, in the order the steps run. Calls
  /// from different cores do not overlap (they are serialised), so it may append to a vector.
  std::function<void(std::span<const int64_t> grid_point, int core)> grid_point_recorder = {};
};

/// `pltpu.force_tpu_interpret_mode(params)`: while an instance lives, every kernel and
/// pallas_call launched in the process runs checked with `params` (a kernel's own
/// InterpretParams win). For tests and tools that run unchanged kernel code checked, like
/// `tessera run <example> --check`. Instances must not overlap.
class ForceTpuInterpretMode {
 public:
  explicit ForceTpuInterpretMode(InterpretParams params = {});
  ~ForceTpuInterpretMode();
  ForceTpuInterpretMode(const ForceTpuInterpretMode&) = delete;
  ForceTpuInterpretMode& operator=(const ForceTpuInterpretMode&) = delete;

 private:
  InterpretParams params_;
};

}  // namespace tessera::pltpu
