// Block mappings: the one validation of a grid walk's specification, and the block algebra of a
// canonicalised BlockSpec (windows, views). tests/unit/block_spec_test.cc tests the algebra on
// its own, tests/unit/pipeline_test.cc and pallas_call*_test.cc the validation.
#include "runtime/block_mapping.h"

#include <fmt/format.h>

#include <algorithm>

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
      "the call has {}; with pltpu::PrefetchScalarGridSpec<n> every index map "
      "takes the grid indices then all n SMEM refs",
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

// Where the body sees the operand, and how many windows it takes.
void check_space_and_buffers(const GridRequest& r, const MappedOperand& op, const BlockMapping& m,
                             std::source_location at) {
  const pl::BlockSpec& s = *op.spec;
  MemorySpace space = s.memory_space();
  if (space == MemorySpace::HBM) space = MemorySpace::ANY;
  const pl::Buffered& mode = s.pipeline_mode();
  if (r.kind == GridRequest::Kind::kEmitPipeline) {
    if (space != MemorySpace::VMEM) {
      fail(r, ErrorKind::kInvalidArgument, r.where,
           "emit_pipeline stages every block in VMEM; a BlockSpec in another memory space "
           "(pl::ANY, SMEM) is for pallas_call operands");
    }
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
  if (space != op.declared) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} puts it in {} but the body takes it as a {} ref; "
                     "make them agree (pl::BlockSpec(pl::ANY) with a pltpu::AnyRef/HbmRef "
                     "parameter, pl::BlockSpec(MemorySpace::SMEM) with an SmemRef, a VMEM "
                     "BlockSpec with a VmemRef)",
                     m.name(), space_word(space), space_word(op.declared)));
  }
  if (space == MemorySpace::ANY && !s.is_whole_array()) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("{} is in pl::ANY with a block shape; operands left in HBM are not "
                     "pipelined, so their BlockSpec is the whole array: pl::BlockSpec(pl::ANY)",
                     m.name()));
  }
  if (space == MemorySpace::ANY) return;  // stays in HBM: no window
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
  for (size_t a = 0; a < dims.size(); ++a) {
    const pl::BlockDim& d = dims[a];
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
  if (r.kind == GridRequest::Kind::kPallasCall && elements > 0 && blocked > 0) {
    fail(r, ErrorKind::kInvalidArgument, at,
         fmt::format("the BlockSpec of {} mixes pl::Element and blocked axes; in a "
                     "pallas_call all block axes are pl::Element (or squeezed), or none are",
                     m.name()));
  }
  if (s.index_map_prefetch() != r.num_prefetch) {
    fail(r, ErrorKind::kInvalidArgument, at,
         prefetch_mismatch(" of " + m.name(), s.index_map_prefetch(), r.num_prefetch));
  }
  if (s.index_map_arity() != r.grid.rank()) {
    fail(r, ErrorKind::kInvalidArgument, at,
         arity_mismatch(" of " + m.name(), s.index_map_arity(), &r.grid, r.grid.rank()));
  }
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
  if (static_cast<int>(block.size()) != r || indices.v.size() != r) {
    if (error != nullptr) {
      error->kind = ErrorKind::kShapeMismatch;
      error->what = fmt::format(
          "the block shape has {} axes and the index map returned {} indices, but the array {} "
          "has rank {}; give one block axis and one index per array axis",
          block.size(), indices.v.size(), array.to_string(), r);
    }
    return false;
  }
  w = BlockWindow{SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0), SmallVec(r, 0)};
  for (int a = 0; a < r; ++a) {
    const pl::BlockDim& b = block[static_cast<size_t>(a)];
    const int64_t i = indices.v[a];
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

BlockWindow whole_window(const Shape& s) {
  return BlockWindow{SmallVec(s.rank(), 0), s.dims(), s.dims(), SmallVec(s.rank(), 0)};
}

}  // namespace

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
    m.index = op.is_output ? outputs++ : inputs++;
    const std::source_location at = s.where().line() != 0 ? s.where() : request.where;
    check_space_and_buffers(request, op, m, at);
    m.space = s.memory_space() == MemorySpace::HBM ? MemorySpace::ANY : s.memory_space();
    if (!m.whole) check_block_shape(request, op, m, at);
    m.buffers = m.whole || !m.pipelined() ? 1 : s.pipeline_mode().buffer_count;
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
    g.blocks.push_back(std::move(m));
  }
  g.num_inputs = inputs;
  return g;
}

BlockWindow block_window(const BlockMapping& m, const pl::Indices& indices) {
  if (m.whole) return whole_window(m.hbm.shape);
  return block_window(m.hbm.shape, m.spec->block_shape(), indices, m.spec->where());
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
  if (whole_) return Indices{detail::SmallVec(static_cast<int>(block_.size()), 0)};
  if (n != arity_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  detail::arity_mismatch("", arity_, nullptr, n));
  }
  if (num_prefetch != prefetch_) {
    detail::raise(ErrorKind::kInvalidArgument, "BlockSpec index map", where_,
                  detail::prefetch_mismatch("", prefetch_, num_prefetch));
  }
  return map_(grid_point, prefetch);
}

}  // namespace tessera
