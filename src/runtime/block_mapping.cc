// Block mappings: the one validation of a grid walk's specification, and the block algebra of a
// canonicalised BlockSpec (windows, views). tests/unit/block_spec_test.cc tests the algebra on
// its own, tests/unit/pipeline_test.cc and pallas_call*_test.cc the validation.
#include "runtime/block_mapping.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "core/messages.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {
std::string arity_mismatch(const std::string& who, int takes, const Shape* grid, int rank);
std::string prefetch_mismatch(const std::string& who, int takes, int has);
}  // namespace

namespace {

[[noreturn]] void fail(const GridRequest& r, ErrorKind kind, std::source_location where,
                       const std::string& what) {
  if (r.kind == GridRequest::Kind::kPallasCall) {
    const std::string name = r.kernel_name != nullptr ? *r.kernel_name : std::string();
    throw UsageError(kind,
                     fmt::format("tessera: pallas_call at {} (kernel '{}', before launch): {}",
                                 format_location(where), name, what),
                     where, -1, {}, name);
  }
  raise(kind, r.op, where, what);
}

// The two index-map mismatches, worded once for map_grid and BlockSpec::block_indices. `who`:
// " of input 0", or "" when the caller does not know the operand.
std::string arity_mismatch(const std::string& who, int takes, const Shape* grid, int rank) {
  return fmt::format(
      "the index map{} takes {} grid indices but the grid has rank {}{}; give it "
      "one int parameter per grid axis",
      who, takes, rank, grid != nullptr ? fmt::format(" (grid {})", grid->to_string()) : "");
}
std::string prefetch_mismatch(const std::string& who, int takes, int has) {
  return fmt::format(
      "the index map{} takes {} scalar-prefetch refs after its grid indices, but "
      "the call has {}; with pltpu::PrefetchScalarGridSpec<n> an index map takes the grid "
      "indices then the first n (or fewer) scalar-prefetch refs",
      who, takes, has);
}

const char* space_word(MemorySpace s) {
  return s == MemorySpace::ANY || s == MemorySpace::HBM ? "pl::ANY (an HBM ref)" : to_string(s);
}

void check_grid(const GridRequest& r, std::vector<pltpu::GridDimensionSemantics>& semantics) {
  const Shape& grid = r.grid;
  int64_t steps = 1;
  for (int a = 0; a < grid.rank(); ++a) {
    if (grid[a] < 1) {
      fail(r, ErrorKind::kInvalidArgument, r.where,
           fmt::format("grid {} has extent {} on axis {}; every grid extent must be at least 1",
                       grid.to_string(), grid[a], a));
    }
    if (__builtin_mul_overflow(steps, grid[a], &steps)) {
      fail(r, ErrorKind::kInvalidArgument, r.where,
           fmt::format("grid {} has more steps than a 64-bit count holds; use fewer, larger "
                       "blocks",
                       grid.to_string()));
    }
  }
  if (r.grid_names != nullptr && !r.grid_names->empty()) {
    const std::vector<std::string>& names = *r.grid_names;
    for (size_t a = 0; a < names.size(); ++a) {
      const bool empty = names[a].empty();
      const bool twice = std::find(names.begin(), names.begin() + static_cast<long>(a), names[a]) !=
                         names.begin() + static_cast<long>(a);
      if (empty || twice) {
        fail(r, ErrorKind::kInvalidArgument, r.where,
             fmt::format("grid axis {} is named \"{}\"{}; give every axis of a named grid its "
                         "own non-empty name",
                         a, names[a], twice ? ", like an earlier axis" : ""));
      }
    }
  }
  if (semantics.empty()) semantics.assign(static_cast<size_t>(grid.rank()), pltpu::ARBITRARY);
  if (static_cast<int>(semantics.size()) != grid.rank()) {
    fail(r, ErrorKind::kInvalidArgument, r.where,
         fmt::format("dimension_semantics has {} entries but the grid {} has rank {}; give one "
                     "per grid axis",
                     semantics.size(), grid.to_string(), grid.rank()));
  }
  bool arbitrary_seen = false;
  for (size_t a = 0; a < semantics.size(); ++a) {
    if (semantics[a] == pltpu::SUBCORE_PARALLEL) {
      fail(r, ErrorKind::kUnsupported, r.where,
           fmt::format("axis {} is SUBCORE_PARALLEL, which splits a grid over the vector "
                       "subcores of a SparseCore; Tessera models TensorCores only: use PARALLEL "
                       "(split over the mesh's cores) or ARBITRARY",
                       a));
    }
    if (!is_parallel(semantics[a])) {
      arbitrary_seen = true;
    } else if (arbitrary_seen && r.kind == GridRequest::Kind::kPallasCall) {
      fail(r, ErrorKind::kInvalidArgument, r.where,
           fmt::format("axis {} is PARALLEL after an ARBITRARY axis; PARALLEL axes must form a "
                       "prefix of the grid (reorder the grid so the reduction axes come last)",
                       a));
    }
  }
}

// Where the body sees the operand (the spec's space against where the array lives and the
// space the body declares), and how many windows it takes.
void check_space_and_buffers(const GridRequest& r, const MappedOperand& op, const BlockMapping& m,
                             std::source_location at) {
  const pl::BlockSpec& s = *op.spec;
  MemorySpace space = s.memory_space();
  const bool hbm_asked = space == MemorySpace::HBM;  // pl::ANY takes the operand where it lies
  if (space == MemorySpace::HBM) space = MemorySpace::ANY;
  const bool pipeline = r.kind == GridRequest::Kind::kEmitPipeline;
  const bool from_hbm = op.hbm.space == MemorySpace::HBM || op.hbm.space == MemorySpace::ANY;
  if (space == MemorySpace::SEMAPHORE) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} is in SEMAPHORE memory, but {} is an array; "
                     "pl::BlockSpec(pltpu::SEMAPHORE) is for semaphore operands",
                     m.name(), m.name()));
  }
  if (!pipeline && op.hbm.space == MemorySpace::SMEM && space != MemorySpace::SMEM &&
      space != MemorySpace::ANY) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("{} is an SMEM array (each core's copy lives in its SMEM), but its BlockSpec "
                     "puts it in {}; take it where it lies: pl::BlockSpec(pltpu::SMEM)",
                     m.name(), to_string(space)));
  }
  if (hbm_asked && !from_hbm) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} asks for an HBM block, but the {} lives in {}; a "
                     "pltpu::HBM BlockSpec is for an operand in HBM (pl::ANY takes it where it "
                     "lies)",
                     m.name(), pipeline ? "ref" : "array", to_string(op.hbm.space)));
  }
  if (space != op.declared) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} puts it in {} but the body takes it as a {} ref; "
                     "make them agree (pl::BlockSpec(pl::ANY) with a pltpu::AnyRef/HbmRef "
                     "parameter, pl::BlockSpec(pltpu::SMEM) with an SmemRef, a VMEM "
                     "BlockSpec with a VmemRef)",
                     m.name(), space_word(space), space_word(op.declared)));
  }
  if (!pipeline && space == MemorySpace::ANY && !s.is_whole_array()) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("{} is in pl::ANY with a block shape; operands left in HBM are not "
                     "pipelined, so their BlockSpec is the whole array: pl::BlockSpec(pl::ANY)",
                     m.name()));
  }
  if (space == MemorySpace::ANY) return;  // stays where it lies: no window
  const pl::Buffered& mode = s.pipeline_mode();
  if (pipeline) {
    if (mode.buffer_count < 1 || (op.is_output && mode.buffer_count > 2)) {
      fail(r, ErrorKind::kInvalidArgument, at,
           fmt::format("pl::Buffered({}) on an {}; inputs take 1 or more buffers, outputs 1 or 2",
                       mode.buffer_count, op.is_output ? "output" : "input"));
    }
    if (op.is_output && mode.use_lookahead) {
      fail(r, ErrorKind::kInvalidArgument, at,
           "pl::Buffered(n, use_lookahead) on an output; lookahead fetches inputs ahead, so "
           "only input BlockSpecs may ask for it");
    }
    return;
  }
  if (mode.buffer_count < 1 || mode.buffer_count > 2) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("{} asks for pl::Buffered({}); pallas_call pipelines take single (1) or "
                     "double (2) buffering (emit_pipeline takes more for inputs)",
                     m.name(), mode.buffer_count));
  }
  if (mode.use_lookahead) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("{} asks for lookahead; pallas_call does not fetch ahead (use "
                     "emit_pipeline inside a kernel for pl::Buffered(n, true))",
                     m.name()));
  }
}

