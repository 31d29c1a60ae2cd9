// The argument rules of lax.gather and jnp.take_along_axis (tessera/gather.h): XLA's Gather
// shape rules as jax.lax checks them, the index vector being the last axis of the indices.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tessera/detail/runtime.h"
#include "tessera/gather.h"

namespace tessera::detail {

namespace {

std::string tuple_text(const std::vector<int>& v) {
  if (v.size() == 1) return fmt::format("({},)", v[0]);
  return fmt::format("({})", fmt::join(v, ", "));
}

[[noreturn]] void fail(const GatherPlan& plan, const std::string& detail) {
  raise(ErrorKind::kInvalidArgument, plan.op, plan.where, detail);
}

// Checks that `dims` (field `field`) are in 0..rank-1 and unique (and sorted, when `sorted`),
// as XLA requires; returns them as a SmallVec.
SmallVec check_dims(const GatherPlan& plan, const char* field, const std::vector<int>& dims,
                    int rank, const char* of, bool sorted) {
  SmallVec out;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int d = dims[i];
    if (d < 0 || d >= rank) {
      fail(plan, fmt::format("{} = {} names dim {}, outside 0..{} of the {} (rank {}); dims are "
                             "non-negative here, as in jax.lax",
                             field, tuple_text(dims), d, rank - 1, of, rank));
    }
    for (size_t j = 0; j < i; ++j) {
      if (dims[j] == d) {
        fail(plan, fmt::format("{} = {} repeats dim {}; each dim may appear once", field,
                               tuple_text(dims), d));
      }
      if (sorted && dims[j] > d) {
        fail(plan, fmt::format("{} = {} must be sorted in increasing order (XLA's rule)", field,
                               tuple_text(dims)));
      }
    }
    out.push_back(d);
  }
  return out;
}

bool contains(const SmallVec& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

lax::GatherScatterMode check_mode(const GatherPlan& plan, const lax::GatherMode& mode,
                                  lax::GatherScatterMode fallback) {
  if (!mode.set()) return fallback;
  if (!mode.known()) {
    fail(plan, fmt::format("mode \"{}\" is not a gather mode; use \"clip\", \"fill\" (or "
                           "\"drop\") or \"promise_in_bounds\"",
                           mode.name()));
  }
  if (mode.mode() == lax::GatherScatterMode::ONE_HOT) {
    fail(plan,
         "mode one_hot is not supported here; use \"clip\", \"fill\" or "
         "\"promise_in_bounds\" (the same elements, gathered directly)");
  }
  return mode.mode();
}

// The rules that tie the dims to the operand and the indices (beyond range and order).
void check_dim_relations(const GatherPlan& g, const Shape& operand, const Shape& indices,
                         const lax::GatherDimensionNumbers& dn) {
  const int batch_rank = indices.rank() - 1;
  if (g.start_index_map.size() != static_cast<int>(indices[batch_rank])) {
    fail(g, fmt::format("start_index_map = {} has {} entries, but the index vectors (the last "
                        "axis of start_indices, shape {}) have {} components; they must agree",
                        tuple_text(dn.start_index_map), g.start_index_map.size(),
                        indices.to_string(), indices[batch_rank]));
  }
  for (int64_t d : g.collapsed) {
    if (contains(g.operand_batching, d)) {
      fail(g, fmt::format("operand dim {} is in both collapsed_slice_dims = {} and "
                          "operand_batching_dims = {}; a dim may be one or the other",
                          d, tuple_text(dn.collapsed_slice_dims),
                          tuple_text(dn.operand_batching_dims)));
    }
  }
  for (int64_t d : g.start_index_map) {
    if (contains(g.operand_batching, d)) {
      fail(g, fmt::format("operand dim {} is in both start_index_map = {} and "
                          "operand_batching_dims = {}; a batching dim is indexed by its batch "
                          "position, not by an index vector",
                          d, tuple_text(dn.start_index_map), tuple_text(dn.operand_batching_dims)));
    }
  }
  if (g.operand_batching.size() != g.indices_batching.size()) {
    fail(g, fmt::format("operand_batching_dims = {} and start_indices_batching_dims = {} must "
                        "have one length (they pair up)",
                        tuple_text(dn.operand_batching_dims),
                        tuple_text(dn.start_indices_batching_dims)));
  }
  for (int i = 0; i < g.operand_batching.size(); ++i) {
    const int64_t od = g.operand_batching[i];
    const int64_t id = g.indices_batching[i];
    if (id == batch_rank) {
      fail(g, fmt::format("start_indices_batching_dims = {} names dim {}, the index vector dim "
                          "(the last of start_indices); name a batch dim",
                          tuple_text(dn.start_indices_batching_dims), id));
    }
    if (operand[static_cast<int>(od)] != indices[static_cast<int>(id)]) {
      fail(g, fmt::format("operand batching dim {} has extent {} but its start_indices batching "
                          "dim {} has extent {}; paired batching dims must have one extent",
                          od, operand[static_cast<int>(od)], id, indices[static_cast<int>(id)]));
    }
  }
}

// slice_sizes against the operand; returns the extents of the offset dims, in operand order.
SmallVec check_slice_sizes(GatherPlan& g, const Shape& operand,
                           const std::vector<int64_t>& slice_sizes) {
  if (static_cast<int>(slice_sizes.size()) != operand.rank()) {
    fail(g, fmt::format("slice_sizes has {} entries for an operand of rank {} (shape {}); give "
                        "one per operand dim",
                        slice_sizes.size(), operand.rank(), operand.to_string()));
  }
  SmallVec offsets;
  for (int d = 0; d < operand.rank(); ++d) {
    const int64_t s = slice_sizes[static_cast<size_t>(d)];
    g.slice_sizes.push_back(s);
    if (s < 0 || s > operand[d]) {
      fail(g, fmt::format("slice_sizes[{}] = {} is outside 0..{} (the operand's extent along "
                          "dim {}, shape {})",
                          d, s, operand[d], d, operand.to_string()));
    }
    const bool collapsed = contains(g.collapsed, d);
    if ((collapsed || contains(g.operand_batching, d)) && s != 1) {
      fail(g, fmt::format("slice_sizes[{}] = {} for operand dim {}, which is a {} dim: its "
                          "slice size must be 1{}",
                          d, s, d, collapsed ? "collapsed" : "batching",
                          s == 0 ? " (a size-0 slice of it is not supported here)" : ""));
    }
    if (!collapsed && !contains(g.operand_batching, d)) offsets.push_back(s);
  }
  return offsets;
}

}  // namespace

void gather_plan(const Shape& operand, const Shape& indices, const lax::GatherDimensionNumbers& dn,
                 const std::vector<int64_t>& slice_sizes, const lax::GatherMode& mode,
                 GatherPlan& g) {
  g.mode = check_mode(g, mode, lax::GatherScatterMode::PROMISE_IN_BOUNDS);
  if (indices.rank() < 1) {
    fail(g,
         "start_indices has shape (): it needs at least one axis, the last holding the index "
         "vectors (reshape a scalar index to (1,))");
  }
  const int batch_rank = indices.rank() - 1;
  const int out_rank = batch_rank + static_cast<int>(dn.offset_dims.size());
  g.offset_dims = check_dims(g, "offset_dims", dn.offset_dims, out_rank, "output", true);
  g.collapsed = check_dims(g, "collapsed_slice_dims", dn.collapsed_slice_dims, operand.rank(),
                           "operand", true);
  g.start_index_map =
      check_dims(g, "start_index_map", dn.start_index_map, operand.rank(), "operand", false);
  g.operand_batching = check_dims(g, "operand_batching_dims", dn.operand_batching_dims,
                                  operand.rank(), "operand", true);
  g.indices_batching = check_dims(g, "start_indices_batching_dims", dn.start_indices_batching_dims,
                                  indices.rank(), "start_indices", false);
  check_dim_relations(g, operand, indices, dn);
  const SmallVec offsets = check_slice_sizes(g, operand, slice_sizes);
  if (offsets.size() != g.offset_dims.size()) {
    fail(g, fmt::format("offset_dims = {} has {} entries, but the operand (rank {}) less its "
                        "{} collapsed and {} batching dims leaves {} slice dims; they must agree",
                        tuple_text(dn.offset_dims), g.offset_dims.size(), operand.rank(),
                        g.collapsed.size(), g.operand_batching.size(), offsets.size()));
  }
  // The result: offset dims take the slice extents in operand order, the other dims the batch
  // dims of the indices in order.
  SmallVec out;
  int next_offset = 0;
  int next_batch = 0;
  for (int o = 0; o < out_rank; ++o) {
    out.push_back(contains(g.offset_dims, o) ? offsets[next_offset++] : indices[next_batch++]);
  }
  g.operand_view = operand;
  g.indices_view = indices;
  g.out = Shape(std::move(out));
}

void take_along_axis_plan(const Shape& x, const Shape& indices, int axis,
                          const lax::GatherMode& mode, GatherPlan& g) {
  g.mode = check_mode(g, mode, lax::GatherScatterMode::FILL_OR_DROP);
  g.wrap_negative = g.mode != lax::GatherScatterMode::PROMISE_IN_BOUNDS;
  const int r = x.rank();
  if (indices.rank() != r) {
    fail(g, fmt::format("indices of shape {} and x of shape {} must have one rank (as "
                        "jnp.take_along_axis requires); add or remove unit axes first",
                        indices.to_string(), x.to_string()));
  }
  if (r == 0) fail(g, "x has shape (): take_along_axis needs at least one axis");
  if (axis < -r || axis >= r) {
    fail(g, fmt::format("axis {} is outside -{}..{} for arrays of rank {}", axis, r, r - 1, r));
  }
  const int a = axis < 0 ? axis + r : axis;
  // The operand and the indices broadcast to the result's extents on every axis but `a`.
  SmallVec out;
  SmallVec xv;
  for (int d = 0; d < r; ++d) {
    if (d == a) {
      out.push_back(indices[d]);
      xv.push_back(x[d]);
      continue;
    }
    if (x[d] != indices[d] && x[d] != 1 && indices[d] != 1) {
      fail(g, fmt::format("x of shape {} and indices of shape {} do not broadcast along axis {} "
                          "({} vs {}); every axis but `axis` ({}) must match or be 1",
                          x.to_string(), indices.to_string(), d, x[d], indices[d], a));
    }
    out.push_back(std::max(x[d], indices[d]));
    xv.push_back(out.back());
  }
  g.zeros = x[a] == 0;
  // A gather whose every other axis is a batching dim: out[i] = x[i with i[a] = indices[i]].
  for (int d = 0; d < r; ++d) {
    g.slice_sizes.push_back(1);
    if (d != a) {
      g.operand_batching.push_back(d);
      g.indices_batching.push_back(d);
    }
  }
  g.collapsed.push_back(a);
  g.start_index_map.push_back(a);
  g.out = Shape(out);
  out.push_back(1);  // the index vectors: one component
  g.indices_view = Shape(out);
  g.operand_view = Shape(xv);
}

}  // namespace tessera::detail
