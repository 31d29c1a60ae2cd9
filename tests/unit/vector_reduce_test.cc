// Reductions and shape ops on VMEM refs (vector_reduce.h): sum/max/min/argmax/argmin over any
// axes with keepdims, transpose, reshape of leading dims, roll (with pltpu.roll's stride); their
// temporaries inside a kernel (VMEM budget) and outside; errors for bad axes and shapes.
// References are plain loops in double precision; float sums are compared with a relative
// tolerance (never exactly).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

// Row-major unravel of `flat` in `shape`.
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

// The reference reduction of x (shape `in`) over `mask`, as doubles, result flattened over the
// kept axes in order.
template <class T, class F>
std::vector<double> reference_reduce(const std::vector<T>& x, const Shape& in, int64_t mask,
                                     double init, F f) {
  int64_t out_size = 1;
  for (int d = 0; d < in.rank(); ++d)
    if (!((mask >> d) & 1)) out_size *= in[d];
  std::vector<double> out(static_cast<size_t>(out_size), init);
  for (int64_t k = 0; k < in.size(); ++k) {
    const auto idx = unravel(k, in);
    int64_t o = 0;
    for (int d = 0; d < in.rank(); ++d)
      if (!((mask >> d) & 1)) o = o * in[d] + idx[static_cast<size_t>(d)];
    out[static_cast<size_t>(o)] =
        f(out[static_cast<size_t>(o)], static_cast<double>(x[static_cast<size_t>(k)]));
  }
  return out;
}

struct ReduceCase {
  Shape shape;
  std::vector<int> axes;  // empty: all
};

const ReduceCase kCases[] = {
    {{1}, {}},           {{7}, {0}},          {{1000}, {}},           {{8, 128}, {1}},
    {{8, 128}, {0}},     {{8, 128}, {0, 1}},  {{3, 257}, {-1}},       {{257, 3}, {0}},
    {{1, 5}, {0}},       {{5, 1}, {1}},       {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}},
    {{2, 3, 4, 5}, {2}}, {{4, 1, 9}, {0, 1}}, {{300, 300}, {1}},
};

detail::AxisSpec axis_spec(const std::vector<int>& axes) {
  detail::AxisSpec s;
  if (axes.empty()) return s;
  s.all = false;
  for (int a : axes) s.axes.push_back(a);
  return s;
}
int64_t mask_of(const ReduceCase& c) {
  if (c.axes.empty()) return (int64_t{1} << c.shape.rank()) - 1;
  int64_t m = 0;
  for (int a : c.axes) m |= int64_t{1} << (a < 0 ? a + c.shape.rank() : a);
  return m;
}
Shape kept_shape(const ReduceCase& c, bool keepdims) {
  const int64_t m = mask_of(c);
  std::vector<int64_t> d;
  for (int i = 0; i < c.shape.rank(); ++i) {
    if ((m >> i) & 1) {
      if (keepdims) d.push_back(1);
    } else {
      d.push_back(c.shape[i]);
    }
  }
  return Shape(d);
}

TEST(VectorReduce, SumMaxMinFloat) {
  for (const auto& c : kCases) {
    std::vector<float> x(static_cast<size_t>(c.shape.size()));
    for (size_t k = 0; k < x.size(); ++k) x[k] = std::sin(static_cast<float>(k) * 0.37f) * 10.0f;
    auto xr = vref(x, c.shape);
    for (bool keep : {false, true}) {
      const Shape os = kept_shape(c, keep);
      std::vector<float> o(static_cast<size_t>(os.size()));
      auto orf = vref(o, os);
      const auto ax = axis_spec(c.axes);
      orf = jnp::sum(xr, ax, keep);
      auto want =
          reference_reduce(x, c.shape, mask_of(c), 0.0, [](double a, double b) { return a + b; });
      double abs_sum_bound = 0;
      for (float v : x) abs_sum_bound += std::fabs(v);
      for (size_t k = 0; k < o.size(); ++k)
        ASSERT_NEAR(o[k], want[k], 1e-6 * abs_sum_bound + 1e-6)
            << c.shape.to_string() << " sum " << k;
      orf = jnp::max(xr, ax, keep);
      want = reference_reduce(x, c.shape, mask_of(c), -INFINITY,
                              [](double a, double b) { return std::max(a, b); });
      for (size_t k = 0; k < o.size(); ++k)
        ASSERT_EQ(o[k], want[k]) << c.shape.to_string() << " max";
      orf = jnp::min(xr, ax, keep) * 2.0f + 1.0f;  // feeds an elementwise chain
      want = reference_reduce(x, c.shape, mask_of(c), INFINITY,
                              [](double a, double b) { return std::min(a, b); });
      for (size_t k = 0; k < o.size(); ++k)
        ASSERT_EQ(o[k], static_cast<float>(want[k]) * 2.0f + 1.0f) << c.shape.to_string() << " min";
    }
  }
}

