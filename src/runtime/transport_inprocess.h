// Internal: the in-process transport (runtime/transport.h) — every device of the mesh is a
// thread group of this process with a core pool of its own, so a remote copy is a strided copy
// into the target's memory on the sending core and a signal an atomic add, as between the cores
// of one device.
//
// Each device publishes its running launch (`Device::launch`) and the number of the last launch
// it entered. A remote operation of launch n on device s waits until its target has entered
// launch n (sleeping on the transport's event word, which every entry, exit and failure bumps),
// then counts itself in the target's `writers` while it touches the target's memory; leave()
// withdraws the launch and waits until `writers` is zero, so a target's buffers and semaphores
// are never written after it has left (a late sender gets an error instead). A launch whose
// semaphores outlive it (a pallas_call's semaphore operands, where a copy may stay in flight into
// a later call) also ends together: no device leaves it before every device's cores have run
// their bodies (bodies_done), so every copy and signal of the launch reaches its target there.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/transport.h"

namespace tessera::detail {

class InProcessTransport final : public Transport {
 public:
  explicit InProcessTransport(MeshInfo mesh);
  ~InProcessTransport() override;

  void enter(int device, DeviceLaunch& launch, bool barrier) override;
  void leave(int device, DeviceLaunch& launch) noexcept override;
  void put(CoreContext& ctx, const RemoteCopy& copy) override;
  void signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc, const char* op,
              std::source_location where, const CheckNote* note) override;
  void fail(int device, std::exception_ptr error) noexcept override;
  void finished(int device) noexcept override;
  std::exception_ptr failure() const override;
  uint64_t entered(int device) const override;
  bool done(int device) const override;

  /// Semaphores that outlive a launch: the launch ends on every device together.
  void bodies_done(CoreContext& ctx) override;

  bool direct() const noexcept override { return true; }
  /// The target's launch that a remote operation of core `ctx`'s launch reaches, once the
  /// target has entered it; counted in the target's writers until release() (kCancelled,
  /// kTimeout, kInvalidArgument when it cannot be reached).
  DeviceLaunch& access(CoreContext& ctx, int target, const char* op,
                       std::source_location where) override;
  void release(int target) noexcept override;
  /// The target's view of the sender's `dst` (the same buffer of the target's launch `to`, on
  /// core `core`); kInvalidArgument for a view no other device has.
  RawRef translate(const CoreContext& ctx, const DeviceLaunch& to, int target, int core,
                   const RawRef& dst, const char* op, std::source_location where) const override;
  /// The semaphore cell `slot` of `core` of `target` in launch `to`.
  SemaphoreCell& cell(const DeviceLaunch& to, int core, int64_t slot) const;

 private:
  struct alignas(64) Device {
    std::atomic<DeviceLaunch*> launch{nullptr};
    std::atomic<uint64_t> entered{0};  // seq of the last launch entered
    std::atomic<int> writers{0};
    std::atomic<bool> done{false};
    std::atomic<int> bodies{0};           // cores of the running launch past bodies_done()
    std::atomic<uint64_t> bodies_seq{0};  // the last launch all of whose cores got there
    std::atomic<int> cpu{-1};             // where its thread entered its last launch
  };
  // Moves device `device`'s thread off device 0's CPU when it entered a launch there.
  void keep_apart(int device) noexcept;

  // Sleeps until `ready()` (re-checked after each wake-up of the event word), the deadline of
  // core/launch `state`, or a failure; `what` describes the wait for the timeout message.
  template <class Ready>
  void wait_for(LaunchState* state, int64_t timeout_ms, Ready ready, const char* op,
                std::source_location where, FunctionRef<std::string()> what);
  void bump() noexcept;

  std::unique_ptr<Device[]> devices_;
  std::atomic<uint32_t> event_{0};
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::exception_ptr failure_;
  int failed_device_ = -1;
};

}  // namespace tessera::detail
