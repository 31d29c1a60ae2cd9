// A pipelined grid walk on the calling core (emit_pipeline, and each core's share of a
// pallas_call): the step schedule of pipeline_schedule.h over block mappings (block_mapping.h),
// with each operand's window on the core's stack and its blocks moved by the engine's copies.
//
// The schedule is Pallas' (copy-in only when a block changes, write-back at the end of a visit);
// what an engine may add is where a window lives. A CPU core has no DMA engine beside it:
// copying a block into VMEM and back leaves memory idle while the core computes. So, where the
// semantics cannot tell the difference and the engine allows it (the native one does, the
// checked one keeps every copy so that no kernel comes to depend on it), a window is the block
// itself, where it lies in HBM:
//   - an input the body takes as a ref to const elements (it cannot write it) whose block is full
//     (a partial edge block still goes through VMEM, so that the body sees a whole window);
//   - an output whose block is full: the body writes HBM directly, and consecutive steps on the
//     block accumulate there as they would in VMEM; a visit of one step streams its stores past
//     the caches (non-temporal) when the arrays do not stay in cache (cache_fit.h), since then
//     nothing reads them back from there.
// Neither applies to an operand whose array overlaps another operand's (aliasing), where the
// copies' timing is visible. Meanwhile the next step's input blocks are prefetched a few lines
// per evaluated tile (step_hints.h), so that they arrive while this step computes.
#include "tessera/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/byte_span.h"
#include "runtime/block_mapping.h"
#include "runtime/cache_fit.h"
#include "runtime/context.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/pipeline_buffers.h"
#include "runtime/pipeline_run.h"
#include "runtime/pipeline_schedule.h"
#include "runtime/step_hints.h"
#include "tessera/dma.h"

namespace tessera {
namespace detail {

namespace {

std::string indices_str(const SmallVec& v) {
  std::vector<int64_t> x(v.begin(), v.end());
  return fmt::format("({})", fmt::join(x, ", "));
}

bool overlaps(const RawRef& a, const RawRef& b) {
  const ByteSpan sa = byte_span(a);
  const ByteSpan sb = byte_span(b);
  return !sa.empty() && !sb.empty() && spans_overlap(sa, sb);
}

// Sets up `st`'s fast full-block addresses when every axis of `m`'s blocks is blocked or squeezed.
void prepare_fast_blocks(const BlockMapping& m, OperandState& st) {
  if (m.whole) return;
  const std::vector<pl::BlockDim>& dims = m.spec->block_shape();
  const int rank = m.hbm.shape.rank();
  if (static_cast<int>(dims.size()) != rank || rank > OperandState::kFastRank) return;
  const int64_t item = itemsize(m.hbm.dtype);
  for (int a = 0; a < rank; ++a) {
    const pl::BlockDim& b = dims[static_cast<size_t>(a)];
    if (b.is_element() || b.is_bounded() || b.size <= 0) return;
    const int64_t size = b.is_squeezed ? 1 : b.size;
    st.block_step[a] = size * m.hbm.strides[a] * item;
    st.full_blocks[a] = m.hbm.shape[a] / size;
  }
  st.fast = true;
  st.fast_rank = rank;
  // The rows of a full block, as queue_prefetch describes them for the first block.
  PrefetchQueue probe;
  const RawRef view{m.hbm.data, m.hbm.dtype, MemorySpace::HBM, m.window, st.hbm_strides};
  st.prefetch_lines = queue_prefetch(probe, view);
  if (probe.num == 1) st.prefetch_rows = probe.blocks[0];
}

// Where block `b` lies when it is a full block of a fast mapping (prepare_fast_blocks), else null
// (then block_window decides, and raises for a block out of bounds).
std::byte* full_block_address(const BlockMapping& m, const OperandState& st, const pl::Indices& b) {
  // pl::ds entries (BoundedSlice axes, or a mismatch block_window reports) take the slow path.
  const int rank = st.fast_rank;
  if (!st.fast || b.v.size() != rank || b.slices != 0) return nullptr;
  auto* p = static_cast<std::byte*>(m.hbm.data);
  const int64_t* idx = b.v.data();
  for (int a = 0; a < rank; ++a) {
    // 0 <= idx < full in one comparison (full >= 0).
    if (static_cast<uint64_t>(idx[a]) >= static_cast<uint64_t>(st.full_blocks[a])) return nullptr;
    p += idx[a] * st.block_step[a];
  }
  return p;
}

// One run of a pipeline on the calling core: allocate the windows, then per step begin it
// (copy-ins, new output visits), set the evaluator's hints, run the body, end it (write-backs).
class PipelineRun {
 public:
  PipelineRun(CoreContext& ctx, const PipelineConfig& config, const GridMapping& g)
      : ctx_(ctx), engine_(*ctx.engine), config_(config), g_(g), windows_scope_(ctx.stack) {}

