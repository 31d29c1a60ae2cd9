// Internal: a jnp::dot / lax::dot_general call checked and normalised (core/dot_rules.cc).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/dot.h"

namespace tessera::detail {

/// A dot of 2-D tiles as (m, k) x (k, n), with each operand's contracting dimension.
struct DotOperands {
  int64_t m, n, k;
  int lc, rc;  // normalised contracting dimensions (0 or 1)
};

/// Validates the call's operands and dimension numbers (raising kInvalidArgument or
/// kShapeMismatch, naming both operands) and normalises them.
DotOperands dot_operands(const DotCall& call);

/// "lhs float32 (8, 128) and rhs float32 (128, 256)", for messages.
std::string dot_call_text(const DotCall& call);

}  // namespace tessera::detail
