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

void check_counts(const DotCall& c) {
  const auto& cd = c.dims.contracting;
  const auto& bd = c.dims.batch;
  if (cd.lhs.size != cd.rhs.size || cd.lhs.size > kMaxDims) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("contracting dimensions {} and {} for {}; both operands list the same "
                      "number of contracting dimensions (at most {}), paired in order, e.g. "
                      "(((1,), (0,)), ((), ())) for x @ y",
                      dims_text(cd.lhs), dims_text(cd.rhs), dot_call_text(c), kMaxDims));
  }
  if (bd.lhs.size != bd.rhs.size || bd.lhs.size > kMaxDims) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("batch dimensions {} and {} for {}; both operands list the same number of "
                      "batch dimensions (at most {}), in the same order",
                      dims_text(bd.lhs), dims_text(bd.rhs), dot_call_text(c), kMaxDims));
  }
  for (const RawRef* r : {&c.lhs, &c.rhs}) {
    if (r->shape.rank() < 1) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("the {} is a scalar ({}); a product takes operands of rank 1 or more",
                        r == &c.lhs ? "lhs" : "rhs", dot_call_text(c)));
    }
  }
}

[[noreturn]] void raise_repeated(const DotCall& c) {
  raise(ErrorKind::kInvalidArgument, c.op, c.where,
        fmt::format("dimension numbers (({}, {}), ({}, {})) name a dimension twice for {}",
                    dims_text(c.dims.contracting.lhs), dims_text(c.dims.contracting.rhs),
                    dims_text(c.dims.batch.lhs), dims_text(c.dims.batch.rhs), dot_call_text(c)));
}

// Normalises the contracting and batch dimensions into `o` and checks their extents pair up.
void pair_dims(const DotCall& c, DotOperands& o, SmallVec& natural) {
  const int lr = c.lhs.shape.rank();
  const int rr = c.rhs.shape.rank();
  uint32_t lused = 0, rused = 0;
  auto mark = [&](uint32_t& used, int d) {
    if ((used >> d) & 1u) raise_repeated(c);
    used |= 1u << d;
  };
  o.nc = c.dims.contracting.lhs.size;
  for (int i = 0; i < o.nc; ++i) {
    o.lcs[i] = normalise(c, c.dims.contracting.lhs.dims[i], lr, "lhs", "contracting");
    o.rcs[i] = normalise(c, c.dims.contracting.rhs.dims[i], rr, "rhs", "contracting");
    mark(lused, o.lcs[i]);
    mark(rused, o.rcs[i]);
    const int64_t kl = c.lhs.shape[o.lcs[i]];
    const int64_t kr = c.rhs.shape[o.rcs[i]];
    if (kl != kr) {
      const bool plain = lr == 2 && rr == 2 && o.lcs[i] == 1 && o.rcs[i] == 0;
      raise(ErrorKind::kShapeMismatch, c.op, c.where,
            fmt::format("{}: the lhs contracts dimension {} (extent {}) and the rhs dimension {} "
                        "(extent {}); the contracted extents must be equal{}",
                        dot_call_text(c), o.lcs[i], kl, o.rcs[i], kr,
                        plain && c.lhs.shape[1] == c.rhs.shape[1]
                            ? " (for x @ y.T use lax::dot_general(x, y, {{{1}, {1}}}))"
                            : ""));
    }
  }
  o.nb = c.dims.batch.lhs.size;
  for (int i = 0; i < o.nb; ++i) {
    o.lb[i] = normalise(c, c.dims.batch.lhs.dims[i], lr, "lhs", "batch");
    o.rb[i] = normalise(c, c.dims.batch.rhs.dims[i], rr, "rhs", "batch");
    mark(lused, o.lb[i]);
    mark(rused, o.rb[i]);
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
  for (int d = 0; d < lr; ++d) {
    if (((lused >> d) & 1u) == 0) o.lfree.push_back(d);
  }
  for (int d = 0; d < rr; ++d) {
    if (((rused >> d) & 1u) == 0) o.rfree.push_back(d);
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
  SmallVec natural;
  pair_dims(c, o, natural);
  o.lc = o.nc > 0 ? o.lcs[o.nc - 1] : -1;
  o.rc = o.nc > 0 ? o.rcs[o.nc - 1] : -1;
  o.lf = o.lfree.empty() ? -1 : static_cast<int>(o.lfree[o.lfree.size() - 1]);
  o.rf = o.rfree.empty() ? -1 : static_cast<int>(o.rfree[o.rfree.size() - 1]);
  o.k = o.lc >= 0 ? c.lhs.shape[o.lc] : 1;
  o.m = o.lf >= 0 ? c.lhs.shape[o.lf] : 1;
  o.n = o.rf >= 0 ? c.rhs.shape[o.rf] : 1;
  for (int i = 0; i < o.lfree.size(); ++i)
    natural.push_back(c.lhs.shape[static_cast<int>(o.lfree[i])]);
  for (int i = 0; i < o.rfree.size(); ++i)
    natural.push_back(c.rhs.shape[static_cast<int>(o.rfree[i])]);
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
