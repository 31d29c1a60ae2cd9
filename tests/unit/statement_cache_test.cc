// The native evaluator's statement plan cache (tessera/detail/statement_cache.h): a statement run
// again with the same shapes, strides and dtypes reuses its plan, and anything that changes the
// plan (shapes, strides, an exponent, an iota's axis, an overlap with the destination) plans it
// again. Each test runs one call site with changing inputs and checks every element against a
// plain loop, so a stale plan shows as a wrong element; the thread's counters show that the
// plan was in fact reused where it may be.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/checked_support.h"
#include "support/view_elements.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using detail::statement_cache_stats;

template <class T>
pltpu::VmemRef<T> vref(T* p, Shape s) {
  return pltpu::VmemRef<T>(p, std::move(s));
}
template <class T>
pltpu::VmemRef<T> vref(T* p, Shape s, detail::SmallVec strides) {
  return pltpu::VmemRef<T>(p, std::move(s), std::move(strides));
}

// Each of these is one statement at one call site, whatever refs it is given. (A single binary
// op of float32 refs, `o = x + y`, takes no plan at all: direct_statement_test.cc.)
[[gnu::noinline]] void add_site(pltpu::VmemRef<const float> x, pltpu::VmemRef<const float> y,
                                pltpu::VmemRef<float> o) {
  o = x + y * 2.0f;
}
[[gnu::noinline]] void affine_site(pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o, float s,
                                   float c) {
  o = x * s + c;
}
[[gnu::noinline]] void int8_site(pltpu::VmemRef<const int8_t> x, pltpu::VmemRef<int8_t> o,
                                 int8_t c) {
  o = x + c;
}
[[gnu::noinline]] void bf16_site(pltpu::VmemRef<const bfloat16> x, pltpu::VmemRef<bfloat16> o,
                                 float s) {
  o = x * s;
}
[[gnu::noinline]] void pow_site(pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o, int n) {
  o = lax::integer_pow(x, n);
}
[[gnu::noinline]] void iota_site(pltpu::VmemRef<int32_t> o, int axis) {
  o = lax::broadcasted_iota<int32_t>(o.shape(), axis) * 10 + 1;
}
[[gnu::noinline]] void clamp_site(pltpu::VmemRef<const float> x, pltpu::VmemRef<float> o) {
  o = jnp::where(x > 0.0f, x, jnp::full_like(x, -1.0f));
}

float value_at(int64_t i, float scale) { return static_cast<float>(i % 97) * scale - 3.0f; }

TEST(StatementCache, ARepeatedStatementReusesItsPlanWithNewData) {
  std::vector<float> x(4096), y(4096), o(4096);
  const auto before = statement_cache_stats();
  for (int run = 0; run < 5; ++run) {
    // Another block of the same shape each time: new data pointers, same plan.
    const int64_t at = run * 8;
    for (int64_t i = 0; i < 1024; ++i) {
      x[static_cast<size_t>(at + i)] = value_at(i + run, 1.0f);
      y[static_cast<size_t>(at + i)] = value_at(i, 0.5f);
    }
    add_site(vref(x.data() + at, {8, 128}), vref(y.data() + at, {8, 128}),
             vref(o.data(), {8, 128}));
    for (int64_t i = 0; i < 1024; ++i) {
      ASSERT_EQ(o[static_cast<size_t>(i)], value_at(i + run, 1.0f) + value_at(i, 0.5f) * 2.0f)
          << run;
    }
  }
  const auto after = statement_cache_stats();
  // Planned at the first run, or already by an earlier test at this call site with this shape
  // (the cache is per thread, and gtest may run the tests in any order in one process).
  EXPECT_LE(after.planned - before.planned, 1);
  EXPECT_EQ((after.planned - before.planned) + (after.reused - before.reused), 5);
}