// The index map's scalar-prefetch parameters against the call's operands: at most as many as
// the call has (a map may leave out trailing ones), each taking the operand's SMEM refs (one, or
// a std::tuple of as many as a grouped operand has) with the operand's dtypes.
void check_prefetch_params(const GridRequest& r, const pl::BlockSpec& s, const BlockMapping& m,
                           std::source_location at) {
  const int has = static_cast<int>(r.prefetch_leaves.size());
  if (s.index_map_prefetch() > has) {
    fail(r, ErrorKind::kInvalidArgument, at,
         prefetch_mismatch(" of " + m.name(), s.index_map_prefetch(), has));
  }
  const SmallVec& leaves = s.index_map_prefetch_leaves();
  const SmallVec& dtypes = s.index_map_prefetch_dtypes();
  int leaf = 0;
  for (int p = 0; p < s.index_map_prefetch(); ++p) {
    const int want = r.prefetch_leaves[static_cast<size_t>(p)];
    if (leaves[p] != want) {
      fail(r, ErrorKind::kInvalidArgument, at,
           fmt::format(
               "the index map of {} takes scalar-prefetch operand {} as {} but the call "
               "passes {} there; take a grouped operand (a std::tuple of arrays) as a "
               "std::tuple of as many pltpu::SmemRef, and an array as one SmemRef",
               m.name(), p,
               leaves[p] == 1 ? std::string("one SmemRef")
                              : fmt::format("a tuple of {} SmemRefs", leaves[p]),
               want == 1 ? std::string("one array") : fmt::format("a tuple of {} arrays", want)));
    }
    for (int k = 0; k < want; ++k, ++leaf) {
      const auto declared = static_cast<DType>(dtypes[leaf]);
      const DType passed = r.prefetch_dtypes[static_cast<size_t>(leaf)];
      if (declared != passed) {
        fail(r, ErrorKind::kInvalidArgument, at,
             fmt::format("the index map of {} takes scalar-prefetch operand {}{} as an SmemRef "
                         "of {}, but the array is {}; declare the ref with the array's dtype",
                         m.name(), p, want == 1 ? std::string() : fmt::format(" element {}", k),
                         dtype_name(declared), dtype_name(passed)));
      }
    }
  }
}

