// Internal: a jnp::dot / lax::dot_general / jnp::einsum call checked and normalised
// (core/dot_rules.cc).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/dot.h"

namespace tessera::detail {

/// A product as a batch of (m, k) x (k, n) tiles: each operand's normalised dimensions. The tile
/// takes each operand's last contracting dimension and last free dimension (-1 when there is
/// none: a vector operand's tile has one row or column, and a product without contracting
/// dimensions has k = 1); the other free dimensions are looped over around the tile, the other
/// contracting dimensions summed over.
struct DotOperands {
  static constexpr int kMax = lax::DotDimensionNumbers::kMaxDims;
  int64_t m, n, k;
  int lc, rc;  // the tile's contracting dimensions, or -1
  int lf, rf;  // the tile's free dimensions, or -1
  int nb = 0;  // batch dimensions
  int lb[kMax] = {};
  int rb[kMax] = {};
  int64_t batch[kMax] = {};
  int nc = 0;  // contracting dimensions (lc = lcs[nc - 1])
  int lcs[kMax] = {};
  int rcs[kMax] = {};
  SmallVec lfree, rfree;  // every free dimension of each operand, in order (lf = lfree's last)
  /// The result's shape in natural order: the batch extents, then the lhs free extents, then the
  /// rhs free extents.
  Shape natural;
};

/// Validates the call's operands and dimension numbers (raising kInvalidArgument or
/// kShapeMismatch, naming both operands) and normalises them.
DotOperands dot_operands(const DotCall& call);

/// "lhs float32 (8, 128) and rhs float32 (128, 256)", for messages.
std::string dot_call_text(const DotCall& call);

}  // namespace tessera::detail
