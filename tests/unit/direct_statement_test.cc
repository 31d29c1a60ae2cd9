// Float32 statements that run on the native engine's fused loops with no plan
// (tessera/detail/statement_cache.h): one binary op over refs of the destination's shape and
// scalars (`o = x + y`, `o = x * 2.0f`; evaluate_binary_f32), and an iota alone or with a scalar
// (`o = jnp::arange<float>(n) + c`; evaluate_iota_f32). Each must give the bits the planned
// statement gives, on every SIMD target; statements they cannot take (broadcasts, strided rows,
// overlaps) must be planned as before and still be right; the checked engine must still see
// every evaluation.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/checked_support.h"
#include "support/vector_targets.h"
#include "support/view_elements.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using detail::statement_cache_stats;

pltpu::VmemRef<float> vref(float* p, Shape s, detail::SmallVec strides) {
  return pltpu::VmemRef<float>(p, std::move(s), std::move(strides));
}
pltpu::VmemRef<const float> cref(const float* p, Shape s, detail::SmallVec strides) {
  return pltpu::VmemRef<const float>(p, std::move(s), std::move(strides));
}

// The statement as it is evaluated when it is planned (what assign() falls back to).
template <class E>
void planned(const pltpu::VmemRef<float>& o, const E& e) {
  detail::ExprProgram p;
  detail::AsExpr<std::remove_cvref_t<E>>::make(e).emit(p);
  detail::evaluate(p, o.raw());
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Values with the cases an op treats specially: NaN, infinities, signed zeros, subnormals.
std::vector<float> values(size_t n, uint32_t seed) {
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           0.0f,
                           -0.0f,
                           std::numeric_limits<float>::denorm_min(),
                           -1.0e-40f,
                           1.0f,
                           -3.5f};
  std::vector<float> v(n);
  uint32_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] =
        (s >> 28) < 2 ? special[(s >> 8) % 9] : static_cast<float>(static_cast<int32_t>(s)) * 1e-7f;
  }
  return v;
}

struct View {
  Shape shape;
  detail::SmallVec strides;  // the operands'; the destination is row-major
};

// Whether `got` is what `want` says, NaN for NaN (any payload) and zeros of either sign alike.
bool same_value(float got, float want) { return std::isnan(want) ? std::isnan(got) : got == want; }

// Runs `form(x, y, o)` (one statement) directly and `form` planned, on every view, and compares
// every element's bits, and its value with `want(x, y)` of the elements; the direct run must have
// taken no plan.
template <class Form, class Want>
void expect_same_bits(const char* what, Form form, Want want) {
  const std::vector<View> views = {
      {{8, 128}, {128, 1}},       {{8, 128}, {160, 1}}, {{3, 37}, {37, 1}}, {{1000}, {1}},
      {{2, 3, 40}, {200, 40, 1}}, {{4, 128}, {0, 1}},   {{1, 1}, {1, 1}}};
  const std::vector<float> x = values(2048, 7), y = values(2048, 11);
  for (const View& v : views) {
    const detail::SmallVec rm = row_major_strides(v.shape);
    std::vector<float> direct(static_cast<size_t>(v.shape.size()), 1.0f);
    std::vector<float> plan(direct.size(), 2.0f);
    const auto before = statement_cache_stats();
    form(cref(x.data(), v.shape, v.strides), cref(y.data() + 3, v.shape, v.strides),
         vref(direct.data(), v.shape, rm), false);
    const auto after = statement_cache_stats();
    EXPECT_EQ(after.direct - before.direct, 1) << what << " " << v.shape.to_string();
    EXPECT_EQ(after.planned, before.planned) << what << " " << v.shape.to_string();
    form(cref(x.data(), v.shape, v.strides), cref(y.data() + 3, v.shape, v.strides),
         vref(plan.data(), v.shape, rm), true);
    const std::vector<float> ex = tessera::testing::view_elements(x.data(), v.shape, v.strides);
    const std::vector<float> ey = tessera::testing::view_elements(y.data() + 3, v.shape, v.strides);
    for (size_t i = 0; i < direct.size(); ++i) {
      ASSERT_EQ(bits(direct[i]), bits(plan[i])) << what << " " << v.shape.to_string() << " element "
                                                << i << ": " << direct[i] << " vs " << plan[i];
      ASSERT_TRUE(same_value(direct[i], want(ex[i], ey[i])))
          << what << " " << v.shape.to_string() << " element " << i << ": " << direct[i] << " for "
          << ex[i] << ", " << ey[i];
    }
  }
}

