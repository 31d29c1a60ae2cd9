// Internal: the checked engine's operations, shared by its files (docs/checked-mode.md). The
// CheckedEngine (checked.cc, made by checked_engine.h's make_checked_engine) calls these from its
// Engine hooks; nothing outside src/check includes this header. A checked launch keeps books
// beside the work: shadow "written" bytes of every VMEM/SMEM arena and output, the in-flight DMAs
// of each core, vector clocks per core and per semaphore, and an access history per HBM array.
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/transport.h"
#include "tessera/block_spec.h"
#include "tessera/detail/expr_program.h"
#include "tessera/dot.h"
#include "tessera/interpret.h"
#include "tessera/tpu_info.h"

namespace tessera::detail {

struct CheckedLaunch;
struct CheckedCore;

/// Sets up a checked launch: resolves the chip, checks the mesh and capacity against it,
/// poisons fresh outputs. Throws UsageError before any core runs.
std::unique_ptr<CheckedLaunch> checked_begin(const LaunchSpec& spec,
                                             const pltpu::InterpretParams& params,
                                             const LaunchBuffer* buffers, int num_buffers,
                                             int64_t vmem_limit);
/// Per core, before its body: attaches the books of core `core` (its index in the books) to
/// `ctx`, poisons its scratch.
void checked_core_begin(CheckedLaunch& launch, CoreContext& ctx, void* const* scratch, int core);
/// Per core, after its body returned normally: raises for copies started and never waited.
void checked_core_end(CoreContext& ctx);
/// After a core's body on a device mesh, before it waits for the other devices' cores: it does
/// nothing more in the kernel, so it counts as finished for deadlock detection.
void checked_body_done(CoreContext& ctx) noexcept;
/// Per core, always, last: the core is finished (for deadlock detection); detaches.
void checked_core_finished(CoreContext& ctx) noexcept;
/// After every core: unless the launch failed, raises kUninitialized for output bytes that no
/// core wrote (stored in state.first_error).
void checked_finish(CheckedLaunch& launch, LaunchState& state, int device) noexcept;
/// checked_begin's parts: the chip's rules, one device's arrays, the cores of `devices` devices.
void checked_check_chip(CheckedLaunch& launch, const LaunchSpec& spec, int64_t vmem_limit);
void checked_add_buffers(CheckedLaunch& launch, const LaunchBuffer* buffers, int num_buffers,
                         int device);
void checked_add_cores(CheckedLaunch& launch, int devices, int cores_per_device);
/// The engine hooks of a launch whose books are `launch` (shared on a device mesh); `base`: the
/// index in the books of this device's core 0, `device`: -1 off a mesh.
std::unique_ptr<Engine> make_engine_for(std::shared_ptr<CheckedLaunch> launch, int base,
                                        int device);

// ---- on a device mesh (checked_devices.cc) ----
/// A core of a device launch begins (under the mutex): joins every device's entry clock after
/// the implicit start barrier.
void checked_device_core_begins(CheckedLaunch& launch, int core);
/// A core of a device launch has finished (under the mutex): its clock persists.
void checked_device_core_finished(CheckedLaunch& launch, int core) noexcept;
/// After a core's body on a device mesh: remote copies it never waited for, bytes it never took.
void checked_remote_core_end(CoreContext& ctx);
void checked_remote_dma_start(CoreContext& ctx, const RemoteCopy& copy);
void checked_remote_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                             const WaitSite& site, bool recv);
void checked_remote_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                           std::source_location where);

/// A synchronous copy (sync_copy, pipeline copy-in / write-back): shapes already validated.
void checked_sync_copy(CoreContext& ctx, const RawRef& src, const RawRef& dst, const char* op,
                       SourceLocation where);
/// An async copy's start and its wait (the descriptor's semaphore and byte count).
void checked_dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                       SourceLocation made, SourceLocation where);
void checked_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                      const WaitSite& site);
/// A semaphore that outlives the kernel (runtime/resident.h): hands over the copies in flight on
/// `sem` whose source and destination are arrays of the launch (an unexecuted copy's destination
/// then counts as written: the copy will write it), and takes in copies an earlier kernel left.
void checked_carry_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out);
void checked_carry_in(CoreContext& ctx, SemaphoreCell* sem, const std::vector<CarriedCopy>& in);
/// A signal of `slot` on core `target`: records the happens-before edge and adds `inc`.
void checked_signal(CoreContext& ctx, int target, int64_t slot, int64_t inc);
/// Takes `amount` from `cell` under the launch's lock, acquiring the semaphore's clock; a core
/// that was blocked stops being so in the same step.
bool checked_try_take(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                      const WaitSite& site);
/// A wait about to sleep: records it, and raises kDeadlock when every core is blocked on a wait
/// that nothing can satisfy any more or has finished.
void checked_blocked(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                     const WaitSite& site);
/// The wait no longer blocks.
void checked_unblocked(CoreContext& ctx) noexcept;
/// The core waits in the transport (Engine::transport_blocked): recorded as blocked on `what`;
/// on MPI ranks, when every core of the rank is blocked, the transport gets the rank's waits.
void checked_transport_blocked(CoreContext& ctx, const std::string& what);
/// A pipeline on this core begins, begins a grid step, ends.
void checked_pipeline_begins(CoreContext& ctx);
void checked_pipeline_step_begins(CoreContext& ctx);
void checked_pipeline_ends(CoreContext& ctx) noexcept;
/// A vector assignment: its loaded refs and its destination.
void checked_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst);
/// A jnp::dot assignment / accumulation.
void checked_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst, bool accumulate);
/// A gather (src/native/gather.h): its indices must be defined and, under promise_in_bounds, in
/// bounds; its result's elements take their operand elements' definedness.
void checked_gather(CoreContext& ctx, const GatherCall& call);
/// An element access through a Ref made on a checked core.
void checked_element(CoreContext& ctx, const void* p, int size, bool read, SourceLocation where);
/// A fresh buffer (run_scoped, a pipeline window): poisoned and never written.
/// `what` names it in messages ("the window of output 0").
void checked_fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype, std::string what);
/// A pipeline input window about to receive a partial edge block: poison that counts as written
/// (the padding is garbage on a TPU, and computing on it is fine).
void checked_pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype);
/// Permutations of the PARALLEL axes of `grid` (empty when the order is not randomised).
std::vector<std::vector<int64_t>> checked_parallel_order(
    const CheckedLaunch& launch, const Shape& grid,
    const std::vector<pltpu::GridDimensionSemantics>& semantics);
/// Raises kBlockShape when `block` (squeezed axes as 1) of an array of `array` shape breaks the
/// TPU's tiling rules (docs/checked-mode.md, kBlockShape).
void checked_block_shape(const Shape& array, const SmallVec& block, DType dtype, int operand,
                         bool is_output, const char* op, SourceLocation where);

}  // namespace tessera::detail
