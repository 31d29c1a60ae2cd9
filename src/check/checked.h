// Internal: the checked engine (issue #5, docs/checked-mode.md). A checked launch keeps books
// beside the native engine's work: shadow "written" bytes of every VMEM/SMEM arena and output,
// the in-flight DMAs of each core, vector clocks per core and per semaphore, and an access
// history per HBM array. The native code calls in here only at coarse points, and only when the
// core's context has `checked` set:
//   launch (begin / per core / end), dma_copy, async start and wait, semaphore signal and wait
//   (block_until), the top of evaluate() and dot_evaluate(), element access of refs made inside
//   a checked core, and pipeline windows (fresh buffers, copy-in, write-back).
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "tessera/block_spec.h"
#include "tessera/detail/expr_program.h"
#include "tessera/dot.h"
#include "tessera/interpret.h"
#include "tessera/tpu_info.h"

namespace tessera::detail {

struct CheckedLaunch;

/// The checked state of one core (CoreContext::checked).
struct CheckedCore;

struct CheckedLaunchDeleter {
  void operator()(CheckedLaunch* p) const noexcept;
};
using CheckedLaunchPtr = std::unique_ptr<CheckedLaunch, CheckedLaunchDeleter>;

/// Sets up a checked launch: resolves the chip, checks the mesh and capacity against it,
/// poisons fresh outputs. Throws UsageError before any core runs.
CheckedLaunchPtr checked_begin(const LaunchSpec& spec, const pltpu::InterpretParams& params,
                               const LaunchBuffer* buffers, int num_buffers, int64_t vmem_limit);
/// The VMEM budget a checked core works with (the limit, capped by the chip's VMEM).
int64_t checked_vmem_limit(const CheckedLaunch& launch, int64_t vmem_limit) noexcept;
/// Per core, before its body: attaches the core's state to `ctx`, poisons its scratch.
void checked_core_begin(CheckedLaunch& launch, CoreContext& ctx, void* const* scratch);
/// Per core, after its body returned normally: raises for copies started and never waited.
void checked_core_end(CoreContext& ctx);
/// Per core, always, last: the core is finished (for deadlock detection); detaches.
void checked_core_finished(CoreContext& ctx) noexcept;
/// After every core: unless the launch failed, raises kUninitialized for output bytes that no
/// core wrote (stored in state.first_error).
void checked_finish(CheckedLaunch& launch, LaunchState& state) noexcept;

// ---- hooks --------------------------------------------------------------------------------
/// A synchronous copy (sync_copy, pipeline copy-in / write-back): shapes already validated.
void checked_sync_copy(CoreContext& ctx, const RawRef& src, const RawRef& dst, const char* op,
                       std::source_location where);
/// An async copy's start and its wait (the descriptor's semaphore and byte count).
void checked_dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                       std::source_location made, std::source_location where);
void checked_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes, const RawRef& src,
                      const char* op, std::source_location where);
/// A signal of `slot` on core `target`: records the happens-before edge and adds `inc`.
void checked_signal(CoreContext& ctx, int target, int64_t slot, int64_t inc);
/// The checked form of a blocking wait: polls, detects deadlocks, acquires the clock.
/// `describe` names the semaphore for messages.
void checked_block_until(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                         const char* op, std::source_location where, const std::string& what,
                         const char* unit);
/// A vector assignment: its loaded refs and its destination.
void checked_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst);
/// A jnp::dot assignment / accumulation.
void checked_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst, bool accumulate);
/// A fresh buffer (run_scoped, a pipeline window): poisoned and never written.
/// `what` names it in messages ("the window of output 0").
void checked_fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype, std::string what);
/// A pipeline input window about to receive a partial edge block: poison that counts as written
/// (the padding is garbage on a TPU, and computing on it is fine).
void checked_pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype);
/// The parameters of the running checked launch.
const pltpu::InterpretParams& checked_params(const CoreContext& ctx) noexcept;
/// The chip of the checked launch, or null when none was named.
const pltpu::TpuInfo* checked_chip(const CoreContext& ctx) noexcept;
/// Permutations of the PARALLEL axes of `grid` (empty when the order is not randomised).
std::vector<std::vector<int64_t>> checked_parallel_order(
    const CoreContext& ctx, const Shape& grid,
    const std::vector<pltpu::GridDimensionSemantics>& semantics);
/// Raises kBlockShape when `block` (squeezed axes as 1) of an array of `array` shape breaks the
/// TPU's tiling rules (pallas-reference §3.1).
void checked_block_shape(const Shape& array, const SmallVec& block, DType dtype, int operand,
                         bool is_output, const char* op, std::source_location where);

/// The native copy without checks, and the shape/dtype checks of a copy (src/native/dma.cc).
void validate_copy(const RawRef& src, const RawRef& dst, const char* op,
                   std::source_location where);
void dma_copy_raw(const RawRef& src, const RawRef& dst);

}  // namespace tessera::detail
