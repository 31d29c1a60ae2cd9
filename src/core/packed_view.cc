// Width-changing bitcast views (detail/packed_view.h): bitcasts, slices and reshapes of the
// planes, and the copies between two views that reads, writes and DMAs are made of.
#include "tessera/detail/packed_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>

#include "core/check.h"
#include "runtime/copy_check.h"
#include "tessera/detail/expr_program.h"
#include "tessera/detail/runtime.h"
#include "tessera/dma.h"

namespace tessera::detail {

namespace {

DType atom_dtype(int bytes) {
  switch (bytes) {
    case 1:
      return DType::kUInt8;
    case 2:
      return DType::kUInt16;
    default:
      TESSERA_CHECK(bytes == 4, "atoms are 1, 2 or 4 bytes");
      return DType::kUInt32;
  }
}

std::byte* byte_ptr(const RawRef& r) { return static_cast<std::byte*>(r.data); }

// Rows start, start + stride, ... (size of them) of a plane along `axis` (in bounds by
// construction).
RawRef plane_rows(const RawRef& r, int axis, int64_t start, int64_t size, int64_t stride) {
  RawRef out = r;
  out.data = byte_ptr(r) + start * r.strides[axis] * itemsize(r.dtype);
  out.shape[axis] = size;
  out.strides[axis] *= stride;
  return out;
}

// Splits every atom into atoms of `a` bytes (a divides v.atom).
void refine(PackedView& v, int a) {
  if (v.atom == a) return;
  const int s = v.atom / a;
  std::vector<RawRef> planes;
  planes.reserve(v.planes.size() * static_cast<size_t>(s));
  for (const RawRef& r : v.planes) {
    for (int t = 0; t < s; ++t) {
      RawRef sub = r;
      sub.data = byte_ptr(r) + t * a;
      sub.dtype = atom_dtype(a);
      for (int i = 0; i < sub.strides.size(); ++i) sub.strides[i] *= s;
      planes.push_back(std::move(sub));
    }
  }
  v.planes = std::move(planes);
  v.p *= s;
  v.atom = a;
}

// Splits every phase into g phases (plane rows u, u + g, ...), so that m becomes m * g.
void split_phases(PackedView& v, int g) {
  if (g == 1) return;
  const int64_t rows = v.planes.front().shape[v.axis];
  std::vector<RawRef> planes;
  planes.reserve(v.planes.size() * static_cast<size_t>(g));
  for (int u = 0; u < g; ++u) {
    for (int j = 0; j < v.m; ++j) {
      for (int q = 0; q < v.p; ++q) {
        planes.push_back(
            plane_rows(v.planes[static_cast<size_t>(j * v.p + q)], v.axis, u, rows / g, g));
      }
    }
  }
  v.planes = std::move(planes);
  v.m *= g;
}

// Joins the atoms of every element into one plane of the element's width where they lie next to
// each other, in order and aligned (a bitcast back to the original width gives a plain view).
void collapse(PackedView& v) {
  if (v.p == 1) return;
  const int e = v.atom * v.p;
  for (int j = 0; j < v.m; ++j) {
    const RawRef& base = v.planes[static_cast<size_t>(j * v.p)];
    if (reinterpret_cast<uintptr_t>(base.data) % static_cast<uintptr_t>(e) != 0) return;
    for (int i = 0; i < base.strides.size(); ++i) {
      if (base.strides[i] % v.p != 0) return;
    }
    for (int q = 1; q < v.p; ++q) {
      const RawRef& r = v.planes[static_cast<size_t>(j * v.p + q)];
      if (r.data != byte_ptr(base) + q * v.atom || r.strides != base.strides) return;
    }
  }
  std::vector<RawRef> planes;
  for (int j = 0; j < v.m; ++j) {
    RawRef r = v.planes[static_cast<size_t>(j * v.p)];
    r.dtype = atom_dtype(e);
    for (int i = 0; i < r.strides.size(); ++i) r.strides[i] /= v.p;
    planes.push_back(std::move(r));
  }
  v.planes = std::move(planes);
  v.atom = e;
  v.p = 1;
}

std::string what(const PackedView& v) {
  return fmt::format("{} view of shape {}", dtype_name(v.dtype), v.shape.to_string());
}

PackedView widen(const PackedView& v, DType to, int k) {
  const int a2 = v.shape.rank() - 2;
  PackedView w = v;
  w.dtype = to;
  w.shape[a2] = v.shape[a2] / k;
  w.axis = a2;
  w.planes.clear();
  if (v.m % k == 0) {
    // Phases k * j' + h become the parts h of phase j'.
    for (int j = 0; j < v.m / k; ++j) {
      for (int h = 0; h < k; ++h) {
        for (int q = 0; q < v.p; ++q) {
          w.planes.push_back(v.planes[static_cast<size_t>((k * j + h) * v.p + q)]);
        }
      }
    }
    w.m = v.m / k;
  } else {
    // k is a multiple of m: part h is row h / m of every group of k / m plane rows.
    const int g = k / v.m;
    const int64_t rows = v.planes.front().shape[a2];
    for (int h = 0; h < k; ++h) {
      for (int q = 0; q < v.p; ++q) {
        w.planes.push_back(plane_rows(v.planes[static_cast<size_t>((h % v.m) * v.p + q)], a2,
                                      h / v.m, rows / g, g));
      }
    }
    w.m = 1;
  }
  w.p = v.p * k;
  collapse(w);
  return w;
}

PackedView narrow(const PackedView& v, DType to, int k) {
  const int a2 = v.shape.rank() - 2;
  PackedView w = v;
  refine(w, std::min(w.atom, itemsize(to)));
  const int p_new = itemsize(to) / w.atom;
  std::vector<RawRef> planes;
  // Part group h of phase j becomes phase k * j + h.
  for (int j = 0; j < w.m; ++j) {
    for (int h = 0; h < k; ++h) {
      for (int q = 0; q < p_new; ++q) {
        planes.push_back(w.planes[static_cast<size_t>(j * w.p + h * p_new + q)]);
      }
    }
  }
  w.planes = std::move(planes);
  w.m *= k;
  w.p = p_new;
  w.shape[a2] = v.shape[a2] * k;
  w.axis = a2;
  w.dtype = to;
  collapse(w);
  return w;
}

}  // namespace

PackedView packed_of(const RawRef& r) {
  PackedView v;
  v.dtype = r.dtype;
  v.space = r.space;
  v.shape = r.shape;
  v.axis = std::max(r.shape.rank() - 2, 0);
  v.atom = itemsize(r.dtype);
  RawRef plane = r;
  plane.dtype = atom_dtype(v.atom);
  v.planes.push_back(std::move(plane));
  return v;
}

PackedView packed_bitcast(const PackedView& v, DType to, std::source_location where,
                          const char* op) {
  const int from_bytes = itemsize(v.dtype), to_bytes = itemsize(to);
  if (from_bytes == to_bytes) {
    PackedView w = v;
    w.dtype = to;
    return w;
  }
  const int rank = v.shape.rank();
  if (rank < 2) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("bitcast<{}> of a {}: a bitcast that changes the element width needs a "
                      "ref of rank 2 or more (a TPU packs the narrower elements along the "
                      "second-minor dim); reshape it to 2-D first (x_ref.reshape(1, -1))",
                      dtype_name(to), what(v)));
  }
  if (v.m > 1 && v.axis != rank - 2) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("bitcast<{}> of a {}: an earlier width-changing bitcast packed axis {}, "
                      "which is no longer the second-minor one; change the width before "
                      "indexing away the last axis",
                      dtype_name(to), what(v), v.axis));
  }
  const int64_t rows = v.shape[rank - 2];
  if (to_bytes > from_bytes) {
    const int k = to_bytes / from_bytes;
    if (rows % k != 0) {
      raise(ErrorKind::kInvalidArgument, op, where,
            fmt::format("bitcast<{}> of a {}: the second-minor dim ({}) times the source "
                        "width ({} bits) must be a multiple of the destination width ({} bits), "
                        "as a TPU packs {} rows into one; slice whole groups of {} rows",
                        dtype_name(to), what(v), rows, 8 * from_bytes, 8 * to_bytes, k, k));
    }
    return widen(v, to, k);
  }
  return narrow(v, to, from_bytes / to_bytes);
}