TEST(VectorReduce, IntegerAndBoolSumsAreInt32) {
  std::vector<int8_t> x(3 * 100);
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = static_cast<int8_t>(static_cast<int>(k * 37) % 256 - 128);
  auto xr = vref(x, {3, 100});
  std::vector<int32_t> o(3);
  vref(o, {3}) = jnp::sum(xr, 1);  // int8 sums in int32, as jnp
  static_assert(std::is_same_v<detail::ValueOf<decltype(jnp::sum(xr, 1))>, int32_t>);
  for (int r = 0; r < 3; ++r) {
    int32_t want = 0;
    for (int c = 0; c < 100; ++c) want += x[static_cast<size_t>(r * 100 + c)];
    EXPECT_EQ(o[static_cast<size_t>(r)], want);
  }
  std::vector<int8_t> m(3);
  vref(m, {3}) = jnp::max(xr, -1);  // max keeps int8
  for (int r = 0; r < 3; ++r) {
    int want = -128;
    for (int c = 0; c < 100; ++c) want = std::max<int>(want, x[static_cast<size_t>(r * 100 + c)]);
    EXPECT_EQ(m[static_cast<size_t>(r)], want);
  }
  std::vector<int32_t> cnt(1);
  vref(cnt, {}) = jnp::sum(xr > int8_t{0});  // counting a mask
  int want = 0;
  for (int8_t v : x) want += v > 0;
  EXPECT_EQ(cnt[0], want);
}

TEST(VectorReduce, IntegerSumsWrap) {
  // jnp.sum of int32 wraps on overflow, in the vector lanes and in the scalar tail alike (a
  // kernel may sum the garbage padding of a partial block, whose rows it then drops).
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  for (int n : {1, 2, 3, 5, 17, 67}) {
    std::vector<int32_t> x(static_cast<size_t>(n), kMax);
    std::vector<int32_t> o(1);
    vref(o, {}) = jnp::sum(vref(x, {n}));
    uint32_t want = 0;
    for (int32_t v : x) want += static_cast<uint32_t>(v);
    EXPECT_EQ(o[0], static_cast<int32_t>(want)) << n;
  }
}

TEST(VectorReduce, Bfloat16SumAccumulatesInFloat32) {
  std::vector<bfloat16> x(4 * 300, bfloat16(1.0f));
  std::vector<bfloat16> o(4);
  vref(o, {4}) = jnp::sum(vref(x, {4, 300}), 1);
  // A bfloat16 accumulator would stall at 256; float32 accumulation gives 300.
  for (auto v : o) EXPECT_EQ(static_cast<float>(v), 300.0f);
}