// The block shape against the array, and the index map against the grid.
void check_block_shape(const GridRequest& r, const MappedOperand& op, const BlockMapping& m,
                       std::source_location at) {
  const pl::BlockSpec& s = *op.spec;
  const Shape& array = op.hbm.shape;
  const std::vector<pl::BlockDim>& dims = s.block_shape();
  if (static_cast<int>(dims.size()) != array.rank()) {
    fail(r, ErrorKind::kShapeMismatch, at,
         fmt::format("{} has shape {} but its BlockSpec has {} block axes; give one block axis "
                     "per array axis",
                     m.name(), array.to_string(), dims.size()));
  }
  int elements = 0;
  int blocked = 0;
  int bounded = -1;  // the first BoundedSlice axis
  for (size_t a = 0; a < dims.size(); ++a) {
    const pl::BlockDim& d = dims[a];
    if (d.is_bounded() && bounded < 0) bounded = static_cast<int>(a);
    elements += d.is_element() ? 1 : 0;
    blocked += d.kind == pl::BlockDim::Kind::kBlocked ? 1 : 0;
    if (!d.is_squeezed && d.size < 1) {
      fail(r, ErrorKind::kInvalidArgument, at,
           fmt::format("the BlockSpec of {} has block extent {} on axis {}; a block extent is "
                       "at least 1 (pl::squeezed drops an axis)",
                       m.name(), d.size, a));
    }
    if (d.is_element() && (d.pad_lo < 0 || d.pad_hi < 0)) {
      fail(r, ErrorKind::kInvalidArgument, at,
           fmt::format("the BlockSpec of {} pads axis {} by ({}, {}); pl::Element padding is "
                       ">= 0 on both sides",
                       m.name(), a, d.pad_lo, d.pad_hi));
    }
  }
  if (r.kind == GridRequest::Kind::kPallasCall && bounded >= 0) {
    fail(r, ErrorKind::kUnsupported, at,
         fmt::format("the BlockSpec of {} has a pl::BoundedSlice on axis {}; Pallas' TPU "
                     "pallas_call does not take BoundedSlice block axes (an unsupported block "
                     "dimension type): use it in pltpu::emit_pipeline inside the kernel",
                     m.name(), bounded));
  }
  if (r.kind == GridRequest::Kind::kPallasCall && elements > 0 && blocked > 0) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} mixes pl::Element and blocked axes; in a "
                     "pallas_call all block axes are pl::Element (or squeezed), or none are",
                     m.name()));
  }
  if (!s.has_index_map()) {  // block 0 at every grid point, whatever the grid and prefetch
    for (size_t a = 0; a < dims.size(); ++a) {
      if (dims[a].is_bounded()) {
        fail(r, ErrorKind::kInvalidArgument, at,
             fmt::format("the BlockSpec of {} has a pl::BoundedSlice on axis {} but no index "
                         "map; a BoundedSlice axis needs an index map that returns "
                         "pl::ds(start, size) there",
                         m.name(), a));
      }
    }
    return;
  }
  check_prefetch_params(r, s, m, at);
  if (s.index_map_arity() != r.grid.rank()) {
    fail(r, ErrorKind::kInvalidArgument, at,
         arity_mismatch(" of " + m.name(), s.index_map_arity(), &r.grid, r.grid.rank()));
  }
}