PackedView packed_at(const PackedView& v, const Indexer* ix, int n, std::source_location where) {
  PackedView w = v;
  SmallVec logical_strides = row_major_strides(w.shape);
  apply_indexers(w.shape, logical_strides, ix, n, v.space, where);  // validates, as Ref.at
  int squeezed_before = 0;
  for (int i = 0; i < std::min(n, v.axis); ++i) {
    if (ix[i].kind == Indexer::Kind::kIndex) ++squeezed_before;
  }
  std::vector<Indexer> pix(ix, ix + n);
  // A plane indexed as the view, but with `at_axis` (when given) on the interleaved axis.
  auto index_plane = [&](RawRef r, std::optional<Indexer> at_axis) {
    if (at_axis) pix[static_cast<size_t>(v.axis)] = *at_axis;
    const int64_t off =
        apply_indexers(r.shape, r.strides, pix.data(), n, v.space, where) * itemsize(r.dtype);
    r.data = byte_ptr(r) + off;
    return r;
  };
  const bool keeps_axis = v.m == 1 || v.axis >= n || ix[v.axis].kind == Indexer::Kind::kAll;
  w.planes.clear();
  if (keeps_axis) {
    for (const RawRef& r : v.planes) w.planes.push_back(index_plane(r, std::nullopt));
    w.axis = v.m == 1 ? std::max(w.shape.rank() - 2, 0) : v.axis - squeezed_before;
  } else if (ix[v.axis].kind == Indexer::Kind::kIndex) {
    const int64_t i = ix[v.axis].slice.start;
    for (int q = 0; q < v.p; ++q) {
      w.planes.push_back(
          index_plane(v.planes[static_cast<size_t>((i % v.m) * v.p + q)], Indexer(i / v.m)));
    }
    w.m = 1;
    w.axis = std::max(w.shape.rank() - 2, 0);
  } else {
    const pl::Slice s = ix[v.axis].slice;
    const int64_t g = std::gcd(s.stride, static_cast<int64_t>(v.m));
    const int64_t m2 = v.m / g;
    if (s.size % m2 != 0) {
      raise(ErrorKind::kInvalidArgument, "Ref.at", where,
            fmt::format("a slice of {} rows from row {} (stride {}) of axis {} of a {}, whose "
                        "rows come {} to an element of the ref it was bitcast from: the slice "
                        "must take a multiple of {} rows, whole packed groups",
                        s.size, s.start, s.stride, v.axis, what(v), v.m, m2));
    }
    for (int64_t j = 0; j < m2; ++j) {
      const int64_t row = s.start + s.stride * j;
      for (int q = 0; q < v.p; ++q) {
        w.planes.push_back(index_plane(v.planes[static_cast<size_t>((row % v.m) * v.p + q)],
                                       Indexer(pl::ds(row / v.m, s.size / m2, s.stride / g))));
      }
    }
    w.m = static_cast<int>(m2);
    w.axis = v.axis - squeezed_before;
  }
  collapse(w);
  return w;
}

