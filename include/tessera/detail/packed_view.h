// Internal: the layout of a width-changing bitcast view (pl::PackedRef, packed_ref.h) and the
// non-template operations on it (src/core/packed_view.cc).
//
// A TPU bitcast of a ref to a type k times narrower splits every element into k rows of the
// second-minor axis: element (..., k * r + h, c) of the narrow view is part h (h = 0 the lowest
// bits) of element (..., r, c). A bitcast to a type k times wider joins k consecutive rows the
// same way. Such a view is not a strided view of the bytes, but it is a few strided views of
// them interleaved: a PackedView holds `m * p` plain views ("planes") of one atom type
// (uint8/uint16/uint32); logical row m * r + j along `axis` is phase j, and each of its elements
// is the `p` atoms of planes[j * p + 0 .. j * p + p - 1] at (..., r, ...), the lowest first. A
// plain Ref is the PackedView with m = p = 1. Every operation (a copy, a read, a write, a DMA)
// becomes copies between planes, which the existing strided copy and evaluator do, so the
// checked engine keeps its books on exactly the bytes touched.
#pragma once

#include <source_location>
#include <utility>
#include <vector>

#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/ref.h"
#include "tessera/shape.h"

namespace tessera::detail {

struct PackedView {
  DType dtype = DType::kUInt8;  // the logical element type
  MemorySpace space = MemorySpace::ANY;
  Shape shape;                 // logical
  int axis = 0;                // the interleaved axis (meaningful when m > 1)
  int m = 1;                   // phases interleaved along axis
  int p = 1;                   // atoms per element
  int atom = 1;                // bytes per atom
  std::vector<RawRef> planes;  // m * p views of the atom type; shape = shape with axis / m
};

/// The one-plane view of a plain ref.
PackedView packed_of(const RawRef& r);
/// `v.bitcast(to)`: the rules of a TPU bitcast (rank >= 2, the second-minor extent times the
/// widths must divide); kInvalidArgument at `where` otherwise.
PackedView packed_bitcast(const PackedView& v, DType to, std::source_location where,
                          const char* op = "Ref.bitcast");
/// `v.at(ix...)`: bounds-checked as Ref.at; a slice of the interleaved axis must take whole
/// groups of the phases it visits.
PackedView packed_at(const PackedView& v, const Indexer* ix, int n, std::source_location where);
/// `v.reshape(to)` (one extent may be -1): free of the interleaved axis, or keeping the last
/// dim and a second-minor extent that is a multiple of the phases.
PackedView packed_reshape(const PackedView& v, const Shape& to, std::source_location where);
/// The pairs of plain views (source plane, destination plane) that copy `src` into `dst`;
/// kShapeMismatch / kDtypeMismatch naming both at `where` (`op` names the call).
std::vector<std::pair<RawRef, RawRef>> packed_pairs(const PackedView& src, const PackedView& dst,
                                                    const char* op, std::source_location where);
/// Copies `src` into `dst` with the vector evaluator (both in VMEM/SMEM), one plane at a time.
void packed_compute_copy(const PackedView& src, const PackedView& dst, std::source_location where);
/// Copies `src` into `dst` by DMA (pltpu::sync_copy), one plane at a time.
void packed_dma_copy(const PackedView& src, const PackedView& dst, const char* op,
                     std::source_location where);

}  // namespace tessera::detail
