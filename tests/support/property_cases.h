// The configurations of tests/unit/property_test.cc: their model and the seeded generator
// (property_reference.h: their description, inputs and the plain C++ reference). Included by
// that test only.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::property_testing {

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
inline const char* dt_name(Dt d) {
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
inline const char* mode_name(Mode m) {
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
inline std::vector<Dt> dts(List<T...>) {
  return {dt_of<T>()...};
}
template <int S>
inline std::pair<std::vector<Dt>, std::vector<Dt>> signature_dts() {
  using P = std::tuple_element_t<S, Signatures>;
  return {dts(typename P::first_type{}), dts(typename P::second_type{})};
}
template <size_t... S>
inline std::pair<std::vector<Dt>, std::vector<Dt>> signature_dts(int s, std::index_sequence<S...>) {
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

inline uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An extent for an axis of a rank-r space, at most `room` so the total stays bounded.
inline int64_t draw_extent(Rng& r, int rank, int64_t room) {
  static constexpr int64_t kMax[] = {0, 300, 48, 14, 7};
  int64_t hi = std::min(kMax[rank], room);
  if (r.coin(0.1)) return 1;
  return r.uni(1, std::max<int64_t>(1, hi));
}

// A block for an extent: dividing it, not dividing it, or larger than the array.
inline int64_t draw_block(Rng& r, int64_t extent) {
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
inline void derive(const Case& c, Operand& op, Rng& r) {
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

inline Case generate(uint64_t seed, int index) {
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
  // Definedness is tracked too: a correct configuration leaves no garbage in its outputs.
  c.checked.allow_uninitialized_reads = false;
  return c;
}

}  // namespace tessera::property_testing