// The BoundedSlice axes of `block` after axis `a`, as pl::Indices::slices marks them.
uint64_t mask_from(const std::vector<pl::BlockDim>& block, int a) {
  uint64_t m = 0;
  for (size_t d = static_cast<size_t>(a) + 1; d < block.size() && d < 63; ++d) {
    m |= block[d].is_bounded() ? uint64_t{1} << d : 0;
  }
  return m;
}

// Why an index map's pl::ds entries do not match the BoundedSlice axes (`got` and `want` as
// pl::Indices::slices marks them).
std::string slice_mismatch(const std::vector<pl::BlockDim>& block, uint64_t got, uint64_t want) {
  if ((got & pl::kStridedSliceBit) != 0) {
    return "the index map returned a pl::ds with a stride for a pl::BoundedSlice axis; a "
           "bounded slice is contiguous: return pl::ds(start, size)";
  }
  for (size_t a = 0; a < block.size() && a < 63; ++a) {
    const uint64_t bit = uint64_t{1} << a;
    if ((want & bit) != 0 && (got & bit) == 0) {
      return fmt::format(
          "the index map returned an integer for axis {}, a pl::BoundedSlice({}) axis; it must "
          "return a ds from the index_map for a BoundedSlice dimension: pl::ds(start, size)",
          a, block[a].size);
    }
    if ((want & bit) == 0 && (got & bit) != 0) {
      return fmt::format(
          "the index map returned a pl::ds for axis {}, which is not a pl::BoundedSlice axis; "
          "return a block index there (or declare the axis pl::BoundedSlice(n))",
          a);
    }
  }
  return "the index map's pl::ds entries do not match the BoundedSlice axes";
}

