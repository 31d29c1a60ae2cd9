// Internal: where HBM arrays come from. By default hbm_allocate (src/core/array.cc) uses the
// process heap; a distributed runtime (src/mpi/) installs a heap of its own, so that every array
// of its device lies in memory the other devices can reach (an MPI window).
#pragma once

#include <cstddef>

namespace tessera::detail {

/// HBM arrays of this many bytes or more start on a page wherever they come from (the process
/// heap maps them, an MPI window's heap aligns them), so that an array's layout in memory does
/// not depend on where it lives.
inline constexpr size_t kLargeHbmBytes = size_t{4} << 20;

class HbmHeap {
 public:
  virtual ~HbmHeap() = default;
  /// 64-byte aligned storage of `bytes`, or null when the heap is full.
  virtual void* allocate(size_t bytes) noexcept = 0;
  /// Whether `p` came from allocate().
  virtual bool owns(const void* p) const noexcept = 0;
  virtual void free(void* p) noexcept = 0;
  /// What to say when the heap is full ("the MPI window's heap of 2 GiB: raise
  /// TESSERA_SYMMETRIC_HEAP").
  virtual const char* full_hint() const noexcept = 0;
};

/// Makes `heap` the source of every HBM array allocated from now on (null: the process heap).
/// Arrays allocated before keep their storage and are freed where they came from.
void set_hbm_heap(HbmHeap* heap) noexcept;

}  // namespace tessera::detail