  void run(FunctionRef<void(const WindowRef*)> body);

 private:
  // The next step's changed input blocks, queued for prefetching at the rate this step's stores
  // pay for them (`paid_by`: the step's output bytes, or all its window bytes). At distance 2
  // the blocks of the step after the next (step 0 queues both steps' blocks).
  struct PrefetchSource {
    PipelineCursor* cursor;
    const GridMapping* g;
    int64_t paid_by;
    const std::vector<OperandState>* state;
    int distance;
    int64_t lead_rows;  // prefetch_lead_rows, at distance 1
    static void fill_queue(const void* self, PrefetchQueue& q) noexcept;
    // Queues input k's block `b` (the queue has room); returns its lines.
    int64_t queue_block(PrefetchQueue& q, int k, const pl::Indices& b) const;
  };

  void check_rules();
  void allocate_windows();
  void begin_step(const PipelineCursor& cursor);
  void* resident_block(const BlockMapping& m, const pl::Indices& b) const;
  void set_hints(const PipelineCursor& cursor);
  void end_step(const PipelineCursor& cursor);
  size_t num_outputs() const { return g_.blocks.size() - static_cast<size_t>(g_.num_inputs); }

  CoreContext& ctx_;
  Engine& engine_;
  const PipelineConfig& config_;
  const GridMapping& g_;
  StackScope windows_scope_;
  BuffersLease lease_;
  std::vector<OperandState>& state_ = (*lease_).state;
  std::vector<WindowRef>& windows_ = (*lease_).windows;
  std::vector<RevisitTracker>& revisits_ = (*lease_).revisits;
  std::vector<int64_t>& visit_start_ = (*lease_).visit_start;
  std::vector<uint8_t>& starting_ = (*lease_).starting;
  StepHints hints_;
  PrefetchSource prefetch_{nullptr, nullptr, 0, nullptr, 1, 0};
  int64_t window_bytes_ = 0;  // what a step's body reads and writes, for the prefetch rate
  int64_t output_bytes_ = 0;
  int64_t array_bytes_ = 0;  // the pipelined operands' whole arrays
  bool stream_outputs_ = false;
  bool prefetch_next_ = false;  // the next step's input blocks are prefetched (step_hints.h)
  bool observes_steps_ = true;  // the engine's fresh and pipeline_step_begins do something
};

int64_t PipelineRun::PrefetchSource::queue_block(PrefetchQueue& q, int k,
                                                 const pl::Indices& b) const {
  const BlockMapping& m = g->blocks[static_cast<size_t>(k)];
  const OperandState& st = (*state)[static_cast<size_t>(k)];
  if (st.prefetch_lines > 0) {
    // A full block: its rows' geometry is the mapping's, only the start moves.
    if (const std::byte* p = full_block_address(m, st, b)) {
      q.blocks[q.num] = st.prefetch_rows;
      q.blocks[q.num++].base = p;
      return st.prefetch_lines;
    }
  }
  if (const auto w = try_block_window(m, b)) return queue_prefetch(q, block_hbm_view(m, *w));
  return 0;
}

void PipelineRun::PrefetchSource::fill_queue(const void* self, PrefetchQueue& q) noexcept {
  const auto& src = *static_cast<const PrefetchSource*>(self);
  PipelineCursor& cursor = *src.cursor;
  int64_t lines = 0;
  try {
    const bool after = src.distance == 2 && cursor.eval_after_next();
    for (int k = 0; k < src.g->num_inputs; ++k) {
      if (src.g->blocks[static_cast<size_t>(k)].resident()) continue;
      const pl::Indices& next = cursor.next_block(k);
      // The next step's block, unless this step's is the same, or (at distance 2) it was
      // queued the step before.
      if ((src.distance == 1 || cursor.step() == 0) && next.v != cursor.block(k).v &&
          q.num < PrefetchQueue::kMaxBlocks) {
        const int at = q.num;
        lines += src.queue_block(q, k, next);
        if (src.lead_rows > 0 && q.num > at) {  // the rows ahead start in this step's block
          const BlockMapping& m = src.g->blocks[static_cast<size_t>(k)];
          q.blocks[at].lead =
              full_block_address(m, (*src.state)[static_cast<size_t>(k)], cursor.block(k));
        }
      }
      if (after && cursor.after_next_block(k).v != next.v && q.num < PrefetchQueue::kMaxBlocks) {
        lines += src.queue_block(q, k, cursor.after_next_block(k));
      }
    }
  } catch (...) {  // a prefetch is only a hint: the next steps validate their blocks themselves
    q.num = q.cur;
    return;
  }
  if (lines > 0 && src.paid_by > 0) q.ratio_q8 = lines * 64 * 256 / src.paid_by;
  choose_prefetch_level(q, lines);
  bool leads = src.lead_rows > 0 && q.num > 0;
  for (int i = 0; i < q.num && leads; ++i) leads = q.blocks[i].lead != nullptr;
  q.lead_rows = leads ? src.lead_rows : 0;
}

// The target's tiling rules for blocks in VMEM (the checked engine against a chip).
void PipelineRun::check_rules() {
  for (const BlockMapping& m : g_.blocks) {
    if (m.whole || m.space != MemorySpace::VMEM || m.resident()) continue;
    engine_.check_block_shape(ctx_, m.hbm.shape, m.block, m.hbm.dtype, m.index, m.is_output,
                              config_.op, m.spec->where());
  }
}

// The windows: buffer_count of them per operand count against the VMEM budget (one for a
// whole-array block), as Pallas allocates them; this engine fills the first.
void PipelineRun::allocate_windows() {
  const size_t n = g_.blocks.size();
  state_.resize(n);
  windows_.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const BlockMapping& m = g_.blocks[k];
    OperandState& st = state_[k];
    if (m.resident()) {  // in the block's space already (an HBM/ANY block, a VMEM ref): no window
      st.resident = true;
      for (int d = 0; d < m.hbm.shape.rank(); ++d) {
        if (m.whole || !m.spec->block_shape()[static_cast<size_t>(d)].is_squeezed) {
          st.hbm_strides.push_back(m.hbm.strides[d]);
        }
      }
      windows_[k] = WindowRef{m.hbm.data, &st.hbm_strides};
      continue;
    }
    const bool in_smem = m.space == MemorySpace::SMEM;
    st.buffer =
        m.storage != nullptr
            ? m.storage
            : ctx_.stack.push(
                  m.space, m.window_bytes * m.buffers, StackUse::kWindow,
                  in_smem ? "an SMEM block" : "a pipeline window",
                  [&] {
                    return fmt::format(
                        "(for {}: {}<{}>{}{})", m.name(), to_string(m.space),
                        dtype_name(m.hbm.dtype), m.window.to_string(),
                        m.buffers == 1 ? std::string() : fmt::format(" x {} buffers", m.buffers));
                  },
                  config_.op, config_.where);
    st.buffer_strides = row_major_strides(m.window);
    for (int d = 0; d < m.hbm.shape.rank(); ++d) {
      if (m.whole || !m.spec->block_shape()[static_cast<size_t>(d)].is_squeezed) {
        st.hbm_strides.push_back(m.hbm.strides[d]);
      }
    }
    if (const ByteSpan sp = byte_span(m.hbm.data, m.window, st.hbm_strides, itemsize(m.hbm.dtype));
        !sp.empty()) {
      st.span_lo = sp.first - static_cast<const std::byte*>(m.hbm.data);
      st.span_hi = sp.last - static_cast<const std::byte*>(m.hbm.data);
    }
    st.may_alias = (m.is_output || m.read_only) && !in_smem && !m.input_output &&
                   engine_.may_use_blocks_in_place();
    // The windows the caller filled (pl::Buffered(prefetched_count=)) keep their contents.
    const int64_t kept = std::min(m.prefetched, m.buffers) * m.window_bytes;
    engine_.fresh(ctx_, static_cast<std::byte*>(st.buffer) + kept,
                  m.window_bytes * m.buffers - kept, m.hbm.dtype, [&] {
                    return fmt::format("the VMEM window of {} ({}<{}>{})", m.name(), config_.op,
                                       dtype_name(m.hbm.dtype), m.window.to_string());
                  });
    for (size_t j = 0; j < n && st.may_alias; ++j) {
      const BlockMapping& other = g_.blocks[j];
      const bool other_kind = other.is_output != m.is_output;
      if (j != k && (other_kind || m.is_output) && overlaps(m.hbm, other.hbm)) {
        st.may_alias = false;
      }
    }
    windows_[k] = WindowRef{st.buffer, &st.buffer_strides};
    prepare_fast_blocks(m, st);
    window_bytes_ += m.window_bytes;
    if (m.is_output) output_bytes_ += m.window_bytes;
    array_bytes_ += m.hbm.shape.size() * itemsize(m.hbm.dtype);
    pipeline_operand_event(m.hbm.data, m.window_bytes, m.hbm.shape.size() * itemsize(m.hbm.dtype));
  }
}

// Where the block `b` of a resident operand lies: Pallas views block_size elements at the
// block's start in the ref itself, so the whole block must lie inside it.
void* PipelineRun::resident_block(const BlockMapping& m, const pl::Indices& b) const {
  if (m.whole) return m.hbm.data;
  const BlockWindow w = block_window(m, b);
  for (int d = 0; d < m.hbm.shape.rank(); ++d) {
    if (w.skip[d] == 0 && w.start[d] + w.block[d] <= m.hbm.shape[d]) continue;
    raise(ErrorKind::kOutOfBounds, config_.op, m.spec->where(),
          fmt::format("block {} of {} covers elements {}..{} on axis {}, past the {} ref of "
                      "shape {}; a block of a ref that already lives in the block's memory "
                      "space ({}) is used where it lies, so all of it must lie inside the ref "
                      "(a partial edge block needs a copy: walk an HBM ref instead)",
                      indices_str(b.v), m.name(), w.start[d] - w.skip[d],
                      w.start[d] - w.skip[d] + w.block[d] - 1, d, to_string(m.hbm.space),
                      m.hbm.shape.to_string(), to_string(m.hbm.space)));
  }
  return block_data(m, w);
}

void PipelineRun::begin_step(const PipelineCursor& cursor) {
  for (size_t k = 0; k < g_.blocks.size(); ++k) {
    const BlockMapping& m = g_.blocks[k];
    OperandState& st = state_[k];
    if (st.resident) {
      const bool changed = m.is_output ? starting_[k - static_cast<size_t>(g_.num_inputs)]
                                       : cursor.copy_in(static_cast<int>(k));
      if (changed) windows_[k].data = resident_block(m, cursor.block(static_cast<int>(k)));
      continue;
    }
    if (!m.is_output) {
      if (!cursor.copy_in(static_cast<int>(k))) continue;  // same block: the copy is elided
      if (st.fetches < m.prefetched) {  // the caller copied this block into window `fetches`
        st.in_place = false;
        windows_[k] = WindowRef{static_cast<std::byte*>(st.buffer) + st.fetches++ * m.window_bytes,
                                &st.buffer_strides};
        continue;
      }
      if (st.may_alias) {
        if (std::byte* p = full_block_address(m, st, cursor.block(static_cast<int>(k)))) {
          st.in_place = true;
          windows_[k] = WindowRef{p, &st.hbm_strides};
          block_in_place_event(p, m.window_bytes, true, &hints_.prefetch);
          continue;
        }
      }
      const BlockWindow w = block_window(m, cursor.block(static_cast<int>(k)));
      st.in_place = st.may_alias && is_full(w);
      if (st.in_place) {
        windows_[k] = WindowRef{block_data(m, w), &st.hbm_strides};
        block_in_place_event(windows_[k].data, m.window_bytes, true, &hints_.prefetch);
      } else {
        const BlockViews v = block_views(m, w, st.buffer);
        // A partial edge block's padding is garbage on a TPU (the checked engine poisons it).
        if (!is_full(w)) engine_.pad(ctx_, st.buffer, m.window_bytes, m.hbm.dtype);
        dma_copy(v.hbm, v.vmem, "emit_pipeline copy-in", config_.where);
        windows_[k] = WindowRef{st.buffer, &st.buffer_strides};
      }
      continue;
    }
    const size_t o = k - static_cast<size_t>(g_.num_inputs);
    if (!starting_[o]) continue;
    // A new visit of this output block: its window starts unspecified (never read from HBM), so
    // a block that was already written back would lose its first visit's data.
    const pl::Indices& b = cursor.block(static_cast<int>(k));
    if (m.input_output) {  // a BufferedRef::input_output block: read from HBM at each visit
      const BlockWindow w = block_window(m, b);
      engine_.fresh(ctx_, st.buffer, m.window_bytes, m.hbm.dtype, [&] {
        return fmt::format("the VMEM window of output {} ({}<{}>{}, block {})", o, config_.op,
                           dtype_name(m.hbm.dtype), m.window.to_string(), indices_str(b.v));
      });
      if (!is_full(w)) engine_.pad(ctx_, st.buffer, m.window_bytes, m.hbm.dtype);
      const BlockViews v = block_views(m, w, st.buffer);
      dma_copy(v.hbm, v.vmem, "emit_pipeline copy-in", config_.where);
      st.single_visit = cursor.write_back(static_cast<int>(o));
      st.in_place = false;
      windows_[k] = WindowRef{st.buffer, &st.buffer_strides};
      continue;
    }
    if (const auto earlier = revisits_[o].earlier_visit(b)) {
      raise(ErrorKind::kRevisit, config_.op, config_.where,
            fmt::format("output {} revisits block {} at grid step {}; it was already written "
                        "back after steps {}..{} of this core, and output windows are never "
                        "read back from HBM; visit each output block in consecutive steps "
                        "(make the reduction axis the last, ARBITRARY one)",
                        o, indices_str(b.v), indices_str(cursor.grid_point()), earlier->first,
                        earlier->last));
    }
    visit_start_[o] = cursor.step();
    // Only a visit of one step is written in place: a block that several steps accumulate into
    // is read back each step, and a contiguous VMEM window is the better place for that (the
    // packing argument of a GEMM's C tile), so it keeps its window and its write-back.
    st.single_visit = cursor.write_back(static_cast<int>(o));
    // Validates the block index before the body runs (a full block needs no BlockWindow).
    void* data = full_block_address(m, st, b);
    if (data == nullptr) {
      const BlockWindow w = block_window(m, b);
      if (is_full(w)) data = block_data(m, w);
    }
    st.in_place = st.may_alias && st.single_visit && data != nullptr;
    windows_[k] =
        st.in_place ? WindowRef{data, &st.hbm_strides} : WindowRef{st.buffer, &st.buffer_strides};
    if (!observes_steps_) continue;
    engine_.fresh(ctx_, st.buffer, m.window_bytes, m.hbm.dtype, [&] {
      return fmt::format("the VMEM window of output {} ({}<{}>{}, block {})", o, config_.op,
                         dtype_name(m.hbm.dtype), m.window.to_string(), indices_str(b.v));
    });
  }
}

// Hints for the evaluator: streaming stores into single-step in-place outputs, and the next
// step's changed input blocks to prefetch at the rate this step's stores pay for them.
void PipelineRun::set_hints(const PipelineCursor& cursor) {
  hints_.num_stream = 0;
  hints_.streamed = false;
  hints_.prefetch.clear();
  for (size_t k = static_cast<size_t>(g_.num_inputs); k < g_.blocks.size(); ++k) {
    const OperandState& st = state_[k];
    if (!stream_outputs_ || !st.in_place || !st.single_visit ||
        hints_.num_stream == StepHints::kMaxSpans)
      continue;
    const auto* data = static_cast<const std::byte*>(windows_[k].data);
    const bool empty = st.span_hi < 0;
    hints_.stream_lo[hints_.num_stream] = empty ? nullptr : data + st.span_lo;
    hints_.stream_hi[hints_.num_stream] = empty ? nullptr : data + st.span_hi;
    ++hints_.num_stream;
  }
  if (cursor.has_next() && prefetch_next_) {
    prefetch_.paid_by = output_bytes_ > 0 ? output_bytes_ : window_bytes_;
    hints_.prefetch.fill = &PrefetchSource::fill_queue;
    hints_.prefetch.fill_ctx = &prefetch_;
  }
}

void PipelineRun::end_step(const PipelineCursor& cursor) {
  // Streaming stores reach memory before anything that publishes them (settle_streams).
  if (hints_.streamed) ctx_.streams_pending = true;
  for (size_t o = 0; o < num_outputs(); ++o) {
    const size_t k = static_cast<size_t>(g_.num_inputs) + o;
    const BlockMapping& m = g_.blocks[k];
    starting_[o] = cursor.write_back(static_cast<int>(o)) ? 1 : 0;
    if (!starting_[o] || state_[k].resident) continue;
    const pl::Indices& b = cursor.block(static_cast<int>(k));
    if (!state_[k].in_place) {
      const BlockViews v = block_views(m, block_window(m, b), state_[k].buffer);
      dma_copy(v.vmem, v.hbm, "emit_pipeline write-back", config_.where);
    } else {
      block_in_place_event(windows_[k].data, m.window_bytes, false, nullptr);
    }
    revisits_[o].written_back(b, visit_start_[o], cursor.step());
  }
}

void PipelineRun::run(FunctionRef<void(const WindowRef*)> body) {
  check_rules();
  // This core's share of the grid.
  const Shape& grid = g_.grid;
  GridPartition part{grid, SmallVec(grid.rank(), 0)};
  if (!config_.core_axis.empty()) {
    const int core = axis_index(config_.core_axis, config_.where);
    part = partition_grid(grid, g_.semantics, ctx_.num_cores, core, config_.where);
  }
  observes_steps_ = engine_.observes_pipeline_steps();
  allocate_windows();
  // Streaming stores bypass the caches: right when the arrays this pipeline walks do not stay in
  // cache (the output would be evicted before anything reads it, and a regular store first
  // reads each line it writes), wrong when they do (the next kernel would find the output in
  // cache). runtime/cache_fit.h decides, from the CPU's report and, where that cannot settle it,
  // a measurement. Only outputs used where they lie can take streaming stores.
  bool in_place_outputs = false;
  for (size_t k = static_cast<size_t>(g_.num_inputs); k < g_.blocks.size(); ++k) {
    in_place_outputs = in_place_outputs || state_[k].may_alias;
  }
  stream_outputs_ = in_place_outputs && !stays_in_cache(array_bytes_);
  // The lines a step's input blocks span (a full block's rows as queue_prefetch counts them, or
  // the window's bytes), which decide whether the next ones are prefetched in software; the rows
  // of the full blocks, which decide how far ahead (prefetch_distance); and those blocks' rows
  // when they all have the same number in one run each (the fused path's row-by-row prefetch),
  // for a lead within the step's blocks.
  int64_t input_lines = 0, input_rows = 0, block_rows = -1;
  for (size_t k = 0; k < static_cast<size_t>(g_.num_inputs); ++k) {
    const OperandState& st = state_[k];
    if (st.resident) continue;
    const bool full = st.prefetch_lines > 0;
    input_lines += full ? st.prefetch_lines : (g_.blocks[k].window_bytes + 63) / 64;
    if (full) input_rows += st.prefetch_rows.n1 * st.prefetch_rows.n2;
    const int64_t rows = full && st.prefetch_rows.n2 == 1 ? st.prefetch_rows.n1 : 0;
    block_rows = block_rows < 0 || block_rows == rows ? rows : 0;
  }
  prefetch_next_ = input_lines > 0 && prefetch_next_blocks(input_lines);
  const int distance = prefetch_distance(input_rows, input_lines);
  const int64_t lead_rows =
      distance == 1 && block_rows > 0 ? prefetch_lead_rows(block_rows, input_rows, input_lines) : 0;

  // Nested pipelines: program_id refers to the innermost grid, so keep the outer one.
  const std::vector<int64_t> outer_step = ctx_.grid_step;
  const std::vector<int64_t> outer_extent = ctx_.grid_extent;
  const std::vector<std::string>* outer_names = ctx_.grid_names;
  ctx_.grid_extent.assign(grid.begin(), grid.end());
  ctx_.grid_names = config_.grid_names.empty() ? nullptr : &config_.grid_names;
  struct Restore {
    CoreContext& c;
    const std::vector<int64_t>& step;
    const std::vector<int64_t>& extent;
    const std::vector<std::string>* names;
    ~Restore() {
      c.grid_step = step;
      c.grid_extent = extent;
      c.grid_names = names;
    }
  } restore{ctx_, outer_step, outer_extent, outer_names};
  const HintsScope hints_scope(&hints_);
  engine_.pipeline_begins(ctx_);
  struct End {
    Engine& e;
    CoreContext& c;
    ~End() { e.pipeline_ends(c); }
  } end{engine_, ctx_};

  std::vector<const pl::BlockSpec*>& specs = (*lease_).specs;
  for (const BlockMapping& m : g_.blocks) specs.push_back(m.spec);
  PipelineCursor& cursor = (*lease_).cursor;
  cursor.reset(part.grid, part.offset, specs, g_.num_inputs, config_.range_begin, config_.range_end,
               config_.scalar_prefetch, engine_.parallel_order(ctx_, grid, g_.semantics));
  prefetch_ = PrefetchSource{&cursor, &g_, 0, &state_, distance, lead_rows};
  revisits_.resize(num_outputs());  // the thread's trackers, their logs' storage kept
  for (RevisitTracker& r : revisits_) r.reset();
  visit_start_.assign(num_outputs(), 0);
  starting_.assign(num_outputs(), 1);
  for (; !cursor.done(); cursor.advance()) {
    const SpanEvent step_event(EventKind::kStep, config_.op, cursor.step());
    write_grid_step(cursor.grid_point(), ctx_.grid_step);  // what pl::program_id reads
    if (observes_steps_) engine_.pipeline_step_begins(ctx_);
    begin_step(cursor);
    set_hints(cursor);
    body(windows_.data());
    end_step(cursor);
  }
  // Once per pipeline rather than per step: the code after it starts with nothing pending.
  settle_streams(ctx_);
}

}  // namespace

void run_mapped_pipeline(const PipelineConfig& config, const GridMapping& g,
                         FunctionRef<void(const WindowRef*)> body) {
  CoreContext* ctx = current_context();
  PipelineRun(*ctx, config, g).run(body);
}

void run_pipeline(const PipelineConfig& config, const std::vector<PipelineOperand>& operands,
                  FunctionRef<void(const WindowRef*)> body) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr) {
    raise(ErrorKind::kOutsideKernel, config.op, config.where,
          "emit_pipeline runs inside a kernel body (pl::kernel); outside one there are no cores "
          "or VMEM to pipeline through");
  }
  GridRequest request;
  request.kind = GridRequest::Kind::kEmitPipeline;
  request.op = config.op;
  request.where = config.where;
  request.grid = config.grid;
  request.grid_names = &config.grid_names;
  request.semantics = config.semantics;
  std::vector<MappedOperand> mapped;
  mapped.reserve(operands.size());
  for (const PipelineOperand& op : operands) {
    MappedOperand m;
    m.hbm = op.hbm;
    m.spec = op.spec;
    m.is_output = op.is_output;
    m.read_only = op.read_only;
    m.declared = op.declared;
    m.storage = op.storage;
    m.storage_buffers = op.storage_buffers;
    m.input_output = op.input_output;
    m.storage_window = op.storage_window;
    m.allocations_where = op.allocations_where;
    mapped.push_back(std::move(m));
  }
  const GridMapping g = map_grid(request, mapped);
  PipelineRun(*ctx, config, g).run(body);
}