TEST(VectorReduce, MaxPropagatesNaN) {
  std::vector<float> x = {1, NAN, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  std::vector<float> o(2);
  vref(o, {2}) = jnp::max(vref(x, {2, 10}), 1);
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_EQ(o[1], 20.0f);
  vref(o, {2}) = jnp::min(vref(x, {2, 10}), 1);
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_EQ(o[1], 11.0f);
}

TEST(VectorReduce, ArgmaxArgmin) {
  for (const auto& c : kCases) {
    if (c.axes.size() > 1) continue;
    std::vector<float> x(static_cast<size_t>(c.shape.size()));
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((k * 7919) % 61);  // ties
    auto xr = vref(x, c.shape);
    const Shape os = kept_shape(c, false);
    std::vector<int32_t> o(static_cast<size_t>(os.size()));
    const int64_t mask = mask_of(c);
    for (bool is_max : {true, false}) {
      const auto ax = axis_spec(c.axes);
      if (is_max)
        vref(o, os) = jnp::argmax(xr, ax);
      else
        vref(o, os) = jnp::argmin(xr, ax);
      // Reference: the first extreme along the axis (flat index for axis=None).
      std::vector<double> best(o.size(), is_max ? -INFINITY : INFINITY);
      std::vector<int32_t> want(o.size(), 0);
      for (int64_t k = 0; k < c.shape.size(); ++k) {
        const auto idx = unravel(k, c.shape);
        int64_t out = 0;
        int64_t pos = k;
        for (int d = 0; d < c.shape.rank(); ++d) {
          if ((mask >> d) & 1) {
            if (!c.axes.empty()) pos = idx[static_cast<size_t>(d)];
          } else {
            out = out * c.shape[d] + idx[static_cast<size_t>(d)];
          }
        }
        const double v = x[static_cast<size_t>(k)];
        if (is_max ? v > best[static_cast<size_t>(out)] : v < best[static_cast<size_t>(out)]) {
          best[static_cast<size_t>(out)] = v;
          want[static_cast<size_t>(out)] = static_cast<int32_t>(pos);
        }
      }
      ASSERT_EQ(o, want) << c.shape.to_string() << (is_max ? " argmax" : " argmin");
    }
  }
  std::vector<float> n = {1, 5, NAN, 5, NAN};
  std::vector<int32_t> i(1);
  vref(i, {}) = jnp::argmax(vref(n, {5}));
  EXPECT_EQ(i[0], 2);  // the first NaN, as numpy
  std::vector<int32_t> k(2);
  std::vector<int32_t> iv = {3, 9, 9, -1, -1, 0};
  vref(k, {2, 1}) = jnp::argmax(vref(iv, {2, 3}), 1, true);
  EXPECT_EQ(k, (std::vector<int32_t>{1, 2}));
}

TEST(VectorReduce, SoftmaxChain) {
  // Several reductions in one expression, each over a fused elementwise operand.
  const int R = 5, C = 131;
  std::vector<float> x(R * C), o(R * C);
  for (size_t k = 0; k < x.size(); ++k) x[k] = std::cos(static_cast<float>(k)) * 4.0f;
  auto xr = vref(x, {R, C});
  vref(o, {R, C}) = jnp::exp(xr - jnp::max(xr, 1, true)) /
                    jnp::sum(jnp::exp(xr - jnp::max(xr, 1, true)), 1, true);
  for (int r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < C; ++c)
      m = std::max(m, static_cast<double>(x[static_cast<size_t>(r * C + c)]));
    for (int c = 0; c < C; ++c) s += std::exp(x[static_cast<size_t>(r * C + c)] - m);
    for (int c = 0; c < C; ++c) {
      const double want = std::exp(x[static_cast<size_t>(r * C + c)] - m) / s;
      ASSERT_NEAR(o[static_cast<size_t>(r * C + c)], want, 1e-6 * want + 1e-9) << r << "," << c;
    }
  }
}

