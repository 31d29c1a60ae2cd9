// Remote copies into a core's VMEM or SMEM on MPI ranks (mpi_transport.h). No window holds those
// memories (they are each core's arena in its own process), so the copy's bytes travel in the
// message that carries its landing: the sender packs its source at start(), and the target's
// engine thread stores the bytes at the same offset of the same core's VMEM or SMEM (every rank
// runs the same kernel, so a scratch buffer or window lies at the same offset on each) just
// before the receive semaphore counts them (a copy into another core of the sender's own device
// takes the same path, without the message). A copy that arrives before the target has entered
// the launch, or before the target core has begun (checked mode makes a core's VMEM and SMEM,
// poisoned, as it begins), waits with the early signals and lands once it can.
#include <fmt/format.h>

#include <cstring>

#include "core/messages.h"
#include "mpi/mpi_transport.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/engine.h"
#include "tessera/error.h"

namespace tessera::detail::mpi {

namespace {
constexpr const char* kStart = "remote_copy.start";

/// The memory `r` lies in among `arena`'s VMEM and SMEM, and its first element's byte offset
/// there; false when it lies in neither.
bool core_memory_of(const RawRef& r, const CoreArena& arena, MemorySpace& space, int64_t& offset) {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  view_span(r, lo, hi);
  const auto vmem = reinterpret_cast<uintptr_t>(arena.vmem());
  const auto smem = reinterpret_cast<uintptr_t>(arena.smem());
  const auto data = reinterpret_cast<uintptr_t>(r.data);
  if (lo >= vmem && hi <= vmem + static_cast<uintptr_t>(max_vmem_limit_bytes())) {
    space = MemorySpace::VMEM;
    offset = static_cast<int64_t>(data - vmem);
    return true;
  }
  if (lo >= smem && hi <= smem + static_cast<uintptr_t>(smem_capacity_bytes())) {
    space = MemorySpace::SMEM;
    offset = static_cast<int64_t>(data - smem);
    return true;
  }
  return false;
}

std::byte* base_of(CoreArena& arena, MemorySpace space) {
  return space == MemorySpace::SMEM ? arena.smem() : arena.vmem();
}
}  // namespace

bool MpiTransport::put_core_memory(CoreContext& ctx, const RemoteCopy& copy, int target,
                                   const Signal& landed) {
  if (ctx.arena == nullptr) return false;
  MemorySpace space = MemorySpace::VMEM;
  int64_t offset = 0;
  if (!core_memory_of(copy.dst, *ctx.arena, space, offset)) return false;
  DataCopy data;
  data.space = space;
  data.dtype = copy.dst.dtype;
  data.shape = copy.dst.shape;
  data.strides = copy.dst.strides;
  data.offset = offset;
  data.bytes.resize(static_cast<size_t>(copy.bytes));
  // Packed row-major: the elements in the order both views enumerate them.
  const RawRef staged{data.bytes.data(), copy.src.dtype, MemorySpace::VMEM, copy.src.shape,
                      row_major_strides(copy.src.shape)};
  native_engine().copy(nullptr, copy.src, staged, kStart, copy.where);
  if (target == rank_) {  // another core of this device: landed as a message's would be
    std::shared_ptr<const CheckNote> note;
    if (copy.note != nullptr) note = std::make_shared<CheckNote>(*copy.note);
    deliver(landed, rank_, std::move(note), std::make_shared<DataCopy>(std::move(data)));
    return true;
  }
  sent_[static_cast<size_t>(target)].fetch_add(1);
  rt_.send_data(target, landed, data, copy.note);
  return true;
}

RawRef MpiTransport::store_data(const Pending& p, CoreArena& arena) const {
  const DataCopy& d = *p.data;
  const bool smem = d.space == MemorySpace::SMEM;
  const int64_t capacity = smem ? smem_capacity_bytes() : max_vmem_limit_bytes();
  std::byte* base = base_of(arena, d.space);
  RawRef dst{base + d.offset, d.dtype, d.space, d.shape, d.strides};
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  view_span(dst, lo, hi);
  const auto b = reinterpret_cast<uintptr_t>(base);
  const int64_t elements = d.shape.size();
  if (d.offset < 0 || d.offset > capacity || lo < b || hi > b + static_cast<uintptr_t>(capacity) ||
      elements > (INT64_MAX / itemsize(d.dtype)) ||
      elements * itemsize(d.dtype) != static_cast<int64_t>(d.bytes.size())) {
    // Only a mismatch between the ranks' programs can cause this: the same kernel lays its
    // buffers out alike on every rank.
    raise(ErrorKind::kInvalidArgument, kStart, std::source_location::current(),
          fmt::format("device {} copied {} bytes into {} {} at offset {} of core {}'s {}, which "
                      "lies outside it here: every device must run the same kernel",
                      mesh_.name(p.from), d.bytes.size(), dtype_name(d.dtype), d.shape.to_string(),
                      d.offset, p.s.core, to_string(d.space)));
  }
  const RawRef staged{const_cast<std::byte*>(d.bytes.data()), d.dtype, MemorySpace::VMEM, d.shape,
                      row_major_strides(d.shape)};
  native_engine().copy(nullptr, staged, dst, kStart, std::source_location::current());
  return dst;
}

void MpiTransport::retry_landings() {
  if (!landings_waiting_.load()) return;
  std::exception_ptr race;
  bool applied = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool waiting = false;
    std::erase_if(early_, [&](const Pending& p) {
      if (p.data == nullptr) return false;
      if (apply(p, race)) {
        applied = true;
        return true;
      }
      waiting = waiting || (launch_ != nullptr && launch_->seq == static_cast<uint64_t>(p.s.seq));
      return false;
    });
    landings_waiting_.store(waiting);
    if (applied && published_stuck_.load()) wake_launch();
  }
  if (applied) version_.fetch_add(1);  // as deliver(): wait snapshots see the change
  if (race) fail(rank_, race);
}

}  // namespace tessera::detail::mpi
