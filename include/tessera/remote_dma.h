// File: tessera/remote_dma.h
//
// Communication between the devices of a mesh (device.h): remote DMAs, remote semaphore
// signals and barrier semaphores — Pallas' `pltpu.make_async_remote_copy`,
// `pl.semaphore_signal(..., device_id=...)` and `pltpu.get_barrier_semaphore()`.
//
//   Pallas                                              Tessera
//   pltpu.make_async_remote_copy(src_ref=x,             pltpu::make_async_remote_copy(x, o,
//       dst_ref=o, send_sem=s, recv_sem=r,                  s, r, {right},
//       device_id=(right,),                                 pl::DeviceIdType::MESH)
//       device_id_type=pl.DeviceIdType.MESH)
//   copy.start(); copy.wait_send(); copy.wait_recv()    copy.start(); copy.wait_send(); ...
//   pl.semaphore_signal(sem, 1, device_id=(left,),      pl::semaphore_signal(sem, 1,
//       device_id_type=pl.DeviceIdType.MESH)                pl::device_id({left}),
//                                                           pl::DeviceIdType::MESH);
//   device_id={'x': i} / device_id=3 (LOGICAL)          {{"x", i}} / 3, pl::DeviceIdType::LOGICAL
//   pltpu.get_barrier_semaphore()                       pltpu::get_barrier_semaphore()
//   pltpu.CompilerParams(collective_id=0)               pltpu::CompilerParams{.collective_id = 0}
//
// Semantics (docs/devices.md):
//   - Communication is push-only. The destination ref of a remote copy names the same buffer
//     and view on the target device (outputs, aliased inputs, scratch, run_scoped buffers: every
//     device runs the same kernel, so they exist on all); the target core is the sender's own
//     core index. A device may target itself.
//   - Device ids: MESH (the default) takes one coordinate per mesh axis ({i, j}; a bare integer
//     on a 1-D mesh), or a dict ({{"x", i}}) whose omitted axes keep the caller's coordinate; a
//     dict may name the TensorCoreMesh axis (the target core) and a joint axis ({{{"y", "x"}, i}}
//     splits i row-major over y and x). LOGICAL takes the row-major index over the mesh axes.
//   - `start()` does not block. The sender's `send_sem` gains the copy's bytes once they have
//     left the source (which may then be reused); the target's `recv_sem` (same semaphore, same
//     core) gains them once they are in the destination. `wait_send()` takes the descriptor's
//     byte count from `send_sem`, `wait_recv()` takes the descriptor's byte count from this
//     device's `recv_sem` (the receiver builds its own descriptor: only its size matters),
//     `wait()` does both. A device that only receives calls only `wait_recv()`. DMA semaphores
//     count bytes: copies may share one, and one wait may absorb several copies.
//   - A remote `semaphore_signal` adds to the same semaphore on the target device (the caller's
//     core, or `pl::core_index(k)`). Remote writes have no handshake: a sender that runs ahead
//     overwrites what the receiver still reads unless the kernel holds it back (capacity
//     semaphores, or more slots).
//   - Barrier semaphores (`get_barrier_semaphore()`, which needs `CompilerParams{.collective_id
//     = k}`) are 32 per core, outlive kernels, are signalled and waited like REGULAR ones and
//     must be 0 when shard_map returns. A kernel without a collective_id (and without
//     `skip_device_barrier`) starts with a barrier over every device of the mesh, so that no
//     device writes another's memory before it has entered the kernel; with a collective_id the
//     kernel does that itself with its barrier semaphore.
//
// Errors (KernelError at the call's line): a device id outside the mesh (kOutOfBounds, naming the
// axis, coordinate and extent); a tuple of the wrong length, a dict with LOGICAL, an unknown axis
// (kInvalidArgument / kUnknownAxis); a destination that no other device has (kInvalidArgument);
// a remote copy of mismatched shapes (kShapeMismatch); a second start() before wait_send()
// (kInvalidArgument); get_barrier_semaphore() without a collective_id (kInvalidArgument); a wait
// past the timeout (kTimeout), or on a device whose peer failed (kCancelled); bytes left on a
// semaphore at kernel exit (kSemaphoreLeak), except on semaphores a pallas_call takes or returns
// (tessera/resident.h), where a copy may stay in flight into a later call; across MPI ranks a
// remote operation on those is refused (kUnsupported).
//
// Cost (in process): a remote copy is one strided copy on the sending core into the target's
// memory plus two atomic adds (and wake-ups of sleeping cores); a remote signal one atomic add.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/semaphore.h"

