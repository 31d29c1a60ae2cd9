// Internal: the evaluator's form of an ExprProgram (see vector_kernels.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/detail/expr_program.h"
#include "tessera/detail/small_vec.h"

namespace tessera::detail {
struct PrefetchQueue;
namespace plan {

inline constexpr int64_t kTile = 256;

/// A node as the evaluator sees it: per-axis strides already broadcast and coalesced.
struct Node {
  OpCode op;
  DType dtype;
  bool flt;  // lanes are float (else int32)
  int a, b;
  const std::byte* data = nullptr;  // kLoad
  SmallVec stride;                  // kLoad: element strides; kIota: coefficients; per axis
  float fval = 0;
  int32_t ival = 0;
};

struct Plan {
  bool stream = false;                // the destination takes streaming (non-temporal) stores
  PrefetchQueue* prefetch = nullptr;  // a pipeline's lines to prefetch, drained per tile
  SmallVec extent;                    // coalesced axes, outermost first; at least one
  std::vector<Node> nodes;
  std::byte* dst = nullptr;
  DType dst_dtype = DType::kFloat32;
  SmallVec dst_stride;
};

}  // namespace plan
}  // namespace tessera::detail
