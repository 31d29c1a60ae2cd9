// Internal: the bytes a strided view covers, for the overlap and containment checks of the
// pipeline, the evaluator, the dots and the transports.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/ref.h"

namespace tessera::detail {

/// [first, last): the first byte a strided view covers and one past its last. A view with no
/// elements covers nothing: first == last, at its data. Strides may be negative.
struct ByteSpan {
  const std::byte* first;
  const std::byte* last;
  bool empty() const noexcept { return first == last; }
  int64_t bytes() const noexcept { return last - first; }
};

/// The span of the view of `shape` at element `strides` from `data`, of `item`-byte elements.
inline ByteSpan byte_span(const void* data, const Shape& shape, const SmallVec& strides,
                          int64_t item) noexcept {
  const auto* base = static_cast<const std::byte*>(data);
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 0) return {base, base};
    const int64_t e = (shape[d] - 1) * strides[d];
    (e < 0 ? lo : hi) += e;
  }
  return {base + lo * item, base + (hi + 1) * item};
}
inline ByteSpan byte_span(const RawRef& r) noexcept {
  return byte_span(r.data, r.shape, r.strides, itemsize(r.dtype));
}

/// Whether the address ranges of two spans intersect (an empty span at an address strictly
/// inside the other counts: callers that must ignore empty views test empty() themselves).
inline bool spans_overlap(ByteSpan a, ByteSpan b) noexcept {
  return a.first < b.last && b.first < a.last;
}

}  // namespace tessera::detail
