// Internal: the runtime side of semaphores — which slot of the calling core a semaphore view
// is, how errors name it, the one blocking wait both engines use, and the clean-up at the end of
// a launch.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>

#include "runtime/context.h"
#include "runtime/engine.h"

namespace tessera::detail {

/// The calling core's context; raises kOutsideKernel (naming `op`) outside a kernel body.
CoreContext& context_for(const char* op, std::source_location where);

/// The index of `cell` in the calling core's semaphore region; raises kInvalidArgument for a
/// view of another core's semaphores (a wait would sleep on the wrong queue).
int64_t own_slot(const CoreContext& ctx, const SemaphoreCell* cell, const char* op,
                 std::source_location where);

/// Names semaphore `slot` of a core ("scratch #1 SemaphoreType.REGULAR((4,)) element (2,)",
/// "run_scoped #0 SemaphoreType.DMA (scope at k.cc:40)"). `ctx` (the core's own context, or null
/// for the launcher) knows the live run_scoped scopes; `kind` is set when known.
std::string name_semaphore(const LaunchSpec& spec, const CoreContext* ctx, int64_t slot,
                           SemaphoreKind* kind = nullptr);
/// Whether semaphore `slot` stands for a pallas_call's semaphore operand (a SemaphoreArray), whose
/// count outlives the launch (ScratchRequest::outlives_launch).
bool semaphore_outlives_launch(const LaunchSpec& spec, int64_t slot) noexcept;
/// The same for a cell of the calling core.
std::string describe_semaphore(const CoreContext& ctx, const SemaphoreCell* cell);

/// Blocks until `cell` (slot `slot` of the calling core) holds at least `amount`, then takes it:
/// the engine's try_take first; then, where the engine allows, a short spin; then sleeps on the
/// core's wait queue, woken by signals, copies and cancellation, until the launch's wait timeout.
/// Raises kCancelled when another core failed meanwhile, kTimeout at the deadline (with the
/// site's hint), and whatever the engine's `blocked` hook raises (kDeadlock).
void block_until(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                 const WaitSite& site);

/// Adds the bytes of a completed copy to its DMA semaphore (releasing the copied bytes to the
/// waiter) and wakes the core that owns it.
void add_dma_bytes(CoreContext& ctx, SemaphoreCell* cell, int64_t bytes);

/// Raises `state.semaphore_high` to at least `bytes`.
void raise_semaphore_high(LaunchState& state, int64_t bytes) noexcept;

/// Wakes every core of the launch that sleeps in a semaphore wait (after `cancelled` was set,
/// or when the checked engine wants blocked cores to look again).
void wake_semaphore_waiters(int num_cores);

/// After every core of a launch has finished: unless the launch already failed, checks that each
/// semaphore of every core is zero and records a kSemaphoreLeak KernelError in
/// state.first_error otherwise; then zeroes the semaphores the launch used, on every core.
void finish_semaphores(const LaunchSpec& spec, LaunchState& state) noexcept;

}  // namespace tessera::detail