// Computes the window of block `indices`; on failure returns false and, when `error` is set,
// says why (kind and message).
struct WindowError {
  ErrorKind kind = ErrorKind::kOutOfBounds;
  std::string what;
};
bool compute_window(const Shape& array, const std::vector<pl::BlockDim>& block,
                    const pl::Indices& indices, BlockWindow& w, WindowError* error) {
  const int r = array.rank();
  const int returned = indices.v.size() - std::popcount(indices.slices & ~pl::kStridedSliceBit);
  if (static_cast<int>(block.size()) != r || returned != r) {
    if (error != nullptr) {
      error->kind = ErrorKind::kShapeMismatch;
      error->what = fmt::format(
          "the block shape has {} axes and the index map returned {} indices, but the array {} "
          "has rank {}; give one block axis and one index per array axis",
          block.size(), returned, array.to_string(), r);
    }
    return false;
  }
  w = BlockWindow{SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0)};
  int slice = 0;         // the next BoundedSlice size in indices.v, after the r indices
  uint64_t bounded = 0;  // the BoundedSlice axes, as pl::Indices::slices marks them
  for (int a = 0; a < r; ++a) {
    const pl::BlockDim& b = block[static_cast<size_t>(a)];
    const int64_t i = indices.v[a];
    bounded |= b.is_bounded() ? uint64_t{1} << a : 0;
    if (((indices.slices >> a) & 1) != (b.is_bounded() ? 1u : 0u) ||
        (a == r - 1 && indices.slices != bounded)) {
      if (error != nullptr) {
        error->kind = ErrorKind::kInvalidArgument;
        error->what = slice_mismatch(block, indices.slices, bounded | mask_from(block, a));
      }
      return false;
    }
    if (b.is_bounded()) {
      const int64_t size = indices.v[r + slice++];
      // size <= block size <= extent is checked before the sum, so it cannot overflow.
      if (i < 0 || size < 0 || size > b.size || size > array[a] || i > array[a] - size) {
        if (error != nullptr) {
          error->what = fmt::format(
              "pl::ds({}, {}) on axis {}, a pl::BoundedSlice({}) axis of the array {} (extent "
              "{}): a bounded slice starts at >= 0, holds 0..{} elements and ends inside the "
              "array; check the index map",
              i, size, a, b.size, array.to_string(), array[a], b.size);
        }
        return false;
      }
      w.start[a] = i;
      w.block[a] = b.size;
      w.valid[a] = size;
      continue;
    }
    if (b.is_element()) {
      // The index is an element offset into the array padded by pad_lo before its start.
      // Offsets beyond +-2^62 are out of bounds of any array: excluded before the arithmetic.
      constexpr int64_t kFar = int64_t{1} << 62;
      const bool far = i < 0 || i > kFar;
      const int64_t start = far ? 0 : i - b.pad_lo;
      const int64_t lo = std::max<int64_t>(start, 0);
      const int64_t hi = far ? 0 : std::min(start + b.size, array[a]);
      if (far || i + b.size > b.pad_lo + array[a] + b.pad_hi || hi <= lo) {
        if (error != nullptr) {
          error->what = fmt::format(
              "element offset {} on axis {} puts the window of {} elements outside the array {} "
              "padded by ({}, {}); the window must lie in the padded array and cover at least "
              "one element of the array; check the index map",
              i, a, b.size, array.to_string(), b.pad_lo, b.pad_hi);
        }
        return false;
      }
      w.start[a] = lo;
      w.block[a] = b.size;
      w.valid[a] = hi - lo;
      w.skip[a] = lo - start;
      continue;
    }
    // A squeezed axis's index is an element index; a blocked axis's index counts blocks.
    int64_t start = 0;
    const bool overflow = !b.is_squeezed && __builtin_mul_overflow(i, b.size, &start);
    if (b.is_squeezed) start = i;
    const int64_t size = b.is_squeezed ? 1 : b.size;
    if (i < 0 || overflow || start >= array[a]) {
      if (error != nullptr) {
        error->what = fmt::format(
            "block index {} on axis {} starts at element {}, outside the array {} (extent {}); a "
            "block must have at least one element in bounds; check the index map",
            i, a, overflow ? std::string("beyond 2^63") : std::to_string(start), array.to_string(),
            array[a]);
      }
      return false;
    }
    w.start[a] = start;
    w.block[a] = size;
    w.valid[a] = std::min(size, array[a] - start);
  }
  return true;
}

// Grids of more points than this are not walked to decide whether a block is constant: their
// blocks count as changing (double-buffered), which only costs budget.
constexpr int64_t kConstantProbePoints = int64_t{1} << 16;

// Whether every grid point maps `s` to the same block: a block shape without an index map, or an
// index map of the grid indices alone (no scalar prefetch, so no data it could depend on) that
// returns one block at every point of the grid, evaluated here and stopped at the first change.
bool constant_block_impl(const pl::BlockSpec& s, const Shape& grid) {
  if (!s.has_index_map()) return true;
  if (s.index_map_prefetch() > 0 || grid.size() > kConstantProbePoints) return false;
  try {
    SmallVec point(grid.rank(), 0);
    const pl::Indices first = s.map_block(point.data(), nullptr);
    while (next_grid_point(grid, point)) {
      const pl::Indices b = s.map_block(point.data(), nullptr);
      if (!(b.v == first.v) || b.slices != first.slices) return false;
    }
  } catch (...) {  // the walk reports a failing index map itself, at its step
    return false;
  }
  return true;
}