int default_buffer_count(const pl::BlockSpec& spec, const Shape& grid) {
  if (spec.is_whole_array()) return 1;
  return constant_block(spec, grid) ? 1 : 2;
}

void check_buffered_ref(int buffer_count, bool is_output, MemorySpace space,
                        std::source_location where) {
  if (buffer_count < 1 || (is_output && buffer_count > 2)) {
    raise(ErrorKind::kInvalidArgument, "pltpu::BufferedRef", where,
          fmt::format("buffer_count={} for {}; inputs take 1 or more buffers, outputs (and "
                      "input_output) 1 or 2",
                      buffer_count, is_output ? "an output" : "an input"));
  }
  if (space != MemorySpace::VMEM) {
    raise(ErrorKind::kUnsupported, "pltpu::BufferedRef", where,
          fmt::format("the BlockSpec puts the windows in {}; a BufferedRef's windows live in "
                      "VMEM (let the pipeline make SMEM windows itself)",
                      to_string(space)));
  }
}

void buffered_ref_needs_block_shape(std::source_location where) {
  raise(ErrorKind::kInvalidArgument, "pltpu::BufferedRef", where,
        "the BlockSpec has no block shape, so the window's shape is not known; give the spec a "
        "block shape, or make the BufferedRefs with emit_pipeline_with_allocations' "
        "make_allocations(refs...), which knows the arrays");
}

