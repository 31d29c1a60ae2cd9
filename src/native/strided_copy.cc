// The native DMA engine's copy: an n-d strided copy. Dimensions are coalesced first (a
// contiguous view of any rank becomes one run), then each contiguous run is one memmove;
// non-contiguous innermost axes fall back to an element loop of the right width.
//
// A copy whose source and destination together do not stay in the caches (runtime/cache_fit.h
// decides, from the CPU's report and a measurement) writes its contiguous runs with streaming
// (non-temporal) stores on x86: a regular store first reads every line it writes, so such a
// copy moves 1.5x the bytes it needs to. Measured on 2 threads copying 32 MiB each
// (Intel Xeon, Sapphire Rapids class, 2 vCPUs): glibc's memcpy 15-18 GB/s, 16-byte streaming
// stores 25 GB/s, 64-byte ones 27 GB/s (docs/performance.md). The 16-byte ones are in every
// x86-64 CPU, and the copy is bound by memory, not by the width of its stores.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "native/native_engine.h"
#include "runtime/cache_fit.h"

namespace tessera::detail {

namespace {
struct Dim {
  int64_t extent;
  int64_t src;  // byte strides
  int64_t dst;
};

template <class T>
void copy_strided(std::byte* d, const std::byte* s, int64_t n, int64_t ds, int64_t ss) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i * ds, s + i * ss, sizeof(T));
  }
}

// Copies below this many bytes never stream: they are a pipeline's blocks, which the next
// statement reads from the cache (and the question costs nothing for them).
constexpr int64_t kStreamMinBytes = int64_t{1} << 20;

}  // namespace

void streaming_copy(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // (the pointers may then be null, which memcpy must not be given)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#if defined(__x86_64__)
  const size_t head = std::min(n, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t body = n / 64 * 64;
  for (size_t i = 0; i < body; i += 64) {
    const auto* from = reinterpret_cast<const __m128i*>(s + i);
    auto* to = reinterpret_cast<__m128i*>(d + i);
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i e = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, e);
  }
  std::memcpy(d + body, s + body, n - body);
#else
  std::memcpy(d, s, n);
#endif
}

namespace {

void copy_run(std::byte* d, const std::byte* s, const Dim& inner, int item, bool stream) {
  if (inner.src == item && inner.dst == item) {
    const auto n = static_cast<size_t>(inner.extent * item);
    const auto da = reinterpret_cast<uintptr_t>(d), sa = reinterpret_cast<uintptr_t>(s);
    if (stream && (da + n <= sa || sa + n <= da)) {
      streaming_copy(d, s, n);
    } else {
      std::memmove(d, s, n);
    }
    return;
  }
  switch (item) {
    case 4:
      copy_strided<uint32_t>(d, s, inner.extent, inner.dst, inner.src);
      break;
    case 2:
      copy_strided<uint16_t>(d, s, inner.extent, inner.dst, inner.src);
      break;
    default:
      copy_strided<uint8_t>(d, s, inner.extent, inner.dst, inner.src);
      break;
  }
}
}  // namespace

void strided_copy(const RawRef& src, const RawRef& dst) {
  if (src.shape.size() == 0) return;
  const int item = itemsize(src.dtype);
  const int64_t bytes = src.shape.size() * item;
#if defined(__x86_64__)
  const bool stream = bytes >= kStreamMinBytes && !stays_in_cache(2 * bytes);
  // Streaming stores are weakly ordered: they reach memory before whatever follows the copy
  // (the semaphore that says it is done).
  struct Fence {
    bool on;
    ~Fence() {
      if (on) _mm_sfence();
    }
  } fence{stream};
#else
  const bool stream = false;
#endif
  const int rank = src.shape.rank();
  const auto* s0 = static_cast<const std::byte*>(src.data);
  auto* d0 = static_cast<std::byte*>(dst.data);
  // Drop unit axes, then merge neighbours that are contiguous in both views. Small ranks use
  // stack storage: a copy of a block allocates nothing.
  constexpr int kInline = 8;
  Dim inline_dims[kInline];
  std::vector<Dim> heap_dims;
  Dim* merged = inline_dims;
  if (rank > kInline) {
    heap_dims.resize(static_cast<size_t>(rank));
    merged = heap_dims.data();
  }
  int n = 0;  // merged[0] is the innermost axis, merged[n - 1] the outermost
  for (int a = rank - 1; a >= 0; --a) {
    if (src.shape[a] == 1) continue;
    const Dim out{src.shape[a], src.strides[a] * item, dst.strides[a] * item};
    if (n > 0 && out.src == merged[n - 1].extent * merged[n - 1].src &&
        out.dst == merged[n - 1].extent * merged[n - 1].dst) {
      merged[n - 1].extent *= out.extent;
    } else {
      merged[n++] = out;
    }
  }
  if (n == 0) merged[n++] = Dim{1, item, item};
  const Dim inner = merged[0];
  if (n == 1) {
    copy_run(d0, s0, inner, item, stream);
    return;
  }
  int64_t inline_idx[kInline] = {};
  std::vector<int64_t> heap_idx;
  int64_t* idx = inline_idx;
  if (n - 1 > kInline) {
    heap_idx.assign(static_cast<size_t>(n - 1), 0);
    idx = heap_idx.data();
  }
  const int outer = n - 1;  // idx[k] walks merged[k + 1]
  const std::byte* sp = s0;
  std::byte* dp = d0;
  for (;;) {
    copy_run(dp, sp, inner, item, stream);
    int k = 0;
    for (; k < outer; ++k) {
      const Dim& dk = merged[k + 1];
      if (++idx[k] < dk.extent) {
        sp += dk.src;
        dp += dk.dst;
        break;
      }
      sp -= (dk.extent - 1) * dk.src;
      dp -= (dk.extent - 1) * dk.dst;
      idx[k] = 0;
    }
    if (k == outer) break;
  }
}

}  // namespace tessera::detail