TEST(VectorReduce, TransposeReshapeRoll) {
  for (auto [M, N] : {std::pair{1, 1}, {1, 9}, {8, 128}, {13, 7}, {130, 257}}) {
    std::vector<float> x(static_cast<size_t>(M * N)), t(static_cast<size_t>(M * N));
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k);
    auto xr = vref(x, {M, N});
    vref(t, {N, M}) = jnp::transpose(xr);  // a view of the ref
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        ASSERT_EQ(t[static_cast<size_t>(j * M + i)], x[static_cast<size_t>(i * N + j)]);
    vref(t, {N, M}) = jnp::transpose(xr * 2.0f) + 1.0f;  // an expression: via a temporary
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        ASSERT_EQ(t[static_cast<size_t>(j * M + i)],
                  x[static_cast<size_t>(i * N + j)] * 2.0f + 1.0f);
    for (int shift : {0, 1, -1, 3, 1000}) {
      vref(t, {M, N}) = pltpu::roll(xr, shift, 1);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          const int src = ((j - shift) % N + N) % N;
          ASSERT_EQ(t[static_cast<size_t>(i * N + j)], x[static_cast<size_t>(i * N + src)])
              << shift;
        }
      vref(t, {M, N}) = jnp::roll(xr + 0.0f, shift, 0);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          const int src = ((i - shift) % M + M) % M;
          ASSERT_EQ(t[static_cast<size_t>(i * N + j)], x[static_cast<size_t>(src * N + j)])
              << shift;
        }
    }
  }
  // Transposes of the last two dims of a 3-D operand; bfloat16 and int8 keep their bits.
  std::vector<bfloat16> h(2 * 3 * 4), ht(2 * 4 * 3);
  for (size_t k = 0; k < h.size(); ++k) h[k] = bfloat16(static_cast<float>(k) + 0.5f);
  vref(ht, {2, 4, 3}) = jnp::transpose(vref(h, {2, 3, 4}) * 1.0f, {0, 2, 1});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(ht[static_cast<size_t>((a * 4 + c) * 3 + b)].bits,
                  h[static_cast<size_t>((a * 3 + b) * 4 + c)].bits);
  // Reshape of leading dims: a view of a contiguous ref, a temporary for an expression.
  std::vector<int8_t> q(4 * 6 * 8), qo(4 * 6 * 8);
  for (size_t k = 0; k < q.size(); ++k) q[k] = static_cast<int8_t>(k);
  vref(qo, {24, 8}) = jnp::reshape(vref(q, {4, 6, 8}), {-1, 8});
  EXPECT_EQ(qo, q);
  vref(qo, {4, 6, 8}) = jnp::reshape(vref(q, {24, 8}) + int8_t{1}, {4, 6, 8});
  for (size_t k = 0; k < q.size(); ++k) ASSERT_EQ(qo[k], static_cast<int8_t>(q[k] + 1));
  vref(qo, {4, 6, 8}) = jnp::reshape(jnp::transpose(vref(q, {4, 6, 8}), {1, 0, 2}), {4, 6, 8});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 6; ++b)
      for (int c = 0; c < 8; ++c) {
        const int flat = (a * 6 + b) * 8 + c;  // position in the (6, 4, 8) transposed array
        const int tb = flat / 32, ta = (flat / 8) % 4;
        ASSERT_EQ(qo[static_cast<size_t>(flat)], q[static_cast<size_t>((ta * 6 + tb) * 8 + c)]);
      }
}

// pltpu.roll with a stride: out[idx] = x[idx with idx[axis] - shift - i * stride (mod n)],
// i = idx[stride_axis], for a stride axis before and after the rolled one (with axes between
// and after them), negative axes and shifts, strides past the extent, ints and a value operand.
TEST(VectorReduce, RollWithStride) {
  const Shape shape{3, 4, 5, 6};
  std::vector<int32_t> x(static_cast<size_t>(shape.size())), o(x.size());
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<int32_t>(k);
  struct Case {
    int64_t shift;
    int axis;
    int64_t stride;
    int stride_axis;
  };
  for (const Case& c :
       {Case{1, 1, 1, 0}, Case{2, 3, 1, 0}, Case{3, 1, 2, 3}, Case{-7, 0, 5, 2}, Case{0, 2, 4, 1},
        Case{4, -1, 13, -3}, Case{1, 3, 0, 2}, Case{5, 0, 2, 3}}) {
    vref(o, shape) = pltpu::roll(vref(x, shape), c.shift, c.axis, c.stride, c.stride_axis);
    const int ax = c.axis < 0 ? c.axis + 4 : c.axis;
    const int sax = c.stride_axis < 0 ? c.stride_axis + 4 : c.stride_axis;
    for (int64_t flat = 0; flat < shape.size(); ++flat) {
      std::vector<int64_t> idx = unravel(flat, shape);
      const int64_t n = shape[ax];
      const int64_t i = idx[static_cast<size_t>(sax)];
      idx[static_cast<size_t>(ax)] =
          ((idx[static_cast<size_t>(ax)] - c.shift - i * c.stride) % n + n) % n;
      int64_t src = 0;
      for (int d = 0; d < 4; ++d) src = src * shape[d] + idx[static_cast<size_t>(d)];
      ASSERT_EQ(o[static_cast<size_t>(flat)], x[static_cast<size_t>(src)])
          << "shift " << c.shift << " axis " << c.axis << " stride " << c.stride << " stride_axis "
          << c.stride_axis << " at " << flat;
    }
  }
  // A stride of 0 is a plain roll; a float value operand goes through the same copy.
  std::vector<float> f(64), fo(64), fr(64);
  for (size_t k = 0; k < f.size(); ++k) f[k] = static_cast<float>(k) * 0.5f;
  jnp::Value v = vref(f, {8, 8}) * 2.0f;
  vref(fo, {8, 8}) = pltpu::roll(v, 3, 1, 0, 0);
  vref(fr, {8, 8}) = pltpu::roll(v, 3, 1);
  EXPECT_EQ(fo, fr);
}