TEST(StatementCache, AnotherShapeOrStridePlansAgain) {
  std::vector<float> x(8192), y(8192), o(8192, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = value_at(static_cast<int64_t>(i), 1.0f);
    y[i] = value_at(static_cast<int64_t>(i), -2.0f);
  }
  struct View {
    Shape shape;
    detail::SmallVec strides;
  };
  // Block shapes, a 1-D view, strided rows and columns, a broadcast row; some repeated so that
  // a kept plan meets a different statement shape in between.
  const std::vector<View> views = {
      {{8, 128}, {128, 1}}, {{16, 128}, {128, 1}}, {{8, 128}, {128, 1}},   {{8, 128}, {256, 1}},
      {{8, 64}, {128, 2}},  {{8, 128}, {128, 1}},  {{1024}, {1}},          {{3, 5}, {7, 1}},
      {{8, 128}, {0, 1}},   {{8, 128}, {128, 1}},  {{2, 4, 8}, {64, 8, 1}}};
  for (size_t v = 0; v < views.size(); ++v) {
    const View& w = views[v];
    const auto rm = row_major_strides(w.shape);
    std::fill(o.begin(), o.end(), 0.0f);
    add_site(vref(x.data(), w.shape, w.strides), vref(y.data() + 1, w.shape, w.strides),
             vref(o.data(), w.shape, rm));
    const auto ex = tessera::testing::view_elements(x.data(), w.shape, w.strides);
    const auto ey = tessera::testing::view_elements(y.data() + 1, w.shape,
                                                    w.strides);  // another alignment, too
    for (size_t i = 0; i < ex.size(); ++i) ASSERT_EQ(o[i], ex[i] + ey[i] * 2.0f) << "view " << v;
  }
}

TEST(StatementCache, OverlapWithTheDestinationIsCheckedAtEveryRun) {
  std::vector<float> b(300);
  auto fill = [&] {
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  };
  std::vector<float> other(300, 0.0f);
  // Apart: the plan is kept.
  fill();
  affine_site(vref(b.data(), {2, 128}), vref(other.data(), {2, 128}), 1.0f, 1.0f);
  const auto kept = statement_cache_stats();
  // The destination one element past the operand: every element reads the old value.
  fill();
  affine_site(vref(b.data(), {2, 128}), vref(b.data() + 1, {2, 128}), 2.0f, 1.0f);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(b[static_cast<size_t>(i + 1)], 2.0f * float(i) + 1.0f) << i;
  EXPECT_EQ(statement_cache_stats().reused, kept.reused);  // not run from the kept plan
  // In place, element for element: allowed, and the plan is reused.
  fill();
  affine_site(vref(b.data(), {2, 128}), vref(b.data(), {2, 128}), 2.0f, 0.0f);
  affine_site(vref(b.data(), {2, 128}), vref(b.data(), {2, 128}), 2.0f, 0.0f);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(b[static_cast<size_t>(i)], 4.0f * float(i)) << i;
  // Overlapping the other way (destination before the operand), after the plan was kept again.
  fill();
  affine_site(vref(b.data() + 3, {2, 128}), vref(b.data(), {2, 128}), 1.0f, 0.0f);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(b[static_cast<size_t>(i)], float(i) + 3.0f) << i;
}

TEST(StatementCache, ScalarsAreTakenAtEveryRun) {
  std::vector<float> x(1024), o(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = value_at(static_cast<int64_t>(i), 0.25f);
  const auto before = statement_cache_stats();
  for (int run = 0; run < 4; ++run) {
    const float s = 1.5f * static_cast<float>(run) - 2.0f;
    const float c = static_cast<float>(run * run);
    affine_site(vref(x.data(), {8, 128}), vref(o.data(), {8, 128}), s, c);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i] * s + c) << run;
  }
  EXPECT_LE(statement_cache_stats().planned - before.planned, 1);  // 0: an earlier test's plan
  // Narrow dtypes: the constant wraps (int8) or rounds (bfloat16) as its node holds it.
  std::vector<int8_t> xi(256), oi(256);
  for (size_t i = 0; i < xi.size(); ++i) xi[i] = static_cast<int8_t>(i);
  for (int8_t c : {int8_t{1}, int8_t{-7}, int8_t{127}, int8_t{1}}) {
    int8_site(vref(xi.data(), {2, 128}), vref(oi.data(), {2, 128}), c);
    for (size_t i = 0; i < xi.size(); ++i) {
      ASSERT_EQ(oi[i], static_cast<int8_t>(static_cast<uint8_t>(xi[i]) + static_cast<uint8_t>(c)))
          << int{c};
    }
  }
  std::vector<bfloat16> xb(256), ob(256);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = bfloat16(value_at(static_cast<int64_t>(i), 0.3f));
  for (float s : {0.1f, 3.3333f, -1.0e-3f, 0.1f}) {
    bf16_site(vref(xb.data(), {2, 128}), vref(ob.data(), {2, 128}), s);
    for (size_t i = 0; i < xb.size(); ++i) {
      const bfloat16 want(static_cast<float>(xb[i]) * static_cast<float>(bfloat16(s)));
      ASSERT_EQ(static_cast<float>(ob[i]), static_cast<float>(want)) << s << " " << i;
    }
  }
}

