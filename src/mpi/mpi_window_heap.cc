// The window's heap (mpi_runtime.h): a first-fit heap over a rank's window for its HBM arrays,
// whose large blocks it collapses into huge pages where the window allows it
// (mpi_huge_window.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <mutex>

#include "mpi/mpi_runtime.h"

namespace tessera::detail::mpi {

namespace {
// `p` rounded up to a multiple of `align` (a power of two).
std::byte* align_up(std::byte* p, int64_t align) {
  const auto a = static_cast<uintptr_t>(align);
  return p + ((a - reinterpret_cast<uintptr_t>(p) % a) % a);
}
}  // namespace

// The window's base need not be aligned beyond 8 or 16 bytes (Open MPI's lies 16 bytes past a
// cache line for one rank, 8 past one for several): the heap starts at the first page boundary
// inside it, so that its offsets are aligned exactly as its addresses are.
WindowHeap::WindowHeap(std::byte* base, int64_t bytes, HugeWindow* huge)
    : base_(align_up(base, kPageBytes)),
      bytes_(std::max<int64_t>(bytes - (base_ - base), 0) / 64 * 64),
      huge_(huge != nullptr && huge->collapsible() ? huge : nullptr) {
  if (bytes_ > 0) free_[0] = bytes_;
  hint_ = fmt::format(
      "this MPI rank's window ({} MiB, TESSERA_SYMMETRIC_HEAP): raise it, or "
      "free arrays no longer needed",
      bytes_ >> 20);
}

// Every block is 64-byte aligned (hbm_allocate's promise: vector loads never split a cache
// line, and streaming stores, which the native evaluator issues only to aligned rows, apply);
// blocks of kLargeBytes or more start on a page (core/hbm_heap.h). First fit; the padding in front
// of an aligned block stays free.
void* WindowHeap::allocate(size_t n) noexcept {
  if (n > static_cast<size_t>(bytes_)) return nullptr;
  const int64_t want = std::max<int64_t>(64, (static_cast<int64_t>(n) + 63) / 64 * 64);
  const int64_t align = want >= kLargeBytes ? kPageBytes : 64;
  int64_t off = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const int64_t start = it->first, size = it->second;
      const int64_t pad = (align - start % align) % align;
      if (size < pad + want) continue;
      off = start + pad;
      const int64_t left = size - pad - want;
      free_.erase(it);
      if (pad > 0) free_[start] = pad;
      if (left > 0) free_[off + want] = left;
      used_[off] = want;
      break;
    }
  }
  if (off < 0) return nullptr;
  if (huge_ != nullptr) collapse(off, want);
  return base_ + off;
}

void WindowHeap::collapse(int64_t off, int64_t bytes) noexcept {
  const auto huge = static_cast<uintptr_t>(HugeWindow::pmd_bytes());
  const uintptr_t origin = reinterpret_cast<uintptr_t>(base_) / huge;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(base_ + off) + huge - 1) / huge;
  const uintptr_t last = reinterpret_cast<uintptr_t>(base_ + off + bytes) / huge;
  if (last <= first) return;
  bool all = true;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (collapsed_.size() < last - origin) collapsed_.resize(last - origin, false);
    for (uintptr_t h = first; h < last; ++h) {
      if (!collapsed_[h - origin]) {
        all = false;
        collapsed_[h - origin] = true;  // tried once: a page the kernel refused stays small
      }
    }
  } catch (...) {
    return;  // no memory for the books: the block stays in small pages
  }
  if (!all) huge_->collapse(base_ + off, base_ + off + bytes);
}

bool WindowHeap::owns(const void* p) const noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && b < base_ + bytes_;
}

void WindowHeap::free(void* p) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  const int64_t off = static_cast<std::byte*>(p) - base_;
  auto u = used_.find(off);
  if (u == used_.end()) return;
  int64_t start = off;
  int64_t size = u->second;
  used_.erase(u);
  // Merge with the free neighbours.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

const char* WindowHeap::full_hint() const noexcept { return hint_.c_str(); }

void WindowHeap::close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

}  // namespace tessera::detail::mpi