TEST(VectorReduceErrors, RollStrideArguments) {
  std::vector<float> x(24), o(24);
  auto xr = vref(x, {2, 3, 4});
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3, 4}) = pltpu::roll(xr, 1, 2, -1, 0), UsageError,
                       ErrorKind::kInvalidArgument, "stride -1 is negative", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3, 4}) = pltpu::roll(xr, 1, 2, 1, 2), UsageError,
                       ErrorKind::kInvalidArgument, "stride_axis 2 is the rolled axis 2", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3, 4}) = pltpu::roll(xr, 1, -1, 1, -1), UsageError,
                       ErrorKind::kInvalidArgument, "stride_axis -1 is the rolled axis 2", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3, 4}) = pltpu::roll(xr, 1, 2, 1, 3), UsageError,
                       ErrorKind::kInvalidArgument,
                       "stride_axis 3 is out of range for an operand of shape (2, 3, 4)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3, 4}) = pltpu::roll(xr, 1, 2, 1, -4), UsageError,
                       ErrorKind::kInvalidArgument, "stride_axis -4 is out of range", line);
  // Inside a kernel: a KernelError at the roll's line, and no output; the clean twin runs.
  static std::atomic<int> kline{0};
  auto roll_kernel = [](int64_t stride) {
    return pl::pallas_call(
        [stride](pltpu::VmemRef<const float> in, pltpu::VmemRef<float> out) {
          kline = __LINE__ + 1;
          out = pltpu::roll(in, 1, 1, stride, 0);
        },
        pl::out_shape<float>({8, 128}))(Array<float>({8, 128}, 1.0f));
  };
  tessera::testing::expect_kernel_error([&] { roll_kernel(-2); }, ErrorKind::kInvalidArgument,
                                        "stride -2 is negative", kline);
  const Array<float> ok = roll_kernel(2);
  for (float e : ok) ASSERT_EQ(e, 1.0f);
}

TEST(VectorReduceErrors, BadAxesAndShapes) {
  std::vector<float> x(24), o(24);
  auto xr = vref(x, {2, 3, 4});
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {2, 3}) = jnp::sum(xr, 3), UsageError, ErrorKind::kInvalidArgument,
                       "axis 3 is out of range for an operand of shape (2, 3, 4)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {4}) = jnp::max(xr, {0, -3}), UsageError,
                       ErrorKind::kInvalidArgument, "axis -3 is given twice", line);
  std::vector<int32_t> io(4);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(io, {4}) = jnp::argmax(xr, {0, 1}), UsageError,
                       ErrorKind::kInvalidArgument, "takes one axis or none", line);
  std::vector<float> none;
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {}) = jnp::max(vref(none, {0})), UsageError,
                       ErrorKind::kInvalidArgument, "extent 0", line);
  // Re-tiling the last dim is allowed (as in Pallas' interpret mode); checked mode with a chip
  // refuses it (ShapeOps.ReshapesOfTheLastDimAndTheirTpuRule). Here the destination is wrong.
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {24}) = jnp::reshape(xr, {4, 6}), UsageError,
                       ErrorKind::kShapeMismatch, "shape (4, 6) does not broadcast", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {24}) = jnp::reshape(xr, {5, 4}), UsageError,
                       ErrorKind::kInvalidArgument, "cannot reshape (2, 3, 4)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {24}) = jnp::transpose(xr, {0, 0, 1}), UsageError,
                       ErrorKind::kInvalidArgument, "is not a permutation", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(vref(o, {24}) = pltpu::roll(xr, 1, 5), UsageError,
                       ErrorKind::kInvalidArgument, "axis 5 is out of range", line);
  // A reduced result that does not fit the destination.
  auto err = tessera::testing::catch_error<UsageError>([&] { vref(o, {5}) = jnp::sum(xr, 0); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kShapeMismatch);
  // Unit dims may be added or removed by a reshape.
  std::vector<float> s(4);
  vref(s, {4, 1}) = jnp::reshape(jnp::sum(xr, {0, 1}), {4, 1});
  EXPECT_EQ(s[0], 0.0f);
}

