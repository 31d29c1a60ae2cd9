// Internal: the MPI transport (mpi_runtime.h describes the design): this rank is device `rank`
// of the mesh; other devices are reached through the window (same host: load/store; otherwise
// MPI_Put by the engine thread) and through signal messages.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/mpi_runtime.h"
#include "runtime/transport.h"

namespace tessera::detail::mpi {

class MpiTransport final : public Transport {
 public:
  MpiTransport(MeshInfo mesh, MpiRuntime& runtime);

  void enter(int device, DeviceLaunch& launch, bool barrier) override;
  void leave(int device, DeviceLaunch& launch) noexcept override;
  void put(CoreContext& ctx, const RemoteCopy& copy) override;
  void signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc, const char* op,
              std::source_location where) override;
  void fail(int device, std::exception_ptr error) noexcept override;
  void finished(int device) noexcept override;
  std::exception_ptr failure() const override;
  uint64_t entered(int device) const override;
  bool done(int device) const override;

  /// From the engine thread: a signal from another rank (or this one) for this rank's cores:
  /// applied now, or kept until this rank enters the launch it belongs to.
  void deliver(const Signal& s);
  /// From the engine thread: rank `rank` failed with `message`.
  void cancelled_by(int rank, int kind, const std::string& message);
  /// True once this rank or another has failed.
  bool failed() const noexcept { return failed_.load(); }

 private:
  // Applies `s` to the running launch (under mu_); false when it is not for it.
  bool apply(const Signal& s);
  void cancel_launch() noexcept;  // under mu_
  // Waits (sleeping) until `ready()`; raises kCancelled after a failure, kTimeout at the launch's
  // deadline naming `what`.
  template <class Ready, class What>
  void wait_for(const CoreContext& ctx, Ready ready, const char* op, std::source_location where,
                What what);
  // The target's copy of the sender's HBM destination `dst` (its window offset), from the
  // target's directory `dir`.
  int64_t target_offset(const CoreContext& ctx, const Directory& dir, int target, const RawRef& dst,
                        const char* op, std::source_location where) const;
  void put_rma(CoreContext& ctx, const RemoteCopy& copy, int64_t offset);

  MpiRuntime& rt_;
  int rank_;
  mutable std::mutex mu_;
  DeviceLaunch* launch_ = nullptr;
  uint64_t entered_ = 0;
  bool done_ = false;
  std::vector<Signal> early_;  // signals of launches not yet entered (or of cores not yet made)
  std::exception_ptr failure_;
  std::atomic<bool> failed_{false};
};

}  // namespace tessera::detail::mpi
