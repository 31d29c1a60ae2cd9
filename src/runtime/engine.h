// Internal: the engine interface — the operations in which the ways of running a kernel differ.
//
// The runtime (launch, pipelines, run_scoped, semaphores, DMA descriptors, the vector and dot
// front ends) is written once, against this interface; an engine decides how a copy moves bytes,
// how a signal and a wait behave, what happens before a vector assignment or a dot, what a fresh
// buffer holds, which block shapes and capacities are allowed. Two implementations exist:
//   - NativeEngine (src/native/native_engine.cc): the fast path; one instance serves every
//     launch that runs natively.
//   - CheckedEngine (src/check/checked_engine.h): keeps books beside the work (shadow memory,
//     vector clocks, in-flight copies, blocked cores) and raises the bugs it finds; it leaves the
//     moving of bytes to the same native copy, so both modes compute with one implementation.
//     One instance per checked launch.
// A launch picks its engine (src/runtime/launch.cc, the only place that knows both) and every
// core's context points at it. A transport between devices would be a third implementation.
//
// Every hook takes the calling core's context; an engine's per-core books hang off
// CoreContext::engine_core, which it sets in core_begin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "runtime/arena.h"
#include "tessera/block_spec.h"
#include "tessera/detail/runtime.h"
#include "tessera/ref.h"

namespace tessera::detail {

struct CoreContext;
struct LaunchState;
struct ExprProgram;
struct DotCall;
struct GatherCall;
struct RemoteCopy;
struct DeviceTarget;

/// Where a blocking wait is, for the engine's books and for messages.
struct WaitSite {
  const char* op;
  std::source_location where;
  const char* hint = "";            // a semaphore wait's advice when it times out
  const RawRef* dma_src = nullptr;  // a DMA wait: the copy's source (its bytes are counted)
  const char* unit() const noexcept { return dma_src != nullptr ? " bytes" : ""; }
};

/// An async copy in flight when its kernel ends, on a semaphore that outlives the kernel (a
/// pallas_call's semaphore output, runtime/resident.h): carried to the kernel that waits for it.
/// `executed`: its bytes have moved (and are counted on the semaphore).
///
/// In checked mode on a device mesh a remote copy is carried as two halves, each on its own
/// device's semaphore: the sender's (its bytes have left, but its source stays in flight until a
/// wait takes them from send_sem) and the receiver's (its bytes land in `dst`, from `staging`
/// when they have not yet, and stay in flight until a wait takes them from recv_sem).
struct CarriedCopy {
  enum class Half : uint8_t { kLocal, kSend, kRecv };
  RawRef src;
  RawRef dst;
  int64_t bytes = 0;
  SourceLocation made;
  SourceLocation started;
  bool executed = false;
  Half half = Half::kLocal;
  std::shared_ptr<std::vector<std::byte>> staging = {};  // kRecv, not landed: its bytes
  std::string what = {};                                 // a remote half: the copy, for messages
  uint64_t id = 0;                                       // a remote half: Transport::carried's id
  bool source_known = true;  // kSend: `src` lies in an array of the call that holds it
};

/// The capacities a core of a launch works with, resolved when the core starts.
struct CoreBudget {
  int64_t vmem = 0;  // bytes of VMEM (the kernel's limit, capped by a checked chip's VMEM)
  int64_t smem = 0;  // bytes of SMEM
  /// Set when a chip's capacity is the budget (smaller than Tessera's own): "the v5e chip's",
  /// for capacity messages.
  std::string vmem_chip;
  std::string smem_chip;
};

class Engine {
 public:
  virtual ~Engine();

  // ---- a launch and its cores ----

  /// What a core of this launch may use, given the kernel's VMEM limit.
  virtual CoreBudget budget(int64_t vmem_limit) const;
  /// Before a core's body (`scratch`: the kernel's scratch pointers, in the spec's order).
  virtual void core_begin(CoreContext& ctx, void* const* scratch);
  /// After a core's body returned normally (not after it threw).
  virtual void core_end(CoreContext& ctx);
  /// After a core's body on a device mesh, before it waits for the other devices' cores to run
  /// theirs (runtime/devices.h, mesh_bodies_done): the core does nothing more in the kernel.
  virtual void body_done(CoreContext& ctx);
  /// Always, last, for every core, even after a failure.
  virtual void core_finished(CoreContext& ctx) noexcept;
  /// After every core finished, under the pool's launch lock: may record the launch's error in
  /// state.first_error (when there is none yet).
  virtual void launch_end(LaunchState& state) noexcept;

  // ---- data movement ----