TEST(VectorReduce, TemporariesComeFromTheKernelsVmem) {
  // A (256, 256) f32 operand needs 256 KiB for its temporary plus 1 KiB for the result: fine
  // in the default budget, and vmem_top is restored (the second reduction reuses the space).
  auto ok =
      pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({256, 256}), pltpu::VMEM<float>({256})))(
          [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> s) {
            x = lax::broadcasted_iota<float>({256, 256}, 1);
            s = jnp::sum(x * 1.0f, 1);
            s = jnp::sum(x * 1.0f, 1) + jnp::max(x, 1) * 0.0f;
            pltpu::sync_copy(s, o);
          });
  Array<float> out = ok();
  EXPECT_EQ(out(0), 255.0f * 256.0f / 2.0f);
  // With a budget just above the scratch, the temporary does not fit: kCapacityExceeded at the
  // jnp.sum call, naming the operand's size.
  static int line = 0;
  auto tight =
      pl::kernel(pl::out_type<float>({256}), pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::VMEM<float>({256, 256}), pltpu::VMEM<float>({256})),
                 pltpu::CompilerParams{.vmem_limit_bytes = 256 * 256 * 4 + 4096})(
          [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> x, pltpu::VmemRef<float> s) {
            x = jnp::zeros_like(x);
            line = __LINE__ + 1;
            s = jnp::sum(x * 2.0f, 1);
            pltpu::sync_copy(s, o);
          });
  auto err = tessera::testing::catch_error<KernelError>([&] { tight(); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded);
  EXPECT_EQ(static_cast<int>(err->where().line()), line) << err->what();
  EXPECT_NE(std::string(err->what()).find("jnp.sum"), std::string::npos) << err->what();
  EXPECT_NE(std::string(err->what()).find("(256, 256)"), std::string::npos) << err->what();
}

