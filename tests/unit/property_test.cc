// A property test of pl::pallas_call: many random, valid Pallas programs, each run in the native
// engine and in the checked engine, compared with a plain C++ reference of what Pallas semantics
// say the outputs must be.
//
// Every configuration is drawn from a seeded generator: the outputs' logical shape (rank 1-4),
// per axis a block that divides the extent or not (partial last blocks), or pl::squeezed; a
// grid of cdiv(extent, block) per axis in a random order (a transposed index map), some axes
// walked in reverse and axes of one block left off the grid (a constant index); optionally a
// reduction axis, last and ARBITRARY, accumulated into a resident output block initialised
// under `pl::program_id(last) == 0`; a PARALLEL prefix of the grid and 1-3 cores; 1-3 inputs and
// 1-2 outputs of float32, int32 and bfloat16. Each input lays the logical axes out in its own
// order, and along each axis follows the output's blocks, is offset by whole blocks, reversed
// block for block, tiled (one block read at every step), broadcast (extent 1) or gathered
// through a scalar-prefetch table of block indices; operands may use pl::Element block axes
// (with padding; input windows may be wider than a block, so that consecutive ones overlap), the
// whole-array default BlockSpec and pl::Buffered(1); an input may alias an output, whose blocks
// outside the grid's keep the input's values. Each output is a sum of its inputs times small
// coefficients; values are small multiples of 0.5, so every float result is exact and the
// comparison is exact (the reference rounds to bfloat16 where the kernel does).
//
// TESSERA_PROPERTY_SEED sets the seed, TESSERA_PROPERTY_CASES the number of configurations and
// TESSERA_PROPERTY_CASE runs that one configuration alone. A failure prints the seed, the case
// index and the configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace {
using namespace tessera;
using Sem = pltpu::GridDimensionSemantics;

#if defined(__SANITIZE_THREAD__)
constexpr int kDefaultCases = 300;  // ThreadSanitizer makes each launch many times slower
#else
constexpr int kDefaultCases = 1000;
#endif
constexpr uint64_t kDefaultSeed = 20240613;
constexpr int64_t kMaxElements = 4096;  // per output
constexpr int64_t kMaxSteps = 384;      // grid points per configuration
constexpr int kKAxis = 100;             // the reduction axis in an operand's layout

enum class Dt : uint8_t { kF32, kI32, kBf16 };
const char* dt_name(Dt d) {
  switch (d) {
    case Dt::kF32:
      return "f32";
    case Dt::kI32:
      return "i32";
    case Dt::kBf16:
      return "bf16";
  }
  return "?";
}
template <class T>
constexpr Dt dt_of() {
  if constexpr (std::is_same_v<T, float>) return Dt::kF32;
  if constexpr (std::is_same_v<T, int32_t>) return Dt::kI32;
  return Dt::kBf16;
}

// How an operand's array axis follows a logical axis of the outputs.
enum class Mode : uint8_t {
  kSame,       // the output's block, offset by `offset` blocks (elements on a squeezed axis)
  kReverse,    // block blocks-1-g where the output has block g (whole blocks only)
  kTile,       // extent one block, block 0 at every step
  kBroadcast,  // extent 1, index 0; the body broadcasts it
  kGather,     // block table[g] where the output has block g (scalar prefetch; whole blocks)
};
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kSame:
      return "same";
    case Mode::kReverse:
      return "reverse";
    case Mode::kTile:
      return "tile";
    case Mode::kBroadcast:
      return "broadcast";
    case Mode::kGather:
      return "gather";
  }
  return "?";
}

// One axis of the outputs' logical space.
struct Logical {
  int64_t extent = 1;
  bool squeezed = false;
  int64_t block = 1;   // 1 when squeezed
  int64_t blocks = 1;  // cdiv(extent, block), or extent when squeezed
  int grid_pos = -1;   // its grid axis; -1: one block, a constant index
  bool reversed = false;
};

// index = ((src >= 0 ? mul * g[src] : 0) + add) * scale + off
struct AxisMap {
  int src = -1;
  int64_t mul = 1;
  int64_t add = 0;
  int64_t scale = 1;
  int64_t off = 0;
  bool gather = false;  // (mul * g[src] + add) indexes the scalar-prefetch table
  int64_t eval(const int64_t* g, const pltpu::SmemRef<int32_t>* table) const {
    int64_t b = (src >= 0 ? mul * g[src] : 0) + add;
    if (gather) b = static_cast<int32_t>((*table)(b));
    return b * scale + off;
  }
};

struct Operand {
  Dt dtype = Dt::kF32;
  std::vector<int> layout;  // array axis -> logical axis (kKAxis: the reduction axis)
  std::vector<Mode> mode;
  std::vector<int64_t> offset;  // kSame: blocks (elements when squeezed) before the output's
  std::vector<int64_t> extra;   // kSame: whole blocks after it (an aliased pair only)
  std::vector<int64_t> halo;    // pl::Element inputs: the window is this much wider than a block
  std::vector<int64_t> shift;   // ... and the body reads it from this element on (0..halo)
  bool element = false;
  std::vector<int64_t> pad_lo, pad_hi;
  bool whole = false;  // the default (whole-array) BlockSpec
  int buffers = 2;
  // Derived.
  std::vector<int64_t> shape;
  std::vector<pl::BlockDim> dims;
  std::vector<AxisMap> map;
};

struct Term {
  int input;
  int coef;
};
struct Output : Operand {
  std::vector<Term> terms;
  int alias = -1;  // the input aliased to this output
};

struct Case {
  uint64_t seed = 0;
  int index = 0;
  std::vector<Logical> ax;
  bool reduce = false;
  int64_t k_extent = 1;
  bool k_squeezed = false;
  int64_t k_block = 1;
  int64_t k_blocks = 1;
  std::vector<int64_t> grid;
  std::vector<Sem> semantics;  // empty: not given (every axis ARBITRARY)
  int cores = 1;
  int signature = 0;
  bool const_inputs = true;
  std::vector<Operand> in;
  std::vector<Output> out;
  pltpu::InterpretParams checked;
  // Scalar prefetch: a table of block indices along logical axis `gather_axis`.
  bool prefetch = false;
  int gather_axis = -1;
  std::vector<int32_t> table;
};