// One op in its three operand forms: ref op ref, ref op scalar, scalar op ref; the value each
// element must have is the C++ operator's on the two floats (IEEE, as the op is defined).
#define TESSERA_DIRECT_FORMS(name, op)              \
  expect_same_bits(                                 \
      name " ref,ref",                              \
      [](auto a, auto b, auto o, bool plan) {       \
        if (plan)                                   \
          planned(o, a op b);                       \
        else                                        \
          o = a op b;                               \
      },                                            \
      [](float a, float b) { return a op b; });     \
  expect_same_bits(                                 \
      name " ref,scalar",                           \
      [](auto a, auto, auto o, bool plan) {         \
        if (plan)                                   \
          planned(o, a op - 1.75f);                 \
        else                                        \
          o = a op - 1.75f;                         \
      },                                            \
      [](float a, float) { return a op - 1.75f; }); \
  expect_same_bits(                                 \
      name " scalar,ref",                           \
      [](auto, auto b, auto o, bool plan) {         \
        if (plan)                                   \
          planned(o, 0.0f op b);                    \
        else                                        \
          o = 0.0f op b;                            \
      },                                            \
      [](float, float b) { return 0.0f op b; })

TEST(DirectBinary, EveryOpAndFormGivesThePlannedBitsOnEveryTarget) {
  const int tried = tessera::testing::on_every_vector_target([](const char* target) {
    SCOPED_TRACE(target);
    TESSERA_DIRECT_FORMS("add", +);
    TESSERA_DIRECT_FORMS("sub", -);
    TESSERA_DIRECT_FORMS("mul", *);
    TESSERA_DIRECT_FORMS("div", /);
  });
  EXPECT_GE(tried, 1);
}

// Pallas' spelling, `o_ref[...] = x_ref[...] + y_ref[...]`: the items are the refs themselves,
// so the statement takes the same direct path.
TEST(DirectBinary, RefItemsAsPallasWritesThemTakeTheDirectPath) {
  tessera::testing::on_every_vector_target([](const char* target) {
    SCOPED_TRACE(target);
    expect_same_bits(
        "add items",
        [](auto a, auto b, auto o, bool plan) {
          if (plan)
            planned(o, a + b);
          else
            o[pl::ellipsis] = a[pl::ellipsis] + b[pl::ellipsis];
        },
        [](float a, float b) { return a + b; });
    expect_same_bits(
        "mul item scalar",
        [](auto a, auto, auto o, bool plan) {
          if (plan)
            planned(o, a * 3.0f);
          else
            o[pl::ellipsis] = a[pl::ellipsis] * 3.0f;
        },
        [](float a, float) { return a * 3.0f; });
    expect_same_bits(
        "sub scalar item",
        [](auto, auto b, auto o, bool plan) {
          if (plan)
            planned(o, 1.0f - b);
          else
            o[pl::ellipsis] = 1.0f - b[pl::ellipsis];
        },
        [](float, float b) { return 1.0f - b; });
  });
}

// jnp.maximum / jnp.minimum: NaN if either operand is NaN.
float nan_max(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, b);
}
float nan_min(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::min(a, b);
}

TEST(DirectBinary, MaximumAndMinimumPropagateNaNAsPlanned) {
  tessera::testing::on_every_vector_target([](const char* target) {
    SCOPED_TRACE(target);
    expect_same_bits(
        "maximum",
        [](auto a, auto b, auto o, bool plan) {
          if (plan)
            planned(o, jnp::maximum(a, b));
          else
            o = jnp::maximum(a, b);
        },
        nan_max);
    expect_same_bits(
        "minimum",
        [](auto a, auto b, auto o, bool plan) {
          if (plan)
            planned(o, jnp::minimum(a, b));
          else
            o = jnp::minimum(a, b);
        },
        nan_min);
    expect_same_bits(
        "minimum scalar",
        [](auto, auto b, auto o, bool plan) {
          if (plan)
            planned(o, jnp::minimum(2.5f, b));
          else
            o = jnp::minimum(2.5f, b);
        },
        [](float, float b) { return nan_min(2.5f, b); });
  });
}

