// HBM storage for tessera::Array and the Array error helpers.
//
// Allocation policy (hbm_allocate / hbm_free):
//   * Every block is 64-byte aligned.
//   * bytes >= 4 MiB: an anonymous private mmap (page aligned, hence 64-byte aligned), advised
//     MADV_HUGEPAGE; the kernel hands it out zero-filled, so `zero` costs nothing. Freed blocks
//     are kept (up to 1 GiB in all; the ones freed longest ago are unmapped to make room) and
//     reused for the next allocation of the same size, which then needs a memset only when
//     `zero` is asked (core/large_block_cache.h).
//   * bytes < 4 MiB: malloc(bytes rounded up to 64, plus 64), aligned by hand with the raw
//     pointer stored just below the block; memset to zero when asked. Freed with std::free of
//     that raw pointer.
//   * bytes == 0: a fresh 64-byte block, so that every Array, even an empty one, has a valid,
//     unique, non-null, aligned data() pointer. hbm_free(p, 0) releases it.
//   * Out of memory throws (via detail::raise) ErrorKind::kCapacityExceeded naming the byte
//     count; hbm_allocate never returns null.
// hbm_free must be given the same byte count that hbm_allocate was, since it picks the release
// path from it (HbmDeleter stores it).
#include "tessera/array.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <source_location>
#include <string>

#include "core/hbm_heap.h"
#include "core/large_block_cache.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMmapThreshold = kLargeHbmBytes;  // mapped, hence on a page
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;

std::string human_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= kGiB * 1024.0) return fmt::format("{:.1f} TiB", b / (kGiB * 1024.0));
  if (b >= kGiB) return fmt::format("{:.1f} GiB", b / kGiB);
  if (b >= kMiB) return fmt::format("{:.1f} MiB", b / kMiB);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

[[noreturn]] void raise_out_of_memory(size_t bytes, const HbmRequest* request) {
  if (request == nullptr || request->shape == nullptr) {
    raise(ErrorKind::kCapacityExceeded, "Array",
          request != nullptr ? request->where : std::source_location{},
          fmt::format("out of host memory allocating {} bytes ({}) for an Array's HBM storage; "
                      "hint: use smaller arrays, or release arrays that are no longer needed",
                      bytes, human_bytes(bytes)));
  }
  raise(ErrorKind::kCapacityExceeded, "Array", request->where,
        fmt::format("out of host memory allocating {} {}{}: {} bytes ({}) of HBM storage; "
                    "hint: use smaller arrays, or release arrays that are no longer needed",
                    request->what, dtype_name(request->dtype), request->shape->to_string(), bytes,
                    human_bytes(bytes)));
}

const char* plural(int64_t n, const char* one, const char* many) { return n == 1 ? one : many; }

}  // namespace

namespace {
// At most this much of freed large blocks is kept for reuse (large_block_cache.h).
constexpr size_t kMaxCachedBytes = size_t{1} << 30;  // 1 GiB

LargeBlockCache& large_blocks() {
  // Never destroyed: used until exit.
  static LargeBlockCache* cache = new LargeBlockCache(
      kMaxCachedBytes, [](void* p, size_t bytes) noexcept { (void)::munmap(p, bytes); });
  return *cache;
}
}  // namespace

namespace {
std::atomic<HbmHeap*> g_heap{nullptr};
}  // namespace

void set_hbm_heap(HbmHeap* heap) noexcept { g_heap.store(heap, std::memory_order_release); }

void* hbm_allocate(size_t bytes, bool zero, const HbmRequest* request) {
  if (HbmHeap* heap = g_heap.load(std::memory_order_acquire)) {
    void* p = heap->allocate(bytes);
    if (p == nullptr) {
      raise(ErrorKind::kCapacityExceeded, "Array",
            request != nullptr ? request->where : std::source_location{},
            fmt::format("no room for {} bytes ({}) of HBM storage in {}", bytes, human_bytes(bytes),
                        heap->full_hint()));
    }
    if (zero) std::memset(p, 0, bytes);
    return p;
  }
  if (bytes >= kMmapThreshold) {
    if (void* p = large_blocks().take(bytes); p != nullptr) {
      if (zero) std::memset(p, 0, bytes);  // a reused block holds old data
      return p;
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) raise_out_of_memory(bytes, request);
#ifdef MADV_HUGEPAGE
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advisory only; failure is harmless
#endif
    return p;  // anonymous mappings are zero-filled
  }
  const size_t rounded =
      bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  // malloc plus manual alignment, with the raw pointer kept just below the block: glibc's
  // aligned_alloc splits and frees pieces on every call (and triggers consolidation), which
  // costs more than a small kernel launch; plain malloc/free stay on the fast paths.
  void* raw = std::malloc(rounded + kAlignment);
  if (raw == nullptr) raise_out_of_memory(bytes, request);
  const auto base = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
  void* p = reinterpret_cast<void*>((base + kAlignment - 1) / kAlignment * kAlignment);
  std::memcpy(static_cast<char*>(p) - sizeof(void*), &raw, sizeof raw);
  if (zero) std::memset(p, 0, rounded);
  return p;
}

void hbm_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (HbmHeap* heap = g_heap.load(std::memory_order_acquire); heap != nullptr && heap->owns(p)) {
    heap->free(p);
    return;
  }
  if (bytes >= kMmapThreshold) {
    large_blocks().give(p, bytes);
  } else {
    void* raw;
    std::memcpy(&raw, static_cast<char*>(p) - sizeof(void*), sizeof raw);
    std::free(raw);
  }
}

void throw_array_size_mismatch(const Shape& shape, size_t values, std::source_location where) {
  const int64_t n = static_cast<int64_t>(values);
  const int64_t size = shape.size();
  raise(ErrorKind::kShapeMismatch, "Array", where,
        fmt::format("{} {} given for shape {}, which holds {} {}; hint: pass exactly {} {} in "
                    "row-major order, or change the shape to match the values",
                    values, plural(n, "value was", "values were"), shape.to_string(), size,
                    plural(size, "element", "elements"), size, plural(size, "value", "values")));
}

void throw_ragged_rows(int64_t row, int64_t length, int64_t expected, std::source_location where) {
  raise(ErrorKind::kShapeMismatch, "array", where,
        fmt::format("row {} has {} {} but row 0 has {}; every row of a nested list must have the "
                    "same length",
                    row, length, plural(length, "value", "values"), expected));
}

void throw_array_index_error(const Shape& shape, int axis, int64_t index, int nindices,
                             std::source_location where) {
  if (axis < 0 || axis >= shape.rank()) {
    raise(ErrorKind::kOutOfBounds, "Array element access", where,
          fmt::format("{} {} given for an array of rank {}, shape {}; element access needs "
                      "exactly one index per axis ({} {})",
                      nindices, plural(nindices, "index was", "indices were"), shape.rank(),
                      shape.to_string(), shape.rank(), plural(shape.rank(), "index", "indices")));
  }
  const int64_t extent = shape[axis];
  std::string rule;
  if (extent == 0) {
    rule = "the axis is empty, so no index is valid";
  } else {
    rule = fmt::format("indices along it must be in [0, {})", extent);
    if (index < 0) rule += "; negative indices are not supported";
  }
  raise(ErrorKind::kOutOfBounds, "Array element access", where,
        fmt::format("index {} is out of bounds for axis {} with size {} (shape {}); {}", index,
                    axis, extent, shape.to_string(), rule));
}

void check_shape_valid(const Shape& shape, size_t itemsize, std::source_location where) {
  check_shape(shape, static_cast<int64_t>(itemsize), "Array", "an Array", where);
}

}  // namespace tessera::detail