TEST(StatementCache, ExponentsIotaAxesAndFullShapesAreChecked) {
  std::vector<float> x(512), o(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = value_at(static_cast<int64_t>(i), 0.01f);
  for (int n : {2, 3, 3, 2, -1}) {
    pow_site(vref(x.data(), {4, 128}), vref(o.data(), {4, 128}), n);
    for (size_t i = 0; i < x.size(); ++i) {
      float want = 1.0f;
      for (int k = 0; k < (n < 0 ? -n : n); ++k) want *= x[i];
      if (n < 0) want = 1.0f / want;
      ASSERT_FLOAT_EQ(o[i], want) << n << " " << i;
    }
  }
  std::vector<int32_t> io(512);
  for (int axis : {0, 1, 1, 0}) {
    iota_site(vref(io.data(), {4, 128}), axis);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 128; ++c) {
        ASSERT_EQ(io[static_cast<size_t>(r * 128 + c)], (axis == 0 ? r : c) * 10 + 1) << axis;
      }
    }
  }
  for (const Shape& s : {Shape{4, 128}, Shape{512}, Shape{4, 128}, Shape{2, 3}}) {
    clamp_site(vref(x.data(), s), vref(o.data(), s));
    for (int64_t i = 0; i < s.size(); ++i) {
      const float v = x[static_cast<size_t>(i)];
      ASSERT_EQ(o[static_cast<size_t>(i)], v > 0.0f ? v : -1.0f) << s.to_string();
    }
  }
}

// One generic statement, instantiated for several dtypes over the same bytes.
TEST(StatementCache, EachDtypeHasItsOwnPlan) {
  auto twice = [](auto x, auto o) { o = x + x; };
  std::vector<uint8_t> bytes(1024), out(1024);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 % 64);
  for (int round = 0; round < 2; ++round) {
    twice(vref(reinterpret_cast<const float*>(bytes.data()), {2, 128}),
          vref(reinterpret_cast<float*>(out.data()), {2, 128}));
    for (size_t i = 0; i < 256; ++i) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      float got;
      std::memcpy(&got, out.data() + 4 * i, 4);
      ASSERT_EQ(got, v + v);
    }
    twice(vref(reinterpret_cast<const int32_t*>(bytes.data()), {2, 128}),
          vref(reinterpret_cast<int32_t*>(out.data()), {2, 128}));
    for (size_t i = 0; i < 256; ++i) {
      int32_t v, got;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      std::memcpy(&got, out.data() + 4 * i, 4);
      ASSERT_EQ(got, static_cast<int32_t>(2u * static_cast<uint32_t>(v)));
    }
    twice(vref(static_cast<const uint8_t*>(bytes.data()), {2, 128}), vref(out.data(), {2, 128}));
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(out[i], static_cast<uint8_t>(2 * bytes[i]));
  }
}

// ---- inside kernels ---------------------------------------------------------------------------

Array<float> ramp(Shape s, float scale) {
  Array<float> a(std::move(s));
  for (int64_t i = 0; i < a.size(); ++i) a[i] = value_at(i, scale);
  return a;
}

struct Counts {
  std::atomic<int64_t> reused{0};
  std::atomic<int64_t> planned{0};
};

// x + 2y pipelined over (bm, bn) blocks on `cores` cores; `c` sums the cores' plan counters.
Array<float> pipelined_axpy(const Array<float>& x, const Array<float>& y, int cores, int64_t bm,
                            int64_t bn, Counts& c) {
  const int64_t m = x.shape()[0];
  const int64_t n = x.shape()[1];
  auto k = pl::kernel(pl::out_type<float>({m, n}), pltpu::TensorCoreMesh("core", cores))(
      [=, &c](pltpu::HbmRef<const float> xh, pltpu::HbmRef<const float> yh,
              pltpu::HbmRef<float> oh) {
        const auto before = statement_cache_stats();
        const pl::BlockSpec spec({bm, bn}, [](int i, int j) { return pl::idx(i, j); });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<const float> yv,
               pltpu::VmemRef<float> ov) { ov = xv + yv * 2.0f; },
            pltpu::grid({(m + bm - 1) / bm, (n + bn - 1) / bn}), pl::in_specs(spec, spec),
            pl::out_specs(spec), pltpu::core_axis_name("core"),
            pltpu::dimension_semantics(pltpu::PARALLEL, pltpu::ARBITRARY))(xh, yh, oh);
        c.reused += statement_cache_stats().reused - before.reused;
        c.planned += statement_cache_stats().planned - before.planned;
      });
  return k(x, y);
}

