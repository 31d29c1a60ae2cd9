// Internal: the transport — how the devices of a mesh reach each other. One code path above it
// (runtime/remote.cc: remote copies and signals; runtime/devices.cc: the device launch, its
// barrier and its cancellation) and one implementation per way devices can be arranged:
//   - InProcessTransport (transport_inprocess.cc): devices are thread groups of this process;
//     a remote copy is a strided copy into the target's memory on the sending core, a signal an
//     atomic add on the target's semaphore.
//   - MpiTransport (src/mpi/, the optional tessera::mpi component): one device per rank; same
//     host: load/store through a shared-memory window; across hosts: MPI-3 passive-target RMA,
//     with one thread per rank owning the MPI calls.
//
// Symmetric addressing. A remote copy's destination view is one of the sender's own buffers of
// the running launch — an HBM array (output or aliased input), or the core's VMEM or SMEM — and
// names the same buffer on the target, where every device has it because every device runs the
// same kernel. Launches are numbered per device from 1 in the order each device's program makes
// them (`DeviceLaunch::seq`): a remote operation of launch n reaches the target's launch n, and
// waits for the target to enter it when it has not yet.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "runtime/arena.h"
#include "tessera/detail/runtime.h"
#include "tessera/ref.h"
#include "tessera/remote_dma.h"

namespace tessera::detail {

struct CoreContext;
struct LaunchState;
class CorePool;

/// The device mesh of a running program.
struct MeshInfo {
  std::vector<std::string> axis_names;
  std::vector<int> shape;
  int size = 1;
  /// The row-major coordinates of device `id`.
  std::vector<int> coords(int id) const;
  /// The row-major index of `coords`.
  int logical(const std::vector<int>& coords) const;
  /// "(1, 0)" or "1" on a 1-D mesh.
  std::string name(int id) const;
};

/// What a checked engine sends with a remote operation where devices keep their own books (MPI
/// ranks): the sender's core, line and vector clock, carried on the operation's message, so
/// that the target's books can order it against their own accesses and waits.
struct CheckNote {
  int from_core = 0;            // the sender's core (its device is the sender)
  int cores_per_device = 1;     // the layout of `clock`: device * cores_per_device + core
  SourceLocation where;         // the start() or semaphore_signal
  std::vector<uint32_t> clock;  // the sender's clock at the operation
  // The last launch the sender entered through the implicit start barrier (which orders every
  // device's entry of it before this operation).
  uint64_t barrier_seq = 0;
  bool copy = false;  // a remote copy's landing (else a signal)
  RawRef dst;         // a copy's destination: the sender's view; at the target, the target's
  int64_t bytes = 0;
  // A copy's definedness: the checked engine's state of each source element, in row-major order
  // of the view (empty: every element is defined), and where its undefined elements were
  // computed from never-written data (a state of 2 + i names origins[i]).
  struct Origin {
    SourceLocation where;
    int core = 0;
    std::string source;  // the never-written memory that statement read, as the sender names it
  };
  std::vector<uint8_t> states;
  std::vector<Origin> origins;
};

/// A device's books for remote operations reaching it (the checked engine's, under MPI).
class ArrivalObserver {
 public:
  virtual ~ArrivalObserver();
  /// A remote operation of launch `seq` from `from_device` reaches semaphore `slot` of core
  /// `core`, before the semaphore gains `inc`: checks it against what the books know (a race
  /// is returned, not thrown: the caller is the transport's engine thread) and records it.
  virtual std::exception_ptr arrived(int from_device, uint64_t seq, const CheckNote& note, int core,
                                     int64_t slot, int64_t inc) noexcept = 0;
  /// Whether core `core` of the running launch has begun (its books made its VMEM and SMEM:
  /// poisoned and marked unwritten), so that bytes landing in them now are kept.
  virtual bool core_begun(int core) noexcept = 0;
};

/// What a device publishes about one of its launches, for the others' remote operations.
struct DeviceLaunch {
  uint64_t seq = 0;  // 1 for the program's first launch on this device, then 2, ...
  const LaunchSpec* spec = nullptr;
  std::vector<LaunchBuffer> buffers;  // this device's HBM arrays of the launch (inputs, outputs)
  LaunchState* state = nullptr;
  CorePool* pool = nullptr;
};

/// A remote copy as the runtime hands it to an engine: validated views, the sender's DMA
/// semaphore, the slot of the receiver's (the same slot on the target core), and the target
/// with its core resolved.
/// The byte range [lo, hi) a view covers (its first and one past its last element; empty for a
/// view with no elements).
void view_span(const RawRef& r, uintptr_t& lo, uintptr_t& hi);

struct RemoteCopy {
  RawRef src;
  RawRef dst;  // the sender's view; the transport finds the target's buffer
  SemaphoreCell* send_sem = nullptr;
  int64_t recv_slot = 0;
  DeviceTarget target;
  int64_t bytes = 0;
  std::source_location made;
  std::source_location where;
  const CheckNote* note = nullptr;  // the checked engine's, where the transport carries it
};

class Transport {
 public:
  virtual ~Transport();
  const MeshInfo& mesh() const noexcept { return mesh_; }