// Statements outside the direct form are planned (the counter does not move) and still right.
TEST(DirectBinary, BroadcastsStridedRowsAndOverlapsArePlanned) {
  std::vector<float> buf(4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i % 251) - 100.0f;
  std::vector<float> y(4096);
  for (size_t i = 0; i < y.size(); ++i) y[i] = 0.5f * static_cast<float>(i % 13);
  std::vector<float> o(4096, 0.0f);
  auto direct_runs = [] { return statement_cache_stats().direct; };

  // A broadcast row.
  int64_t d0 = direct_runs();
  vref(o.data(), {8, 128}, {128, 1}) =
      cref(buf.data(), {1, 128}, {128, 1}) + cref(y.data(), {8, 128}, {128, 1});
  EXPECT_EQ(direct_runs(), d0);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 128; ++c)
      ASSERT_EQ(o[static_cast<size_t>(r * 128 + c)],
                buf[static_cast<size_t>(c)] + y[static_cast<size_t>(r * 128 + c)]);

  // Rows with a stride of 2 elements.
  d0 = direct_runs();
  vref(o.data(), {4, 64}, {64, 1}) =
      cref(buf.data(), {4, 64}, {128, 2}) * cref(y.data(), {4, 64}, {64, 1});
  EXPECT_EQ(direct_runs(), d0);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 64; ++c)
      ASSERT_EQ(o[static_cast<size_t>(r * 64 + c)],
                buf[static_cast<size_t>(r * 128 + 2 * c)] * y[static_cast<size_t>(r * 64 + c)]);

  // The destination one element past an operand: every element must read the old value.
  std::vector<float> b = buf;
  d0 = direct_runs();
  vref(b.data() + 1, {2, 128}, {128, 1}) =
      cref(b.data(), {2, 128}, {128, 1}) + cref(y.data(), {2, 128}, {128, 1});
  EXPECT_EQ(direct_runs(), d0);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(b[i + 1], buf[i] + y[i]) << i;

  // The same bytes as another layout (rows of 64 read as rows of 128): planned.
  b = buf;
  d0 = direct_runs();
  vref(b.data(), {2, 64}, {64, 1}) =
      cref(b.data(), {2, 64}, {128, 1}) - cref(y.data(), {2, 64}, {64, 1});
  EXPECT_EQ(direct_runs(), d0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 64; ++c)
      ASSERT_EQ(b[static_cast<size_t>(r * 64 + c)],
                buf[static_cast<size_t>(r * 128 + c)] - y[static_cast<size_t>(r * 64 + c)]);

  // In place, element for element: taken directly.
  b = buf;
  d0 = direct_runs();
  vref(b.data(), {8, 128}, {128, 1}) =
      cref(b.data(), {8, 128}, {128, 1}) * cref(y.data(), {8, 128}, {128, 1});
  EXPECT_EQ(direct_runs(), d0 + 1);
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(b[i], buf[i] * y[i]) << i;
}

