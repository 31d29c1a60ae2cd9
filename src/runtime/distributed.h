// Internal: the seam where a distributed runtime (one device per process, e.g. MPI ranks: the
// optional tessera::mpi component, src/mpi/) plugs in. The core library knows only this
// interface; the component registers its implementation when it is linked into the program.
#pragma once

#include <exception>
#include <source_location>

#include "runtime/transport.h"
#include "tessera/detail/runtime.h"

namespace tessera {
class Mesh;
}

namespace tessera::detail {

class DistributedRuntime {
 public:
  virtual ~DistributedRuntime();
  /// True when this process runs as one rank of a distributed job (and TESSERA_TRANSPORT does
  /// not keep it in process).
  virtual bool active() = 0;
  virtual int rank() = 0;
  virtual int size() = 0;
  /// Runs this rank's device of a program mapped over `mesh` (whose size must be size()) on the
  /// calling thread: job(rank()). Rethrows the first error of any rank.
  virtual void run_program(const Mesh& mesh, FunctionRef<void(int)> job,
                           std::source_location where) = 0;
};

/// The registered distributed runtime, or null.
DistributedRuntime* distributed_runtime() noexcept;
/// Registers `runtime` (called once, by the component, before main).
void register_distributed_runtime(DistributedRuntime* runtime) noexcept;
/// The devices a program may use: the ranks under a distributed runtime, else TESSERA_DEVICES,
/// else 1.
int default_device_count();
/// The runtime's description of `mesh`.
MeshInfo mesh_info(const Mesh& mesh);

/// Runs device `device`'s part of a program on the calling thread, as that device of `transport`
/// (current_device() is it meanwhile): job(device); an error is stored in `error` and reported to
/// the transport (which cancels the other devices), and the device is marked finished.
void run_as_device(Transport& transport, int device, FunctionRef<void(int)> job,
                   std::exception_ptr& error);
/// After a program: the halves of remote copies the checked engine carried on semaphores that
/// outlived their kernels (Transport::carried) and no later call waited for become `error`
/// (kSemaphoreLeak) unless there is one already.
void check_never_waited(Transport& transport, std::exception_ptr& error);
/// After a program: clears the barrier semaphores of `device`'s cores in `pool`; the first
/// non-zero one becomes `error` (kSemaphoreLeak) unless there is one already.
void check_barrier_semaphores(const MeshInfo& mesh, int device, CorePool& pool,
                              std::exception_ptr& error, std::source_location where);

}  // namespace tessera::detail
