// Internal: the roll and the running sum of a node's operand, computed on its contiguous 32-bit
// lanes (src/native/lane_scans.cc), for the lowering of non-elementwise nodes in
// vector_evaluate.cc.
#pragma once

#include "tessera/detail/expr_program.h"

namespace tessera::detail {

/// A roll of the contiguous 32-bit lanes at `operand` along `node.axis` by `node.iconst` into
/// `result`; with a stride axis (pltpu.roll's stride), slice i along it by iconst + i *
/// roll_stride (mod n).
void roll_lanes(const ExprNode& node, const void* operand, void* result);

/// A running sum of the contiguous 32-bit lanes at `operand` along `node.axis` into `result`
/// (float, or int32 wrapping).
void cumsum_lanes(const ExprNode& node, bool flt, const void* operand, void* result);

}  // namespace tessera::detail
