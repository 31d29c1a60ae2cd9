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

/// Where a gather's dims go: the result dim of each batch dim; per operand dim, the result dim
/// of its offset (-1: none) and the indices' batch dim that a batching dim follows (-1: none);
/// the offset dims' extents and operand dims, in operand order.
struct GatherLayout {
  SmallVec out_strides;
  SmallVec batch_out;
  SmallVec offset_out;
  SmallVec batch_of;
  SmallVec slice_ext;
  SmallVec slice_dim;
};
GatherLayout gather_layout(const GatherPlan& g);

/// Steps the row-major multi-index `i` through `ext`; false after the last.
inline bool next_index(SmallVec& i, const int64_t* ext) {
  for (int d = i.size() - 1; d >= 0; --d) {
    if (++i[d] < ext[d]) return true;
    i[d] = 0;
  }
  return false;
}

/// The start of the slice of batch position `bi` along each operand dim, into `start`; false
/// (after `oob` returned false) to stop. Out-of-range starts are reported to `oob`, then
/// clamped; `fill` tells mode fill to fill the slice instead.
template <class Oob>
bool gather_starts(const GatherCall& c, const GatherLayout& l, const SmallVec& bi, SmallVec& start,
                   bool& fill, Oob&& oob) {
  const GatherPlan& g = *c.plan;
  const int batch_rank = bi.size();
  int64_t ioff = 0;
  for (int b = 0; b < batch_rank; ++b) ioff += bi[b] * c.indices.strides[b];
  for (int d = 0; d < start.size(); ++d) {
    start[d] = l.batch_of[d] >= 0 ? bi[static_cast<int>(l.batch_of[d])] : 0;
  }
  fill = false;
  for (int k = 0; k < g.start_index_map.size(); ++k) {
    const int d = static_cast<int>(g.start_index_map[k]);
    int64_t s =
        read_index(c.indices.data, c.indices.dtype, ioff + k * c.indices.strides[batch_rank]);
    const int64_t n = g.operand_view[d];
    if (g.wrap_negative && s < 0) s += n;
    const int64_t hi = n - g.slice_sizes[d];
    if (s < 0 || s > hi) {
      if (!oob(GatherOutOfBounds{bi, k, s, d, hi})) return false;
      fill = fill || g.mode == lax::GatherScatterMode::FILL_OR_DROP;
      s = s < 0 ? 0 : hi;
    }
    start[d] = s;
  }
  return true;
}

/// Walks the gather: calls `element(out, src)` for every result element (its row-major offset,
/// and its operand element's offset, or -1 where mode fill puts the fill value). Out-of-range
/// starts are clamped (clip, promise_in_bounds) or filled; `oob(const GatherOutOfBounds&)` is
/// called for each before that and returns false to stop the walk.
template <class Element, class Oob>
void walk_gather(const GatherCall& c, Element&& element, Oob&& oob) {
  const GatherPlan& g = *c.plan;
  if (g.out.size() == 0) return;
  const GatherLayout l = gather_layout(g);
  SmallVec bi(g.indices_view.rank() - 1, 0);
  SmallVec start(g.operand_view.rank(), 0);
  SmallVec off(l.slice_ext.size(), 0);
  bool fill = false;
  do {
    if (!gather_starts(c, l, bi, start, fill, oob)) return;
    int64_t sbase = 0;
    for (int d = 0; d < start.size(); ++d) sbase += start[d] * c.operand.strides[d];
    int64_t obase = 0;
    for (int b = 0; b < bi.size(); ++b) {
      obase += bi[b] * l.out_strides[static_cast<int>(l.batch_out[b])];
    }
    // The slice: every offset position.
    do {
      int64_t src = sbase;
      int64_t dst = obase;
      for (int i = 0; i < off.size(); ++i) {
        const int d = static_cast<int>(l.slice_dim[i]);
        src += off[i] * c.operand.strides[d];
        dst += off[i] * l.out_strides[static_cast<int>(l.offset_out[d])];
      }
      element(dst, fill ? int64_t{-1} : src);
    } while (next_index(off, l.slice_ext.data()));
  } while (next_index(bi, g.indices_view.dims().data()));
}

/// Computes the gather into c.out (out-of-range starts clamped, or filled in mode fill).
void run_gather(const GatherCall& c);

}  // namespace tessera::detail