BlockWindow whole_window(const Shape& s) {
  return BlockWindow{SmallVec(s.rank(), 0), s.dims(), s.dims(), SmallVec(s.rank(), 0)};
}

}  // namespace

bool constant_block(const pl::BlockSpec& s, const Shape& grid) {
  return constant_block_impl(s, grid);
}

std::string BlockMapping::name() const {
  return fmt::format("{} {}", is_output ? "output" : "input", index);
}

GridMapping map_grid(const GridRequest& request, const std::vector<MappedOperand>& operands) {
  GridMapping g;
  g.grid = request.grid;
  g.semantics = request.semantics;
  check_grid(request, g.semantics);
  int inputs = 0;
  int outputs = 0;
  g.blocks.reserve(operands.size());
  for (const MappedOperand& op : operands) {
    const pl::BlockSpec& s = *op.spec;
    BlockMapping m;
    m.hbm = op.hbm;
    m.spec = op.spec;
    m.whole = s.is_whole_array();
    m.is_output = op.is_output;
    m.read_only = op.read_only;
    const int position = op.is_output ? outputs++ : inputs++;
    m.index = op.index >= 0 ? op.index : position;
    const std::source_location at = s.where().line() != 0 ? s.where() : request.where;
    check_space_and_buffers(request, op, m, at);
    m.space = s.memory_space() == MemorySpace::HBM ? MemorySpace::ANY : s.memory_space();
    if (!m.whole) check_block_shape(request, op, m, at);
    // pl::Buffered is the user's word; without it a block double-buffers unless its index
    // never changes over the grid (then one window is all a pipeline can use).
    m.storage = op.storage;
    m.input_output = op.input_output;
    m.buffers = m.resident()                     ? 0
                : op.storage != nullptr          ? op.storage_buffers
                : m.whole                        ? 1
                : s.has_pipeline_mode()          ? s.pipeline_mode().buffer_count
                : constant_block_impl(s, g.grid) ? 1
                                                 : 2;
    SmallVec window;
    if (m.whole) {
      m.block = op.hbm.shape.dims();
      window = op.hbm.shape.dims();
    } else {
      for (const pl::BlockDim& d : s.block_shape()) {
        m.block.push_back(d.is_squeezed ? 1 : d.size);
        if (!d.is_squeezed) window.push_back(d.size);
      }
    }
    m.window = Shape(std::move(window));
    int64_t elements = 1;
    for (int64_t e : m.window) {
      if (__builtin_mul_overflow(elements, e, &elements)) elements = -1;
      if (elements < 0) break;
    }
    if (elements < 0 || __builtin_mul_overflow(elements, itemsize(op.hbm.dtype), &m.window_bytes)) {
      fail(request, ErrorKind::kInvalidArgument, at,
           fmt::format("the block {} of {} has more bytes than a 64-bit count holds; use a "
                       "smaller block",
                       m.window.to_string(), m.name()));
    }
    if (op.storage != nullptr && !m.resident() && op.storage_window != m.window) {
      fail(request, ErrorKind::kShapeMismatch, at,
           fmt::format("the BufferedRef of {} holds windows of {} but its BlockSpec takes "
                       "blocks {} of the operand {}; make the BufferedRef from the same spec "
                       "(make_allocations does)",
                       m.name(), op.storage_window.to_string(), m.window.to_string(),
                       op.hbm.shape.to_string()));
    }
    if (const auto problem = prefetched_problem(request, op, m, at)) {
      fail(request, problem->kind, problem->where, problem->what);
    }
    m.prefetched = s.has_pipeline_mode() ? s.pipeline_mode().prefetched_count : 0;
    if (!op.is_output && outputs > 0) {
      fail(request, ErrorKind::kInvalidArgument, at,
           fmt::format("{} comes after an output; a pipeline takes its inputs first, then its "
                       "outputs (BufferedRef::output / input_output)",
                       m.name()));
    }
    g.blocks.push_back(std::move(m));
  }
  g.num_inputs = inputs;
  return g;
}

BlockWindow block_window(const BlockMapping& m, const pl::Indices& indices) {
  if (m.whole) return whole_window(m.hbm.shape);
  BlockWindow w;
  WindowError error;
  if (!compute_window(m.hbm.shape, m.spec->block_shape(), indices, w, &error)) {
    raise(error.kind, "BlockSpec", m.spec->where(), fmt::format("{}: {}", m.name(), error.what));
  }
  return w;
}