namespace tessera {
namespace pl {

/// `pl.DeviceIdType`: how a device id is given.
enum class DeviceIdType {
  MESH,     // coordinates on the mesh axes (a tuple, or a dict)
  LOGICAL,  // the row-major index over the mesh axes
};

/// A key of a dict device id: one axis ("x"), or a joint axis ({"y", "x"}).
class AxisKey {
 public:
  AxisKey(const char* name) : names_{std::string(name)} {}  // NOLINT: implicit, as in Python
  AxisKey(std::string name) : names_{std::move(name)} {}    // NOLINT
  AxisKey(std::initializer_list<std::string> names) : names_(names) {}
  const std::vector<std::string>& names() const noexcept { return names_; }

 private:
  std::vector<std::string> names_;
};

/// A device id, as Pallas' `device_id=` takes it: an integer, a tuple of coordinates (`{i, j}`,
/// or a std::vector<int>), or a dict (`{{"x", i}}`, or a vector of pairs).
class DeviceId {
 public:
  enum class Form { kInteger, kTuple, kDict };
  DeviceId(int id) : form_(Form::kInteger), coords_{id} {}  // NOLINT: implicit, as in Python
  DeviceId(std::initializer_list<int> coords) : form_(Form::kTuple), coords_(coords) {}
  DeviceId(std::vector<int> coords) : form_(Form::kTuple), coords_(std::move(coords)) {}  // NOLINT
  DeviceId(std::initializer_list<std::pair<AxisKey, int>> dict) : form_(Form::kDict), dict_(dict) {}
  DeviceId(std::vector<std::pair<AxisKey, int>> dict)  // NOLINT
      : form_(Form::kDict), dict_(std::move(dict)) {}
  Form form() const noexcept { return form_; }
  const std::vector<int>& coords() const noexcept { return coords_; }
  const std::vector<std::pair<AxisKey, int>>& dict() const noexcept { return dict_; }

 private:
  Form form_;
  std::vector<int> coords_;
  std::vector<std::pair<AxisKey, int>> dict_;
};

/// The `device_id=` option of `pl::semaphore_signal`: `pl::device_id({left})` (also accepted
/// where a DeviceId is).
struct DeviceIdOption {
  DeviceId id;
  operator DeviceId() const { return id; }  // NOLINT: implicit
};
inline DeviceIdOption device_id(DeviceId id) { return DeviceIdOption{std::move(id)}; }

}  // namespace pl

namespace detail {
/// A resolved target: a device of the mesh and, when the id named one, a core (-1: the
/// caller's).
struct DeviceTarget {
  int device = 0;
  int core = -1;
};
/// Resolves a device id against the calling kernel's device mesh (kOutOfBounds etc. at `where`).
DeviceTarget resolve_device_id(const pl::DeviceId& id, pl::DeviceIdType type, const char* op,
                               std::source_location where);
/// The runtime behind the descriptor below (src/runtime/remote.cc).
void remote_copy_start(const RawRef& src, const RawRef& dst, SemaphoreCell* send_sem,
                       SemaphoreCell* recv_sem, DeviceTarget target, std::source_location made,
                       std::source_location where);
void remote_copy_wait(SemaphoreCell* sem, const RawRef& src, bool recv, std::source_location where);
void remote_semaphore_signal(SemaphoreCell* cell, const Shape& shape, SemaphoreKind kind,
                             int64_t inc, const pl::DeviceId& id, pl::DeviceIdType type,
                             std::optional<int> core_index, std::source_location where);
/// The calling core's barrier semaphore of the kernel's collective_id.
SemaphoreCell* barrier_semaphore(std::source_location where);
}  // namespace detail

namespace pltpu {

/// A remote copy, the descriptor `pltpu.make_async_remote_copy` returns: a source view on this
/// device, a destination view naming the same buffer on the target device, the sender's DMA
/// semaphore and the receiver's, and the target. Made by `make_async_remote_copy`.
class AsyncRemoteCopyDescriptor {
 public:
  AsyncRemoteCopyDescriptor(detail::RawRef src, detail::RawRef dst, detail::SemaphoreCell* send,
                            detail::SemaphoreCell* recv, detail::DeviceTarget target,
                            std::source_location made)
      : src_(std::move(src)),
        dst_(std::move(dst)),
        send_(send),
        recv_(recv),
        target_(target),
        made_(made) {}

