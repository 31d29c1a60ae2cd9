// The rules of in-kernel expressions that do not depend on an engine: the ops' names, and the
// shapes jnp's broadcasting, reductions, transposes, reshapes and rolls give (with the errors
// jnp raises for bad arguments). The public headers (vector_ops.h, vector_reduce.h,
// vector_math.h) call these while building an expression; the native evaluator runs it.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/detail/expr_program.h"
#include "tessera/detail/runtime.h"
#include "tessera/vector_extra.h"
#include "tessera/vector_ops.h"
#include "tessera/vector_reduce.h"

namespace tessera::detail {

namespace {
std::string shape_str(const Shape& s) { return s.to_string(); }
}  // namespace

const char* op_name(OpCode op) noexcept {
  switch (op) {
#define TESSERA_OP(code, name, call) \
  case OpCode::code:                 \
    return name;
#include "tessera/detail/op_codes.inc"
#undef TESSERA_OP
  }
  return "?";
}

const char* op_call(OpCode op) noexcept {
  switch (op) {
#define TESSERA_OP(code, name, call) \
  case OpCode::code:                 \
    return call;
#include "tessera/detail/op_codes.inc"
#undef TESSERA_OP
  }
  return "?";
}

namespace {
// The calling thread's program levels: level k is used by the k-th nested ExprProgram alive.
thread_local std::vector<std::unique_ptr<ExprProgram::Level>> t_levels;
thread_local size_t t_depth = 0;

ExprProgram::Level& enter_level() {
  if (t_levels.size() <= t_depth) t_levels.push_back(std::make_unique<ExprProgram::Level>());
  ExprProgram::Level& l = *t_levels[t_depth++];
  l.nodes.clear();
  l.keep.clear();
  return l;
}
}  // namespace

ExprProgram::ExprProgram() : level_(enter_level()), nodes(level_.nodes), keep(level_.keep) {}

ExprProgram::~ExprProgram() {
  level_.keep.clear();  // the temporaries its loads read
  --t_depth;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, std::source_location where) {
  const int r = std::max(a.rank(), b.rank());
  SmallVec out(r, 1);
  for (int k = 0; k < r; ++k) {
    const int ia = a.rank() - r + k;
    const int ib = b.rank() - r + k;
    const int64_t ea = ia >= 0 ? a[ia] : 1;
    const int64_t eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("operands of shapes {} and {} do not broadcast (axis {} from the left of "
                        "the result: {} vs {}); extents must match or be 1",
                        shape_str(a), shape_str(b), k, ea, eb));
    }
    out[k] = ea == 1 ? eb : ea;
  }
  return Shape(std::move(out));
}

Shape reduce_shape(const Shape& in, const AxisSpec& axes, bool keepdims, bool single, bool nonempty,
                   const char* op, std::source_location where, int64_t& mask) {
  const int r = in.rank();
  mask = 0;
  if (axes.all) {
    mask = r == 0 ? 0 : (int64_t{1} << r) - 1;
  } else {
    if (single && axes.axes.size() != 1) {
      raise(ErrorKind::kInvalidArgument, op, where,
            fmt::format("takes one axis or none (the flattened array), got {} axes",
                        axes.axes.size()));
    }
    for (int64_t a : axes.axes) {
      const int64_t ax = a < 0 ? a + r : a;
      if (ax < 0 || ax >= r) {
        raise(ErrorKind::kInvalidArgument, op, where,
              fmt::format("axis {} is out of range for an operand of shape {} (rank {}); axes "
                          "are -{}..{}",
                          a, shape_str(in), r, r, r - 1));
      }
      if ((mask >> ax) & 1) {
        raise(ErrorKind::kInvalidArgument, op, where,
              fmt::format("axis {} is given twice (shape {})", a, shape_str(in)));
      }
      mask |= int64_t{1} << ax;
    }
  }
  SmallVec out;
  for (int i = 0; i < r; ++i) {
    if ((mask >> i) & 1) {
      if (nonempty && in[i] == 0) {
        raise(ErrorKind::kInvalidArgument, op, where,
              fmt::format("reduces axis {} of extent 0 (shape {}), which has no identity; jnp "
                          "raises here too",
                          i, shape_str(in)));
      }
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(in[i]);
    }
  }
  if (nonempty && r == 0 && in.size() == 0) mask = 0;
  return Shape(std::move(out));
}

