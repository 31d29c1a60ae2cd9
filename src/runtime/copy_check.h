// Internal: the rules every copy's two sides meet (sync_copy, async copies, and the copies of a
// width-changing bitcast view, src/core/packed_view.cc): equal shapes and equal dtypes.
#pragma once

#include <source_location>

#include "tessera/dtype.h"
#include "tessera/memory_space.h"
#include "tessera/shape.h"

namespace tessera::detail {

/// Raises kShapeMismatch / kDtypeMismatch at `where` (naming `op`) when the source (shape, dtype,
/// memory space) and the destination differ in shape or dtype.
void check_copy_sides(const Shape& src_shape, DType src_dtype, MemorySpace src_space,
                      const Shape& dst_shape, DType dst_dtype, MemorySpace dst_space,
                      const char* op, std::source_location where);

}  // namespace tessera::detail
