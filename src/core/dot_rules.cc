// The rules of jnp::dot / lax::dot_general / jnp::einsum that do not depend on an engine: which
// operands and dimension numbers a product takes, its shape, and einsum's subscripts.
#include "core/dot_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {

using Dims = lax::DotDimensionNumbers::Dims;
constexpr int kMaxDims = lax::DotDimensionNumbers::kMaxDims;

std::string dims_text(const Dims& d) {
  // Python's tuple spelling: (), (1,), (0, 1).
  if (d.size == 0) return "()";
  if (d.size == 1) return fmt::format("({},)", d.dims[0]);
  std::string s = "(";
  for (int i = 0; i < std::min(d.size, kMaxDims); ++i) {
    s += fmt::format("{}{}", i ? ", " : "", d.dims[i]);
  }
  return s + (d.size > kMaxDims ? ", ...)" : ")");
}

// Normalises dimension `d` of an operand of rank `rank` (negative counts from the end).
int normalise(const DotCall& c, int d, int rank, const char* side, const char* what) {
  if (d < -rank || d >= rank) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("{} dimension {} of the {} is out of range for a rank-{} operand ({}); use "
                      "0..{} (or -{}..-1)",
                      what, d, side, rank, dot_call_text(c), rank - 1, rank));
  }
  return d < 0 ? d + rank : d;
}

// The operand's dimension that is neither contracted nor batched, -1 when there is none; raises
// when there is more than one.
int free_dim(const DotCall& c, const RawRef& r, int contracted, const int* batch, int nb,
             const char* side) {
  int f = -1;
  for (int d = 0; d < r.shape.rank(); ++d) {
    if (d == contracted || std::find(batch, batch + nb, d) != batch + nb) continue;
    if (f >= 0) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("the {} has more than one dimension that is neither contracted nor a "
                        "batch dimension ({}: dimensions {} and {}); a product takes at most one "
                        "free dimension per operand: reshape the operand, or name the others as "
                        "batch dimensions",
                        side, dot_call_text(c), f, d));
    }
    f = d;
  }
  return f;
}

void check_counts(const DotCall& c) {
  const auto& cd = c.dims.contracting;
  const auto& bd = c.dims.batch;
  if (cd.lhs.size != 1 || cd.rhs.size != 1) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("contracting dimensions {} and {} for {}; a product contracts exactly one "
                      "dimension of each operand, e.g. (((1,), (0,)), ((), ())) for x @ y",
                      dims_text(cd.lhs), dims_text(cd.rhs), dot_call_text(c)));
  }
  if (bd.lhs.size != bd.rhs.size || bd.lhs.size > kMaxDims) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("batch dimensions {} and {} for {}; both operands list the same number of "
                      "batch dimensions (at most {}), in the same order",
                      dims_text(bd.lhs), dims_text(bd.rhs), dot_call_text(c), kMaxDims));
  }
  for (const RawRef* r : {&c.lhs, &c.rhs}) {
    if (r->shape.rank() < 1 + bd.lhs.size) {
      raise(
          ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("the {} has rank {} ({}); a product needs a contracting dimension "
                      "besides its {} batch dimension(s)",
                      r == &c.lhs ? "lhs" : "rhs", r->shape.rank(), dot_call_text(c), bd.lhs.size));
    }
  }
}

}  // namespace

std::string dot_call_text(const DotCall& c) {
  return fmt::format("lhs {} {} and rhs {} {}", dtype_name(c.lhs.dtype), c.lhs.shape.to_string(),
                     dtype_name(c.rhs.dtype), c.rhs.shape.to_string());
}

DotOperands dot_operands(const DotCall& c) {
  check_counts(c);
  DotOperands o{};
  const int lr = c.lhs.shape.rank();
  const int rr = c.rhs.shape.rank();
  o.lc = normalise(c, c.dims.contracting.lhs.dims[0], lr, "lhs", "contracting");
  o.rc = normalise(c, c.dims.contracting.rhs.dims[0], rr, "rhs", "contracting");
  o.nb = c.dims.batch.lhs.size;
  SmallVec natural;
  for (int i = 0; i < o.nb; ++i) {
    o.lb[i] = normalise(c, c.dims.batch.lhs.dims[i], lr, "lhs", "batch");
    o.rb[i] = normalise(c, c.dims.batch.rhs.dims[i], rr, "rhs", "batch");
    const bool repeated = o.lb[i] == o.lc || o.rb[i] == o.rc ||
                          std::find(o.lb, o.lb + i, o.lb[i]) != o.lb + i ||
                          std::find(o.rb, o.rb + i, o.rb[i]) != o.rb + i;
    if (repeated) {
      raise(
          ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("dimension numbers (({}, {}), ({}, {})) name a dimension twice for {}",
                      dims_text(c.dims.contracting.lhs), dims_text(c.dims.contracting.rhs),
                      dims_text(c.dims.batch.lhs), dims_text(c.dims.batch.rhs), dot_call_text(c)));
    }
    const int64_t bl = c.lhs.shape[o.lb[i]];
    const int64_t br = c.rhs.shape[o.rb[i]];
    if (bl != br) {
      raise(ErrorKind::kShapeMismatch, c.op, c.where,
            fmt::format("{}: batch dimension {} of the lhs has extent {} and dimension {} of the "
                        "rhs {}; batch extents must be equal",
                        dot_call_text(c), o.lb[i], bl, o.rb[i], br));
    }
    o.batch[i] = bl;
    natural.push_back(bl);
  }
  o.lf = free_dim(c, c.lhs, o.lc, o.lb, o.nb, "lhs");
  o.rf = free_dim(c, c.rhs, o.rc, o.rb, o.nb, "rhs");
  const int64_t kl = c.lhs.shape[o.lc];
  const int64_t kr = c.rhs.shape[o.rc];
  if (kl != kr) {
    const bool plain = lr == 2 && rr == 2 && o.lc == 1 && o.rc == 0;
    raise(ErrorKind::kShapeMismatch, c.op, c.where,
          fmt::format("{}: the lhs contracts dimension {} (extent {}) and the rhs dimension {} "
                      "(extent {}); the contracted extents must be equal{}",
                      dot_call_text(c), o.lc, kl, o.rc, kr,
                      plain && c.lhs.shape[1] == c.rhs.shape[1]
                          ? " (for x @ y.T use lax::dot_general(x, y, {{{1}, {1}}}))"
                          : ""));
  }
  o.k = kl;
  o.m = o.lf >= 0 ? c.lhs.shape[o.lf] : 1;
  o.n = o.rf >= 0 ? c.rhs.shape[o.rf] : 1;
  if (o.lf >= 0) natural.push_back(o.m);
  if (o.rf >= 0) natural.push_back(o.n);
  o.natural = Shape(std::move(natural));
  if (!c.out_perm.empty() && c.out_perm.size() != o.natural.rank()) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("the output order has {} axes but the product of {} has {}",
                      c.out_perm.size(), dot_call_text(c), o.natural.rank()));
  }
  return o;
}

Shape dot_result_shape(const DotCall& call) {
  const DotOperands o = dot_operands(call);
  if (call.out_perm.empty()) return o.natural;
  SmallVec dims;
  for (int i = 0; i < call.out_perm.size(); ++i) {
    dims.push_back(o.natural[static_cast<int>(call.out_perm[i])]);
  }
  return Shape(std::move(dims));
}

}  // namespace tessera::detail
