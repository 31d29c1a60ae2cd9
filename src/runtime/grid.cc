// Grid and block index algebra: pure functions, no cores (tests/unit/block_spec_test.cc).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "tessera/block_spec.h"
#include "tessera/detail/runtime.h"

namespace tessera {

const char* pltpu::to_string(GridDimensionSemantics s) noexcept {
  switch (s) {
    case GridDimensionSemantics::PARALLEL:
      return "parallel";
    case GridDimensionSemantics::ARBITRARY:
      return "arbitrary";
    case GridDimensionSemantics::CORE_PARALLEL:
      return "core_parallel";
    case GridDimensionSemantics::SUBCORE_PARALLEL:
      return "subcore_parallel";
  }
  return "?";
}

pl::Indices pl::BlockSpec::block_indices(const int64_t* grid_point, int n,
                                         const detail::RawRef* prefetch, int num_prefetch) const {
  if (whole_) return Indices{detail::SmallVec(static_cast<int>(block_.size()), 0)};
  if (n != arity_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  fmt::format("the index map takes {} grid indices but the grid has rank {}; "
                              "give it one int parameter per grid axis",
                              arity_, n));
  }
  if (num_prefetch != prefetch_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  fmt::format("the index map takes {} scalar-prefetch refs after its grid indices "
                              "but the call has {}; with pltpu::PrefetchScalarGridSpec<n> every "
                              "index map takes the grid indices then all n refs",
                              prefetch_, num_prefetch));
  }
  return map_(grid_point, prefetch);
}

namespace detail {

namespace {
std::string semantics_list(const std::vector<pltpu::GridDimensionSemantics>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += ", ";
    out += pltpu::to_string(s[i]);
  }
  return out + (s.size() == 1 ? ",)" : ")");
}

void check_lengths(const Shape& grid, const std::vector<pltpu::GridDimensionSemantics>& sem,
                   const char* op, std::source_location where) {
  if (static_cast<int>(sem.size()) != grid.rank()) {
    raise(ErrorKind::kInvalidArgument, op, where,
          fmt::format("dimension_semantics {} has {} entries but the grid {} has rank {}; give "
                      "one per grid axis",
                      semantics_list(sem), sem.size(), grid.to_string(), grid.rank()));
  }
}
}  // namespace

GridPartition partition_grid(const Shape& grid,
                             const std::vector<pltpu::GridDimensionSemantics>& semantics,
                             int num_cores, int core_id, std::source_location where) {
  GridPartition p{grid, SmallVec(grid.rank(), 0)};
  if (num_cores <= 1) return p;
  check_lengths(grid, semantics, "emit_pipeline", where);
  int axis = -1;
  // (a) The first PARALLEL axis that divides evenly: every core gets size / num_cores.
  for (int a = 0; a < grid.rank(); ++a) {
    if (semantics[static_cast<size_t>(a)] == pltpu::PARALLEL && grid[a] % num_cores == 0) {
      const int64_t per = grid[a] / num_cores;
      p.grid[a] = per;
      p.offset[a] = core_id * per;
      return p;
    }
  }
  // (b) Else the largest PARALLEL axis (first on ties); the remainder goes to the lowest cores.
  for (int a = 0; a < grid.rank(); ++a) {
    if (semantics[static_cast<size_t>(a)] == pltpu::PARALLEL &&
        (axis < 0 || grid[a] > grid[axis])) {
      axis = a;
    }
  }
  if (axis < 0) {
    raise(ErrorKind::kInvalidArgument, "emit_pipeline", where,
          fmt::format("core_axis_name splits the grid over {} cores, but dimension_semantics {} "
                      "has no PARALLEL axis; mark the independent leading axis pltpu::PARALLEL",
                      num_cores, semantics_list(semantics)));
  }
  const int64_t size = grid[axis];
  const int64_t base = size / num_cores;
  const int64_t rem = size % num_cores;
  if (core_id < rem) {
    p.grid[axis] = base + 1;
    p.offset[axis] = core_id * (base + 1);
  } else {
    p.grid[axis] = base;
    p.offset[axis] = core_id * base + rem;
  }
  return p;
}