  /// Issues the copy (does not block on the receiver): checks the shapes (kShapeMismatch), then
  /// moves the bytes into the target's destination, adds them to the target's `recv_sem` and
  /// this device's `send_sem`. kInvalidArgument when this descriptor was started and not
  /// `wait_send()`-ed since.
  void start(std::source_location where = std::source_location::current()) {
    if (in_flight_) already_started(where);
    detail::remote_copy_start(src_, dst_, send_, recv_, target_, made_, where);
    in_flight_ = true;
    started_at_ = where;
  }
  /// Blocks until `send_sem` holds this copy's bytes (the source may be reused), then takes
  /// them.
  void wait_send(std::source_location where = std::source_location::current()) {
    detail::remote_copy_wait(send_, src_, false, where);
    in_flight_ = false;
  }
  /// Blocks until this device's `recv_sem` holds this descriptor's bytes (a copy of that size
  /// has landed here), then takes them.
  void wait_recv(std::source_location where = std::source_location::current()) {
    detail::remote_copy_wait(recv_, src_, true, where);
  }
  /// `wait_send()`, then `wait_recv()`.
  void wait(std::source_location where = std::source_location::current()) {
    wait_send(where);
    wait_recv(where);
  }

  /// The bytes each wait takes (the source's size).
  int64_t nbytes() const noexcept { return src_.shape.size() * itemsize(src_.dtype); }
  const detail::RawRef& src() const noexcept { return src_; }
  const detail::RawRef& dst() const noexcept { return dst_; }
  /// The target device (its LOGICAL id).
  int device_id() const noexcept { return target_.device; }

 private:
  [[noreturn]] void already_started(std::source_location where) const;