SmallVec transpose_perm(const Shape& in, const SmallVec& perm, std::source_location where) {
  const int r = in.rank();
  SmallVec p;
  if (perm.size() == 0) {
    for (int i = r - 1; i >= 0; --i) p.push_back(i);
    return p;
  }
  if (perm.size() != r) {
    raise(ErrorKind::kInvalidArgument, "jnp.transpose", where,
          fmt::format("the permutation has {} axes but the operand of shape {} has {}", perm.size(),
                      shape_str(in), r));
  }
  int64_t seen = 0;
  for (int64_t a : perm) {
    const int64_t ax = a < 0 ? a + r : a;
    if (ax < 0 || ax >= r || ((seen >> ax) & 1)) {
      raise(ErrorKind::kInvalidArgument, "jnp.transpose", where,
            fmt::format("({}) is not a permutation of the axes of shape {}", fmt::join(perm, ", "),
                        shape_str(in)));
    }
    seen |= int64_t{1} << ax;
    p.push_back(ax);
  }
  return p;
}

Shape reshape_shape(const Shape& in, const Shape& to, std::source_location where) {
  SmallVec dims = to.dims();
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && infer < 0) {
      infer = i;
    } else if (dims[i] < 0) {
      raise(ErrorKind::kInvalidArgument, "jnp.reshape", where,
            fmt::format("bad target shape {}: extents must be >= 0, with at most one -1",
                        shape_str(to)));
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) dims[infer] = known == 0 ? 0 : in.size() / known;
  Shape out(std::move(dims));
  if (out.size() != in.size()) {
    raise(ErrorKind::kInvalidArgument, "jnp.reshape", where,
          fmt::format("cannot reshape {} ({} elements) into {} ({} elements)", shape_str(in),
                      in.size(), shape_str(to), out.size()));
  }
  return out;
}

void check_tpu_reshape(const Shape& in, const Shape& out, std::string_view chip,
                       std::source_location where) {
  auto squeeze = [](const Shape& s) {
    SmallVec d;
    for (int64_t e : s) {
      if (e != 1) d.push_back(e);
    }
    return d;
  };
  const int64_t in_last = in.rank() > 0 ? in[in.rank() - 1] : 1;
  const int64_t out_last = out.rank() > 0 ? out[out.rank() - 1] : 1;
  if (in_last != out_last && squeeze(in) != squeeze(out)) {
    raise(ErrorKind::kBlockShape, "jnp.reshape", where,
          fmt::format("reshaping {} into {} changes the last dim ({} -> {}), which a {} TPU "
                      "kernel cannot lower: Mosaic reshapes leading dims (or flattens them into "
                      "the second-to-last) and adds or drops unit dims, but does not re-tile the "
                      "last dim; keep the last dim (or reshape in the wrapper, outside the "
                      "kernel)",
                      shape_str(in), shape_str(out), in_last, out_last, chip));
  }
}

int roll_axis(const Shape& in, int axis, int64_t& shift, std::source_location where) {
  const int r = in.rank();
  const int ax = axis < 0 ? axis + r : axis;
  if (ax < 0 || ax >= r) {
    raise(ErrorKind::kInvalidArgument, "pltpu.roll", where,
          fmt::format("axis {} is out of range for an operand of shape {} (rank {})", axis,
                      shape_str(in), r));
  }
  const int64_t n = in[ax];
  shift = n == 0 ? 0 : ((shift % n) + n) % n;
  return ax;
}

