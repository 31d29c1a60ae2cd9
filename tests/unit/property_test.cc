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

#include "support/property_cases.h"
#include "support/property_reference.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::property_testing;

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
void accumulate(pltpu::VmemRef<O>& ov, E&& e, bool first) {
  if (first) {
    ov = jnp::astype<O>(std::forward<E>(e));
  } else {
    ov += jnp::astype<O>(std::forward<E>(e));
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