// Full blocks are used where they lie (the array's strides), partial edge blocks in windows
// (row-major strides): the same statement alternates between the two layouts.
TEST(StatementCacheKernels, RaggedEdgesOnOneAndTwoCores) {
  const Array<float> x = ramp({300, 200}, 1.0f);
  const Array<float> y = ramp({300, 200}, -0.5f);
  for (int cores : {1, 2}) {
    for (const auto& [bm, bn] : {std::pair<int64_t, int64_t>{8, 128}, {16, 64}, {8, 128}}) {
      Counts c;
      const Array<float> o = pipelined_axpy(x, y, cores, bm, bn, c);
      for (int64_t i = 0; i < o.size(); ++i) {
        ASSERT_EQ(o[i], x[i] + y[i] * 2.0f) << cores << " " << i;
      }
      EXPECT_GT(c.reused.load(), 0) << cores;
      EXPECT_LE(c.planned.load(), 2 * cores) << cores;  // one plan per layout and core
    }
  }
}

// Two pipelines with different blocks share one body (one statement), interleaved.
TEST(StatementCacheKernels, TwoPipelinesShareABody) {
  const Array<float> x = ramp({64, 256}, 0.5f);
  auto k = pl::kernel(
      pl::out_type(ShapeDtypeStruct<float>{{64, 256}}, ShapeDtypeStruct<float>{{64, 256}}),
      pltpu::TensorCoreMesh("core", 1))([](pltpu::HbmRef<const float> xh, pltpu::HbmRef<float> ah,
                                           pltpu::HbmRef<float> bh) {
    auto body = [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) {
      ov = xv * 2.0f + 1.0f;
    };
    const pl::BlockSpec small({8, 128}, [](int i, int j) { return pl::idx(i, j); });
    const pl::BlockSpec tall({32, 64}, [](int i, int j) { return pl::idx(i, j); });
    auto p1 =
        pltpu::emit_pipeline(body, pltpu::grid({8, 2}), pl::in_specs(small), pl::out_specs(small));
    auto p2 =
        pltpu::emit_pipeline(body, pltpu::grid({2, 4}), pl::in_specs(tall), pl::out_specs(tall));
    for (int round = 0; round < 3; ++round) {
      p1(xh, ah);
      p2(xh, bh);
    }
  });
  const auto [a, b] = k(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(a[i], x[i] * 2.0f + 1.0f) << i;
    ASSERT_EQ(b[i], x[i] * 2.0f + 1.0f) << i;
  }
}

// BoundedSlice blocks: the window keeps its extent while the part copied in changes size.
TEST(StatementCacheKernels, BoundedSliceBlocks) {
  Array<int32_t> x({16, 256});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 7 % 1000);
  auto k = pl::kernel(pl::out_type<int32_t>({16, 256}), pltpu::TensorCoreMesh("core", 1))(
      [](pltpu::HbmRef<const int32_t> xh, pltpu::HbmRef<int32_t> oh) {
        const pl::BlockSpec spec({pl::BoundedSlice(6), 128}, [](int i, int j) {
          return pl::idx(pl::ds(i * 6, i == 2 ? 4 : 6), j);
        });
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const int32_t> xv, pltpu::VmemRef<int32_t> ov) { ov = xv * 3 - 1; },
            pltpu::grid({3, 2}), pl::in_specs(spec), pl::out_specs(spec))(xh, oh);
      });
  const Array<int32_t> o = k(x);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], x[i] * 3 - 1) << i;
}

// The checked engine sees every evaluation: a statement that ran from a kept plan natively still
// reports a read of unwritten memory in checked mode, at the run that makes it.
TEST(StatementCacheKernels, CheckedModeSeesEveryRun) {
  using namespace tessera::checked_testing;
  auto k = pl::kernel(pl::out_type<float>({3, 128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({3, 128}), pltpu::VMEM<float>({128})))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> src, pltpu::VmemRef<float> ov) {
        src.at(0) = jnp::zeros<float>({128});
        src.at(1) = jnp::ones<float>({128});
        for (int r = 0; r < 3; ++r) {  // row 2 of src is never written
          // clang-format off
          MARK_LINE; ov = src.at(r) + 1.0f;
          // clang-format on
          pltpu::sync_copy(ov, o.at(r));
        }
      });
  for (int run = 0; run < 2; ++run) {
    const Array<float> o = k();  // native: row 2 is garbage, no error
    for (int c = 0; c < 128; ++c) ASSERT_EQ(o(1, c), 2.0f);
  }
  const pltpu::ForceTpuInterpretMode force(checked());
  expect_bug([&] { k(); }, {ErrorKind::kUninitialized, kMarked, 0, {}, "VMEM scratch #0"});
}

}  // namespace
