// Internal: the device a thread runs as, and how a launch takes part in a device mesh.
//
// A program mapped over a mesh (tessera::shard_map, device.h) runs on every device; in process
// each device is a thread with a core pool of its own (CorePool::for_device), under MPI this
// process is one device. On such a thread `current_device()` says which device it is; launch()
// (runtime/launch.cc) then makes the launch a device launch through a DeviceLaunchScope:
// published to the transport, started with the implicit barrier unless the kernel has a
// collective_id, cancelled when another device fails, and withdrawn when its cores are done.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "runtime/transport.h"
#include "tessera/detail/runtime.h"

namespace tessera::detail {

struct CoreContext;
struct LaunchState;

/// A device of a running program, as its threads see it.
struct DeviceContext {
  Transport* transport = nullptr;
  const MeshInfo* mesh = nullptr;
  int device = 0;                  // LOGICAL id (row-major index)
  std::vector<int> coords;         // on the mesh's axes
  uint64_t launches = 0;           // launches this device's program has made so far
  DeviceLaunch* launch = nullptr;  // the running launch, or null
};

/// The device the calling thread runs as (a device thread, or a core of a device launch), or
/// null.
DeviceContext* current_device() noexcept;

/// A launch's part in its device mesh; does nothing on a thread that is no device.
class DeviceLaunchScope {
 public:
  /// Numbers the launch and gathers its arrays (nothing is published yet: see enter()).
  DeviceLaunchScope(const LaunchSpec& spec, LaunchState& state, LaunchBuffers buffers);
  /// Publishes the launch and, unless the kernel has a collective_id or skips it, waits for
  /// every device of the mesh to enter it. Throws kCancelled when a device has failed.
  void enter();
  ~DeviceLaunchScope();
  DeviceLaunchScope(const DeviceLaunchScope&) = delete;
  DeviceLaunchScope& operator=(const DeviceLaunchScope&) = delete;

  /// The device, for the cores' contexts (null without one).
  DeviceContext* device() const noexcept { return device_; }
  /// What the launch publishes (valid with a device).
  const DeviceLaunch& launch() const noexcept { return launch_; }
  /// A core of this launch failed, and `error` is the launch's first error (which the program
  /// reports if no device told the mesh of one before): the other devices are cancelled.
  void core_failed(std::exception_ptr error) noexcept;
  /// Every core has finished: no remote operation reaches this device's launch afterwards (its
  /// semaphores can be checked and cleared). Idempotent.
  void leave() noexcept;

 private:
  DeviceContext* device_ = nullptr;
  DeviceLaunch launch_;
  bool left_ = false;
};

/// Test hook: a core whose failure is its launch's first waits `ms` milliseconds before telling
/// the other devices (src/runtime/launch.cc), so that a core it woke, which fails with kCancelled,
/// tells them first; the program must still report the first error. 0 (the default) restores.
void set_first_error_report_delay_for_test(int ms) noexcept;

/// Core `ctx` has run its body in a launch whose semaphores outlive it (a pallas_call with
/// semaphore operands): on a mesh of several in-process devices, returns once every core of every
/// device has run its body in this launch (Transport::bodies_done), so that the counts and the
/// copies in flight it then saves include everything sent to it. Does nothing off a mesh.
void mesh_bodies_done(CoreContext& ctx);

/// Names semaphore `slot` when it is a barrier semaphore ("the barrier semaphore of
/// collective_id 2"), else returns "".
std::string barrier_semaphore_name(int64_t slot);
/// The first slot of the barrier semaphores (kSemaphoresPerCore - kBarrierSemaphores).
int64_t first_barrier_slot() noexcept;

}  // namespace tessera::detail
