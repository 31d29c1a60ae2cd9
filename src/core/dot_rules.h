// Internal: a jnp::dot / lax::dot_general / jnp::einsum call checked and normalised
// (core/dot_rules.cc).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/dot.h"

namespace tessera::detail {

/// A product as a batch of (m, k) x (k, n) tiles: each operand's normalised contracting
/// dimension, free dimension (-1 for a vector operand, whose tile has one row or column) and
/// batch dimensions.
struct DotOperands {
  int64_t m, n, k;
  int lc, rc;  // contracting dimensions
  int lf, rf;  // free dimensions, or -1
  int nb = 0;  // batch dimensions
  int lb[lax::DotDimensionNumbers::kMaxDims] = {};
  int rb[lax::DotDimensionNumbers::kMaxDims] = {};
  int64_t batch[lax::DotDimensionNumbers::kMaxDims] = {};
  /// The result's shape in natural order: the batch extents, then m (when lf >= 0), then n (when
  /// rf >= 0).
  Shape natural;
};

/// Validates the call's operands and dimension numbers (raising kInvalidArgument or
/// kShapeMismatch, naming both operands) and normalises them.
DotOperands dot_operands(const DotCall& call);

/// "lhs float32 (8, 128) and rhs float32 (128, 256)", for messages.
std::string dot_call_text(const DotCall& call);

}  // namespace tessera::detail
