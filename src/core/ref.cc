// Ref view arithmetic: `at(...)` indexers and element-access errors.
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
  int64_t offset = 0;
  SmallVec new_shape;
  SmallVec new_strides;
  for (int a = 0; a < shape.rank(); ++a) {
    const int64_t extent = shape[a];
    if (a >= n || ix[a].kind == Indexer::Kind::kAll) {
      new_shape.push_back(extent);
      new_strides.push_back(strides[a]);
      continue;
    }
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
    // With one element or none the stride moves nothing: keep the axis's own.
    int64_t stride = strides[a];
    if (!checked_mul(s.start, strides[a], &step) || !checked_add(offset, step, &offset) ||
        (s.size > 1 && !checked_mul(strides[a], s.stride, &stride))) {
      fail(ix, n, a, shape, space, where,
           fmt::format("stride {} times the view's stride {} overflows 64 bits", s.stride,
                       strides[a]));
    }
    new_shape.push_back(s.size);
    new_strides.push_back(stride);
  }
  shape = Shape(std::move(new_shape));
  strides = std::move(new_strides);
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

}  // namespace tessera::detail