// Iotas: alone, and under +, - and * with a scalar on either side, along every axis of several
// shapes (and a destination with strided rows); the bits of the planned statement, and the
// value index op c, exact below 2^24.
template <class Form>
void expect_same_iota_bits(const char* what, Form form) {
  struct Dst {
    Shape shape;
    detail::SmallVec strides;
  };
  const std::vector<Dst> dsts = {{{128}, {1}},
                                 {{1000}, {1}},
                                 {{3, 37}, {37, 1}},
                                 {{8, 128}, {160, 1}},
                                 {{2, 3, 40}, {120, 40, 1}},
                                 {{1, 1}, {1, 1}}};
  for (const Dst& d : dsts) {
    for (int axis = 0; axis < d.shape.rank(); ++axis) {
      std::vector<float> direct(1400, -1.0f), plan(1400, -2.0f);
      const auto before = statement_cache_stats();
      form(vref(direct.data(), d.shape, d.strides), axis, false);
      const auto after = statement_cache_stats();
      EXPECT_EQ(after.direct - before.direct, 1) << what << " " << d.shape.to_string() << axis;
      EXPECT_EQ(after.planned, before.planned) << what << " " << d.shape.to_string() << axis;
      form(vref(plan.data(), d.shape, d.strides), axis, true);
      const auto got = tessera::testing::view_elements(direct.data(), d.shape, d.strides);
      const auto want = tessera::testing::view_elements(plan.data(), d.shape, d.strides);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(bits(got[i]), bits(want[i]))
            << what << " " << d.shape.to_string() << " axis " << axis << " element " << i;
      }
      // Elements outside the view (between strided rows, past its end) are untouched.
      std::vector<float> offsets(direct.size());
      for (size_t k = 0; k < offsets.size(); ++k) offsets[k] = static_cast<float>(k);
      std::vector<bool> inside(direct.size(), false);
      for (float k : tessera::testing::view_elements(offsets.data(), d.shape, d.strides)) {
        inside[static_cast<size_t>(k)] = true;
      }
      for (size_t k = 0; k < direct.size(); ++k) {
        if (!inside[k]) {
          ASSERT_EQ(direct[k], -1.0f) << what << " " << d.shape.to_string() << " " << k;
        }
      }
    }
  }
}

TEST(DirectIota, EveryFormGivesThePlannedBitsOnEveryTarget) {
  tessera::testing::on_every_vector_target([](const char* target) {
    SCOPED_TRACE(target);
    expect_same_iota_bits("iota", [](auto o, int axis, bool plan) {
      auto e = lax::broadcasted_iota<float>(o.shape(), axis);
      if (plan)
        planned(o, e);
      else
        o = e;
    });
    expect_same_iota_bits("iota + c", [](auto o, int axis, bool plan) {
      auto e = lax::broadcasted_iota<float>(o.shape(), axis) + 0.5f;
      if (plan)
        planned(o, e);
      else
        o = e;
    });
    expect_same_iota_bits("c - iota", [](auto o, int axis, bool plan) {
      auto e = 100.0f - lax::broadcasted_iota<float>(o.shape(), axis);
      if (plan)
        planned(o, e);
      else
        o = e;
    });
    expect_same_iota_bits("iota * c", [](auto o, int axis, bool plan) {
      auto e = lax::broadcasted_iota<float>(o.shape(), axis) * -0.25f;
      if (plan)
        planned(o, e);
      else
        o = e;
    });
  });
}

TEST(DirectIota, ValuesAreTheIndexAndOtherFormsArePlanned) {
  std::vector<float> o(2048, 0.0f);
  auto direct_runs = [] { return statement_cache_stats().direct; };
  int64_t d0 = direct_runs();
  vref(o.data(), {1024}, {1}) = jnp::arange<float>(1024) * 3.0f;
  EXPECT_EQ(direct_runs(), d0 + 1);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(o[static_cast<size_t>(i)], 3.0f * float(i)) << i;
  d0 = direct_runs();
  vref(o.data(), {8, 128}, {128, 1}) = lax::broadcasted_iota<float>(Shape{8, 128}, 0) + 2;
  EXPECT_EQ(direct_runs(), d0 + 1);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 128; ++c) ASSERT_EQ(o[static_cast<size_t>(r * 128 + c)], float(r + 2));
  // Division is not a fused iota form; an iota of another shape broadcasts; a destination with
  // strided elements: all planned.
  d0 = direct_runs();
  vref(o.data(), {2, 128}, {128, 1}) = lax::broadcasted_iota<float>(Shape{2, 128}, 1) / 4.0f;
  vref(o.data() + 256, {2, 128}, {128, 1}) = lax::broadcasted_iota<float>(Shape{1, 128}, 1) + 1.0f;
  vref(o.data() + 512, {2, 64}, {128, 2}) = lax::broadcasted_iota<float>(Shape{2, 64}, 1) * 2.0f;
  EXPECT_EQ(direct_runs(), d0);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 128; ++c) {
      ASSERT_EQ(o[static_cast<size_t>(r * 128 + c)], float(c) / 4.0f);
      ASSERT_EQ(o[static_cast<size_t>(256 + r * 128 + c)], float(c) + 1.0f);
    }
    for (int c = 0; c < 64; ++c)
      ASSERT_EQ(o[static_cast<size_t>(512 + r * 128 + 2 * c)], 2.0f * float(c));
  }
}

