// Grid algebra: the semantics' names, the split of a grid over cores, grid points. Pure
// functions, no cores (tests/unit/block_spec_test.cc).
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
    if (is_parallel(semantics[static_cast<size_t>(a)]) && grid[a] % num_cores == 0) {
      const int64_t per = grid[a] / num_cores;
      p.grid[a] = per;
      p.offset[a] = core_id * per;
      return p;
    }
  }
  // (b) Else the largest PARALLEL axis (first on ties); the remainder goes to the lowest cores.
  for (int a = 0; a < grid.rank(); ++a) {
    if (is_parallel(semantics[static_cast<size_t>(a)]) && (axis < 0 || grid[a] > grid[axis])) {
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
  while (prefix < grid.rank() && is_parallel(semantics[static_cast<size_t>(prefix)])) {
    ++prefix;
  }
  for (int a = prefix; a < grid.rank(); ++a) {
    if (is_parallel(semantics[static_cast<size_t>(a)])) {
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

}  // namespace detail
}  // namespace tessera
