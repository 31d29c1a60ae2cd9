// For tests/unit/property_test.cc: a readable description of a configuration (printed on
// failure), its inputs, and the plain C++ reference of what Pallas semantics say its outputs
// must be.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "support/property_cases.h"

namespace tessera::property_testing {

// ---------------------------------------------------------------------------------------------
// Description, for failures.

inline std::string join(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// before + text + after, through a stream (see describe_operand).
inline std::string fmt_wrap(const char* before, const std::string& text, const char* after) {
  std::ostringstream o;
  o << before << text << after;
  return o.str();
}
template <class N>
inline std::string fmt_wrap(const char* before, const std::string& text, const char* after,
                            N number) {
  std::ostringstream o;
  o << before << text << after << number;
  return o.str();
}

inline std::string describe_operand(const Operand& op) {
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

inline std::string describe(const Case& c) {
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

inline Values make_input(const Operand& op, Rng& r) {
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

inline int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t t = 0; t < shape.size(); ++t) f = f * shape[t] + idx[t];
  return f;
}

// Where logical point x (and reduction element k) lies in an operand's array.
inline std::vector<int64_t> locate(const Case& c, const Operand& op, const std::vector<int64_t>& x,
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

inline bool has_k(const Operand& op) {
  return std::find(op.layout.begin(), op.layout.end(), kKAxis) != op.layout.end();
}

// Rounds a value as the output dtype holds it.
inline double round_to(Dt d, double v) {
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
inline std::vector<std::vector<double>> reference(const Case& c, const std::vector<Values>& ins) {
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

}  // namespace tessera::property_testing
