// Internal: the broadcast shape of two operands (numpy's rule: shapes align on the right, extents
// of 1 stretch), as the expression nodes of vector_ops.h compute it when they are built.
#pragma once

#include <source_location>

#include "tessera/detail/expr_program.h"
#include "tessera/shape.h"

namespace tessera::detail {

/// The broadcast shape of `a` and `b`; throws kShapeMismatch naming `op` when they do not
/// broadcast (src/core/expr_rules.cc).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, std::source_location where);

/// The same for the operands of `op`, with the common cases inline: equal shapes, and a scalar
/// (rank 0) operand. An expression node builds its shape this way every time it is made.
inline Shape broadcast_pair(const Shape& a, const Shape& b, OpCode op) {
  if (b.rank() == 0 || a == b) return a;
  if (a.rank() == 0) return b;
  return broadcast_shapes(a, b, op_name(op), {});
}

}  // namespace tessera::detail