// Signatures: the input and output dtypes of the body (compile-time in a pallas_call).
template <class... T>
struct List {};
using Signatures =
    std::tuple<std::pair<List<float>, List<float>>, std::pair<List<int32_t>, List<int32_t>>,
               std::pair<List<float, int32_t>, List<float>>,
               std::pair<List<bfloat16, float>, List<float, bfloat16>>,
               std::pair<List<int32_t, int32_t, float>, List<int32_t, float>>,
               std::pair<List<float, float, float>, List<float>>,
               std::pair<List<bfloat16>, List<bfloat16>>,
               std::pair<List<int32_t, bfloat16, int32_t>, List<float, int32_t>>>;
constexpr int kSignatures = std::tuple_size_v<Signatures>;

template <class... T>
std::vector<Dt> dts(List<T...>) {
  return {dt_of<T>()...};
}
template <int S>
std::pair<std::vector<Dt>, std::vector<Dt>> signature_dts() {
  using P = std::tuple_element_t<S, Signatures>;
  return {dts(typename P::first_type{}), dts(typename P::second_type{})};
}
template <size_t... S>
std::pair<std::vector<Dt>, std::vector<Dt>> signature_dts(int s, std::index_sequence<S...>) {
  std::pair<std::vector<Dt>, std::vector<Dt>> r;
  ((s == static_cast<int>(S) ? (r = signature_dts<S>(), 0) : 0), ...);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Generation.

struct Rng {
  std::mt19937_64 g;
  int64_t uni(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(g);
  }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  template <class T>
  void shuffle(std::vector<T>& v) {
    std::shuffle(v.begin(), v.end(), g);
  }
};

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An extent for an axis of a rank-r space, at most `room` so the total stays bounded.
int64_t draw_extent(Rng& r, int rank, int64_t room) {
  static constexpr int64_t kMax[] = {0, 300, 48, 14, 7};
  int64_t hi = std::min(kMax[rank], room);
  if (r.coin(0.1)) return 1;
  return r.uni(1, std::max<int64_t>(1, hi));
}

// A block for an extent: dividing it, not dividing it, or larger than the array.
int64_t draw_block(Rng& r, int64_t extent) {
  if (r.coin(0.15)) return extent;
  if (r.coin(0.08)) return extent + r.uni(1, 3);
  if (r.coin(0.4)) {  // a divisor
    std::vector<int64_t> div;
    for (int64_t d = 1; d <= extent; ++d) {
      if (extent % d == 0) div.push_back(d);
    }
    return div[static_cast<size_t>(r.uni(0, static_cast<int64_t>(div.size()) - 1))];
  }
  return r.uni(1, extent);
}

// The array shape, block dims and index map of an operand from its layout and modes.
void derive(const Case& c, Operand& op, Rng& r) {
  const int rank = static_cast<int>(op.layout.size());
  const int G = static_cast<int>(c.grid.size());
  op.shape.assign(static_cast<size_t>(rank), 1);
  op.dims.clear();
  op.map.assign(static_cast<size_t>(rank), AxisMap{});
  op.pad_lo.assign(static_cast<size_t>(rank), 0);
  op.pad_hi.assign(static_cast<size_t>(rank), 0);
  for (int t = 0; t < rank; ++t) {
    const size_t ts = static_cast<size_t>(t);
    AxisMap& m = op.map[ts];
    bool squeezed = false;
    int64_t block = 1;
    int64_t need_hi = 0;  // Element padding after the array that the last window needs
    if (op.layout[ts] == kKAxis) {
      op.shape[ts] = c.k_extent;
      squeezed = c.k_squeezed;
      block = c.k_block;
      m.src = G - 1;
      need_hi = c.k_blocks * c.k_block - c.k_extent;
    } else {
      const Logical& L = c.ax[static_cast<size_t>(op.layout[ts])];
      squeezed = L.squeezed;
      block = L.block;
      if (L.grid_pos >= 0) {
        m.src = L.grid_pos;
        m.mul = L.reversed ? -1 : 1;
        m.add = L.reversed ? L.blocks - 1 : 0;
      } else {
        m.src = -1;
        m.mul = 0;
        m.add = 0;
      }
      switch (op.mode[ts]) {
        case Mode::kSame:
          op.shape[ts] = L.extent + (op.offset[ts] + op.extra[ts]) * L.block + op.shift[ts];
          m.add += op.offset[ts];
          need_hi = L.blocks * L.block + op.halo[ts] - L.extent - op.shift[ts];
          break;
        case Mode::kReverse:
          op.shape[ts] = L.extent;
          m.mul = -m.mul;
          m.add = L.blocks - 1 - m.add;
          break;
        case Mode::kTile:
          op.shape[ts] = L.block;
          m.src = -1;
          m.mul = 0;
          m.add = 0;
          break;
        case Mode::kBroadcast:
          op.shape[ts] = 1;
          block = 1;
          m.src = -1;
          m.mul = 0;
          m.add = 0;
          break;
        case Mode::kGather:
          op.shape[ts] = L.extent;
          m.gather = true;
          break;
      }
    }
    if (m.src < 0) m.mul = 0;
    if (squeezed) {
      op.dims.emplace_back(pl::squeezed);
    } else if (op.element) {
      const int64_t lo = r.uni(0, 2);
      const int64_t hi = std::max<int64_t>(0, need_hi) + r.uni(0, 2);
      op.pad_lo[ts] = lo;
      op.pad_hi[ts] = hi;
      op.dims.emplace_back(pl::Element(block + op.halo[ts], {lo, hi}));
      m.scale = block;
      m.off = lo;
    } else {
      op.dims.emplace_back(block);
    }
  }
  // The whole-array default spec stands for one block that is the array, at index 0.
  bool whole_ok = !op.element && rank > 0;
  for (int t = 0; t < rank && whole_ok; ++t) {
    const size_t ts = static_cast<size_t>(t);
    whole_ok = !op.dims[ts].is_squeezed && op.dims[ts].size == op.shape[ts] && op.map[ts].src < 0 &&
               op.map[ts].add == 0;
  }
  op.whole = whole_ok && r.coin(0.5);
}

Case generate(uint64_t seed, int index) {
  Rng r{std::mt19937_64(mix(seed ^ mix(static_cast<uint64_t>(index))))};
  Case c;
  c.seed = seed;
  c.index = index;
  c.reduce = r.coin(0.35);
  const int rank = static_cast<int>(r.uni(1, c.reduce ? 3 : 4));
  // The logical space and its blocks, redrawn until the grid is small enough.
  for (int attempt = 0;; ++attempt) {
    c.ax.assign(static_cast<size_t>(rank), Logical{});
    int64_t room = kMaxElements;
    for (Logical& L : c.ax) {
      L.extent = draw_extent(r, rank, room);
      room = std::max<int64_t>(1, room / L.extent);
      L.squeezed = L.extent <= 16 && r.coin(0.2);
      L.block = L.squeezed ? 1 : draw_block(r, L.extent);
      L.blocks = L.squeezed ? L.extent : cdiv(L.extent, L.block);
      L.reversed = L.blocks > 1 && r.coin(0.2);
    }
    if (c.reduce) {
      c.k_extent = r.uni(1, 24);
      c.k_squeezed = r.coin(0.25);
      c.k_block = c.k_squeezed ? 1 : draw_block(r, c.k_extent);
      c.k_blocks = c.k_squeezed ? c.k_extent : cdiv(c.k_extent, c.k_block);
    }
    int64_t steps = c.reduce ? c.k_blocks : 1;
    for (const Logical& L : c.ax) steps *= L.blocks;
    if (steps <= kMaxSteps || attempt > 50) break;
  }
  // The grid: the axes of several blocks (and some of one) in a random order, then the
  // reduction axis.
  std::vector<int> gridded;
  for (int a = 0; a < rank; ++a) {
    const Logical& L = c.ax[static_cast<size_t>(a)];
    if (L.blocks > 1 || r.coin(0.5)) gridded.push_back(a);
  }
  r.shuffle(gridded);
  if (gridded.size() + (c.reduce ? 1 : 0) > 4) gridded.resize(c.reduce ? 3 : 4);
  // An axis left off the grid must be one block.
  for (int a = 0; a < rank; ++a) {
    Logical& L = c.ax[static_cast<size_t>(a)];
    if (std::find(gridded.begin(), gridded.end(), a) == gridded.end() && L.blocks > 1) {
      L.squeezed = false;
      L.block = L.extent;
      L.blocks = 1;
      L.reversed = false;
    }
  }
  for (size_t p = 0; p < gridded.size(); ++p) {
    Logical& L = c.ax[static_cast<size_t>(gridded[p])];
    L.grid_pos = static_cast<int>(p);
    c.grid.push_back(L.blocks);
  }
  if (c.reduce) c.grid.push_back(c.k_blocks);
  const int G = static_cast<int>(c.grid.size());
  // Semantics: a PARALLEL prefix of the output axes, the rest (the reduction axis) ARBITRARY.
  const int free_axes = G - (c.reduce ? 1 : 0);
  const int parallel = static_cast<int>(r.uni(0, free_axes));
  if (G > 0 && (parallel > 0 || r.coin(0.7))) {
    for (int a = 0; a < G; ++a) {
      c.semantics.push_back(a < parallel ? (r.coin(0.15) ? pltpu::CORE_PARALLEL : pltpu::PARALLEL)
                                         : pltpu::ARBITRARY);
    }
  }
  c.cores = static_cast<int>(r.uni(1, 3));
  c.signature = static_cast<int>(r.uni(0, kSignatures - 1));
  c.const_inputs = r.coin(0.6);
  const auto [in_dts, out_dts] =
      signature_dts(c.signature, std::make_index_sequence<kSignatures>{});

  // Scalar prefetch: a table of blocks of one gridded axis of whole blocks, for gathers.
  if (r.coin(0.25)) {
    std::vector<int> candidates;
    for (int a = 0; a < rank; ++a) {
      const Logical& L = c.ax[static_cast<size_t>(a)];
      if (L.grid_pos >= 0 && (L.squeezed || L.extent % L.block == 0)) candidates.push_back(a);
    }
    if (!candidates.empty()) {
      c.prefetch = true;
      c.gather_axis =
          candidates[static_cast<size_t>(r.uni(0, static_cast<int64_t>(candidates.size()) - 1))];
      const Logical& L = c.ax[static_cast<size_t>(c.gather_axis)];
      for (int64_t b = 0; b < L.blocks; ++b) {
        c.table.push_back(static_cast<int32_t>(r.uni(0, L.blocks - 1)));
      }
    }
  }
  std::vector<int> identity(static_cast<size_t>(rank));
  for (int a = 0; a < rank; ++a) identity[static_cast<size_t>(a)] = a;
  auto plain = [&](Operand& op, const std::vector<int>& layout) {
    op.layout = layout;
    op.mode.assign(layout.size(), Mode::kSame);
    op.offset.assign(layout.size(), 0);
    op.extra.assign(layout.size(), 0);
    op.halo.assign(layout.size(), 0);
    op.shift.assign(layout.size(), 0);
  };
  // Outputs: a layout (a permutation of the logical axes), their blocks, maybe pl::Element.
  c.out.resize(out_dts.size());
  for (size_t o = 0; o < c.out.size(); ++o) {
    Output& op = c.out[o];
    op.dtype = out_dts[o];
    std::vector<int> layout = identity;
    if (r.coin(0.3)) r.shuffle(layout);
    plain(op, layout);
    op.element = r.coin(0.15);
    op.buffers = r.coin(0.2) ? 1 : 2;
  }
  // Aliases: an input of the output's dtype that reads exactly the output's blocks.
  c.in.resize(in_dts.size());
  std::vector<bool> aliased_in(c.in.size(), false);
  for (size_t o = 0; o < c.out.size(); ++o) {
    if (!r.coin(0.3)) continue;
    for (size_t j = 0; j < c.in.size(); ++j) {
      if (!aliased_in[j] && in_dts[j] == c.out[o].dtype) {
        aliased_in[j] = true;
        c.out[o].alias = static_cast<int>(j);
        // The grid may cover only part of an aliased output: blocks before it and, past whole
        // blocks, after it keep the input's values.
        Output& op = c.out[o];
        for (size_t t = 0; t < op.layout.size(); ++t) {
          const Logical& L = c.ax[static_cast<size_t>(op.layout[t])];
          if (r.coin(0.25)) op.offset[t] = r.uni(1, 2);
          if ((L.squeezed || L.extent % L.block == 0) && r.coin(0.25)) op.extra[t] = r.uni(1, 2);
        }
        break;
      }
    }
  }
  for (size_t j = 0; j < c.in.size(); ++j) {
    Operand& op = c.in[j];
    op.dtype = in_dts[j];
    op.element = r.coin(0.15);
    op.buffers = r.coin(0.2) ? 1 : 2;
    if (aliased_in[j]) {
      for (const Output& o : c.out) {
        if (o.alias != static_cast<int>(j)) continue;
        plain(op, o.layout);
        op.offset = o.offset;
        op.extra = o.extra;
      }
      continue;
    }
    std::vector<int> layout = identity;
    if (r.coin(0.35)) r.shuffle(layout);
    if (c.reduce && r.coin(0.8)) {
      layout.insert(layout.begin() + r.uni(0, static_cast<int64_t>(layout.size())), kKAxis);
    }
    plain(op, layout);
    for (size_t t = 0; t < layout.size(); ++t) {
      if (layout[t] == kKAxis) continue;
      const Logical& L = c.ax[static_cast<size_t>(layout[t])];
      const double u = std::uniform_real_distribution<double>(0, 1)(r.g);
      if (c.prefetch && layout[t] == c.gather_axis && r.coin(0.6)) {
        op.mode[t] = Mode::kGather;
      } else if (u < 0.12) {
        op.mode[t] = Mode::kBroadcast;
      } else if (u < 0.24 && !L.squeezed) {
        op.mode[t] = Mode::kTile;
      } else if (u < 0.36 && (L.squeezed || L.extent % L.block == 0)) {
        op.mode[t] = Mode::kReverse;
      } else {
        op.mode[t] = Mode::kSame;
        if (r.coin(0.15)) op.offset[t] = r.uni(1, 2);
        // A window wider than the block: consecutive windows overlap.
        if (op.element && !L.squeezed && r.coin(0.4)) {
          op.halo[t] = r.uni(1, 3);
          op.shift[t] = r.uni(0, op.halo[t]);
        }
      }
    }
  }
  for (Operand& op : c.in) derive(c, op, r);
  for (Output& op : c.out) derive(c, op, r);
  // Terms: each output sums a non-empty subset of the inputs, in a random order.
  for (Output& o : c.out) {
    std::vector<int> js(c.in.size());
    for (size_t j = 0; j < js.size(); ++j) js[j] = static_cast<int>(j);
    r.shuffle(js);
    const size_t n = static_cast<size_t>(r.uni(1, static_cast<int64_t>(js.size())));
    static constexpr int kCoef[] = {1, 2, 3, -1, -2};
    for (size_t i = 0; i < n; ++i) o.terms.push_back(Term{js[i], kCoef[r.uni(0, 4)]});
  }
  // The checked engine's own choices.
  static constexpr pltpu::DmaExecutionMode kModes[] = {pltpu::DmaExecutionMode::eager,
                                                       pltpu::DmaExecutionMode::on_wait,
                                                       pltpu::DmaExecutionMode::random};
  c.checked.dma_execution_mode = kModes[r.uni(0, 2)];
  c.checked.random_seed = r.g();
  if (r.coin(0.5)) c.checked.parallel_order_seed = r.g();
  if (r.coin(0.3)) c.checked.uninitialized_memory = pltpu::UninitializedMemory::zero;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Description, for failures.

std::string join(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// before + text + after, through a stream (see describe_operand).
std::string fmt_wrap(const char* before, const std::string& text, const char* after) {
  std::ostringstream o;
  o << before << text << after;
  return o.str();
}
template <class N>
std::string fmt_wrap(const char* before, const std::string& text, const char* after, N number) {
  std::ostringstream o;
  o << before << text << after << number;
  return o.str();
}

std::string describe_operand(const Operand& op) {
  std::ostringstream s;
  s << dt_name(op.dtype) << join(op.shape) << " block (";
  for (size_t t = 0; t < op.dims.size(); ++t) {
    const pl::BlockDim& d = op.dims[t];
    s << (t ? ", " : "");
    if (d.is_squeezed) {
      s << "squeezed";
    } else if (d.is_element()) {
      s << "Element(" << d.size << ", (" << d.pad_lo << ", " << d.pad_hi << "))";
    } else {
      s << d.size;
    }
  }
  s << ") index_map (";
  for (size_t t = 0; t < op.map.size(); ++t) {
    const AxisMap& m = op.map[t];
    s << (t ? ", " : "");
    // Built with streams: GCC 12's -Wrestrict misfires on chains of std::string concatenation
    // at -O3.
    std::ostringstream e;
    if (m.src < 0) {
      e << m.add;
    } else if (m.mul < 0) {
      e << m.add << "-g" << m.src;
    } else {
      e << "g" << m.src;
      if (m.add) e << "+" << m.add;
    }
    std::string text = e.str();
    if (m.gather) text = fmt_wrap("table[", text, "]");
    if (m.scale != 1) text = fmt_wrap("(", text, ")*", m.scale);
    if (m.off != 0) text = fmt_wrap("", text, "+", m.off);
    s << text;
  }
  s << ") layout (";
  for (size_t t = 0; t < op.layout.size(); ++t) {
    s << (t ? ", " : "");
    if (op.layout[t] == kKAxis) {
      s << "K";
    } else {
      s << "L" << op.layout[t] << ":" << mode_name(op.mode[t]);
      if (op.offset[t] != 0) s << " offset " << op.offset[t];
      if (op.extra[t] != 0) s << " extra " << op.extra[t];
      if (op.halo[t] != 0) s << " halo " << op.halo[t] << " shift " << op.shift[t];
    }
  }
  s << ")" << (op.whole ? " whole-array spec" : "") << (op.buffers == 1 ? " Buffered(1)" : "");
  return s.str();
}

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "seed " << c.seed << " case " << c.index << "\n  logical axes:";
  for (size_t a = 0; a < c.ax.size(); ++a) {
    const Logical& L = c.ax[a];
    s << " L" << a << "=" << L.extent << (L.squeezed ? " squeezed" : "")
      << (L.squeezed ? "" : " block " + std::to_string(L.block)) << " (" << L.blocks
      << " blocks, grid axis " << L.grid_pos << (L.reversed ? ", reversed" : "") << ");";
  }
  if (c.reduce) {
    s << "\n  reduction K=" << c.k_extent
      << (c.k_squeezed ? " squeezed" : " block " + std::to_string(c.k_block)) << " (" << c.k_blocks
      << " steps, last grid axis)";
  }
  s << "\n  grid " << join(c.grid) << " semantics (";
  for (size_t a = 0; a < c.semantics.size(); ++a) {
    s << (a ? ", " : "") << pltpu::to_string(c.semantics[a]);
  }
  s << (c.semantics.empty() ? "not given" : "") << ")";
  if (c.prefetch) {
    s << " scalar prefetch: table " << join(std::vector<int64_t>(c.table.begin(), c.table.end()))
      << " of L" << c.gather_axis << " blocks";
  }
  s << " cores " << c.cores << " signature " << c.signature
    << (c.const_inputs ? " (const inputs)" : " (mutable inputs)");
  for (size_t j = 0; j < c.in.size(); ++j) {
    s << "\n  input " << j << ": " << describe_operand(c.in[j]);
  }
  for (size_t o = 0; o < c.out.size(); ++o) {
    s << "\n  output " << o << ": " << describe_operand(c.out[o]) << "\n    = ";
    for (size_t i = 0; i < c.out[o].terms.size(); ++i) {
      const Term& t = c.out[o].terms[i];
      s << (i ? " + " : "") << t.coef << "*in" << t.input;
    }
    if (c.out[o].alias >= 0) s << "; aliases input " << c.out[o].alias;
  }
  s << "\n  checked: dma_execution_mode " << static_cast<int>(c.checked.dma_execution_mode)
    << ", random_seed " << c.checked.random_seed << ", parallel_order_seed "
    << (c.checked.parallel_order_seed ? std::to_string(*c.checked.parallel_order_seed) : "none")
    << ", poison "
    << (c.checked.uninitialized_memory == pltpu::UninitializedMemory::zero ? "zero" : "nan");
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// Inputs and the reference.

struct Values {
  Dt dtype;
  std::vector<int64_t> shape;
  std::vector<double> v;  // exact: small multiples of 0.5 (integers for int32)
};

Values make_input(const Operand& op, Rng& r) {
  Values x{op.dtype, op.shape, {}};
  int64_t n = 1;
  for (int64_t e : op.shape) n *= e;
  x.v.resize(static_cast<size_t>(n));
  for (double& e : x.v) {
    e = op.dtype == Dt::kI32 ? static_cast<double>(r.uni(-4, 4))
                             : static_cast<double>(r.uni(-8, 8)) / 2;
  }
  return x;
}

int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t t = 0; t < shape.size(); ++t) f = f * shape[t] + idx[t];
  return f;
}

// Where logical point x (and reduction element k) lies in an operand's array.
std::vector<int64_t> locate(const Case& c, const Operand& op, const std::vector<int64_t>& x,
                            int64_t k) {
  std::vector<int64_t> idx(op.layout.size());
  for (size_t t = 0; t < op.layout.size(); ++t) {
    if (op.layout[t] == kKAxis) {
      idx[t] = k;
      continue;
    }
    const Logical& L = c.ax[static_cast<size_t>(op.layout[t])];
    const int64_t xa = x[static_cast<size_t>(op.layout[t])];
    switch (op.mode[t]) {
      case Mode::kSame:
        idx[t] = xa + op.offset[t] * L.block + op.shift[t];
        break;
      case Mode::kReverse:
        idx[t] = (L.blocks - 1 - xa / L.block) * L.block + xa % L.block;
        break;
      case Mode::kTile:
        idx[t] = xa % L.block;
        break;
      case Mode::kBroadcast:
        idx[t] = 0;
        break;
      case Mode::kGather:
        idx[t] = c.table[static_cast<size_t>(xa / L.block)] * L.block + xa % L.block;
        break;
    }
  }
  return idx;
}

bool has_k(const Operand& op) {
  return std::find(op.layout.begin(), op.layout.end(), kKAxis) != op.layout.end();
}

// Rounds a value as the output dtype holds it.
double round_to(Dt d, double v) {
  switch (d) {
    case Dt::kF32:
      return static_cast<double>(static_cast<float>(v));
    case Dt::kBf16:
      return static_cast<double>(static_cast<float>(bfloat16(static_cast<float>(v))));
    case Dt::kI32:
      return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
  }
  return v;
}

// What each output must hold: the body's passes over its terms, in order, rounded as the kernel
// rounds (an int32 output computes in int32, truncating float inputs; the others in float32).
std::vector<std::vector<double>> reference(const Case& c, const std::vector<Values>& ins) {
  std::vector<std::vector<double>> result;
  const int rank = static_cast<int>(c.ax.size());
  for (const Output& o : c.out) {
    int64_t n = 1;
    for (int64_t e : o.shape) n *= e;
    // An aliased output starts as its input; the grid overwrites what it covers.
    std::vector<double> res = o.alias >= 0 ? ins[static_cast<size_t>(o.alias)].v
                                           : std::vector<double>(static_cast<size_t>(n), 0);
    const bool int_compute = o.dtype == Dt::kI32;
    auto conv = [&](double v) { return int_compute ? std::trunc(v) : v; };
    std::vector<int64_t> x(static_cast<size_t>(rank), 0);
    for (;;) {
      auto value = [&](const Term& t, int64_t k_step) {
        const Operand& in = c.in[static_cast<size_t>(t.input)];
        const Values& iv = ins[static_cast<size_t>(t.input)];
        double sum = 0;
        if (c.reduce && has_k(in)) {
          const int64_t lo = k_step * c.k_block;
          const int64_t hi = std::min(c.k_extent, lo + c.k_block);
          for (int64_t k = lo; k < hi; ++k) {
            sum += conv(iv.v[static_cast<size_t>(flat(iv.shape, locate(c, in, x, k)))]);
          }
        } else {
          sum = conv(iv.v[static_cast<size_t>(flat(iv.shape, locate(c, in, x, 0)))]);
        }
        return round_to(o.dtype, sum * t.coef);
      };
      double acc = 0;
      if (c.reduce) {
        for (int64_t ks = 0; ks < c.k_blocks; ++ks) {
          for (const Term& t : o.terms) acc = round_to(o.dtype, acc + value(t, ks));
        }
      } else {
        for (size_t i = 0; i < o.terms.size(); ++i) {
          const double v = value(o.terms[i], 0);
          acc = i == 0 ? v : round_to(o.dtype, acc + v);
        }
      }
      res[static_cast<size_t>(flat(o.shape, locate(c, o, x, 0)))] = acc;
      int a = rank - 1;
      for (; a >= 0; --a) {
        if (++x[static_cast<size_t>(a)] < c.ax[static_cast<size_t>(a)].extent) break;
        x[static_cast<size_t>(a)] = 0;
      }
      if (a < 0) break;
    }
    result.push_back(std::move(res));
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// The kernel.

// The window of an operand with its axes in logical order (the reduction axis last): a view,
// as jnp.transpose of a ref is.
template <class T, class W>
pltpu::VmemRef<const T> logical_view(const W& w, const Operand& op) {
  std::vector<std::pair<int, size_t>> axes;  // (logical axis, array axis)
  for (size_t t = 0; t < op.layout.size(); ++t) {
    if (!op.whole && op.dims[t].is_squeezed) continue;
    axes.emplace_back(op.layout[t], t);
  }
  std::vector<int> window_axis(op.layout.size(), 0);
  for (size_t i = 0; i < axes.size(); ++i) window_axis[axes[i].second] = static_cast<int>(i);
  std::sort(axes.begin(), axes.end());
  detail::SmallVec shape;
  detail::SmallVec strides;
  int64_t offset = 0;  // a wide window is read from its shift on, one block wide
  for (const auto& [l, t] : axes) {
    const int a = window_axis[t];
    shape.push_back(w.shape()[a] - op.halo[t]);
    strides.push_back(w.strides()[a]);
    offset += op.shift[t] * w.strides()[a];
  }
  return pltpu::VmemRef<const T>(w.data() + offset, Shape(std::move(shape)), std::move(strides));
}
template <class T>
pltpu::VmemRef<T> logical_out_view(const pltpu::VmemRef<T>& w, const Operand& op) {
  const pltpu::VmemRef<const T> v = logical_view<T>(w, op);
  return pltpu::VmemRef<T>(const_cast<T*>(v.data()), v.shape(), v.strides());
}

template <class O>
using ComputeT = std::conditional_t<std::is_same_v<O, int32_t>, int32_t, float>;

template <class O, class E>
void accumulate(pltpu::VmemRef<O>& ov, const E& e, bool first) {
  if (first) {
    ov = jnp::astype<O>(e);
  } else {
    ov += jnp::astype<O>(e);
  }
}

// One term of output `ov`: input view `v` times the coefficient, summed over its reduction
// axis when it has one (masked where the last block is partial).
template <class O, class T>
void add_term(const Case& c, const Operand& in, pltpu::VmemRef<O>& ov,
              const pltpu::VmemRef<const T>& v, int coef, bool first) {
  using C = ComputeT<O>;
  if (c.reduce && has_k(in) && !c.k_squeezed) {
    const int axis = v.rank() - 1;
    const int64_t k = pl::program_id(static_cast<int>(c.grid.size()) - 1);
    const int64_t valid = c.k_extent - k * c.k_block;
    if (valid < c.k_block) {
      accumulate(ov,
                 jnp::sum(jnp::where(lax::broadcasted_iota<int32_t>(v.shape(), axis) <
                                         static_cast<int32_t>(valid),
                                     v.template astype<C>(), C(0)),
                          axis) *
                     C(coef),
                 first);
    } else {
      accumulate(ov, jnp::sum(v.template astype<C>(), axis) * C(coef), first);
    }
  } else {
    accumulate(ov, v.template astype<C>() * C(coef), first);
  }
}

template <bool Const, class InL, class OutL>
struct Body;
template <bool Const, class InL, class OutL>
struct PrefetchBody;
template <bool Const, class... Ins, class... Outs>
struct Body<Const, List<Ins...>, List<Outs...>> {
  const Case* c;
  template <class T>
  using InRef = pltpu::VmemRef<std::conditional_t<Const, const T, T>>;

  void operator()(InRef<Ins>... ins, pltpu::VmemRef<Outs>... outs) const {
    const auto in_refs = std::forward_as_tuple(ins...);
    run(in_refs, std::index_sequence_for<Ins...>{}, std::index_sequence_for<Outs...>{}, outs...);
  }

 private:
  template <class Tuple, size_t... I, size_t... O>
  void run(const Tuple& in_refs, std::index_sequence<I...>, std::index_sequence<O...>,
           pltpu::VmemRef<Outs>... outs) const {
    (one_output<O>(in_refs, outs, std::index_sequence<I...>{}), ...);
  }

  template <size_t O, class Tuple, class OT, size_t... I>
  void one_output(const Tuple& in_refs, pltpu::VmemRef<OT>& window,
                  std::index_sequence<I...>) const {
    const Output& out = c->out[O];
    pltpu::VmemRef<OT> ov = logical_out_view(window, out);
    bool first = true;
    if (c->reduce) {
      if (pl::program_id(static_cast<int>(c->grid.size()) - 1) == 0) ov = jnp::zeros_like(ov);
      first = false;
    }
    for (const Term& t : out.terms) {
      (
          [&] {
            if (t.input != static_cast<int>(I)) return;
            using T = std::remove_const_t<
                typename std::tuple_element_t<I, std::tuple<InRef<Ins>...>>::element_type>;
            const Operand& in = c->in[I];
            add_term<OT, T>(*c, in, ov, logical_view<T>(std::get<I>(in_refs), in), t.coef, first);
          }(),
          ...);
      first = false;
    }
  }
};

// The same body after the scalar-prefetch table's SMEM ref.
template <bool Const, class... Ins, class... Outs>
struct PrefetchBody<Const, List<Ins...>, List<Outs...>> {
  using B = Body<Const, List<Ins...>, List<Outs...>>;
  B body;
  void operator()(pltpu::SmemRef<int32_t>, typename B::template InRef<Ins>... ins,
                  pltpu::VmemRef<Outs>... outs) const {
    body(ins..., outs...);
  }
};

// An index map of G grid indices.
template <class F>
pl::BlockSpec spec_of_rank(const std::vector<pl::BlockDim>& d, F f, pl::Buffered mode) {
  switch (d.size()) {
    case 1:
      return pl::BlockSpec({d[0]}, std::move(f), mode);
    case 2:
      return pl::BlockSpec({d[0], d[1]}, std::move(f), mode);
    case 3:
      return pl::BlockSpec({d[0], d[1], d[2]}, std::move(f), mode);
    case 4:
      return pl::BlockSpec({d[0], d[1], d[2], d[3]}, std::move(f), mode);
    default:
      throw std::logic_error("operand rank out of range");
  }
}

pl::Indices eval_map(const std::vector<AxisMap>& maps, const int64_t* g,
                     const pltpu::SmemRef<int32_t>* table) {
  pl::Indices ix;
  for (const AxisMap& m : maps) ix.v.push_back(m.eval(g, table));
  return ix;
}

template <size_t>
using GridIndex = int;

// An index map of sizeof...(K) grid indices, then (with scalar prefetch) the table's SMEM ref.
template <bool Prefetch, size_t... K>
auto index_map(std::shared_ptr<const std::vector<AxisMap>> maps, std::index_sequence<K...>) {
  if constexpr (Prefetch) {
    return [maps](GridIndex<K>... g, pltpu::SmemRef<int32_t> table) {
      const int64_t gv[] = {g..., 0};
      return eval_map(*maps, gv, &table);
    };
  } else {
    return [maps](GridIndex<K>... g) {
      const int64_t gv[] = {g..., 0};
      return eval_map(*maps, gv, nullptr);
    };
  }
}

template <bool Prefetch>
pl::BlockSpec make_spec(const Operand& op, int G) {
  if (op.whole) return pl::BlockSpec();
  auto maps = std::make_shared<const std::vector<AxisMap>>(op.map);
  const pl::Buffered mode{op.buffers};
  switch (G) {
    case 0:
      return spec_of_rank(op.dims, index_map<Prefetch>(maps, std::make_index_sequence<0>{}), mode);
    case 1:
      return spec_of_rank(op.dims, index_map<Prefetch>(maps, std::make_index_sequence<1>{}), mode);
    case 2:
      return spec_of_rank(op.dims, index_map<Prefetch>(maps, std::make_index_sequence<2>{}), mode);
    case 3:
      return spec_of_rank(op.dims, index_map<Prefetch>(maps, std::make_index_sequence<3>{}), mode);
    case 4:
      return spec_of_rank(op.dims, index_map<Prefetch>(maps, std::make_index_sequence<4>{}), mode);
    default:
      throw std::logic_error("grid rank out of range");
  }
}

template <class T>
Array<T> to_array(const Values& x) {
  Array<T> a(Shape(detail::SmallVec(x.shape.begin(), x.shape.end())), T(0));
  for (size_t i = 0; i < x.v.size(); ++i) {
    if constexpr (std::is_same_v<T, int32_t>) {
      a.data()[i] = static_cast<int32_t>(x.v[i]);
    } else {
      a.data()[i] = static_cast<T>(static_cast<float>(x.v[i]));
    }
  }
  return a;
}
template <class T>
std::vector<double> from_array(const Array<T>& a) {
  std::vector<double> v(static_cast<size_t>(a.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, int32_t>) {
      v[i] = a.data()[i];
    } else {
      v[i] = static_cast<double>(static_cast<float>(a.data()[i]));
    }
  }
  return v;
}

Shape shape_of(const std::vector<int64_t>& s) {
  return Shape(detail::SmallVec(s.begin(), s.end()));
}

// Runs the configuration with signature (Ins, Outs); the outputs as doubles.
template <bool Const, class... Ins, class... Outs, size_t... I, size_t... O>
std::vector<std::vector<double>> launch(const Case& c, const std::vector<Values>& ins, List<Ins...>,
                                        List<Outs...>, std::index_sequence<I...>,
                                        std::index_sequence<O...>) {
  const int G = static_cast<int>(c.grid.size());
  pl::InputOutputAliases aliases;  // input indices count the scalar-prefetch operand first
  for (size_t o = 0; o < c.out.size(); ++o) {
    if (c.out[o].alias >= 0) {
      aliases.pairs.emplace_back(c.out[o].alias + (c.prefetch ? 1 : 0), static_cast<int>(o));
    }
  }
  using B = Body<Const, List<Ins...>, List<Outs...>>;
  const auto out_shape = pl::out_shape(ShapeDtypeStruct<Outs>{shape_of(c.out[O].shape)}...);
  const pltpu::CompilerParams params{.dimension_semantics = c.semantics};
  const pltpu::TensorCoreMesh mesh("core", c.cores);
  auto result = [&] {
    if (c.prefetch) {
      auto f = pl::pallas_call(
          PrefetchBody<Const, List<Ins...>, List<Outs...>>{B{&c}}, out_shape,
          pltpu::PrefetchScalarGridSpec<1>(pl::grid(shape_of(c.grid)),
                                           pl::in_specs(make_spec<true>(c.in[I], G)...),
                                           pl::out_specs(make_spec<true>(c.out[O], G)...)),
          params, mesh, aliases, pl::name("property"));
      const Array<int32_t> table(Shape{static_cast<int64_t>(c.table.size())}, c.table);
      const std::tuple<Array<int32_t>, Array<Ins>...> arrays{table, to_array<Ins>(ins[I])...};
      return std::apply(f, arrays);
    }
    auto f = pl::pallas_call(B{&c}, out_shape, pl::grid(shape_of(c.grid)),
                             pl::in_specs(make_spec<false>(c.in[I], G)...),
                             pl::out_specs(make_spec<false>(c.out[O], G)...), params, mesh, aliases,
                             pl::name("property"));
    const std::tuple<Array<Ins>...> arrays{to_array<Ins>(ins[I])...};
    return std::apply(f, arrays);
  }();
  if constexpr (sizeof...(Outs) == 1) {
    return {from_array(result)};
  } else {
    return {from_array(std::get<O>(result))...};
  }
}

template <bool Const, size_t S>
std::vector<std::vector<double>> launch_signature(const Case& c, const std::vector<Values>& ins) {
  using P = std::tuple_element_t<S, Signatures>;
  return []<class... Ins, class... Outs>(const Case& cc, const std::vector<Values>& v,
                                         List<Ins...> il, List<Outs...> ol) {
    return launch<Const>(cc, v, il, ol, std::index_sequence_for<Ins...>{},
                         std::index_sequence_for<Outs...>{});
  }(c, ins, typename P::first_type{}, typename P::second_type{});
}

template <size_t... S>
std::vector<std::vector<double>> run_case(const Case& c, const std::vector<Values>& ins,
                                          std::index_sequence<S...>) {
  std::vector<std::vector<double>> r;
  ((c.signature == static_cast<int>(S) ? (r = c.const_inputs ? launch_signature<true, S>(c, ins)
                                                             : launch_signature<false, S>(c, ins),
                                          0)
                                       : 0),
   ...);
  return r;
}

// ---------------------------------------------------------------------------------------------
// The test.

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoll(v, nullptr, 0);
}

struct Coverage {
  int cases = 0, partial = 0, squeezed = 0, element = 0, aliases = 0, reductions = 0,
      ragged_reductions = 0, three_cores = 0, parallel = 0, transposed = 0, reversed = 0, tiled = 0,
      broadcast = 0, offset = 0, whole = 0, buffered1 = 0, two_outputs = 0, three_inputs = 0,
      bf16 = 0, off_grid = 0, mutable_inputs = 0, halo = 0, alias_regions = 0, gathers = 0;
  int grid_rank[5] = {};
  int rank[5] = {};
  void add(const Case& c) {
    ++cases;
    bool p = false, sq = false, el = false, tr = false, rv = false, ti = false, bc = false,
         of = false, wh = false, b1 = false, bf = false, og = false, ha = false, ar = false;
    for (const Logical& L : c.ax) {
      p = p || (!L.squeezed && L.extent % L.block != 0);
      sq = sq || L.squeezed;
      rv = rv || L.reversed;
      og = og || L.grid_pos < 0;
    }
    auto scan = [&](const Operand& op) {
      el = el || op.element;
      wh = wh || op.whole;
      b1 = b1 || op.buffers == 1;
      bf = bf || op.dtype == Dt::kBf16;
      for (size_t t = 0; t < op.layout.size(); ++t) {
        tr = tr || (t > 0 && op.layout[t] < op.layout[t - 1]);
        if (op.layout[t] == kKAxis) continue;
        rv = rv || op.mode[t] == Mode::kReverse;
        ti = ti || op.mode[t] == Mode::kTile;
        bc = bc || op.mode[t] == Mode::kBroadcast;
        of = of || op.offset[t] != 0;
        ha = ha || op.halo[t] != 0;
      }
    };
    for (const Operand& op : c.in) scan(op);
    bool al = false;
    for (const Output& op : c.out) {
      scan(op);
      al = al || op.alias >= 0;
      for (size_t t = 0; t < op.layout.size(); ++t) {
        ar = ar || (op.alias >= 0 && (op.offset[t] != 0 || op.extra[t] != 0));
      }
    }
    partial += p;
    squeezed += sq;
    element += el;
    aliases += al;
    reductions += c.reduce;
    ragged_reductions += c.reduce && !c.k_squeezed && c.k_extent % c.k_block != 0;
    three_cores += c.cores == 3;
    parallel += !c.semantics.empty() && c.semantics[0] != pltpu::ARBITRARY;
    transposed += tr;
    reversed += rv;
    tiled += ti;
    broadcast += bc;
    offset += of;
    whole += wh;
    buffered1 += b1;
    two_outputs += c.out.size() == 2;
    three_inputs += c.in.size() == 3;
    bf16 += bf;
    halo += ha;
    bool ga = false;
    for (const Operand& op : c.in) {
      for (Mode m : op.mode) ga = ga || m == Mode::kGather;
    }
    gathers += ga;
    alias_regions += ar;
    off_grid += og;
    mutable_inputs += !c.const_inputs;
    ++grid_rank[c.grid.size()];
    ++rank[c.ax.size()];
  }
  std::string str() const {
    std::ostringstream s;
    s << cases << " configurations: partial blocks " << partial << ", squeezed " << squeezed
      << ", pl::Element " << element << ", aliases " << aliases << " (covering part of the output "
      << alias_regions << "), overlapping Element windows " << halo << ", scalar-prefetch gathers "
      << gathers << ", reductions " << reductions << " (ragged " << ragged_reductions
      << "), 3 cores " << three_cores << ", PARALLEL prefix " << parallel << ", transposed layouts "
      << transposed << ", reversed " << reversed << ", tiled " << tiled << ", broadcast "
      << broadcast << ", block offsets " << offset << ", whole-array specs " << whole
      << ", Buffered(1) " << buffered1 << ", axes off the grid " << off_grid << ", 2 outputs "
      << two_outputs << ", 3 inputs " << three_inputs << ", bf16 " << bf16 << ", mutable inputs "
      << mutable_inputs << "; grid rank 0-4:";
    for (int g : grid_rank) s << " " << g;
    s << "; rank 1-4:";
    for (int i = 1; i <= 4; ++i) s << " " << rank[i];
    return s.str();
  }
};

// The first mismatch between `got` and `want`, or "".
std::string compare(const Case& c, const std::vector<std::vector<double>>& got,
                    const std::vector<std::vector<double>>& want) {
  if (got.size() != want.size()) return "wrong number of outputs";
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].size() != want[o].size()) return "output " + std::to_string(o) + ": wrong size";
    for (size_t i = 0; i < want[o].size(); ++i) {
      if (got[o][i] == want[o][i]) continue;
      // Unflatten i for the message.
      std::vector<int64_t> idx(c.out[o].shape.size());
      int64_t rest = static_cast<int64_t>(i);
      for (size_t t = idx.size(); t-- > 0;) {
        idx[t] = rest % c.out[o].shape[t];
        rest /= c.out[o].shape[t];
      }
      std::ostringstream s;
      s << "output " << o << " element " << join(idx) << " is " << got[o][i] << ", want "
        << want[o][i];
      return s.str();
    }
  }
  return "";
}