Shape window_shape(const pl::BlockSpec& spec, const Shape& array) {
  if (spec.is_whole_array()) return array;
  SmallVec s;
  for (const pl::BlockDim& d : spec.block_shape()) {
    if (!d.is_squeezed) s.push_back(d.size);
  }
  return Shape(std::move(s));
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

namespace {
// The axis of the innermost grid named `name`.
int named_axis(const char* op, std::string_view name, std::source_location where) {
  const detail::CoreContext& ctx = innermost_grid(op, 0, where);
  if (ctx.grid_names != nullptr) {
    for (size_t a = 0; a < ctx.grid_names->size(); ++a) {
      if ((*ctx.grid_names)[a] == name) return static_cast<int>(a);
    }
  }
  detail::raise(
      ErrorKind::kUnknownAxis, op, where,
      fmt::format("the innermost grid has no axis named \"{}\"{}; name the axes with "
                  "pl::grid({{{{\"i\", n}}, ...}}), or pass the axis number",
                  name,
                  ctx.grid_names == nullptr
                      ? std::string(" (its axes have no names)")
                      : fmt::format(" (its axes are {})", fmt::join(*ctx.grid_names, ", "))));
}
}  // namespace

int64_t pl::program_id(std::string_view axis_name, std::source_location where) {
  const int a = named_axis("pl::program_id", axis_name, where);
  return detail::current_context()->grid_step[static_cast<size_t>(a)];
}

int64_t pl::num_programs(std::string_view axis_name, std::source_location where) {
  const int a = named_axis("pl::num_programs", axis_name, where);
  return detail::current_context()->grid_extent[static_cast<size_t>(a)];
}

namespace detail {
int grid_axis_index(std::string_view name) noexcept {
  const CoreContext* ctx = current_context();
  if (ctx == nullptr || ctx->grid_names == nullptr) return -1;
  for (size_t a = 0; a < ctx->grid_names->size(); ++a) {
    if ((*ctx->grid_names)[a] == name) return static_cast<int>(ctx->grid_step[a]);
  }
  return -1;
}
int grid_axis_size(std::string_view name) noexcept {
  const CoreContext* ctx = current_context();
  if (ctx == nullptr || ctx->grid_names == nullptr) return -1;
  for (size_t a = 0; a < ctx->grid_names->size(); ++a) {
    if ((*ctx->grid_names)[a] == name) return static_cast<int>(ctx->grid_extent[a]);
  }
  return -1;
}
}  // namespace detail

}  // namespace tessera