// The quickstart's kernel (an iota plus each core's offset, copied out) on 2 cores: the iota
// takes no plan natively; the checked engine evaluates it itself and gives the same array.
TEST(DirectIotaKernels, QuickstartIotaTakesNoPlanAndCheckedModeAgrees) {
  std::atomic<int64_t> direct{0};
  auto k = pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 2),
                      pl::scratch_types(pltpu::VMEM<float>({128})))(
      [&direct](pltpu::HbmRef<float> o_ref, pltpu::VmemRef<float> o_vmem) {
        const auto before = statement_cache_stats().direct;
        const int i = lax::axis_index("core");
        o_vmem = jnp::arange<float>(128) + float(i * 128);
        direct += statement_cache_stats().direct - before;
        pltpu::sync_copy(o_vmem, o_ref.at(pl::ds(i * 128, 128)));
      });
  const Array<float> native = k();
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(native[i], float(i));
  EXPECT_EQ(direct.load(), 2);
  direct = 0;
  const pltpu::ForceTpuInterpretMode force(checked_testing::checked());
  const Array<float> checked = k();
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(checked[i], float(i));
  EXPECT_EQ(direct.load(), 0);
}

// The pipelined add of the tutorial: full blocks read and written where they lie, ragged edge
// blocks in VMEM windows; every step's statement takes no plan on the native engine, and the
// checked engine still evaluates (and checks) each one itself.
TEST(DirectBinaryKernels, PipelinedAddTakesNoPlanAndCheckedModeStillSeesIt) {
  Array<float> x({300, 200}), y({300, 200});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 97) - 3.0f;
    y[i] = static_cast<float>(i % 89) * 0.25f;
  }
  struct Counts {
    std::atomic<int64_t> direct{0}, planned{0}, reused{0};
  };
  auto run = [&](int cores, Counts& c) {
    auto k = pl::kernel(pl::out_type<float>({300, 200}), pltpu::TensorCoreMesh("core", cores))(
        [&c](pltpu::HbmRef<const float> xh, pltpu::HbmRef<const float> yh,
             pltpu::HbmRef<float> oh) {
          const auto before = statement_cache_stats();
          const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
          pltpu::emit_pipeline([](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
                                  pltpu::VmemRef<float> ov) { ov = xv + yv; },
                               pltpu::grid({38, 2}), pl::in_specs(spec, spec), pl::out_specs(spec),
                               pltpu::core_axis_name("core"),
                               pltpu::dimension_semantics(pltpu::PARALLEL, pltpu::ARBITRARY))(
              xh, yh, oh);
          const auto after = statement_cache_stats();
          c.direct += after.direct - before.direct;
          c.planned += after.planned - before.planned;
          c.reused += after.reused - before.reused;
        });
    return k(x, y);
  };
  for (int cores : {1, 2}) {
    Counts c;
    const Array<float> o = run(cores, c);
    for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + y[i]) << cores << " " << i;
    EXPECT_EQ(c.direct.load(), 38 * 2) << cores;  // every step, full or ragged
    EXPECT_EQ(c.planned.load(), 0) << cores;
    EXPECT_EQ(c.reused.load(), 0) << cores;
  }
  const pltpu::ForceTpuInterpretMode force(checked_testing::checked());
  Counts c;
  const Array<float> o = run(2, c);
  for (int64_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], x[i] + y[i]) << i;
  EXPECT_EQ(c.direct.load(), 0);
}

}  // namespace
