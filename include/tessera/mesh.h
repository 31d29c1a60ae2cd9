// File: tessera/mesh.h
//
// `pltpu::TensorCoreMesh` and `lax::axis_index`: a kernel launched with
// `pl::kernel(..., mesh)` runs its body once on every core of the mesh,
// concurrently (SPMD). Inside the body, `lax::axis_index("core")` says which
// core is running, so each core can take its own share of the work.
//
//   Pallas                                         Tessera
//   pltpu.TensorCoreMesh(axis_name="core")         pltpu::TensorCoreMesh("core")
//   pltpu.TensorCoreMesh("core", num_cores=2)      pltpu::TensorCoreMesh("core", 2)
//   i = jax.lax.axis_index("core")                 const int i = lax::axis_index("core");
//
// In the native engine the cores are a persistent pool of threads (one per
// mesh core; the caller's thread runs core 0). The default core count is this
// machine's hardware threads, or the TESSERA_NUM_CORES environment variable.
// A mesh may have more cores than the machine has threads (they then share
// the hardware), up to 256.
#pragma once

#include <source_location>
#include <string>
#include <string_view>
#include <utility>

#include "tessera/detail/runtime.h"

namespace tessera {
namespace pltpu {

/// `pltpu.TensorCoreMesh`: a 1-D mesh of TensorCores named `axis_name`.
class TensorCoreMesh {
 public:
  /// A mesh of the default core count (hardware threads, or TESSERA_NUM_CORES).
  explicit TensorCoreMesh(std::string axis_name,
                          std::source_location where = std::source_location::current())
      : TensorCoreMesh(std::move(axis_name), detail::default_num_cores(where), where) {}
  /// A mesh of `num_cores` cores (1 .. 256). Throws UsageError otherwise, or for an empty name.
  TensorCoreMesh(std::string axis_name, int num_cores,
                 std::source_location where = std::source_location::current())
      : axis_name_(std::move(axis_name)), num_cores_(num_cores), where_(where) {
    if (axis_name_.empty()) {
      detail::raise(ErrorKind::kInvalidArgument, "TensorCoreMesh", where,
                    "the axis name is empty; name the core axis, e.g. TensorCoreMesh(\"core\")");
    }
    detail::check_num_cores(num_cores_, where);
  }

  const std::string& axis_name() const noexcept { return axis_name_; }
  int num_cores() const noexcept { return num_cores_; }
  /// Where the mesh was made.
  const std::source_location& where() const noexcept { return where_; }

 private:
  std::string axis_name_;
  int num_cores_;
  std::source_location where_;
};

}  // namespace pltpu

namespace lax {
/// `jax.lax.axis_index(name)`: the running core's index along mesh axis `name` (or, on a
/// device mesh, the device's coordinate on axis `name`; device.h).
/// Throws UsageError (kOutsideKernel) outside a kernel body, KernelError (kUnknownAxis) for a
/// name the kernel's mesh does not have.
inline int axis_index(std::string_view name,
                      std::source_location where = std::source_location::current()) {
  return detail::axis_index(name, where);
}
/// `jax.lax.axis_size(name)`: the number of cores of the kernel's TensorCoreMesh axis `name`, or
/// of devices along device mesh axis `name` (inside a kernel, or in a function mapped by
/// jax::shard_map). Throws as axis_index.
inline int axis_size(std::string_view name,
                     std::source_location where = std::source_location::current()) {
  return detail::axis_size(name, where);
}
}  // namespace lax

namespace pltpu {
/// `pltpu.run_on_first_core(axis_name)`: runs `f` only on core 0 of the mesh axis, e.g. for a
/// result every core computed identically. (Several cores writing the same HBM bytes is a
/// write/write race, harmless on a TPU when the values agree but undefined behaviour in C++ and
/// an error in the checked mode.)
template <class F>
void run_on_first_core(std::string_view axis_name, F&& f,
                       std::source_location where = std::source_location::current()) {
  if (detail::axis_index(axis_name, where) == 0) std::forward<F>(f)();
}
}  // namespace pltpu

}  // namespace tessera