  /// Device `device` enters `launch` (published for the others). With `barrier`, returns once
  /// every device of the mesh has entered this launch (the implicit start barrier). Throws
  /// kCancelled when a device has failed, kTimeout / kInvalidArgument when a device can never
  /// enter it (it finished its program, or runs another kernel).
  virtual void enter(int device, DeviceLaunch& launch, bool barrier) = 0;
  /// Device `device` leaves its launch (every core has finished): from here no remote operation
  /// reaches its memory; returns once those in progress are done.
  virtual void leave(int device, DeviceLaunch& launch) noexcept = 0;
  /// Moves the bytes of a remote copy from core `ctx` into the target device's destination and
  /// adds them to the target core's semaphore `copy.recv_slot` (waking it). The caller credits
  /// the sender's semaphore.
  virtual void put(CoreContext& ctx, const RemoteCopy& copy) = 0;
  /// Adds `inc` to semaphore `slot` of `target`'s core (the caller's when target.core < 0).
  virtual void signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc,
                      const char* op, std::source_location where,
                      const CheckNote* note = nullptr) = 0;
  /// Device `device` failed with `error` (in a kernel or in host code): every device's waits are
  /// cancelled, and devices that enter a launch afterwards stop at once. The first failure is
  /// kept.
  virtual void fail(int device, std::exception_ptr error) noexcept = 0;
  /// Device `device`'s program has returned: a device that waits for it to enter a launch fails.
  virtual void finished(int device) noexcept = 0;
  /// The first failure, or null.
  virtual std::exception_ptr failure() const = 0;
  /// The number of the last launch device `device` has entered (0: none yet).
  virtual uint64_t entered(int device) const = 0;
  /// True when `device`'s program has returned.
  virtual bool done(int device) const = 0;

  // ---- semaphores that outlive a launch (a pallas_call's SemaphoreArray operands) ----

  /// A remote copy or signal may use such a semaphore, so that a copy stays in flight into a
  /// later call. Core `ctx` has run its body in a launch with such semaphores: returns once every
  /// core of every device has run its body in the same launch, so that everything any device
  /// sends in it has arrived before a device saves the semaphores' counts. Throws kCancelled
  /// when a device failed, kTimeout / kInvalidArgument when a device never gets there.
  virtual void bodies_done(CoreContext& ctx) = 0;
  /// A half of a remote copy that the checked engine carries into a later call on such a
  /// semaphore (`what`: the copy and the wait it needs; `started`: its start): returns its id,
  /// reported by never_waited() unless waited(id) comes first.
  struct Carried {
    SourceLocation started;
    std::string what;
  };
  uint64_t carried(SourceLocation started, std::string what);
  void waited(uint64_t id) noexcept;
  /// What is still carried, oldest first, and forgets it (at the end of the program nothing
  /// will wait for it any more).
  std::vector<Carried> never_waited();

  // ---- load/store access, for an engine that moves remote bytes itself (the checked engine) --

  /// True when this transport reaches other devices' memory by load and store.
  virtual bool direct() const noexcept { return false; }
  /// The target's launch of the caller's launch number, once the target has entered it, pinned
  /// (its memory stays valid) until release(target). Raises as put() does.
  virtual DeviceLaunch& access(CoreContext& ctx, int target, const char* op,
                               std::source_location where);
  virtual void release(int target) noexcept;
  /// The target's view of the sender's destination `dst` on core `core` of launch `to`.
  virtual RawRef translate(const CoreContext& ctx, const DeviceLaunch& to, int target, int core,
                           const RawRef& dst, const char* op, std::source_location where) const;

  // ---- checked mode where each device keeps its own books (MPI ranks) ----

  /// The books that see operations arriving at this process's device (set once per program by
  /// the checked engine; null otherwise).
  void observe(std::shared_ptr<ArrivalObserver> observer);
  /// A number that changes whenever something reaches this process's device: read before a
  /// check that every core is blocked, passed to stuck().
  virtual uint64_t wait_version() const noexcept { return 0; }
  /// Every core of this process's device is blocked (`waits`: what each waits for) and has been
  /// since wait_version() returned `version`: the transport may conclude a deadlock over every
  /// device from this. Default: nothing (in process the books are shared).
  virtual void stuck(uint64_t version, std::string waits) noexcept;

  // ---- waits that take what arrives themselves (MPI ranks on one host: mpi_mailbox.h) ----

  /// True when a thread of this process's device that spins in a wait should call poll(), so
  /// that what other devices send reaches it without waking a thread of the transport's own.
  virtual bool polled() const noexcept { return false; }
  virtual void poll() {}
  /// A thread of this process's device goes to sleep in a wait (true; what arrives from then on
  /// must wake it) or has woken (false). Asleep below calls it for a scope.
  virtual void sleeping(bool /*on*/) noexcept {}
  class Asleep {
   public:
    explicit Asleep(Transport* t) noexcept : t_(t != nullptr && t->polled() ? t : nullptr) {
      if (t_ != nullptr) t_->sleeping(true);
    }
    ~Asleep() {
      if (t_ != nullptr) t_->sleeping(false);
    }
    Asleep(const Asleep&) = delete;
    Asleep& operator=(const Asleep&) = delete;

   private:
    Transport* t_;
  };

  // ---- books an engine shares between devices (the checked engine's) ----

  /// The program's books: made by `make` on first use, the same object for every device.
  std::shared_ptr<void> program_books(FunctionRef<std::shared_ptr<void>()> make);
  /// The books of launch number `seq`, shared by every device's launch of that number: made by
  /// the first device to ask; forgotten here once every device has asked.
  std::shared_ptr<void> launch_books(uint64_t seq, FunctionRef<std::shared_ptr<void>()> make);

 protected:
  /// The observer set by observe(), or null.
  std::shared_ptr<ArrivalObserver> observer();

  MeshInfo mesh_;

 private:
  std::mutex books_mu_;
  std::shared_ptr<ArrivalObserver> observer_;
  std::shared_ptr<void> program_books_;
  std::map<uint64_t, std::pair<std::shared_ptr<void>, int>> launch_books_;  // books, devices
  std::map<uint64_t, Carried> carried_;                                     // by id
  uint64_t next_carried_ = 1;
};

}  // namespace tessera::detail
