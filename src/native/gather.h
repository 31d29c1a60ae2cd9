// Internal: the gather kernel of lax.gather / jnp.take_along_axis (tessera/gather.h), shared by
// the native engine (which moves the elements) and the checked engine (which moves their
// definedness the same way and reports broken in-bounds promises).
#pragma once

#include <cstdint>

#include "tessera/gather.h"

namespace tessera::detail {

/// One gather: the plan, the operand and the indices as views of the plan's view shapes (broadcast
/// axes have stride 0), and the contiguous result.
struct GatherCall {
  const GatherPlan* plan = nullptr;
  RawRef operand;
  RawRef indices;
  RawRef indices_value;  // the indices as the value holds them (the checked engine's reads)
  void* out = nullptr;
};

/// An index outside its range: the batch position (indices' coordinates without the index
/// vector axis), the index vector component, its value and the range it breaks.
struct GatherOutOfBounds {
  SmallVec position;
  int component = 0;
  int64_t index = 0;
  int64_t dim = 0;
  int64_t limit = 0;  // the largest start the slice allows (extent - slice size)
};

/// The integer at element `off` of an index view of dtype `dtype`.
int64_t read_index(const void* data, DType dtype, int64_t off);

/// Walks the gather: calls `element(out, src)` for every result element (its row-major offset,
/// and its operand element's offset, or -1 where mode fill puts the fill value). Out-of-range
/// starts are clamped (clip, promise_in_bounds) or filled; `oob(const GatherOutOfBounds&)` is
/// called for each before that and returns false to stop the walk.
template <class Element, class Oob>
void walk_gather(const GatherCall& c, Element&& element, Oob&& oob) {
  const GatherPlan& g = *c.plan;
  const int out_rank = g.out.rank();
  const int batch_rank = g.indices_view.rank() - 1;
  const int op_rank = g.operand_view.rank();
  const SmallVec out_strides = row_major_strides(g.out);
  // The result dim of each batch dim, and of each operand dim's offset (-1: none).
  SmallVec batch_out;
  for (int o = 0; o < out_rank; ++o) {
    bool offset = false;
    for (int64_t d : g.offset_dims) offset = offset || d == o;
    if (!offset) batch_out.push_back(o);
  }
  SmallVec offset_out(op_rank, -1);
  SmallVec batch_of(op_rank, -1);  // the indices' batch dim that a batching dim follows
  SmallVec slice_ext;              // extents of the offset dims, in operand order
  SmallVec slice_dim;              // their operand dims
  int next = 0;
  for (int d = 0; d < op_rank; ++d) {
    bool collapsed = false;
    for (int64_t x : g.collapsed) collapsed = collapsed || x == d;
    for (int i = 0; i < g.operand_batching.size(); ++i) {
      if (g.operand_batching[i] == d) batch_of[d] = g.indices_batching[i];
    }
    if (collapsed || batch_of[d] >= 0) continue;
    offset_out[d] = g.offset_dims[next++];
    slice_ext.push_back(g.slice_sizes[d]);
    slice_dim.push_back(d);
  }
  if (g.out.size() == 0) return;
  const int k_count = static_cast<int>(g.start_index_map.size());
  SmallVec bi(batch_rank, 0);
  SmallVec start(op_rank, 0);
  SmallVec off(slice_ext.size(), 0);
  for (bool more = true; more;) {
    int64_t ioff = 0;
    int64_t obase = 0;
    for (int b = 0; b < batch_rank; ++b) {
      ioff += bi[b] * c.indices.strides[b];
      obase += bi[b] * out_strides[static_cast<int>(batch_out[b])];
    }
    for (int d = 0; d < op_rank; ++d)
      start[d] = batch_of[d] >= 0 ? bi[static_cast<int>(batch_of[d])] : 0;
    bool fill = false;
    for (int k = 0; k < k_count; ++k) {
      const int d = static_cast<int>(g.start_index_map[k]);
      int64_t s =
          read_index(c.indices.data, c.indices.dtype, ioff + k * c.indices.strides[batch_rank]);
      const int64_t n = g.operand_view[d];
      if (g.wrap_negative && s < 0) s += n;
      const int64_t hi = n - g.slice_sizes[d];
      if (s < 0 || s > hi) {
        if (!oob(GatherOutOfBounds{bi, k, s, d, hi})) return;
        if (g.mode == lax::GatherScatterMode::FILL_OR_DROP) fill = true;
        s = s < 0 ? 0 : hi;
      }
      start[d] = s;
    }
    int64_t sbase = 0;
    for (int d = 0; d < op_rank; ++d) sbase += start[d] * c.operand.strides[d];
    // The slice: every offset position.
    for (int i = 0; i < off.size(); ++i) off[i] = 0;
    for (bool in_slice = true; in_slice;) {
      int64_t src = sbase;
      int64_t dst = obase;
      for (int i = 0; i < off.size(); ++i) {
        src += off[i] * c.operand.strides[static_cast<int>(slice_dim[i])];
        dst += off[i] * out_strides[static_cast<int>(offset_out[static_cast<int>(slice_dim[i])])];
      }
      element(dst, fill ? int64_t{-1} : src);
      in_slice = false;
      for (int i = off.size() - 1; i >= 0 && !in_slice; --i) {
        in_slice = ++off[i] < slice_ext[i];
        if (!in_slice) off[i] = 0;
      }
    }
    more = false;
    for (int b = batch_rank - 1; b >= 0 && !more; --b) {
      more = ++bi[b] < g.indices_view[b];
      if (!more) bi[b] = 0;
    }
  }
}

/// Computes the gather into c.out (out-of-range starts clamped, or filled in mode fill).
void run_gather(const GatherCall& c);

}  // namespace tessera::detail
