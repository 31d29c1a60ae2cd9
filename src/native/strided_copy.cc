// The native DMA engine's copy: an n-d strided copy. Dimensions are coalesced first (a
// contiguous view of any rank becomes one run), then each contiguous run is one memmove;
// non-contiguous innermost axes fall back to an element loop of the right width.
#include <cstring>
#include <vector>

#include "native/native_engine.h"

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

void copy_run(std::byte* d, const std::byte* s, const Dim& inner, int item) {
  if (inner.src == item && inner.dst == item) {
    std::memmove(d, s, static_cast<size_t>(inner.extent * item));
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
    copy_run(d0, s0, inner, item);
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
    copy_run(dp, sp, inner, item);
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