PackedView packed_reshape(const PackedView& v, const Shape& to, std::source_location where) {
  PackedView w = v;
  SmallVec logical_strides = row_major_strides(w.shape);
  reshape_view(w.shape, logical_strides, to, v.space, where);  // validates, resolves -1
  const int rank = w.shape.rank();
  Shape plane_shape = w.shape;
  if (v.m > 1) {
    const int old_rank = v.shape.rank();
    if (rank < 2 || w.shape[rank - 1] != v.shape[old_rank - 1] || w.shape[rank - 2] % v.m != 0) {
      raise(ErrorKind::kInvalidArgument, "Ref.reshape", where,
            fmt::format("reshape to {} of a {}, whose second-minor rows come {} to an element of "
                        "the ref it was bitcast from: the last dim must stay ({}) and the new "
                        "second-minor dim must be a multiple of {}",
                        w.shape.to_string(), what(v), v.m, v.shape[old_rank - 1], v.m));
    }
    plane_shape[rank - 2] /= v.m;
  }
  for (RawRef& r : w.planes) reshape_view(r.shape, r.strides, plane_shape, v.space, where);
  w.axis = std::max(rank - 2, 0);
  return w;
}

std::vector<std::pair<RawRef, RawRef>> packed_pairs(const PackedView& src, const PackedView& dst,
                                                    const char* op, std::source_location where) {
  check_copy_sides(src.shape, src.dtype, src.space, dst.shape, dst.dtype, dst.space, op, where);
  PackedView s = src, d = dst;
  const int atom = std::min(s.atom, d.atom);
  refine(s, atom);
  refine(d, atom);
  if (s.m > 1 && d.m > 1 && s.axis != d.axis) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("the source {} and the destination {} were bitcast along different axes "
                      "({} and {}); copy through a plain VMEM buffer",
                      what(src), what(dst), s.axis, d.axis));
  }
  if (s.m < d.m) {
    s.axis = d.axis;
    split_phases(s, d.m / s.m);
  } else if (d.m < s.m) {
    d.axis = s.axis;
    split_phases(d, s.m / d.m);
  }
  TESSERA_CHECK(s.planes.size() == d.planes.size(), "matched views have as many planes");
  std::vector<std::pair<RawRef, RawRef>> pairs;
  for (size_t i = 0; i < s.planes.size(); ++i) pairs.emplace_back(s.planes[i], d.planes[i]);
  return pairs;
}

void packed_compute_copy(const PackedView& src, const PackedView& dst, std::source_location where) {
  for (const auto& [s, d] : packed_pairs(src, dst, "Ref.bitcast", where)) {
    ExprProgram program;
    program.where = where;
    ExprNode& n = program.emplace();
    n.op = OpCode::kLoad;
    n.dtype = s.dtype;
    n.data = s.data;
    n.space = s.space;
    n.shape = s.shape;
    n.strides = s.strides;
    evaluate(program, d);
  }
}

void packed_dma_copy(const PackedView& src, const PackedView& dst, const char* op,
                     std::source_location where) {
  for (const auto& [s, d] : packed_pairs(src, dst, op, where)) dma_copy(s, d, op, where);
}

}  // namespace tessera::detail
