// emit_pipeline in the native engine: the step schedule of pipeline_schedule.h, with each
// operand's window in the core's VMEM arena and its blocks moved by the DMA engine.
//
// This is the semantics-first engine: every copy the schedule asks for is made, synchronously.
// (Prefetching the next block while the body computes, eliding copies where the semantics allow,
// and streaming stores are the performance work of issue #3.)
#include "tessera/pipeline.h"

#include <fmt/format.h>

#include <vector>

#include "runtime/context.h"
#include "runtime/pipeline_schedule.h"
#include "runtime/scoped_vmem.h"
#include "tessera/dma.h"

namespace tessera {
namespace detail {

namespace {

// The part of operand `op`'s array that block `w` covers, as a strided view (squeezed axes
// dropped), and the matching part of its VMEM window.
struct BlockViews {
  RawRef hbm;
  RawRef vmem;
};

BlockViews block_views(const PipelineOperand& op, const BlockWindow& w, void* window) {
  const RawRef& a = op.hbm;
  const int item = itemsize(a.dtype);
  const auto& dims = op.spec->block_shape();
  BlockViews v{RawRef{nullptr, a.dtype, a.space, Shape{}, SmallVec{}},
               RawRef{window, a.dtype, MemorySpace::VMEM, Shape{}, SmallVec{}}};
  int64_t offset = 0;
  SmallVec shape;
  SmallVec hbm_strides;
  SmallVec block_extent;  // the window's own (full block) extents, for its row-major strides
  for (int d = 0; d < a.shape.rank(); ++d) {
    offset += w.start[d] * a.strides[d];
    const bool squeezed = !op.spec->is_whole_array() && dims[static_cast<size_t>(d)].is_squeezed;
    if (squeezed) continue;
    shape.push_back(w.valid[d]);
    hbm_strides.push_back(a.strides[d]);
    block_extent.push_back(w.block[d]);
  }
  v.hbm.data = static_cast<std::byte*>(a.data) + offset * item;
  v.hbm.shape = Shape(shape);
  v.hbm.strides = std::move(hbm_strides);
  v.vmem.shape = Shape(std::move(shape));
  v.vmem.strides = row_major_strides(Shape(std::move(block_extent)));
  return v;
}

BlockWindow window_of(const PipelineOperand& op, const pl::Indices& idx,
                      std::source_location where) {
  if (op.spec->is_whole_array()) {
    const Shape& s = op.hbm.shape;
    return BlockWindow{SmallVec(s.rank(), 0), s.dims(), s.dims()};
  }
  return block_window(op.hbm.shape, op.spec->block_shape(), idx, where);
}

std::string indices_str(const SmallVec& v) {
  std::vector<int64_t> x(v.begin(), v.end());
  return fmt::format("({})", fmt::join(x, ", "));
}

}  // namespace

Shape window_shape(const pl::BlockSpec& spec, const Shape& array) {
  if (spec.is_whole_array()) return array;
  SmallVec s;
  for (const pl::BlockDim& d : spec.block_shape()) {
    if (!d.is_squeezed) s.push_back(d.size);
  }
  return Shape(std::move(s));
}

void run_pipeline(const PipelineConfig& config, const std::vector<PipelineOperand>& operands,
                  FunctionRef<void(void* const*)> body) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr) {
    raise(ErrorKind::kOutsideKernel, config.op, config.where,
          "emit_pipeline runs inside a kernel body (pl::kernel); outside one there are no cores "
          "or VMEM to pipeline through");
  }
  const Shape& grid = config.grid;
  for (int a = 0; a < grid.rank(); ++a) {
    if (grid[a] < 1) {
      raise(ErrorKind::kInvalidArgument, config.op, config.where,
            fmt::format("grid {} has extent {} on axis {}; every grid extent must be at least 1",
                        grid.to_string(), grid[a], a));
    }
  }
  std::vector<pltpu::GridDimensionSemantics> semantics = config.semantics;
  if (semantics.empty()) semantics.assign(static_cast<size_t>(grid.rank()), pltpu::ARBITRARY);
  if (static_cast<int>(semantics.size()) != grid.rank()) {
    raise(ErrorKind::kInvalidArgument, config.op, config.where,
          fmt::format("dimension_semantics has {} entries but the grid {} has rank {}; give one "
                      "per grid axis",
                      semantics.size(), grid.to_string(), grid.rank()));
  }
  int num_inputs = 0;
  std::vector<const pl::BlockSpec*> specs;
  for (const PipelineOperand& op : operands) {
    if (!op.is_output) ++num_inputs;
    specs.push_back(op.spec);
    const pl::BlockSpec& s = *op.spec;
    if (!s.is_whole_array()) {
      if (static_cast<int>(s.block_shape().size()) != op.hbm.shape.rank()) {
        raise(ErrorKind::kShapeMismatch, config.op, s.where(),
              fmt::format("a BlockSpec with {} block axes is used for an operand of shape {}; "
                          "give one block axis per array axis",
                          s.block_shape().size(), op.hbm.shape.to_string()));
      }
      if (s.index_map_arity() != grid.rank()) {
        raise(ErrorKind::kInvalidArgument, config.op, s.where(),
              fmt::format("a BlockSpec index map takes {} grid indices but the grid {} has rank "
                          "{}; give it one int parameter per grid axis",
                          s.index_map_arity(), grid.to_string(), grid.rank()));
      }
    }
  }