int roll_stride_axis(const Shape& in, int axis, int64_t& stride, int stride_axis,
                     std::source_location where) {
  const int r = in.rank();
  if (stride < 0) {
    raise(ErrorKind::kInvalidArgument, "pltpu.roll", where,
          fmt::format("stride {} is negative; pltpu.roll's stride must be >= 0 (slice i along "
                      "stride_axis rolls by shift + i * stride)",
                      stride));
  }
  const int sax = stride_axis < 0 ? stride_axis + r : stride_axis;
  if (sax < 0 || sax >= r) {
    raise(ErrorKind::kInvalidArgument, "pltpu.roll", where,
          fmt::format("stride_axis {} is out of range for an operand of shape {} (rank {}); "
                      "give an axis in {}..{} (negative counts from the end)",
                      stride_axis, shape_str(in), r, -r, r - 1));
  }
  if (sax == axis) {
    raise(ErrorKind::kInvalidArgument, "pltpu.roll", where,
          fmt::format("stride_axis {} is the rolled axis {} of an operand of shape {}; the "
                      "stride axis must be another axis (each slice along it is rolled along "
                      "axis)",
                      stride_axis, axis, shape_str(in)));
  }
  const int64_t n = in[axis];
  stride = n == 0 ? 0 : stride % n;
  return sax;
}

void raise_zero_step(std::source_location where) {
  raise(ErrorKind::kInvalidArgument, "jnp.arange", where,
        "step is 0; arange needs a nonzero step (as numpy)");
}

void check_integer_pow(bool integral, int64_t n, std::source_location where) {
  if (integral && n < 0) {
    raise(ErrorKind::kInvalidArgument, "lax.integer_pow", where,
          fmt::format("an integer operand cannot be raised to the negative power {} (jnp "
                      "raises the same); convert with astype<float>() first",
                      n));
  }
}

int normalise_axis(int axis, int rank, const char* op, std::source_location where) {
  if (axis < -rank || axis >= rank) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("axis {} is out of range for {} axes (use 0..{}, or -{}..-1)", axis, rank,
                      rank - 1, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

int64_t split_size(const Shape& s, int64_t sections, int& axis, std::source_location where) {
  axis = normalise_axis(axis, s.rank(), "jnp.split", where);
  if (sections < 1 || s[axis] % sections != 0) {
    raise(
        ErrorKind::kInvalidArgument, "jnp.split", where,
        fmt::format("{} sections do not divide axis {} of shape {} (extent {}) equally; jnp.split "
                    "needs a divisor of the extent (slice unequal parts with "
                    "lax::slice_in_dim)",
                    sections, axis, shape_str(s), s[axis]));
  }
  return s[axis] / sections;
}

void check_slice_in_dim(int64_t start, int64_t limit, int64_t stride, std::source_location where) {
  if (stride < 1 || limit < start) {
    raise(ErrorKind::kInvalidArgument, "lax.slice_in_dim", where,
          fmt::format("start {}, limit {} and stride {}: a slice needs start <= limit and a "
                      "stride of at least 1",
                      start, limit, stride));
  }
}

void check_repeats(int64_t repeats, std::source_location where) {
  if (repeats < 0 || repeats > (int64_t{1} << 31)) {
    raise(ErrorKind::kInvalidArgument, "jnp.repeat", where,
          fmt::format("repeats={} must be between 0 and 2^31", repeats));
  }
}

SmallVec broadcast_dims(const Shape& in, const Shape& out, const SmallVec& dims, const char* op,
                        std::source_location where) {
  if (dims.size() != in.rank()) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("broadcast_dimensions has {} entries for an operand of shape {} (one per "
                      "operand axis)",
                      dims.size(), shape_str(in)));
  }
  for (int i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i];
    if (d < 0 || d >= out.rank() || (i > 0 && d <= dims[i - 1])) {
      raise(ErrorKind::kInvalidArgument, op, where,
            fmt::format("broadcast_dimensions must be increasing result axes of {} (entry {} is "
                        "{})",
                        shape_str(out), i, d));
    }
    const int64_t e = in[i];
    if (e != 1 && e != out[static_cast<int>(d)]) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("operand axis {} (extent {}) cannot broadcast to result axis {} (extent "
                        "{}): extents must match or be 1 (operand {}, result {})",
                        i, e, d, out[static_cast<int>(d)], shape_str(in), shape_str(out)));
    }
  }
  return dims;
}

