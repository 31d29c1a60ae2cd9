// Internal: per-core VMEM and SMEM arenas.
//
// Each mesh core owns one arena: a virtual reservation of the largest VMEM a kernel may ask for
// plus the SMEM capacity. Pages materialise on first write, and the first writer is the core's
// own thread (workers create and pre-touch their arena when they start), so on a multi-socket
// machine the memory lands near the core that uses it. Scratch buffers are laid out at fixed
// offsets computed once per launch; nothing is allocated per launch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

class CoreArena {
 public:
  CoreArena();
  ~CoreArena();
  CoreArena(const CoreArena&) = delete;
  CoreArena& operator=(const CoreArena&) = delete;

  std::byte* vmem() const noexcept { return vmem_; }
  std::byte* smem() const noexcept { return smem_; }

 private:
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  std::byte* vmem_ = nullptr;
  std::byte* smem_ = nullptr;
};

/// Bytes of VMEM pre-touched by the owning core when its arena is made.
inline constexpr int64_t kPretouchBytes = int64_t{1} << 20;

}  // namespace tessera::detail
