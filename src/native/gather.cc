// lax.gather / jnp.take_along_axis (tessera/gather.h): the gathered elements are copied into a
// new block of the core's VMEM, which the expression then loads. The running core's engine does
// the gather (the checked engine checks it first); outside a kernel it runs here.
#include "native/gather.h"

#include <algorithm>
#include <cstring>

#include "runtime/context.h"
#include "runtime/engine.h"

namespace tessera::detail {

int64_t read_index(const void* data, DType dtype, int64_t off) {
  switch (dtype) {
    case DType::kInt8:
      return static_cast<const int8_t*>(data)[off];
    case DType::kInt16:
      return static_cast<const int16_t*>(data)[off];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(data)[off];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(data)[off];
    case DType::kUInt32:
      return static_cast<const uint32_t*>(data)[off];
    default:
      return static_cast<const int32_t*>(data)[off];
  }
}

GatherLayout gather_layout(const GatherPlan& g) {
  GatherLayout l;
  l.out_strides = row_major_strides(g.out);
  for (int o = 0; o < g.out.rank(); ++o) {
    if (std::find(g.offset_dims.begin(), g.offset_dims.end(), o) == g.offset_dims.end()) {
      l.batch_out.push_back(o);
    }
  }
  const int r = g.operand_view.rank();
  l.offset_out = SmallVec(r, -1);
  l.batch_of = SmallVec(r, -1);
  int next = 0;
  for (int d = 0; d < r; ++d) {
    for (int i = 0; i < g.operand_batching.size(); ++i) {
      if (g.operand_batching[i] == d) l.batch_of[d] = g.indices_batching[i];
    }
    const bool collapsed =
        std::find(g.collapsed.begin(), g.collapsed.end(), d) != g.collapsed.end();
    if (collapsed || l.batch_of[d] >= 0) continue;
    l.offset_out[d] = g.offset_dims[next++];
    l.slice_ext.push_back(g.slice_sizes[d]);
    l.slice_dim.push_back(d);
  }
  return l;
}

void run_gather(const GatherCall& c) {
  const GatherPlan& g = *c.plan;
  const auto item = static_cast<size_t>(itemsize(c.operand.dtype));
  auto* out = static_cast<std::byte*>(c.out);
  if (g.zeros) {
    std::memset(out, 0, static_cast<size_t>(g.out.size()) * item);
    return;
  }
  const auto* src = static_cast<const std::byte*>(c.operand.data);
  walk_gather(
      c,
      [&](int64_t dst, int64_t from) {
        std::memcpy(out + static_cast<size_t>(dst) * item,
                    from < 0 ? g.fill : src + static_cast<size_t>(from) * item, item);
      },
      [](const GatherOutOfBounds&) { return true; });
}

namespace {
// `r` seen as a view of `view` shape: axes where r's extent differs (1) are broadcast (stride 0),
// axes beyond r's rank are new unit axes.
RawRef broadcast_view(const RawRef& r, const Shape& view) {
  RawRef v = r;
  v.shape = view;
  v.strides = SmallVec(view.rank(), 0);
  for (int d = 0; d < view.rank() && d < r.shape.rank(); ++d) {
    if (r.shape[d] == view[d]) v.strides[d] = r.strides[d];
  }
  return v;
}
}  // namespace

int emit_gather(ExprProgram& p, const GatherPlan& plan, const RawRef& operand,
                const RawRef& indices) {
  const DType dtype = operand.dtype;
  ValueStorage s = ValueStorage::allocate(dtype, plan.out, plan.where);
  GatherCall call;
  call.plan = &plan;
  call.operand = broadcast_view(operand, plan.operand_view);
  call.indices = broadcast_view(indices, plan.indices_view);
  call.indices_value = indices;
  call.out = s.data();
  if (CoreContext* ctx = current_context()) {
    ctx->engine->gather(*ctx, call);
  } else {
    run_gather(call);
  }
  ExprNode& node = p.emplace();
  node.op = OpCode::kLoad;
  node.dtype = dtype;
  node.data = s.data();
  node.space = MemorySpace::VMEM;
  node.shape = plan.out;
  node.strides = row_major_strides(plan.out);
  node.where = plan.where;
  p.keep.push_back(std::move(s));
  return p.last();
}

}  // namespace tessera::detail
