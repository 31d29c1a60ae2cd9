// The rules of jnp::dot / lax::dot_general that do not depend on an engine: which operands and
// dimension numbers a dot of 2-D tiles takes, and the product's shape.
#include "core/dot_rules.h"

#include <fmt/format.h>

#include <string>

#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {

std::string dims_text(const lax::DotDimensionNumbers::Dims& d) {
  // Python's tuple spelling: (), (1,), (0, 1).
  if (d.size == 0) return "()";
  if (d.size == 1) return fmt::format("({},)", d.dims[0]);
  return fmt::format("({}, {}{})", d.dims[0], d.dims[1], d.size > 2 ? ", ..." : "");
}

}  // namespace

std::string dot_call_text(const DotCall& c) {
  return fmt::format("lhs {} {} and rhs {} {}", dtype_name(c.lhs.dtype), c.lhs.shape.to_string(),
                     dtype_name(c.rhs.dtype), c.rhs.shape.to_string());
}

DotOperands dot_operands(const DotCall& c) {
  for (const RawRef* r : {&c.lhs, &c.rhs}) {
    if (r->shape.rank() != 2) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("{} has rank {} ({}); a dot of tiles needs 2-D refs (a vector can be "
                        "viewed as a (1, K) or (K, 1) tile)",
                        r == &c.lhs ? "lhs" : "rhs", r->shape.rank(), dot_call_text(c)));
    }
  }
  const auto& cd = c.dims.contracting;
  if (c.dims.batch.lhs.size != 0 || c.dims.batch.rhs.size != 0) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("batch dimensions {} and {} were given for {}; a dot of 2-D tiles has no "
                      "batch dimensions (loop over the batch and take 2-D views with .at(b))",
                      dims_text(c.dims.batch.lhs), dims_text(c.dims.batch.rhs), dot_call_text(c)));
  }
  if (cd.lhs.size != 1 || cd.rhs.size != 1) {
    raise(ErrorKind::kInvalidArgument, c.op, c.where,
          fmt::format("contracting dimensions {} and {} for {}; a dot of 2-D tiles contracts "
                      "exactly one dimension of each operand, e.g. (((1,), (0,)), ((), ())) for "
                      "x @ y",
                      dims_text(cd.lhs), dims_text(cd.rhs), dot_call_text(c)));
  }
  int lc = cd.lhs.dims[0];
  int rc = cd.rhs.dims[0];
  for (int* d : {&lc, &rc}) {
    if (*d < -2 || *d > 1) {
      raise(ErrorKind::kInvalidArgument, c.op, c.where,
            fmt::format("contracting dimension {} of the {} is out of range for a 2-D operand "
                        "({}); use 0 or 1 (or -2, -1)",
                        *d, d == &lc ? "lhs" : "rhs", dot_call_text(c)));
    }
    if (*d < 0) *d += 2;
  }
  const int64_t kl = c.lhs.shape[lc];
  const int64_t kr = c.rhs.shape[rc];
  if (kl != kr) {
    const bool plain = lc == 1 && rc == 0;
    raise(ErrorKind::kShapeMismatch, c.op, c.where,
          fmt::format("{}: the lhs contracts dimension {} (extent {}) and the rhs dimension {} "
                      "(extent {}); the contracted extents must be equal{}",
                      dot_call_text(c), lc, kl, rc, kr,
                      plain && c.lhs.shape[1] == c.rhs.shape[1]
                          ? " (for x @ y.T use lax::dot_general(x, y, {{{1}, {1}}}))"
                          : ""));
  }
  return DotOperands{c.lhs.shape[1 - lc], c.rhs.shape[1 - rc], kl, lc, rc};
}

Shape dot_result_shape(const DotCall& call) {
  const DotOperands o = dot_operands(call);
  return Shape{o.m, o.n};
}

}  // namespace tessera::detail
