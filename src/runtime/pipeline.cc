// emit_pipeline in the native engine: the step schedule of pipeline_schedule.h, with each
// operand's window in the core's VMEM arena and its blocks moved by the DMA engine.
//
// The schedule is Pallas' (copy-in only when a block changes, write-back at the end of a visit);
// what the native engine adds is where a window lives. A CPU core has no DMA engine beside it:
// copying a block into VMEM and back leaves memory idle while the core computes. So, where the
// semantics cannot tell the difference, a window is the block itself, where it lies in HBM:
//   - an input the body takes as a ref to const elements (it cannot write it) whose block is full
//     (a partial edge block still goes through VMEM, so that the body sees a whole window);
//   - an output whose block is full: the body writes HBM directly, and consecutive steps on the
//     block accumulate there as they would in VMEM; a visit of one step streams its stores past
//     the caches (non-temporal), since nothing reads them back soon.
// Neither applies to an operand whose array overlaps another operand's (aliasing), where the
// copies' timing is visible. Meanwhile the next step's input blocks are prefetched a few lines
// per evaluated tile (PrefetchQueue), so that they arrive while this step computes. The checked
// engine (issue #5) keeps every copy, so that no kernel can come to depend on these shortcuts.
#include "tessera/pipeline.h"

#include <fmt/format.h>
#include <hwy/cache_control.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/pipeline_schedule.h"
#include "runtime/step_hints.h"
#include "tessera/dma.h"

