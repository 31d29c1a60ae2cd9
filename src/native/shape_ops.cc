// jnp.concatenate / jnp.stack in the native engine: the parts (values, in the core's VMEM) are
// copied into one new block of the core's VMEM, which the expression then loads.
#include "tessera/dma.h"
#include "tessera/vector_shape.h"

namespace tessera::detail {

int emit_concat(ExprProgram& p, const RawRef* parts, int n, int axis, bool stack, const Shape& out,
                std::source_location where) {
  const DType dtype = parts[0].dtype;
  ValueStorage s = ValueStorage::allocate(dtype, out, where);
  const SmallVec strides = row_major_strides(out);
  const char* op = stack ? "jnp.stack" : "jnp.concatenate";
  int64_t offset = 0;  // along `axis`
  for (int i = 0; i < n; ++i) {
    // The part's place in the result: a slice along `axis` (concatenate) or one index of the new
    // axis (stack), which the part's view lacks.
    RawRef dst{static_cast<std::byte*>(s.data()) + offset * strides[axis] * itemsize(dtype), dtype,
               MemorySpace::VMEM, parts[i].shape, SmallVec()};
    for (int d = 0; d < out.rank(); ++d) {
      if (!(stack && d == axis)) dst.strides.push_back(strides[d]);
    }
    dma_copy(parts[i], dst, op, where);
    offset += stack ? 1 : parts[i].shape[axis];
  }
  ExprNode& node = p.emplace();
  node.op = OpCode::kLoad;
  node.dtype = dtype;
  node.data = s.data();
  node.space = MemorySpace::VMEM;
  node.shape = out;
  node.strides = strides;
  p.keep.push_back(std::move(s));
  return p.last();
}

}  // namespace tessera::detail
