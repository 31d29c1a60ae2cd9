// Internal: the pieces of the native evaluator's planner (vector_evaluate.cc) that the statement
// plan cache (statement_cache.cc) shares: planning an elementwise program with its plan kept,
// and the per-run steps a kept plan still needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <utility>
#include <vector>

#include "core/byte_span.h"
#include "native/vector_plan.h"
#include "runtime/step_hints.h"
#include "tessera/detail/expr_program.h"
#include "tessera/ref.h"

namespace tessera::detail {

/// A plan as evaluate_flat made it, with what running it again with other data pointers needs.
struct CapturedPlan {
  /// Where a load's elements lie around its first one, and whether it is laid out as the
  /// destination (same broadcast strides and dtype): a load at the destination's own address
  /// with its layout reads each element before it is written, so it may overlap.
  struct LoadSpan {
    int64_t lo = 0;   // bytes from the first element to the lowest one
    int64_t len = 0;  // bytes from the lowest element to past the highest
    bool same_layout = false;
  };
  plan::Plan plan;
  std::vector<int> loads;       // the plan node of each load, in program order
  std::vector<int> consts;      // the plan node of each constant, in program order
  std::vector<LoadSpan> spans;  // per load
  LoadSpan dst;
  bool ok = false;  // planned, with no load overlapping the destination elsewhere
};

/// Evaluates an elementwise program (no non-elementwise nodes) into dst. With `capture`, the
/// plan is also copied there (capture->ok) unless the destination overlaps a load elsewhere
/// (then the program runs through a temporary and nothing is kept).
void evaluate_flat(const std::vector<ExprNode>& nodes, std::source_location where,
                   const RawRef& dst, CapturedPlan* capture = nullptr);

/// A constant's lanes in its node (fval or ival), rounded or wrapped to `dtype` as its node's
/// lanes hold it: `f` and `i` are the ExprNode's fconst and iconst.
void const_lanes(DType dtype, double f, int64_t i, plan::Node& n);

/// [first byte, byte length].
using Span = std::pair<const std::byte*, int64_t>;

/// The bytes a strided view covers: [first byte, byte length] (length 0 for an empty view).
inline Span span_of(const void* data, const Shape& shape, const SmallVec& strides, int item) {
  const ByteSpan s = byte_span(data, shape, strides, item);
  return {s.first, s.bytes()};
}

inline bool ranges_overlap(const std::byte* a, int64_t alen, const std::byte* b, int64_t blen) {
  return a < b + blen && b < a + alen;
}

/// A running pipeline step may ask for streaming stores into this destination (an output block
/// written once in place) and for its next blocks to be prefetched as tiles are stored.
inline void take_step_hints(const Span& dspan, bool& stream, PrefetchQueue*& prefetch) {
  stream = false;
  prefetch = nullptr;
  if (StepHints* h = step_hints(); h != nullptr) {
    for (int i = 0; i < h->num_stream; ++i) {
      if (dspan.first >= h->stream_lo[i] && dspan.first + dspan.second <= h->stream_hi[i]) {
        stream = true;
        h->streamed = true;
      }
    }
    if (h->prefetch.active()) prefetch = &h->prefetch;
  }
}
inline void apply_step_hints(const Span& dspan, plan::Plan& p) {
  take_step_hints(dspan, p.stream, p.prefetch);
}

}  // namespace tessera::detail