  /// A synchronous copy (sync_copy, a pipeline's copy-in and write-back); `src` and `dst` were
  /// validated (equal shapes and dtypes). `ctx` is null outside a kernel.
  virtual void copy(CoreContext* ctx, const RawRef& src, const RawRef& dst, const char* op,
                    std::source_location where) = 0;
  /// An async copy's start: `sem` is the calling core's DMA semaphore, `made` where the
  /// descriptor was made. The copy completes (in the engine's time) by adding its source's bytes
  /// to `sem`.
  virtual void dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                         std::source_location made, std::source_location where) = 0;
  /// Waits until `sem` (slot `slot` of the calling core) holds `bytes`, then takes them: a
  /// descriptor's wait (`site.dma_src` is the copy's source).
  virtual void dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                        const WaitSite& site) = 0;
  /// A semaphore outlives the kernel (runtime/resident.h): hands over the copies this engine
  /// still has in flight on `sem` (appended to `out`, forgotten here), and takes in copies an
  /// earlier kernel left in flight on it. The native engine makes every copy it holds before the
  /// semaphores are saved (flush_copies), so it has none to hand over; copies a checked kernel
  /// handed over complete when a native one takes them in.
  virtual void carry_copies_out(CoreContext& ctx, SemaphoreCell* sem,
                                std::vector<CarriedCopy>& out);
  virtual void carry_copies_in(CoreContext& ctx, SemaphoreCell* sem,
                               const std::vector<CarriedCopy>& copies);

  // ---- semaphores ----

  /// Adds `inc` to semaphore `slot` of core `target` (the caller then wakes that core).
  virtual void signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) = 0;
  /// Takes `amount` from `cell` (slot `slot` of the calling core) if it holds that much, for
  /// the wait at `site`.
  virtual bool try_take(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                        const WaitSite& site) = 0;
  /// Whether a blocked wait spins before it sleeps.
  virtual bool spin_before_sleep() const noexcept = 0;
  /// A blocked wait is about to sleep (called again after every wake-up while still short):
  /// the checked engine records the wait and raises kDeadlock when no core can satisfy it.
  virtual void blocked(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                       const WaitSite& site);
  /// A wait that blocked has taken its amount, or failed (`taken` false); either way it no
  /// longer waits.
  virtual void unblocked(CoreContext& ctx, int64_t slot, bool taken) noexcept;
  /// The core waits in the transport, outside a semaphore wait (for another device to enter a
  /// launch; `what` says what it waits for, at the user's line): the checked engine counts it as
  /// blocked, so that a deadlock over MPI ranks that involves it is found. Called again after
  /// anything reached the device while it still waits.
  virtual void transport_blocked(CoreContext& ctx, const std::string& what);
  /// That wait is over (or failed).
  virtual void transport_unblocked(CoreContext& ctx) noexcept;

  // ---- devices (runtime/remote.cc defines the defaults: the transport moves the bytes at once,
  // as the native engine's local copies do) ----

  /// A remote copy's start: moves the bytes to the target, credits the target's recv_sem and
  /// this core's send_sem.
  virtual void remote_dma_start(CoreContext& ctx, const RemoteCopy& copy);
  /// A remote copy's wait_send (`recv` false) or wait_recv on this core's semaphore `sem`.
  virtual void remote_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                               const WaitSite& site, bool recv);
  /// A signal of semaphore `slot` on another device.
  virtual void remote_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot,
                             int64_t inc, std::source_location where);

  // ---- compute ----

  /// Before a vector assignment evaluates `prog` into `dst`.
  virtual void before_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst);
  /// True for an engine that overrides before_evaluate: its assignments are planned each time
  /// (the native evaluator's statement plan cache, src/native/statement_cache.cc, builds no
  /// ExprProgram for before_evaluate to see).
  virtual bool observes_evaluate() const noexcept;
  /// Before a jnp::dot assignment (`accumulate`: +=).
  virtual void before_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst,
                          bool accumulate);
  /// A gather (lax.gather, jnp.take_along_axis, src/native/gather.h) into its result block: the
  /// default computes it (native/gather.cc, run_gather).
  virtual void gather(CoreContext& ctx, const GatherCall& call);
  /// Element access through a Ref made on a core whose engine observes elements
  /// (observes_elements() was true when the core started).
  virtual bool observes_elements() const noexcept;
  virtual void element_access(CoreContext& ctx, const void* p, int size, bool read,
                              std::source_location where);

  // ---- buffers and rules ----

  /// A fresh buffer (a run_scoped buffer, a pipeline window): its contents are unspecified.
  /// `what` names it, and is only called when a message needs it.
  virtual void fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype,
                     FunctionRef<std::string()> what);
  /// A window about to receive a partial edge block: the part outside the block is garbage
  /// that the body may compute on.
  virtual void pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype);
  /// Whether a pipeline may use a block where it lies in HBM instead of copying it into its
  /// window, where the semantics cannot tell the difference (the native engine's shortcut).
  virtual bool may_use_blocks_in_place() const noexcept;
  /// The target's rules for a block of `block` extents (squeezed axes as 1) over an array of
  /// `array` shape; raises kBlockShape. `operand` counts inputs or outputs.
  virtual void check_block_shape(CoreContext& ctx, const Shape& array, const SmallVec& block,
                                 DType dtype, int operand, bool is_output, const char* op,
                                 std::source_location where) const;
  /// The target's rules for reshaping a value of shape `in` into `out` (jnp.reshape): the
  /// checked engine with a chip refuses what Mosaic cannot lower (kBlockShape).
  virtual void check_reshape(CoreContext& ctx, const Shape& in, const Shape& out,
                             std::source_location where) const;
  /// A pipeline starts on this core, starts each of its grid steps, and ends (also when it
  /// fails); pipelines nest.
  virtual void pipeline_begins(CoreContext& ctx);
  virtual void pipeline_step_begins(CoreContext& ctx);
  /// True for an engine that overrides fresh or pipeline_step_begins (the checked engine): a
  /// pipeline calls them for every grid step and every new output visit only then.
  virtual bool observes_pipeline_steps() const noexcept;
  virtual void pipeline_ends(CoreContext& ctx) noexcept;
  /// The order in which a pipeline visits the points of its PARALLEL axes: per grid axis, empty
  /// (in order) or a permutation.
  virtual std::vector<std::vector<int64_t>> parallel_order(
      CoreContext& ctx, const Shape& grid,
      const std::vector<pltpu::GridDimensionSemantics>& semantics) const;
};

/// The engine of kernels that run natively (src/native/native_engine.cc).
Engine& native_engine() noexcept;

/// The engine of the calling core, or the native engine outside a kernel.
Engine& current_engine() noexcept;

}  // namespace tessera::detail