  // This core's share of the grid.
  GridPartition part{grid, SmallVec(grid.rank(), 0)};
  if (!config.core_axis.empty()) {
    const int core = axis_index(config.core_axis, config.where);
    part = partition_grid(grid, semantics, ctx->num_cores, core, config.where);
  }

  // One VMEM window per operand, for the life of the pipeline.
  ScopedVmem vmem(*ctx, config.op, config.where);
  std::vector<void*> windows(operands.size());
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape ws = window_shape(*operands[k].spec, operands[k].hbm.shape);
    windows[k] = vmem.allocate(ws.size() * itemsize(operands[k].hbm.dtype), "a pipeline window");
  }

  // Nested pipelines: program_id refers to the innermost grid, so keep the outer one.
  const std::vector<int64_t> outer_step = ctx->grid_step;
  const std::vector<int64_t> outer_extent = ctx->grid_extent;
  ctx->grid_extent.assign(grid.begin(), grid.end());
  struct Restore {
    CoreContext* c;
    const std::vector<int64_t>& step;
    const std::vector<int64_t>& extent;
    ~Restore() {
      c->grid_step = step;
      c->grid_extent = extent;
    }
  } restore{ctx, outer_step, outer_extent};

  PipelineCursor cursor(part.grid, part.offset, specs, num_inputs, config.range_begin,
                        config.range_end);
  const size_t num_outputs = operands.size() - static_cast<size_t>(num_inputs);
  std::vector<RevisitTracker> revisits(num_outputs);
  std::vector<int64_t> visit_start(num_outputs, 0);
  std::vector<bool> starting(num_outputs, true);
  for (; !cursor.done(); cursor.advance()) {
    ctx->grid_step.assign(cursor.grid_point().begin(), cursor.grid_point().end());
    for (size_t k = 0; k < operands.size(); ++k) {
      const PipelineOperand& op = operands[k];
      if (!op.is_output) {
        if (!cursor.copy_in(static_cast<int>(k))) continue;  // same block: the copy is elided
        const BlockWindow w = window_of(op, cursor.block(static_cast<int>(k)), op.spec->where());
        const BlockViews v = block_views(op, w, windows[k]);
        dma_copy(v.hbm, v.vmem, "emit_pipeline copy-in", config.where);
        continue;
      }
      const size_t o = k - static_cast<size_t>(num_inputs);
      if (starting[o]) {
        // A new visit of this output block: its window starts unspecified (never read from
        // HBM), so a block that was already written back would lose its first visit's data.
        const pl::Indices& b = cursor.block(static_cast<int>(k));
        if (const auto earlier = revisits[o].earlier_visit(b)) {
          raise(ErrorKind::kRevisit, config.op, config.where,
                fmt::format("output {} revisits block {} at grid step {}; it was already written "
                            "back after steps {}..{} of this core, and output windows are never "
                            "read back from HBM; visit each output block in consecutive steps "
                            "(make the reduction axis the last, ARBITRARY one)",
                            o, indices_str(b.v), indices_str(cursor.grid_point()), earlier->first,
                            earlier->last));
        }
        visit_start[o] = cursor.step();
        window_of(op, b, op.spec->where());  // validates the block index before the body runs
      }
    }
    body(windows.data());
    for (size_t o = 0; o < num_outputs; ++o) {
      const size_t k = static_cast<size_t>(num_inputs) + o;
      starting[o] = cursor.write_back(static_cast<int>(o));
      if (!starting[o]) continue;
      const PipelineOperand& op = operands[k];
      const pl::Indices& b = cursor.block(static_cast<int>(k));
      const BlockWindow w = window_of(op, b, op.spec->where());
      const BlockViews v = block_views(op, w, windows[k]);
      dma_copy(v.vmem, v.hbm, "emit_pipeline write-back", config.where);
      revisits[o].written_back(b, visit_start[o], cursor.step());
    }
  }
}

}  // namespace detail

namespace {
// The innermost grid's context, after checking that there is a grid and that it has `axis`.
const detail::CoreContext& innermost_grid(const char* op, int axis, std::source_location where) {
  const detail::CoreContext* ctx = detail::current_context();
  if (ctx == nullptr || ctx->grid_extent.empty()) {
    detail::raise(ErrorKind::kOutsideKernel, op, where,
                  fmt::format("{} is called outside a grid; it refers to the steps of an "
                              "emit_pipeline or pallas_call grid, so call it from their body",
                              op));
  }
  if (axis < 0 || axis >= static_cast<int>(ctx->grid_extent.size())) {
    detail::raise(
        ErrorKind::kInvalidArgument, op, where,
        fmt::format("axis {} is outside the grid's axes 0..{}", axis, ctx->grid_extent.size() - 1));
  }
  return *ctx;
}
}  // namespace

int64_t pl::program_id(int axis, std::source_location where) {
  return innermost_grid("pl::program_id", axis, where).grid_step[static_cast<size_t>(axis)];
}

int64_t pl::num_programs(int axis, std::source_location where) {
  return innermost_grid("pl::num_programs", axis, where).grid_extent[static_cast<size_t>(axis)];
}

}  // namespace tessera