  detail::RawRef src_;
  detail::RawRef dst_;
  detail::SemaphoreCell* send_;
  detail::SemaphoreCell* recv_;
  detail::DeviceTarget target_;
  std::source_location made_;
  std::source_location started_at_;
  bool in_flight_ = false;
};

namespace detail_remote {
template <class S, class D, SemaphoreKind K1, SemaphoreKind K2>
constexpr bool check() {
  static_assert(K1 == SemaphoreKind::DMA && K2 == SemaphoreKind::DMA,
                "tessera: make_async_remote_copy needs DMA semaphores for send_sem and recv_sem "
                "(pltpu::SemaphoreType::DMA)");
  static_assert(std::is_same_v<std::remove_cv_t<S>, D>,
                "tessera: make_async_remote_copy needs source and destination of the same dtype "
                "(and a non-const destination); check the element types of both refs");
  return true;
}
}  // namespace detail_remote

/// `pltpu.make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
/// device_id_type)`: a descriptor of a copy from `src` on this device to `dst` on the target
/// device. Nothing moves until `.start()`. The device id is resolved here (errors name this
/// line).
template <class S, MemorySpace SS, class D, MemorySpace DS, SemaphoreKind K1, SemaphoreKind K2>
[[nodiscard]] AsyncRemoteCopyDescriptor make_async_remote_copy(
    const pl::Ref<S, SS>& src, const pl::Ref<D, DS>& dst, const BasicSemaphoreRef<K1>& send_sem,
    const BasicSemaphoreRef<K2>& recv_sem, pl::DeviceId device_id,
    pl::DeviceIdType device_id_type = pl::DeviceIdType::MESH,
    std::source_location where = std::source_location::current()) {
  static_assert(detail_remote::check<S, D, K1, K2>());
  static_assert(SS != MemorySpace::SEMAPHORE && DS != MemorySpace::SEMAPHORE,
                "tessera: semaphores cannot be copied");
  constexpr const char* op = "pltpu::make_async_remote_copy";
  detail::check_single_semaphore(send_sem.shape(), K1, op, where);
  detail::check_single_semaphore(recv_sem.shape(), K2, op, where);
  const detail::DeviceTarget target =
      detail::resolve_device_id(device_id, device_id_type, op, where);
  return AsyncRemoteCopyDescriptor(src.raw(), dst.raw(), send_sem.data(), recv_sem.data(), target,
                                   where);
}
/// `pltpu.async_remote_copy(...)`: make_async_remote_copy and `.start()`; returns the started
/// descriptor.
template <class S, MemorySpace SS, class D, MemorySpace DS, SemaphoreKind K1, SemaphoreKind K2>
AsyncRemoteCopyDescriptor async_remote_copy(
    const pl::Ref<S, SS>& src, const pl::Ref<D, DS>& dst, const BasicSemaphoreRef<K1>& send_sem,
    const BasicSemaphoreRef<K2>& recv_sem, pl::DeviceId device_id,
    pl::DeviceIdType device_id_type = pl::DeviceIdType::MESH,
    std::source_location where = std::source_location::current()) {
  AsyncRemoteCopyDescriptor copy = make_async_remote_copy(
      src, dst, send_sem, recv_sem, std::move(device_id), device_id_type, where);
  copy.start(where);
  return copy;
}

/// `pltpu.get_barrier_semaphore()`: this core's barrier semaphore of the kernel's
/// `CompilerParams::collective_id` (kInvalidArgument without one). It keeps its count across
/// kernels; signal it on other devices with `pl::semaphore_signal(sem, n, pl::device_id(...))`.
inline BarrierSemaphoreRef get_barrier_semaphore(
    std::source_location where = std::source_location::current()) {
  return BarrierSemaphoreRef(detail::barrier_semaphore(where), Shape{});
}

}  // namespace pltpu

namespace pl {

/// `pl.semaphore_signal(sem, inc, device_id=..., device_id_type=..., core_index=...)`: adds
/// `inc` to the same REGULAR or BARRIER semaphore on the target device (on the caller's core, or
/// core `core_index`). Releases this core's earlier writes (including its remote copies that
/// have landed) to whoever waits for the signal there.
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc, DeviceIdOption id,
                      DeviceIdType type = DeviceIdType::MESH,
                      std::source_location where = std::source_location::current()) {
  static_assert(K != SemaphoreKind::DMA,
                "tessera: pl::semaphore_signal needs a REGULAR or BARRIER semaphore; a DMA "
                "semaphore counts the bytes of copies");
  detail::remote_semaphore_signal(sem.data(), sem.shape(), K, inc, id.id, type, std::nullopt,
                                  where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc, DeviceIdOption id,
                      CoreIndex core,
                      std::source_location where = std::source_location::current()) {
  semaphore_signal(sem, inc, std::move(id), DeviceIdType::MESH, core, where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, int64_t inc, DeviceIdOption id,
                      DeviceIdType type, CoreIndex core,
                      std::source_location where = std::source_location::current()) {
  static_assert(K != SemaphoreKind::DMA,
                "tessera: pl::semaphore_signal needs a REGULAR or BARRIER semaphore; a DMA "
                "semaphore counts the bytes of copies");
  detail::remote_semaphore_signal(sem.data(), sem.shape(), K, inc, id.id, type, core.value, where);
}
template <SemaphoreKind K>
void semaphore_signal(const pltpu::BasicSemaphoreRef<K>& sem, DeviceIdOption id,
                      DeviceIdType type = DeviceIdType::MESH,
                      std::source_location where = std::source_location::current()) {
  semaphore_signal(sem, 1, std::move(id), type, where);
}

}  // namespace pl
}  // namespace tessera