SmallVec broadcast_to_dims(const Shape& in, const Shape& out, std::source_location where) {
  if (in.rank() > out.rank()) {
    raise(ErrorKind::kShapeMismatch, "jnp.broadcast_to", where,
          fmt::format("cannot broadcast shape {} to the lower-rank shape {}", shape_str(in),
                      shape_str(out)));
  }
  SmallVec dims;
  for (int i = 0; i < in.rank(); ++i) dims.push_back(out.rank() - in.rank() + i);
  return broadcast_dims(in, out, dims, "jnp.broadcast_to", where);
}

Shape concat_shape(const Shape* parts, int n, int& axis, bool stack, std::source_location where) {
  const char* op = stack ? "jnp.stack" : "jnp.concatenate";
  if (n == 0) {
    raise(ErrorKind::kInvalidArgument, op, where, "needs at least one array");
  }
  const Shape& first = parts[0];
  axis = normalise_axis(axis, first.rank() + (stack ? 1 : 0), op, where);
  int64_t along = 0;
  for (int i = 0; i < n; ++i) {
    const Shape& s = parts[i];
    bool ok = s.rank() == first.rank();
    for (int d = 0; ok && d < s.rank(); ++d) ok = s[d] == first[d] || (!stack && d == axis);
    if (!ok) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("part {} has shape {} and part 0 {}; {}", i, shape_str(s), shape_str(first),
                        stack ? "stacked arrays must have one shape"
                              : fmt::format("the parts must agree on every axis but {}", axis)));
    }
    along += stack ? 1 : s[axis];
  }
  SmallVec dims = first.dims();
  if (stack) {
    dims.insert_front(0);
    for (int d = 0; d < axis; ++d) dims[d] = dims[d + 1];
    dims[axis] = along;
  } else {
    dims[axis] = along;
  }
  return Shape(std::move(dims));
}

void check_diagonal_rank(const Shape& in, std::source_location where) {
  if (in.rank() != 2) {
    raise(ErrorKind::kInvalidArgument, "jnp.diagonal", where,
          fmt::format("takes a 2-D operand here, got shape {}; select the two axes first (e.g. "
                      "with at(...) or jnp::transpose)",
                      shape_str(in)));
  }
}

void check_pad(const Shape& in, const std::pair<int64_t, int64_t>* pads, int n,
               std::string_view mode, std::source_location where) {
  if (mode != "constant" && mode != "wrap") {
    raise(ErrorKind::kInvalidArgument, "jnp.pad", where,
          fmt::format("mode \"{}\" is not supported; Tessera pads with \"constant\" or "
                      "\"wrap\"",
                      mode));
  }
  if (in.rank() < 1 || in.rank() > 4 || n != in.rank()) {
    raise(ErrorKind::kInvalidArgument, "jnp.pad", where,
          fmt::format("needs one (before, after) pair per axis of the operand (rank 1 to 4), "
                      "got {} pairs for shape {}",
                      n, shape_str(in)));
  }
  for (int d = 0; d < n; ++d) {
    const auto [lo, hi] = pads[d];
    if (lo < 0 || hi < 0) {
      raise(ErrorKind::kInvalidArgument, "jnp.pad", where,
            fmt::format("the pads of axis {} are ({}, {}); pads must be >= 0", d, lo, hi));
    }
    if (mode == "wrap" && in[d] == 0 && lo + hi > 0) {
      raise(
          ErrorKind::kInvalidArgument, "jnp.pad", where,
          fmt::format("mode \"wrap\" cannot pad axis {} of extent 0 (shape {})", d, shape_str(in)));
    }
  }
}

}  // namespace tessera::detail