IterationRange pallas_call_core_range(const Shape& grid,
                                      const std::vector<pltpu::GridDimensionSemantics>& semantics,
                                      int num_cores, int core_id, std::source_location where) {
  const int64_t total = grid.size();
  if (num_cores <= 1) return {0, total};
  check_lengths(grid, semantics, "pallas_call", where);
  int prefix = 0;
  while (prefix < grid.rank() && semantics[static_cast<size_t>(prefix)] == pltpu::PARALLEL) {
    ++prefix;
  }
  for (int a = prefix; a < grid.rank(); ++a) {
    if (semantics[static_cast<size_t>(a)] == pltpu::PARALLEL) {
      raise(ErrorKind::kInvalidArgument, "pallas_call", where,
            fmt::format("dimension_semantics {}: PARALLEL axes must form a prefix of the grid "
                        "(axis {} is PARALLEL after an ARBITRARY one); reorder the grid",
                        semantics_list(semantics), a));
    }
  }
  int64_t parallel_points = 1;
  for (int a = 0; a < prefix; ++a) parallel_points *= grid[a];
  if (prefix == 0) {
    // Nothing may be split: core 0 runs the whole grid, the others nothing.
    return core_id == 0 ? IterationRange{0, total} : IterationRange{total, total};
  }
  const int64_t inner = parallel_points == 0 ? 0 : total / parallel_points;
  const int64_t per_core = (parallel_points + num_cores - 1) / num_cores;
  const int64_t begin = std::min(total, core_id * per_core * inner);
  const int64_t end = std::min(total, (core_id + 1) * per_core * inner);
  return {begin, end};
}

bool next_grid_point(const Shape& grid, SmallVec& idx) {
  for (int a = grid.rank() - 1; a >= 0; --a) {
    if (++idx[a] < grid[a]) return true;
    idx[a] = 0;
  }
  return false;
}

int64_t linear_grid_index(const Shape& grid, const SmallVec& idx) {
  int64_t l = 0;
  for (int a = 0; a < grid.rank(); ++a) l = l * grid[a] + idx[a];
  return l;
}

SmallVec grid_point(const Shape& grid, int64_t linear) {
  SmallVec idx(grid.rank(), 0);
  for (int a = grid.rank() - 1; a >= 0; --a) {
    if (grid[a] == 0) continue;
    idx[a] = linear % grid[a];
    linear /= grid[a];
  }
  return idx;
}

BlockWindow block_window(const Shape& array, const std::vector<pl::BlockDim>& block,
                         const pl::Indices& indices, std::source_location where) {
  const int r = array.rank();
  if (static_cast<int>(block.size()) != r || indices.v.size() != r) {
    raise(ErrorKind::kShapeMismatch, "BlockSpec", where,
          fmt::format("the block shape has {} axes and the index map returned {} indices, but "
                      "the array {} has rank {}; give one block axis and one index per array axis",
                      block.size(), indices.v.size(), array.to_string(), r));
  }
  BlockWindow w{SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0)};
  for (int a = 0; a < r; ++a) {
    const pl::BlockDim& b = block[static_cast<size_t>(a)];
    const int64_t i = indices.v[a];
    if (b.is_element()) {
      // The index is an element offset into the array padded by pad_lo before its start.
      const int64_t start = i - b.pad_lo;
      const int64_t lo = std::max<int64_t>(start, 0);
      const int64_t hi = std::min(start + b.size, array[a]);
      if (i < 0 || i + b.size > b.pad_lo + array[a] + b.pad_hi || hi <= lo) {
        raise(ErrorKind::kOutOfBounds, "BlockSpec", where,
              fmt::format("element offset {} on axis {} puts the window of {} elements outside "
                          "the array {} padded by ({}, {}); the window must lie in the padded "
                          "array and cover at least one element of the array; check the index "
                          "map",
                          i, a, b.size, array.to_string(), b.pad_lo, b.pad_hi));
      }
      w.start[a] = lo;
      w.block[a] = b.size;
      w.valid[a] = hi - lo;
      w.skip[a] = lo - start;
      continue;
    }
    // A squeezed axis's index is an element index; a blocked axis's index counts blocks.
    const int64_t start = b.is_squeezed ? i : i * b.size;
    const int64_t size = b.is_squeezed ? 1 : b.size;
    if (i < 0 || start >= array[a]) {
      raise(ErrorKind::kOutOfBounds, "BlockSpec", where,
            fmt::format("block index {} on axis {} starts at element {}, outside the array {} "
                        "(extent {}); a block must have at least one element in bounds; check "
                        "the index map",
                        i, a, start, array.to_string(), array[a]));
    }
    w.start[a] = start;
    w.block[a] = size;
    w.valid[a] = std::min(size, array[a] - start);
  }
  return w;
}

}  // namespace detail
}  // namespace tessera