namespace tessera {
namespace detail {

namespace {

thread_local StepHints* t_step_hints = nullptr;

// The part of operand `op`'s array that block `w` covers, as a strided view (squeezed axes
// dropped), and the matching part of its VMEM window.
struct BlockViews {
  RawRef hbm;
  RawRef vmem;
};

bool is_squeezed(const PipelineOperand& op, int d) {
  return !op.spec->is_whole_array() && op.spec->block_shape()[static_cast<size_t>(d)].is_squeezed;
}

BlockViews block_views(const PipelineOperand& op, const BlockWindow& w, void* window) {
  const RawRef& a = op.hbm;
  const int item = itemsize(a.dtype);
  BlockViews v{RawRef{nullptr, a.dtype, a.space, Shape{}, SmallVec{}},
               RawRef{window, a.dtype, MemorySpace::VMEM, Shape{}, SmallVec{}}};
  int64_t offset = 0;
  SmallVec shape;
  SmallVec hbm_strides;
  SmallVec block_extent;  // the window's own (full block) extents, for its row-major strides
  SmallVec skip;          // window elements before the array (Element padding)
  for (int d = 0; d < a.shape.rank(); ++d) {
    offset += w.start[d] * a.strides[d];
    if (is_squeezed(op, d)) continue;
    shape.push_back(w.valid[d]);
    hbm_strides.push_back(a.strides[d]);
    block_extent.push_back(w.block[d]);
    skip.push_back(w.skip[d]);
  }
  v.hbm.data = static_cast<std::byte*>(a.data) + offset * item;
  v.hbm.shape = Shape(shape);
  v.hbm.strides = std::move(hbm_strides);
  v.vmem.shape = Shape(std::move(shape));
  v.vmem.strides = row_major_strides(Shape(std::move(block_extent)));
  int64_t window_offset = 0;
  for (int d = 0; d < skip.size(); ++d) window_offset += skip[d] * v.vmem.strides[d];
  if (window != nullptr) v.vmem.data = static_cast<std::byte*>(window) + window_offset * item;
  return v;
}

// Where block `w` of operand `op` starts in its array (a block read or written in place).
void* block_data(const PipelineOperand& op, const BlockWindow& w) {
  int64_t offset = 0;
  for (int d = 0; d < op.hbm.shape.rank(); ++d) offset += w.start[d] * op.hbm.strides[d];
  return static_cast<std::byte*>(op.hbm.data) + offset * itemsize(op.hbm.dtype);
}

BlockWindow window_of(const PipelineOperand& op, const pl::Indices& idx,
                      std::source_location where) {
  if (op.spec->is_whole_array()) {
    const Shape& s = op.hbm.shape;
    return BlockWindow{SmallVec(s.rank(), 0), s.dims(), s.dims(), SmallVec(s.rank(), 0)};
  }
  return block_window(op.hbm.shape, op.spec->block_shape(), idx, where);
}

bool is_full(const BlockWindow& w) { return w.valid == w.block; }

std::string indices_str(const SmallVec& v) {
  std::vector<int64_t> x(v.begin(), v.end());
  return fmt::format("({})", fmt::join(x, ", "));
}

// [first byte, one past the last byte] of a strided view.
std::pair<const std::byte*, const std::byte*> span_of(const RawRef& r) {
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < r.shape.rank(); ++d) {
    if (r.shape[d] == 0) return {nullptr, nullptr};
    const int64_t e = (r.shape[d] - 1) * r.strides[d];
    (e < 0 ? lo : hi) += e;
  }
  const int item = itemsize(r.dtype);
  const auto* base = static_cast<const std::byte*>(r.data);
  return {base + lo * item, base + (hi + 1) * item};
}

bool overlaps(const RawRef& a, const RawRef& b) {
  const auto sa = span_of(a);
  const auto sb = span_of(b);
  return sa.first != nullptr && sb.first != nullptr && sa.first < sb.second && sb.first < sa.second;
}

// The next step's block of an input, for prefetching; nothing if the index map puts it out of
// bounds (that step reports it when it runs).
std::optional<BlockWindow> next_window(const PipelineOperand& op, const pl::Indices& idx) {
  if (op.spec->is_whole_array()) return window_of(op, idx, {});
  const Shape& a = op.hbm.shape;
  const auto& dims = op.spec->block_shape();
  if (static_cast<int>(dims.size()) != a.rank() || idx.v.size() != a.rank()) return std::nullopt;
  for (int d = 0; d < a.rank(); ++d) {
    const pl::BlockDim& b = dims[static_cast<size_t>(d)];
    const int64_t i = idx.v[d];
    if (b.is_element()) {
      const int64_t start = i - b.pad_lo;
      if (i < 0 || start + b.size <= 0 || start >= a[d] ||
          i + b.size > b.pad_lo + a[d] + b.pad_hi) {
        return std::nullopt;
      }
      continue;
    }
    const int64_t start = b.is_squeezed ? i : i * b.size;
    if (i < 0 || start >= a[d]) return std::nullopt;
  }
  return window_of(op, idx, {});
}

// Queues the lines of `hbm` (a block view) for prefetching; returns the lines queued. Views the
// queue cannot describe (more than two outer axes, a strided innermost axis) are skipped.
int64_t queue_prefetch(PrefetchQueue& q, const RawRef& hbm) {
  if (q.num == PrefetchQueue::kMaxBlocks || hbm.shape.size() == 0) return 0;
  const int item = itemsize(hbm.dtype);
  PrefetchQueue::Block b;
  b.base = static_cast<const std::byte*>(hbm.data);
  int r = hbm.shape.rank();
  while (r > 0 && hbm.shape[r - 1] == 1) --r;
  if (r == 0) {
    b.row_bytes = item;
  } else {
    if (hbm.strides[r - 1] != 1) return 0;
    b.row_bytes = hbm.shape[r - 1] * item;
    int outer = 0;
    for (int d = r - 2; d >= 0; --d) {
      if (hbm.shape[d] == 1) continue;
      if (outer == 0) {
        b.n1 = hbm.shape[d];
        b.s1 = hbm.strides[d] * item;
      } else if (outer == 1) {
        b.n2 = hbm.shape[d];
        b.s2 = hbm.strides[d] * item;
      } else {
        return 0;
      }
      ++outer;
    }
  }
  q.blocks[q.num++] = b;
  return b.n1 * b.n2 * ((b.row_bytes + 126) / 64);  // a row may straddle one more line
}

// The next step's changed input blocks, queued for prefetching at the rate this step's stores
// pay for them (`paid_by`: the step's output bytes, or all its window bytes).
struct PrefetchSource {
  const PipelineCursor* cursor;
  const std::vector<PipelineOperand>* operands;
  int num_inputs;
  int64_t paid_by;

  static void fill_queue(const void* ctx, PrefetchQueue& q) noexcept {
    const auto& self = *static_cast<const PrefetchSource*>(ctx);
    int64_t lines = 0;
    try {
      for (int k = 0; k < self.num_inputs; ++k) {
        const pl::Indices& next = self.cursor->next_block(k);
        if (next.v == self.cursor->block(k).v) continue;
        const PipelineOperand& op = (*self.operands)[static_cast<size_t>(k)];
        if (const auto w = next_window(op, next)) {
          lines += queue_prefetch(q, block_views(op, *w, nullptr).hbm);
        }
      }
    } catch (...) {  // a prefetch is only a hint: the next step validates its blocks itself
      q.num = q.cur;
      return;
    }
    if (lines > 0 && self.paid_by > 0) q.ratio_q8 = lines * 64 * 256 / self.paid_by;
  }
};

// A pipeline's hints become the thread's for its life (an enclosing pipeline's come back after).
class HintsScope {
 public:
  explicit HintsScope(StepHints* h) : saved_(t_step_hints) { t_step_hints = h; }
  ~HintsScope() { t_step_hints = saved_; }
  HintsScope(const HintsScope&) = delete;
  HintsScope& operator=(const HintsScope&) = delete;

