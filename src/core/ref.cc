// Ref view arithmetic: `at(...)` indexers, `reshape(...)` views and element-access errors.
#include "tessera/ref.h"

#include <fmt/format.h>

#include <string>

#include "tessera/detail/checked_math.h"
#include "tessera/detail/runtime.h"

namespace tessera::detail {

namespace {
// "a VMEM", "an HBM", "an ANY", "an SMEM".
std::string a_space(MemorySpace s) {
  const bool vowel_sound = s == MemorySpace::HBM || s == MemorySpace::SMEM || s == MemorySpace::ANY;
  return std::string(vowel_sound ? "an " : "a ") + to_string(s);
}

std::string describe(const Indexer& ix) {
  switch (ix.kind) {
    case Indexer::Kind::kIndex:
      return fmt::format("{}", ix.slice.start);
    case Indexer::Kind::kSlice:
      if (ix.slice.stride == 1) return fmt::format("pl::ds({}, {})", ix.slice.start, ix.slice.size);
      return fmt::format("pl::ds({}, {}, {})", ix.slice.start, ix.slice.size, ix.slice.stride);
    case Indexer::Kind::kAll:
      return "pl::all";
  }
  return "?";
}

[[noreturn]] void fail(const Indexer* ix, int n, int axis, const Shape& shape, MemorySpace space,
                       std::source_location where, const std::string& why) {
  std::vector<std::string> parts;
  for (int i = 0; i < n; ++i) parts.push_back(describe(ix[i]));
  raise(ErrorKind::kOutOfBounds, "Ref.at", where,
        fmt::format("at({}) on {} ref of shape {}: {} on axis {} (extent {}){}",
                    fmt::join(parts, ", "), a_space(space), shape.to_string(), why, axis,
                    axis < shape.rank() ? shape[axis] : 0,
                    "; check the index arithmetic (e.g. the core index times the block size)"));
}
}  // namespace

int64_t apply_indexers(Shape& shape, SmallVec& strides, const Indexer* ix, int n, MemorySpace space,
                       std::source_location where) {
  if (n > shape.rank()) {
    std::vector<std::string> parts;
    for (int i = 0; i < n; ++i) parts.push_back(describe(ix[i]));
    raise(
        ErrorKind::kOutOfBounds, "Ref.at", where,
        fmt::format("at({}) has {} indexers but the {} ref has rank {} (shape {}); give at most "
                    "one indexer per axis",
                    fmt::join(parts, ", "), n, to_string(space), shape.rank(), shape.to_string()));
  }
  // First every indexer is checked against the view as given (an error names its shape), then
  // the kept axes move down in place: an index drops its axis, a slice keeps it with its size and
  // stride. Building new vectors and moving them over costs most of a call: the 16-byte copies of
  // their inline arrays read what 8-byte stores have just written (a failed store forwarding,
  // docs/performance.md, "Paged attention, ported").
  int64_t offset = 0;
  for (int a = 0; a < n; ++a) {
    if (ix[a].kind == Indexer::Kind::kAll) continue;
    const int64_t extent = shape[a];
    const pl::Slice s = ix[a].slice;
    // Every product and sum below is checked: a start or stride near INT64_MAX must not wrap
    // into an in-bounds (or negative) element.
    int64_t step = 0;
    if (ix[a].kind == Indexer::Kind::kIndex) {
      if (s.start < 0 || s.start >= extent) {
        fail(ix, n, a, shape, space, where,
             fmt::format("index {} is outside 0..{}", s.start, extent - 1));
      }
      if (!checked_mul(s.start, strides[a], &step) || !checked_add(offset, step, &offset)) {
        fail(ix, n, a, shape, space, where,
             fmt::format("index {} times the view's stride {} overflows 64 bits", s.start,
                         strides[a]));
      }
      continue;
    }
    if (s.stride < 1) {
      fail(ix, n, a, shape, space, where, fmt::format("stride {} must be at least 1", s.stride));
    }
    if (s.size < 0) {
      fail(ix, n, a, shape, space, where, fmt::format("size {} is negative", s.size));
    }
    if (s.start < 0) {
      fail(ix, n, a, shape, space, where, fmt::format("start {} is negative", s.start));
    }
    if (s.size > 0) {
      int64_t last = 0;
      if (!checked_mul(s.size - 1, s.stride, &last) || !checked_add(last, s.start, &last)) {
        fail(ix, n, a, shape, space, where,
             fmt::format("the slice's last element, start {} + (size {} - 1) * stride {}, "
                         "overflows 64 bits, far past the end",
                         s.start, s.size, s.stride));
      }
      if (last >= extent) {
        fail(ix, n, a, shape, space, where,
             fmt::format("the slice covers elements {}..{}, past the end", s.start, last));
      }
    }
    if (s.size == 0 && s.start > extent) {
      fail(ix, n, a, shape, space, where, fmt::format("start {} is past the end", s.start));
    }
    int64_t stride = strides[a];
    if (!checked_mul(s.start, strides[a], &step) || !checked_add(offset, step, &offset) ||
        (s.size > 1 && !checked_mul(strides[a], s.stride, &stride))) {
      fail(ix, n, a, shape, space, where,
           fmt::format("stride {} times the view's stride {} overflows 64 bits", s.stride,
                       strides[a]));
    }
  }
  int kept = 0;
  SmallVec& dims = shape.dims();
  for (int a = 0; a < dims.size(); ++a) {
    if (a < n && ix[a].kind == Indexer::Kind::kIndex) continue;
    if (a < n && ix[a].kind == Indexer::Kind::kSlice) {
      // Checked above. With one element or none the stride moves nothing: keep the axis's own.
      const pl::Slice& s = ix[a].slice;
      dims[kept] = s.size;
      strides[kept] = s.size > 1 ? strides[a] * s.stride : strides[a];
    } else {
      dims[kept] = dims[a];
      strides[kept] = strides[a];
    }
    ++kept;
  }
  dims.resize(kept);
  strides.resize(kept);
  return offset;
}

void throw_element_index_error(const Shape& shape, const int64_t* idx, int n, MemorySpace space,
                               std::source_location where) {
  std::vector<int64_t> v(idx, idx + n);
  if (n != shape.rank()) {
    raise(ErrorKind::kOutOfBounds, "Ref element access", where,
          fmt::format("({}) gives {} indices to {} ref of rank {} (shape {}); give one index per "
                      "axis",
                      fmt::join(v, ", "), n, a_space(space), shape.rank(), shape.to_string()));
  }
  int axis = 0;
  for (; axis < n; ++axis) {
    if (idx[axis] < 0 || idx[axis] >= shape[axis]) break;
  }
  raise(ErrorKind::kOutOfBounds, "Ref element access", where,
        fmt::format("({}) on {} ref of shape {}: index {} is outside 0..{} on axis {}",
                    fmt::join(v, ", "), a_space(space), shape.to_string(), idx[axis],
                    shape[axis] - 1, axis));
}

void raise_cdiv(int64_t a, int64_t b, std::source_location where) {
  raise(ErrorKind::kInvalidArgument, "pl.cdiv", where,
        b <= 0 ? fmt::format("pl::cdiv({}, {}): the divisor must be positive", a, b)
               : fmt::format("pl::cdiv({}, {}): {} + {} - 1 overflows 64 bits", a, b, a, b));
}

void raise_multiple_of(int64_t x, int64_t n, std::source_location where) {
  raise(ErrorKind::kInvalidArgument, "pl.multiple_of", where,
        n <= 0 ? fmt::format("pl::multiple_of({}, {}): the multiple must be positive", x, n)
               : fmt::format("pl::multiple_of({}, {}): {} is not a multiple of {} (remainder {}); "
                             "on a TPU this hint would make Mosaic compile wrong code silently; "
                             "check the index arithmetic or drop the hint",
                             x, n, x, n, x % n));
}

void reshape_view(Shape& shape, SmallVec& strides, const Shape& to, MemorySpace space,
                  std::source_location where) {
  const std::string what = fmt::format("reshape{} of {} ref of shape {}", to.to_string(),
                                       a_space(space), shape.to_string());
  auto fail = [&](const std::string& why) {
    raise(ErrorKind::kInvalidArgument, "Ref.reshape", where, fmt::format("{}: {}", what, why));
  };
  // The new shape, with at most one -1 inferred from the element count.
  const int64_t total = shape.size();
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < to.rank(); ++i) {
    if (to[i] == -1 && infer < 0) {
      infer = i;
    } else if (to[i] < 0) {
      fail(to[i] == -1 ? "at most one extent may be -1" : "extents must be >= 0 (or one -1)");
    } else if (!checked_mul(known, to[i], &known)) {
      fail("the element count overflows 64 bits");
    }
  }
  SmallVec dims;
  for (int i = 0; i < to.rank(); ++i) dims.push_back(to[i]);
  if (infer >= 0) {
    if (known == 0 || total % known != 0) {
      fail(fmt::format("the {} elements do not divide into the given extents", total));
    }
    dims[infer] = total / known;
    known = total;
  }
  if (known != total) {
    fail(fmt::format("the ref holds {} elements and the new shape {}; a reshape keeps the count",
                     total, known));
  }
  Shape out(dims);
  if (total == 0) {
    strides = row_major_strides(out);
    shape = std::move(out);
    return;
  }
  // numpy's no-copy reshape: the old and new axes (unit axes dropped) are matched in groups of
  // equal element counts; each group of old axes must be contiguous among itself, and the new
  // axes of the group then take row-major strides from the group's innermost stride.
  SmallVec od, os;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] != 1) od.push_back(shape[i]), os.push_back(strides[i]);
  }
  SmallVec nd, map;  // the new non-unit axes and their positions in `out`
  for (int i = 0; i < out.rank(); ++i) {
    if (out[i] != 1) nd.push_back(out[i]), map.push_back(i);
  }
  SmallVec ns(nd.size(), 0);
  int oi = 0, ni = 0;
  while (oi < od.size() && ni < nd.size()) {
    int oj = oi + 1, nj = ni + 1;
    int64_t op = od[oi], np = nd[ni];
    while (op != np) {
      if (np < op) {
        np *= nd[nj++];
      } else {
        op *= od[oj++];
      }
    }
    for (int k = oi; k + 1 < oj; ++k) {
      if (os[k] != od[k + 1] * os[k + 1]) {
        fail(
            "this view's elements are not laid out so that the new shape is a view of them "
            "(axes that merge or split must be contiguous among themselves); copy it into a "
            "contiguous VMEM scratch first, or reshape the whole buffer before slicing it");
      }
    }
    ns[nj - 1] = os[oj - 1];
    for (int k = nj - 1; k > ni; --k) ns[k - 1] = ns[k] * nd[k];
    oi = oj;
    ni = nj;
  }
  SmallVec st(out.rank(), 1);
  for (int k = 0; k < nd.size(); ++k) st[static_cast<int>(map[k])] = ns[k];
  strides = std::move(st);
  shape = std::move(out);
}

}  // namespace tessera::detail
