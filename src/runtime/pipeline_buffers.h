// What a pipeline run keeps per operand (OperandState), and the vectors of a run, which each
// thread keeps between runs (PipelineBuffers, leased by BuffersLease); used by
// src/runtime/pipeline.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/pipeline_schedule.h"
#include "runtime/step_hints.h"
#include "tessera/detail/small_vec.h"
#include "tessera/pipeline.h"

namespace tessera::detail {

// What one operand's window is while the pipeline runs.
struct OperandState {
  bool resident = false;    // the block is used where it lies, always (BlockMapping::resident)
  void* buffer = nullptr;   // the window on the core's stack (VMEM or SMEM)
  SmallVec buffer_strides;  // its row-major strides
  SmallVec hbm_strides;     // the array's strides on the window's axes (in-place windows)
  bool may_alias = false;   // the semantics allow using the block where it lies
  bool in_place = false;    // the current block is used where it lies
  bool single_visit = false;
  int fetches = 0;  // blocks an input has fetched in this run (the first few may be prefetched)
  // Full blocks found without a BlockWindow (every axis blocked or squeezed, rank at most
  // kFastRank): per array axis, the bytes from one block index to the next and how many blocks
  // along it are full. Plain arrays: read at every step, for every operand and its next block.
  static constexpr int kFastRank = SmallVec::kInline;
  bool fast = false;
  int fast_rank = 0;
  int64_t block_step[kFastRank] = {};
  int64_t full_blocks[kFastRank] = {};
  // The bytes an in-place window covers, as offsets from its first element (the same for every
  // block: its strides are the array's), for the streaming-store hints; span_hi < 0: none.
  int64_t span_lo = 0;
  int64_t span_hi = -1;
  // A full block's rows for the prefetch queue (its base set per block), and their lines; 0 when
  // the queue cannot describe them.
  PrefetchQueue::Block prefetch_rows;
  int64_t prefetch_lines = 0;
};

// The vectors of a pipeline run, kept by the thread between runs so that a run allocates
// nothing once its thread has run one of its size: a small allocation per call costs more than
// its size here (a tiny pallas_call made ~50, and malloc's slow paths showed in its profile,
// docs/performance.md). Leased last in, first out: a pipeline inside a pipeline's body takes
// the next one. Emptied on return, their capacity kept.
struct PipelineBuffers {
  std::vector<OperandState> state;
  std::vector<WindowRef> windows;
  std::vector<RevisitTracker> revisits;  // kept whole: run() resets the ones it uses
  std::vector<int64_t> visit_start;
  std::vector<uint8_t> starting;  // per output: a new visit begins at this step
  std::vector<const pl::BlockSpec*> specs;
  PipelineCursor cursor;
};

class BuffersLease {
 public:
  BuffersLease() {
    if (depth_ == pool_.size()) pool_.push_back(std::make_unique<PipelineBuffers>());
    buffers_ = pool_[depth_++].get();
  }
  ~BuffersLease() {
    buffers_->state.clear();
    buffers_->windows.clear();
    buffers_->visit_start.clear();
    buffers_->starting.clear();
    buffers_->specs.clear();
    --depth_;
  }
  BuffersLease(const BuffersLease&) = delete;
  BuffersLease& operator=(const BuffersLease&) = delete;
  PipelineBuffers& operator*() const { return *buffers_; }

 private:
  static inline thread_local std::vector<std::unique_ptr<PipelineBuffers>> pool_;
  static inline thread_local size_t depth_ = 0;
  PipelineBuffers* buffers_;
};

}  // namespace tessera::detail