// A reshape of an elementwise expression whose refs are row-major in the operand's shape is the
// expression read in the new shape (src/native/vector_evaluate.cc, lower_reshape_as_relabel): no
// temporary, so it runs in a budget that holds only the scratch. Pallas' paged attention writes
// `k = k_vmem[...].astype(f32).reshape(-1, head_dim)`. The others (a broadcast operand, an iota,
// a strided view) still take a temporary; every form gives the same values in both engines.
TEST(VectorReduce, ReshapeOfAnElementwiseExpressionIsReadInTheNewShape) {
  constexpr int64_t kScratch = 4 * 16 * 128 * 2 + 128 * 4 + 64 * 128 * 4 + 32 * 128 * 2;
  auto run = [](int64_t budget, bool with_temporaries) {
    return pl::kernel(
        pl::out_type(ShapeDtypeStruct<float>{{64, 128}}, ShapeDtypeStruct<float>{{64, 128}},
                     ShapeDtypeStruct<float>{{64, 128}}, ShapeDtypeStruct<bfloat16>{{32, 128}}),
        pltpu::TensorCoreMesh("core", 1),
        pl::scratch_types(pltpu::VMEM<bfloat16>({4, 16, 128}), pltpu::VMEM<float>({128}),
                          pltpu::VMEM<float>({64, 128}), pltpu::VMEM<bfloat16>({32, 128})),
        pltpu::CompilerParams{.vmem_limit_bytes = budget})(
        [with_temporaries](pltpu::HbmRef<float> h1, pltpu::HbmRef<float> h2,
                           pltpu::HbmRef<float> h3, pltpu::HbmRef<bfloat16> h4,
                           pltpu::VmemRef<bfloat16> x, pltpu::VmemRef<float> row,
                           pltpu::VmemRef<float> o, pltpu::VmemRef<bfloat16> o3) {
          x = ((lax::broadcasted_iota<float>({4, 16, 128}, 2) +
                lax::broadcasted_iota<float>({4, 16, 128}, 1) * 7.0f -
                lax::broadcasted_iota<float>({4, 16, 128}, 0) * 50.0f) *
               0.25f)
                  .astype<bfloat16>();
          row = lax::broadcasted_iota<float>({128}, 0) * -0.5f;
          // Relabelled: loads of x's own shape, scalars, a where over a compare.
          o = (x[pl::ellipsis].astype<float>() * 2.0f + 1.0f).reshape({-1, 128});
          pltpu::sync_copy(o, h1);
          o = jnp::where(x[pl::ellipsis] > bfloat16(0.0f), x[pl::ellipsis], bfloat16(-1.0f))
                  .astype<float>()
                  .reshape({64, 128}) +
              row[pl::ellipsis];
          pltpu::sync_copy(o, h2);
          o = jnp::zeros_like(o);
          o3 = jnp::zeros_like(o3);
          if (with_temporaries) {
            // Through a temporary: a broadcast operand, an iota, a strided view.
            o = jnp::reshape(x[pl::ellipsis].astype<float>() + row[pl::ellipsis], {64, 128});
            o = o[pl::ellipsis] +
                jnp::reshape(lax::broadcasted_iota<float>({4, 16, 128}, 1), {64, 128});
            o3 = jnp::reshape(x.at(pl::all, pl::ds(0, 8), pl::all)[pl::ellipsis] * bfloat16(2.0f),
                              {32, 128});
          }
          pltpu::sync_copy(o, h3);
          pltpu::sync_copy(o3, h4);
        });
  };
  auto xv = [](int64_t a, int64_t b, int64_t c) {
    return static_cast<float>(bfloat16(
        (static_cast<float>(c) + 7.0f * static_cast<float>(b) - 50.0f * static_cast<float>(a)) *
        0.25f));
  };
  for (const bool checked : {false, true}) {
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace(pltpu::InterpretParams{});
    const auto [r1, r2, r3, r4] = run(int64_t{16} << 20, true)();
    for (int64_t i = 0; i < 64; ++i) {
      for (int64_t j = 0; j < 128; ++j) {
        const float x = xv(i / 16, i % 16, j);
        const float row = -0.5f * static_cast<float>(j);
        ASSERT_EQ(r1(i, j), x * 2.0f + 1.0f) << i << "," << j << " checked " << checked;
        ASSERT_EQ(r2(i, j), (x > 0.0f ? x : -1.0f) + row) << i << "," << j;
        ASSERT_EQ(r3(i, j), x + row + static_cast<float>(i % 16)) << i << "," << j;
        if (i < 32) {
          ASSERT_EQ(static_cast<float>(r4(i, j)), 2.0f * xv(i / 8, i % 8, j));
        }
      }
    }
    // The relabelled statements need no temporary: a budget of the scratch alone is enough,
    // and a statement that does need one still raises there.
    const auto [t1, t2, t3, t4] = run(kScratch + 1024, false)();
    for (int64_t k = 0; k < r1.size(); ++k) {
      ASSERT_EQ(t1[k], r1[k]);
      ASSERT_EQ(t2[k], r2[k]);
    }
    auto err = tessera::testing::catch_error<KernelError>([&] { run(kScratch + 1024, true)(); });
    ASSERT_TRUE(err);
    EXPECT_EQ(err->kind(), ErrorKind::kCapacityExceeded) << err->what();
  }
}

}  // namespace