 private:
  StepHints* saved_;
};

struct OperandState {
  void* buffer = nullptr;   // the window in VMEM
  Shape shape;              // the window's shape
  int64_t bytes = 0;        // and its size
  SmallVec buffer_strides;  // its row-major strides
  SmallVec hbm_strides;     // the array's strides on the window's axes (in-place windows)
  bool may_alias = false;   // the semantics allow using the block where it lies
  bool in_place = false;    // the current block is used where it lies
  bool single_visit = false;
  WindowRef win;
};

}  // namespace

StepHints* step_hints() noexcept { return t_step_hints; }

void drain_prefetch(PrefetchQueue& q, int64_t stored_bytes) noexcept {
  if (q.fill != nullptr) {
    const auto fill = q.fill;
    q.fill = nullptr;
    fill(q.fill_ctx, q);
  }
  q.credit += stored_bytes * q.ratio_q8;
  int64_t lines = q.credit >> 14;  // one line per 64 bytes x 256
  q.credit -= lines << 14;
  while (lines > 0 && q.cur < q.num) {
    const PrefetchQueue::Block& b = q.blocks[q.cur];
    const std::byte* row = b.base + q.r1 * b.s1 + q.r2 * b.s2;
    const auto first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{63};
    const auto end = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(b.row_bytes);
    for (; lines > 0; --lines) {
      const uintptr_t line = first + static_cast<uintptr_t>(q.byte);
      if (line >= end) break;
      hwy::Prefetch(reinterpret_cast<const std::byte*>(line));
      q.byte += 64;
    }
    if (first + static_cast<uintptr_t>(q.byte) < end) continue;
    q.byte = 0;
    if (++q.r1 < b.n1) continue;
    q.r1 = 0;
    if (++q.r2 < b.n2) continue;
    q.r2 = 0;
    ++q.cur;
  }
}

Shape window_shape(const pl::BlockSpec& spec, const Shape& array) {
  if (spec.is_whole_array()) return array;
  SmallVec s;
  for (const pl::BlockDim& d : spec.block_shape()) {
    if (!d.is_squeezed) s.push_back(d.size);
  }
  return Shape(std::move(s));
}

void run_pipeline(const PipelineConfig& config, const std::vector<PipelineOperand>& operands,
                  FunctionRef<void(const WindowRef*)> body) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr) {
    raise(ErrorKind::kOutsideKernel, config.op, config.where,
          "emit_pipeline runs inside a kernel body (pl::kernel); outside one there are no cores "
          "or VMEM to pipeline through");
  }
  Engine& engine = *ctx->engine;
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
      if (s.index_map_prefetch() != static_cast<int>(config.scalar_prefetch.size())) {
        raise(ErrorKind::kInvalidArgument, config.op, s.where(),
              fmt::format("a BlockSpec index map takes {} scalar-prefetch refs after its grid "
                          "indices but there are {}; with pltpu::PrefetchScalarGridSpec<n> every "
                          "index map takes the grid indices then all n SMEM refs",
                          s.index_map_prefetch(), config.scalar_prefetch.size()));
      }
      if (s.index_map_arity() != grid.rank()) {
        raise(ErrorKind::kInvalidArgument, config.op, s.where(),
              fmt::format("a BlockSpec index map takes {} grid indices but the grid {} has rank "
                          "{}; give it one int parameter per grid axis",
                          s.index_map_arity(), grid.to_string(), grid.rank()));
      }
    }
    const pl::Buffered& mode = s.pipeline_mode();
    if (mode.buffer_count < 1 || (op.is_output && mode.buffer_count > 2)) {
      raise(ErrorKind::kInvalidArgument, config.op, s.where(),
            fmt::format("pl::Buffered({}) on an {}; inputs take 1 or more buffers, outputs 1 or 2",
                        mode.buffer_count, op.is_output ? "output" : "input"));
    }
    if (op.is_output && mode.use_lookahead) {
      raise(ErrorKind::kInvalidArgument, config.op, s.where(),
            "pl::Buffered(n, use_lookahead) on an output; lookahead fetches inputs ahead, so "
            "only input BlockSpecs may ask for it");
    }
    // The target's tiling rules for blocks in VMEM (the checked engine against a chip).
    if (!s.is_whole_array() && s.memory_space() != MemorySpace::SMEM) {
      SmallVec block;
      for (const pl::BlockDim& d : s.block_shape()) block.push_back(d.is_squeezed ? 1 : d.size);
      const int index =
          op.is_output ? static_cast<int>(specs.size()) - 1 - num_inputs : num_inputs - 1;
      engine.check_block_shape(*ctx, op.hbm.shape, block, op.hbm.dtype, index, op.is_output,
                               config.op, s.where());
    }
  }

  // This core's share of the grid.
  GridPartition part{grid, SmallVec(grid.rank(), 0)};
  if (!config.core_axis.empty()) {
    const int core = axis_index(config.core_axis, config.where);
    part = partition_grid(grid, semantics, ctx->num_cores, core, config.where);
  }

  // The windows: buffer_count of them per operand count against the VMEM budget (one for a
  // whole-array block), as Pallas allocates them; the native engine fills the first.
  StackScope windows_scope(ctx->stack);
  std::vector<OperandState> state(operands.size());
  std::vector<WindowRef> windows(operands.size());
  for (size_t k = 0; k < operands.size(); ++k) {
    const PipelineOperand& op = operands[k];
    OperandState& st = state[k];
    st.shape = window_shape(*op.spec, op.hbm.shape);
    st.bytes = st.shape.size() * itemsize(op.hbm.dtype);
    const int buffers = op.spec->is_whole_array() ? 1 : op.spec->pipeline_mode().buffer_count;
    const bool in_smem = op.spec->memory_space() == MemorySpace::SMEM;
    st.buffer = ctx->stack.push(
        in_smem ? MemorySpace::SMEM : MemorySpace::VMEM, in_smem ? st.bytes : st.bytes * buffers,
        StackUse::kWindow, in_smem ? "an SMEM block" : "a pipeline window",
        [&] {
          return fmt::format(
              "(for {} {}: {}<{}>{}{})", op.is_output ? "output" : "input",
              op.is_output ? static_cast<int>(k) - num_inputs : static_cast<int>(k),
              to_string(in_smem ? MemorySpace::SMEM : MemorySpace::VMEM), dtype_name(op.hbm.dtype),
              st.shape.to_string(),
              in_smem || buffers == 1 ? std::string() : fmt::format(" x {} buffers", buffers));
        },
        config.op, config.where);
    st.buffer_strides = row_major_strides(st.shape);
    for (int d = 0; d < op.hbm.shape.rank(); ++d) {
      if (!is_squeezed(op, d)) st.hbm_strides.push_back(op.hbm.strides[d]);
    }
    st.may_alias = (op.is_output || op.read_only) && op.spec->memory_space() != MemorySpace::SMEM &&
                   engine.may_use_blocks_in_place();
    engine.fresh(*ctx, st.buffer, st.bytes * buffers, op.hbm.dtype, [&] {
      return fmt::format("the VMEM window of {} {} ({}<{}>{})", op.is_output ? "output" : "input",
                         op.is_output ? static_cast<int>(k) - num_inputs : static_cast<int>(k),
                         config.op, dtype_name(op.hbm.dtype), st.shape.to_string());
    });
    for (size_t j = 0; j < operands.size() && st.may_alias; ++j) {
      const bool other_kind = operands[j].is_output != op.is_output;
      if (j != k && (other_kind || op.is_output) && overlaps(op.hbm, operands[j].hbm)) {
        st.may_alias = false;
      }
    }
    st.win = WindowRef{st.buffer, &st.buffer_strides};
    pipeline_operand_event(op.hbm.data, st.bytes, op.hbm.shape.size() * itemsize(op.hbm.dtype));
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
  StepHints hints;
  const HintsScope hints_scope(&hints);

  PipelineCursor cursor(part.grid, part.offset, specs, num_inputs, config.range_begin,
                        config.range_end, config.scalar_prefetch,
                        engine.parallel_order(*ctx, grid, semantics));
  PrefetchSource prefetch_source{&cursor, &operands, num_inputs, 0};
  const size_t num_outputs = operands.size() - static_cast<size_t>(num_inputs);
  std::vector<RevisitTracker> revisits(num_outputs);
  std::vector<int64_t> visit_start(num_outputs, 0);
  std::vector<bool> starting(num_outputs, true);
  for (; !cursor.done(); cursor.advance()) {
    const SpanEvent step_event(EventKind::kStep, config.op, cursor.step());
    ctx->grid_step.assign(cursor.grid_point().begin(), cursor.grid_point().end());
    int64_t window_bytes = 0;  // what this step's body reads and writes, for the prefetch rate
    int64_t output_bytes = 0;
    for (size_t k = 0; k < operands.size(); ++k) {
      const PipelineOperand& op = operands[k];
      OperandState& st = state[k];
      window_bytes += st.bytes;
      if (!op.is_output) {
        if (!cursor.copy_in(static_cast<int>(k))) continue;  // same block: the copy is elided
        const BlockWindow w = window_of(op, cursor.block(static_cast<int>(k)), op.spec->where());
        st.in_place = st.may_alias && is_full(w);
        if (st.in_place) {
          st.win = WindowRef{block_data(op, w), &st.hbm_strides};
          block_in_place_event(st.win.data, st.bytes, true, &hints.prefetch);
        } else {
          const BlockViews v = block_views(op, w, st.buffer);
          // A partial edge block's padding is garbage on a TPU (the checked engine poisons it).
          if (!is_full(w)) engine.pad(*ctx, st.buffer, st.bytes, op.hbm.dtype);
          dma_copy(v.hbm, v.vmem, "emit_pipeline copy-in", config.where);
          st.win = WindowRef{st.buffer, &st.buffer_strides};
        }
        continue;
      }
      output_bytes += st.bytes;
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
        // Validates the block index before the body runs.
        const BlockWindow w = window_of(op, b, op.spec->where());
        // Only a visit of one step is written in place: a block that several steps accumulate
        // into is read back each step, and a contiguous VMEM window is the better place for that
        // (the packing argument of a GEMM's C tile), so it keeps its window and its write-back.
        st.single_visit = cursor.write_back(static_cast<int>(o));
        st.in_place = st.may_alias && st.single_visit && is_full(w);
        st.win = st.in_place ? WindowRef{block_data(op, w), &st.hbm_strides}
                             : WindowRef{st.buffer, &st.buffer_strides};
        // A new visit's window holds garbage that was never written.
        engine.fresh(*ctx, st.buffer, st.bytes, op.hbm.dtype, [&] {
          return fmt::format("the VMEM window of output {} ({}<{}>{}, block {})", o, config.op,
                             dtype_name(op.hbm.dtype), st.shape.to_string(), indices_str(b.v));
        });
      }
    }
    // Hints for the evaluator: streaming stores into single-step in-place outputs, and the next
    // step's changed input blocks to prefetch at the rate this step's stores pay for them.
    hints.num_stream = 0;
    hints.streamed = false;
    hints.prefetch.clear();
    for (size_t k = static_cast<size_t>(num_inputs); k < operands.size(); ++k) {
      const OperandState& st = state[k];
      if (!st.in_place || !st.single_visit || hints.num_stream == StepHints::kMaxSpans) continue;
      const RawRef view{st.win.data, operands[k].hbm.dtype, MemorySpace::HBM, st.shape,
                        st.hbm_strides};
      const auto span = span_of(view);
      hints.stream_lo[hints.num_stream] = span.first;
      hints.stream_hi[hints.num_stream] = span.second;
      ++hints.num_stream;
    }
    if (cursor.has_next()) {
      prefetch_source.paid_by = output_bytes > 0 ? output_bytes : window_bytes;
      hints.prefetch.fill = &PrefetchSource::fill_queue;
      hints.prefetch.fill_ctx = &prefetch_source;
    }

    for (size_t k = 0; k < operands.size(); ++k) windows[k] = state[k].win;
    body(windows.data());
    if (hints.streamed) hwy::FlushStream();  // streaming stores reach memory before any signal

    for (size_t o = 0; o < num_outputs; ++o) {
      const size_t k = static_cast<size_t>(num_inputs) + o;
      starting[o] = cursor.write_back(static_cast<int>(o));
      if (!starting[o]) continue;
      const PipelineOperand& op = operands[k];
      const pl::Indices& b = cursor.block(static_cast<int>(k));
      if (!state[k].in_place) {
        const BlockWindow w = window_of(op, b, op.spec->where());
        const BlockViews v = block_views(op, w, state[k].buffer);
        dma_copy(v.vmem, v.hbm, "emit_pipeline write-back", config.where);
      } else {
        block_in_place_event(state[k].win.data, state[k].bytes, false, nullptr);
      }
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