TEST(Property, RandomPallasCallsMatchTheReferenceNativeAndChecked) {
  const uint64_t seed = static_cast<uint64_t>(env_int("TESSERA_PROPERTY_SEED", kDefaultSeed));
  const int64_t only = env_int("TESSERA_PROPERTY_CASE", -1);
  const int64_t cases = env_int("TESSERA_PROPERTY_CASES", kDefaultCases);
  const int64_t first = only >= 0 ? only : 0;
  const int64_t last = only >= 0 ? only + 1 : cases;
  Coverage cov;
  int failures = 0;
  double native_s = 0;
  double checked_s = 0;
  for (int64_t i = first; i < last; ++i) {
    const Case c = generate(seed, static_cast<int>(i));
    cov.add(c);
    Rng r{std::mt19937_64(mix(seed + 0x5eed + static_cast<uint64_t>(i)))};
    std::vector<Values> ins;
    for (const Operand& op : c.in) ins.push_back(make_input(op, r));
    const auto want = reference(c, ins);
    for (const bool checked : {false, true}) {
      std::string error;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        std::optional<pltpu::ForceTpuInterpretMode> force;
        if (checked) force.emplace(c.checked);
        const auto got = run_case(c, ins, std::make_index_sequence<kSignatures>{});
        error = compare(c, got, want);
      } catch (const std::exception& e) {
        error = std::string("threw: ") + e.what();
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (checked ? checked_s : native_s) += s;
      if (error.empty()) continue;
      if (++failures <= 8) {
        ADD_FAILURE() << (checked ? "checked" : "native") << " engine: " << error << "\n"
                      << describe(c) << "\n  replay: TESSERA_PROPERTY_SEED=" << seed
                      << " TESSERA_PROPERTY_CASE=" << i
                      << " tessera_unit_tests --gtest_filter=Property.*";
      }
    }
  }
  EXPECT_EQ(failures, 0) << "seed " << seed;
  std::cout << "[ property ] seed " << seed << ": " << cov.str() << "\n[ property ] native "
            << native_s << " s, checked " << checked_s << " s\n";
}

}  // namespace
