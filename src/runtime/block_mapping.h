// Internal: a BlockSpec canonicalised against its operand, once per call of a pipeline — the
// block mapping — and the block algebra on it: which elements block `indices` covers (its
// window), and the views of that block in the array and in its VMEM window.
//
// map_grid is the one place that validates a grid walk's specification: grid extents,
// dimension semantics, block ranks and extents, index-map arities and scalar-prefetch counts,
// buffer counts and memory spaces. Everything after it (the cursor, the pipeline, the copies)
// trusts the mappings; only the index maps' values are checked per step, since they depend on
// the data (block_window).
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "tessera/block_spec.h"
#include "tessera/error.h"
#include "tessera/ref.h"

namespace tessera::detail {

/// One operand of a grid walk as the caller has it.
struct MappedOperand {
  RawRef hbm;                           // the whole array; its space is where it lives
  const pl::BlockSpec* spec = nullptr;  // its BlockSpec
  bool is_output = false;
  /// An input the body takes as a ref to const elements: it never writes its window, so an
  /// engine may let the body read a full block where it lies.
  bool read_only = false;
  /// pallas_call: where the body's parameter lives (ANY: the body takes the HBM ref itself and
  /// the operand is not pipelined). emit_pipeline: VMEM.
  MemorySpace declared = MemorySpace::VMEM;
  /// Its number in messages ("input 2"); -1: its position among the inputs or outputs.
  int index = -1;
  /// A BufferedRef's windows (emit_pipeline with pltpu::allocations): `storage_buffers` windows
  /// of `storage_window` at `storage`; `input_output`: an output whose block is copied in at the
  /// start of each visit.
  void* storage = nullptr;
  int storage_buffers = 0;
  bool input_output = false;
  Shape storage_window;
  std::source_location allocations_where{};  // pltpu::allocations(...) (line 0: unknown)
};

/// A BlockSpec canonicalised against its operand.
struct BlockMapping {
  RawRef hbm;
  const pl::BlockSpec* spec = nullptr;  // its index map
  bool whole = true;                    // the whole array is one block
  bool is_output = false;
  bool read_only = false;
  int index = 0;              // among the inputs, or among the outputs
  int buffers = 1;            // windows the pipeline keeps (pl::Buffered; 1 for a whole array)
  void* storage = nullptr;    // the windows, made ahead by a BufferedRef (null: on the stack)
  bool input_output = false;  // an output copied in at the start of each visit
  /// pl::Buffered(prefetched_count=): the first that many fetches find their block already in
  /// windows 0.. of `storage` (the caller's), and copy nothing.
  int prefetched = 0;
  MemorySpace space = MemorySpace::VMEM;  // where the window lives: VMEM, SMEM or ANY (none)
  SmallVec block;  // per array axis: the block's extent (1 for a squeezed axis)
  Shape window;    // the body's view: the block without squeezed axes
  int64_t window_bytes = 0;

  bool pipelined() const noexcept { return space != MemorySpace::ANY; }
  /// The block's space is where the array already lives (a VMEM ref walked in VMEM, an HBM ref
  /// in HBM/ANY), or ANY ("wherever it lies"): no window and no copies, the body works on the
  /// block where it lies (Pallas aliases such a block in the source ref).
  bool resident() const noexcept {
    const auto canon = [](MemorySpace s) { return s == MemorySpace::HBM ? MemorySpace::ANY : s; };
    return space == MemorySpace::ANY || canon(hbm.space) == canon(space);
  }
  /// "input 1", "output 0".
  std::string name() const;
};

/// What a grid walk is and who asks for it.
struct GridRequest {
  enum class Kind { kPallasCall, kEmitPipeline };
  Kind kind = Kind::kEmitPipeline;
  const char* op = "emit_pipeline";
  std::source_location where;
  const std::string* kernel_name = nullptr;  // pallas_call: named in errors before launch
  Shape grid;
  const std::vector<std::string>* grid_names = nullptr;  // a named grid's axis names
  std::vector<pltpu::GridDimensionSemantics> semantics;  // empty: every axis ARBITRARY
  // pallas_call with scalar prefetch: per operand, the SMEM refs it holds (1, or a grouped
  // operand's size), and every ref's dtype in order; index maps take a prefix of the operands.
  std::vector<int> prefetch_leaves;
  std::vector<DType> prefetch_dtypes;
};

/// A validated grid walk: the grid, one semantics per axis, and a mapping per operand.
struct GridMapping {
  Shape grid;
  std::vector<pltpu::GridDimensionSemantics> semantics;
  std::vector<BlockMapping> blocks;  // inputs, then outputs
  int num_inputs = 0;
};

/// Whether every point of `grid` maps `s` to the same block: no index map, or one of the grid
/// indices alone that is constant over the grid (evaluated, for grids up to 2^16 points).
bool constant_block(const pl::BlockSpec& s, const Shape& grid);

/// Why an operand cannot run as map_grid sees it: the error's kind, line and message.
struct MappingProblem {
  ErrorKind kind;
  std::source_location where;
  std::string what;
};
/// The checks of an operand's pl::Buffered(prefetched_count=) (src/runtime/prefetched_window.cc):
/// only an input of an emit_pipeline, in VMEM windows bound by the caller, fewer than its
/// buffers unless fetched once. `m` is mapped but for `prefetched`.
std::optional<MappingProblem> prefetched_problem(const GridRequest& r, const MappedOperand& op,
                                                 const BlockMapping& m, std::source_location at);

/// Validates and canonicalises a grid walk (see the file comment). Raises UsageError before a
/// pallas_call's launch (naming the kernel), KernelError for emit_pipeline inside a kernel.
GridMapping map_grid(const GridRequest& request, const std::vector<MappedOperand>& operands);

/// The window of block `indices` of `m`: its elements' start, extent and valid part per axis.
/// Raises kOutOfBounds (at the spec's line) when the index map put the block outside the array.
BlockWindow block_window(const BlockMapping& m, const pl::Indices& indices);
/// The same without raising: nothing when the block would be out of bounds (a prefetch of the
/// next step's block, which reports the error itself when it runs).
std::optional<BlockWindow> try_block_window(const BlockMapping& m, const pl::Indices& indices);

/// The part of `m`'s array that window `w` covers, as a strided view (squeezed axes dropped),
/// and the matching part of its VMEM window at `window` (null: only the HBM view is wanted).
struct BlockViews {
  RawRef hbm;
  RawRef vmem;
};
BlockViews block_views(const BlockMapping& m, const BlockWindow& w, void* window);
/// Where window `w` starts in `m`'s array (a block read or written in place).
void* block_data(const BlockMapping& m, const BlockWindow& w);
/// The HBM view of block_views alone (the valid part of the block, where it lies), without the
/// window's view: what a prefetch of the block needs, once per step.
RawRef block_hbm_view(const BlockMapping& m, const BlockWindow& w);
/// True when the block lies wholly inside the array (no partial edge).
inline bool is_full(const BlockWindow& w) { return w.valid == w.block; }

}  // namespace tessera::detail