std::optional<BlockWindow> try_block_window(const BlockMapping& m, const pl::Indices& indices) {
  if (m.whole) return whole_window(m.hbm.shape);
  BlockWindow w;
  if (!compute_window(m.hbm.shape, m.spec->block_shape(), indices, w, nullptr)) return std::nullopt;
  return w;
}

BlockWindow block_window(const Shape& array, const std::vector<pl::BlockDim>& block,
                         const pl::Indices& indices, std::source_location where) {
  BlockWindow w;
  WindowError error;
  if (!compute_window(array, block, indices, w, &error)) {
    raise(error.kind, "BlockSpec", where, error.what);
  }
  return w;
}

BlockViews block_views(const BlockMapping& m, const BlockWindow& w, void* window) {
  const RawRef& a = m.hbm;
  const int item = itemsize(a.dtype);
  BlockViews v{RawRef{nullptr, a.dtype, a.space, Shape{}, SmallVec{}},
               RawRef{window, a.dtype, MemorySpace::VMEM, Shape{}, SmallVec{}}};
  const std::vector<pl::BlockDim>* dims = m.whole ? nullptr : &m.spec->block_shape();
  int64_t offset = 0;
  SmallVec shape;
  SmallVec hbm_strides;
  SmallVec block_extent;  // the window's own (full block) extents, for its row-major strides
  SmallVec skip;          // window elements before the array (Element padding)
  for (int d = 0; d < a.shape.rank(); ++d) {
    offset += w.start[d] * a.strides[d];
    if (dims != nullptr && (*dims)[static_cast<size_t>(d)].is_squeezed) continue;
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

RawRef block_hbm_view(const BlockMapping& m, const BlockWindow& w) {
  const RawRef& a = m.hbm;
  const std::vector<pl::BlockDim>* dims = m.whole ? nullptr : &m.spec->block_shape();
  SmallVec shape;
  SmallVec strides;
  for (int d = 0; d < a.shape.rank(); ++d) {
    if (dims != nullptr && (*dims)[static_cast<size_t>(d)].is_squeezed) continue;
    shape.push_back(w.valid[d]);
    strides.push_back(a.strides[d]);
  }
  return RawRef{block_data(m, w), a.dtype, a.space, Shape(std::move(shape)), std::move(strides)};
}

void* block_data(const BlockMapping& m, const BlockWindow& w) {
  int64_t offset = 0;
  for (int d = 0; d < m.hbm.shape.rank(); ++d) offset += w.start[d] * m.hbm.strides[d];
  return static_cast<std::byte*>(m.hbm.data) + offset * itemsize(m.hbm.dtype);
}

}  // namespace tessera::detail

namespace tessera {

pl::Indices pl::BlockSpec::block_indices(const int64_t* grid_point, int n,
                                         const detail::RawRef* prefetch, int num_prefetch) const {
  if (whole_ || !map_) return Indices{detail::SmallVec(static_cast<int>(block_.size()), 0)};
  if (n != arity_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  detail::arity_mismatch("", arity_, nullptr, n));
  }
  int leaves = 0;
  for (int64_t l : prefetch_leaves_) leaves += static_cast<int>(l);
  if (num_prefetch < leaves) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  detail::prefetch_mismatch("", prefetch_, num_prefetch));
  }
  return map_(grid_point, prefetch);
}

void pl::BlockSpec::apply(const Option& o) {
  if (o.kind == Option::Kind::kMode) {
    if (mode_given_) {
      detail::raise(ErrorKind::kInvalidArgument, "BlockSpec", where_,
                    "pipeline_mode (pl::Buffered) is given twice; give it at most once");
    }
    mode_ = o.mode;
    mode_given_ = true;
    return;
  }
  if (space_given_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec", where_,
                  "memory_space is given twice; give it at most once");
  }
  if (o.space == MemorySpace::SEMAPHORE && !whole_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec", where_,
                  "a BlockSpec in SEMAPHORE memory has no block shape: semaphores are passed "
                  "whole, pl::BlockSpec(pltpu::SEMAPHORE)");
  }
  space_ = o.space;
  space_given_ = true;
}

}  // namespace tessera
