#include "runtime/arena.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {
// The default VMEM budget per core. A CPU core's fast memory is its L2 (1-2 MiB here), but a
// Pallas-style kernel double-buffers blocks whose best sizes on this CPU reach a few MiB
// (docs/performance.md: 512x512x256 matmul blocks), so the default budget follows Pallas' own
// default scoped VMEM limit (16 MiB) rather than the L2 size; `vmem_limit_bytes` raises it up to
// the largest VMEM of any TPU generation Tessera models (8i: 192 MiB).
constexpr int64_t kDefaultVmemLimit = int64_t{16} << 20;
constexpr int64_t kMaxVmemLimit = int64_t{192} << 20;
// SMEM: 1 MiB per core, as on TPU v4 and later.
constexpr int64_t kSmemCapacity = int64_t{1} << 20;
}  // namespace

int64_t default_vmem_limit_bytes() noexcept { return kDefaultVmemLimit; }
int64_t max_vmem_limit_bytes() noexcept { return kMaxVmemLimit; }
int64_t smem_capacity_bytes() noexcept { return kSmemCapacity; }
int64_t semaphore_capacity() noexcept { return kSemaphoresPerCore - kBarrierSemaphores; }

CoreArena::CoreArena() {
  bytes_ = static_cast<size_t>(kMaxVmemLimit + kSmemCapacity);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<std::byte*>(p);
  vmem_ = base_;
  smem_ = base_ + kMaxVmemLimit;
  // First touch by the constructing (owning) thread; the rest materialises on use.
  std::memset(vmem_, 0, static_cast<size_t>(kPretouchBytes));
  std::memset(smem_, 0, static_cast<size_t>(kSmemCapacity));
  // Value-initialised: every counter starts at zero (and is first touched by this thread).
  semaphores_ = std::make_unique<SemaphoreCell[]>(static_cast<size_t>(kSemaphoresPerCore));
}

CoreArena::~CoreArena() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

}  // namespace tessera::detail
