// The dtypes beyond float32/bfloat16/int32/int8/bool: float16 and the float8s (conversions bit
// for bit against numpy and ml_dtypes, tests/unit/data/narrow_float_cases.txt, written by
// scripts/gen_narrow_float_cases.py; per-node rounding), and int16/uint8/uint16/uint32 (wrapping,
// and uint32's unsigned compare, division, shifts, max/min, conversions and reductions), in the
// scalar types and in the evaluator on every SIMD target this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "native/vector_plan.h"
#include "runtime/step_hints.h"
#include "support/checked_support.h"
#include "support/vector_targets.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct EncodeCase {
  uint32_t f32;
  uint16_t f16;
  uint8_t e4m3fn, e5m2, e4m3b11fnuz;
};
struct DecodeCase {
  std::string format;
  uint32_t bits, f32;
};
struct Cases {
  std::vector<EncodeCase> encode;
  std::vector<DecodeCase> decode;
};

const Cases& cases() {
  static const Cases c = [] {
    Cases out;
    std::ifstream in(std::string(TESSERA_TEST_DATA_DIR) + "/narrow_float_cases.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string tag;
      ss >> tag;
      if (tag == "E") {
        uint32_t a, b, e4, e5, b11;
        ss >> std::hex >> a >> b >> e4 >> e5 >> b11;
        out.encode.push_back({a, static_cast<uint16_t>(b), static_cast<uint8_t>(e4),
                              static_cast<uint8_t>(e5), static_cast<uint8_t>(b11)});
      } else if (tag == "D") {
        DecodeCase d;
        ss >> d.format >> std::hex >> d.bits >> d.f32;
        out.decode.push_back(d);
      }
    }
    return out;
  }();
  return c;
}

// NaN bit patterns compare by class (NaN, sign) only where the reference kept a payload that
// the other side need not; everything else is bit for bit.
bool same_f32(uint32_t got, uint32_t want) {
  if (std::isnan(from_bits(want))) return std::isnan(from_bits(got)) && (got >> 31) == (want >> 31);
  return got == want;
}

TEST(NarrowFloat, ScalarConversionsMatchMlDtypes) {
  const Cases& c = cases();
  ASSERT_GT(c.encode.size(), 4000u);
  ASSERT_GT(c.decode.size(), 2700u);
  for (const EncodeCase& e : c.encode) {
    const float x = from_bits(e.f32);
    ASSERT_EQ(float16(x).bits, e.f16) << std::hex << e.f32;
    ASSERT_EQ(float8_e4m3fn(x).bits, e.e4m3fn) << std::hex << e.f32;
    ASSERT_EQ(float8_e5m2(x).bits, e.e5m2) << std::hex << e.f32;
    ASSERT_EQ(float8_e4m3b11fnuz(x).bits, e.e4m3b11fnuz) << std::hex << e.f32;
  }
  for (const DecodeCase& d : c.decode) {
    float f = 0;
    if (d.format == "e4m3fn") f = float8_e4m3fn::from_bits(static_cast<uint8_t>(d.bits));
    if (d.format == "e5m2") f = float8_e5m2::from_bits(static_cast<uint8_t>(d.bits));
    if (d.format == "e4m3b11fnuz") {
      f = float8_e4m3b11fnuz::from_bits(static_cast<uint8_t>(d.bits));
    }
    if (d.format == "f16") f = float16::from_bits(static_cast<uint16_t>(d.bits));
    ASSERT_TRUE(same_f32(bits_of(f), d.f32)) << d.format << " " << std::hex << d.bits;
  }
  // Every float16 pattern survives a round trip through float.
  for (uint32_t b = 0; b < 65536; ++b) {
    const float16 h = float16::from_bits(static_cast<uint16_t>(b));
    if (!std::isnan(static_cast<float>(h))) {
      ASSERT_EQ(float16(static_cast<float>(h)).bits, b);
    }
  }
  // A double rounds once: just above a float16 tie (1 + 2^-11) it rounds up, although the
  // nearest float is the tie itself, which would round to even.
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)).bits, 0x3c01);
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11)).bits, 0x3c00);
  EXPECT_EQ(float16(0.1).bits, 0x2e66);  // numpy.float16(0.1)
  EXPECT_EQ(float8_e5m2(-3).bits, 0xc2);
  static_assert(float16(1.0f).bits == 0x3c00 && float8_e4m3fn(448.0f).bits == 0x7e);
  EXPECT_EQ(static_cast<float>(float8_e4m3fn(500.0f)) != static_cast<float>(float8_e4m3fn(500.0f)),
            true);  // overflow is NaN (no infinity)
  EXPECT_EQ(static_cast<float>(float8_e5m2(1e6f)), std::numeric_limits<float>::infinity());
  // float8_e4m3b11fnuz: the largest value is 30; NaN, infinity, overflow (31 rounds up to 32)
  // and negative overflow are its one NaN 0x80; there is no -0; the smallest subnormal 2^-13.
  static_assert(float8_e4m3b11fnuz(30.0f).bits == 0x7f && float8_e4m3b11fnuz(-30.0f).bits == 0xff);
  static_assert(float8_e4m3b11fnuz(31.0f).bits == 0x80 && float8_e4m3b11fnuz(-1e9f).bits == 0x80);
  static_assert(float8_e4m3b11fnuz(-0.0f).bits == 0 && float8_e4m3b11fnuz(-1e-30f).bits == 0);
  static_assert(float8_e4m3b11fnuz(0x1p-13f).bits == 1 &&
                float8_e4m3b11fnuz(-0x1p-13f).bits == 0x81);
  EXPECT_EQ(float8_e4m3b11fnuz(-std::numeric_limits<float>::infinity()).bits, 0x80);
  EXPECT_EQ(float8_e4m3b11fnuz(std::numeric_limits<float>::quiet_NaN()).bits, 0x80);
  EXPECT_TRUE(std::isnan(static_cast<float>(float8_e4m3b11fnuz::from_bits(0x80))));
  for (uint32_t b = 0; b < 256; ++b) {  // every other pattern is finite and round-trips
    if (b == 0x80) continue;
    const float v = float8_e4m3b11fnuz::from_bits(static_cast<uint8_t>(b));
    ASSERT_TRUE(std::isfinite(v)) << b;
    ASSERT_EQ(float8_e4m3b11fnuz(v).bits, b);
  }
}

// Converts every table input with the evaluator (astype) and back, on the current target.
void check_vector_conversions(const char* target) {
  const Cases& c = cases();
  const int64_t n = static_cast<int64_t>(c.encode.size());
  std::vector<float> x(c.encode.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = from_bits(c.encode[i].f32);
  std::vector<float16> h(x.size());
  std::vector<float8_e4m3fn> e4(x.size());
  std::vector<float8_e5m2> e5(x.size());
  std::vector<float8_e4m3b11fnuz> b11(x.size());
  auto xr = vref(x, {n});
  vref(h, {n}) = xr.astype<float16>();
  vref(e4, {n}) = xr.astype<float8_e4m3fn>();
  vref(e5, {n}) = xr.astype<float8_e5m2>();
  vref(b11, {n}) = xr.astype<float8_e4m3b11fnuz>();
  std::vector<float> back(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i].bits, c.encode[i].f16) << target << " " << std::hex << c.encode[i].f32;
    ASSERT_EQ(e4[i].bits, c.encode[i].e4m3fn) << target << " " << std::hex << c.encode[i].f32;
    ASSERT_EQ(e5[i].bits, c.encode[i].e5m2) << target << " " << std::hex << c.encode[i].f32;
    ASSERT_EQ(b11[i].bits, c.encode[i].e4m3b11fnuz) << target << " " << std::hex << c.encode[i].f32;
  }
  // Decoding: the evaluator's loads against the scalar conversion (checked above).
  for (auto [name, dt] : {std::pair{"f16", 0}, std::pair{"e4m3fn", 1}, std::pair{"e5m2", 2},
                          std::pair{"e4m3b11fnuz", 3}}) {
    auto br = vref(back, {n});
    if (dt == 0) br = vref(h, {n}).astype<float>();
    if (dt == 1) br = vref(e4, {n}).astype<float>();
    if (dt == 2) br = vref(e5, {n}).astype<float>();
    if (dt == 3) br = vref(b11, {n}).astype<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = dt == 0   ? static_cast<float>(h[i])
                         : dt == 1 ? static_cast<float>(e4[i])
                         : dt == 2 ? static_cast<float>(e5[i])
                                   : static_cast<float>(b11[i]);
      ASSERT_TRUE(same_f32(bits_of(back[i]), bits_of(want))) << target << " " << name << " " << i;
    }
  }
  // A strided store takes the scalar path; it must agree with the vector one.
  std::vector<float16> hs(x.size() * 2);
  pltpu::VmemRef<float16>(hs.data(), {n}, {2}) = xr.astype<float16>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(hs[2 * i].bits, h[i].bits) << target << i;
}

TEST(NarrowFloat, EvaluatorConversionsMatchOnEveryTarget) {
  // AVX2 and up convert float16 with F16C; lesser targets with the generic bit code.
  EXPECT_GE(tessera::testing::on_every_vector_target(
                [](const char* name) { check_vector_conversions(name); }),
            1);
}

// A (3, 200) block: rows of 200 bfloat16 are 400 bytes apart, so rows 0 and 2 start aligned for
// streaming stores and row 1 does not, and 200 leaves a partial vector at the end of each row.
constexpr int64_t kStreamRows = 3, kStreamCols = 200, kStreamN = kStreamRows * kStreamCols;
template <class T>
struct alignas(64) StreamBlock {
  T v[kStreamN];
};

// Whether the evaluator took a pipeline's hint to stream into [dst, dst + bytes) (the hint of
// src/runtime/step_hints.h) while `assign` ran.
template <class F>
bool with_stream_hint(const void* dst, int64_t bytes, F&& assign) {
  detail::StepHints h;
  h.stream_lo[0] = static_cast<const std::byte*>(dst);
  h.stream_hi[0] = static_cast<const std::byte*>(dst) + bytes;
  h.num_stream = 1;
  {
    const detail::HintsScope scope(&h);
    assign();
  }
  return h.streamed;
}

// `value()` assigned to a block of T without the hint and with it: the hint taken, and the same
// bytes stored. Returns the block stored with the hint.
template <class T, class V>
std::unique_ptr<StreamBlock<T>> stored_and_streamed(V&& value) {
  auto stored = std::make_unique<StreamBlock<T>>();
  auto streamed = std::make_unique<StreamBlock<T>>();
  pltpu::VmemRef<T>(stored->v, {kStreamRows, kStreamCols}) = value();
  EXPECT_TRUE(with_stream_hint(streamed->v, sizeof(StreamBlock<T>), [&] {
    pltpu::VmemRef<T>(streamed->v, {kStreamRows, kStreamCols}) = value();
  }));
  EXPECT_EQ(std::memcmp(stored->v, streamed->v, sizeof(StreamBlock<T>)), 0);
  return streamed;
}

// Stores into an output block a pipeline streams take streaming stores in the rows aligned for
// them and regular stores elsewhere: every value as the unhinted store writes it, on every target,
// for bfloat16 <-> float32 conversions, computed results of every width and constant fills.
TEST(NarrowDtypes, StreamedStoresEqualRegularOnes) {
  auto x = std::make_unique<StreamBlock<float>>();
  uint32_t r = 12345;
  for (int64_t i = 0; i < kStreamN; ++i) {
    r = r * 1664525u + 1013904223u;
    x->v[i] = from_bits(r);
  }
  // Ties to even both ways, the largest finite value, infinities and NaNs among them.
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u,
                              0xff800000u, 0x7fc00001u, 0xffa00000u, 0x00000001u};
  for (int64_t i = 0; i < 8; ++i) x->v[i * 71] = from_bits(special[i]);
  auto ints = std::make_unique<StreamBlock<int32_t>>();
  for (int64_t i = 0; i < kStreamN; ++i)
    ints->v[i] = static_cast<int32_t>(i * 7919 % 100003) - 50000;
  EXPECT_GE(
      tessera::testing::on_every_vector_target([&](const char* name) {
        SCOPED_TRACE(name);
        const pltpu::VmemRef<float> xr(x->v, {kStreamRows, kStreamCols});
        const auto narrow = stored_and_streamed<bfloat16>([&] { return xr.astype<bfloat16>(); });
        for (int64_t i = 0; i < kStreamN; ++i) {
          ASSERT_EQ(narrow->v[i].bits, bfloat16(x->v[i]).bits) << "element " << i;
        }
        const pltpu::VmemRef<bfloat16> nr(narrow->v, {kStreamRows, kStreamCols});
        stored_and_streamed<float>([&] { return nr.astype<float>(); });
        // Computed results of every width (the evaluator's general path, and float32's fused one).
        stored_and_streamed<bfloat16>([&] { return (xr * 2.0f + 1.0f).astype<bfloat16>(); });
        stored_and_streamed<float16>([&] { return (xr * 2.0f).astype<float16>(); });
        stored_and_streamed<float8_e4m3fn>([&] { return (xr * 2.0f).astype<float8_e4m3fn>(); });
        stored_and_streamed<float>([&] { return xr * 2.0f + 1.0f; });
        // Trees (src/native/vector_fused_tree-inl.h), a mask with an iota among them.
        stored_and_streamed<float>([&] { return 0.5f * xr * (1.0f + jnp::tanh(xr * 0.7f)); });
        stored_and_streamed<float>([&] {
          return jnp::where(lax::broadcasted_iota<int32_t>({kStreamRows, kStreamCols}, 1) > 100,
                            xr * 2.0f, xr - 1.0f);
        });
        const pltpu::VmemRef<int32_t> ir(ints->v, {kStreamRows, kStreamCols});
        stored_and_streamed<int32_t>([&] { return ir * 3 + 1; });
        stored_and_streamed<int16_t>([&] { return (ir * 3 + 1).astype<int16_t>(); });
        stored_and_streamed<int8_t>([&] { return (ir * 3 + 1).astype<int8_t>(); });
        stored_and_streamed<uint8_t>([&] { return (ir * 3 + 1).astype<uint8_t>(); });
        // Constant fills, from one element past an aligned start (each row has a head before
        // its first aligned element), around untouched first elements.
        auto fill_f32 = std::make_unique<StreamBlock<float>>();
        auto fill_bf16 = std::make_unique<StreamBlock<bfloat16>>();
        std::fill_n(fill_f32->v, kStreamN, 0.0f);
        std::fill_n(fill_bf16->v, kStreamN, bfloat16(0.0f));
        const Shape shape{kStreamRows, kStreamCols - 1};
        pltpu::VmemRef<float> ff(fill_f32->v + 1, shape, {kStreamCols, 1});
        pltpu::VmemRef<bfloat16> fb(fill_bf16->v + 1, shape, {kStreamCols, 1});
        EXPECT_TRUE(with_stream_hint(fill_f32->v, sizeof(StreamBlock<float>),
                                     [&] { ff = jnp::full_like(ff, 1.5f); }));
        EXPECT_TRUE(with_stream_hint(fill_bf16->v, sizeof(StreamBlock<bfloat16>),
                                     [&] { fb = jnp::full_like(fb, 2.5f); }));
        for (int64_t i = 0; i < kStreamN; ++i) {
          const bool head = i % kStreamCols == 0;
          ASSERT_EQ(fill_f32->v[i], head ? 0.0f : 1.5f) << "element " << i;
          ASSERT_EQ(fill_bf16->v[i].bits, head ? 0 : bfloat16(2.5f).bits) << "element " << i;
        }
      }),
      1);
}

TEST(NarrowFloat, EveryNodeRoundsToItsDtype) {
  const int n = 300;
  std::vector<float16> a(n), b(n), o(n);
  std::vector<float8_e4m3fn> p(n), q(n), r(n);
  for (int i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i) * 0.37f - 40.0f;
    b[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i % 13) * 0.1f;
    p[static_cast<size_t>(i)] = static_cast<float>(i % 40) * 0.3f - 5.0f;
    q[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i % 7);
  }
  auto ar = vref(a, {n}), br = vref(b, {n});
  vref(o, {n}) = ar * br + 1.5f;  // two nodes: rounded after the product and after the sum
  auto pr = vref(p, {n}), qr = vref(q, {n});
  vref(r, {n}) = jnp::exp(pr / qr) - qr;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const float prod = float16(static_cast<float>(a[i]) * static_cast<float>(b[i]));
    ASSERT_EQ(o[i].bits, float16(prod + 1.5f).bits) << i;
    const float quot = float8_e4m3fn(static_cast<float>(p[i]) / static_cast<float>(q[i]));
    const float e = float8_e4m3fn(std::exp(quot));
    const float8_e4m3fn want(e - static_cast<float>(q[i]));
    // exp is within an ULP of libm's in float32, far below a float8 step, except where the
    // float32 result sits on a rounding boundary of the float8.
    if (std::isnan(static_cast<float>(want))) {
      ASSERT_TRUE(std::isnan(static_cast<float>(r[i]))) << i;
      continue;
    }
    ASSERT_NEAR(static_cast<float>(r[i]), static_cast<float>(want),
                std::fabs(static_cast<float>(want)) * 0.07f + 1e-6f)
        << i;
  }
  // Overflow of a float16 product is infinity; of a float8_e4m3fn one, NaN.
  std::vector<float16> big(1, float16(300.0f)), bo(1);
  vref(bo, {1}) = vref(big, {1}) * vref(big, {1});
  EXPECT_TRUE(std::isinf(static_cast<float>(bo[0])));
  std::vector<float8_e4m3fn> b8(1, float8_e4m3fn(256.0f)), b8o(1);
  vref(b8o, {1}) = vref(b8, {1}) + vref(b8, {1});
  EXPECT_EQ(b8o[0].bits, 0x7f);
  // float8_e4m3b11fnuz: overflow of either sign is its NaN 0x80, and a negative result that
  // is zero (-2 * 0, or a product below half the smallest subnormal) is +0, never 0x80. The
  // 130 lanes take both the vector and the scalar tail of the store.
  const int m = 130;
  std::vector<float8_e4m3b11fnuz> u(m), v(m), w(m);
  for (int i = 0; i < m; ++i) {
    u[static_cast<size_t>(i)] = float8_e4m3b11fnuz(i % 2 == 0 ? 16.0f : -16.0f);
    v[static_cast<size_t>(i)] = float8_e4m3b11fnuz(i % 3 == 0 ? 0.0f : 0x1p-13f);
  }
  vref(w, {m}) = vref(u, {m}) + vref(u, {m});
  for (const auto& x : w) ASSERT_EQ(x.bits, 0x80);
  vref(w, {m}) = -vref(u, {m}) * vref(v, {m});  // 16 * 2^-13 = 2^-9, or -0 where v is 0
  for (int i = 0; i < m; ++i) {
    const float want = -static_cast<float>(u[static_cast<size_t>(i)]) *
                       static_cast<float>(v[static_cast<size_t>(i)]);
    ASSERT_EQ(w[static_cast<size_t>(i)].bits, float8_e4m3b11fnuz(want).bits) << i;
    if (want == 0.0f) {
      ASSERT_EQ(w[static_cast<size_t>(i)].bits, 0) << i;
    }
  }
  vref(w, {m}) = vref(v, {m}) * vref(v, {m}) * -1.0f;  // 2^-26: rounds to zero
  for (const auto& x : w) ASSERT_EQ(x.bits, 0);
}

TEST(NarrowInts, WrapOnEveryNode) {
  const int n = 260;
  std::vector<int16_t> s(n), so(n);
  std::vector<uint8_t> u(n), uo(n);
  std::vector<uint16_t> w(n), wo(n);
  for (int i = 0; i < n; ++i) {
    s[static_cast<size_t>(i)] = static_cast<int16_t>(i * 250 - 30000);
    u[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    w[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 257);
  }
  vref(so, {n}) = vref(s, {n}) * int16_t{3} + 7;
  vref(uo, {n}) = vref(u, {n}) * 3 - vref(u, {n});
  vref(wo, {n}) = (vref(w, {n}) << 4) + (vref(w, {n}) >> 3);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    ASSERT_EQ(so[i], static_cast<int16_t>(static_cast<int16_t>(s[i] * 3) + 7)) << i;
    ASSERT_EQ(uo[i], static_cast<uint8_t>(static_cast<uint8_t>(u[i] * 3) - u[i])) << i;
    ASSERT_EQ(wo[i], static_cast<uint16_t>(static_cast<uint16_t>(w[i] << 4) + (w[i] >> 3))) << i;
  }
  // Shifts past the width give 0; int16's logical shift sees its 16 bits.
  std::vector<int16_t> m1(1, int16_t{-32768}), sh(1);
  vref(sh, {1}) = lax::shift_right_logical(vref(m1, {1}), int16_t{15});
  EXPECT_EQ(sh[0], 1);
  vref(sh, {1}) = vref(m1, {1}) << int16_t{16};
  EXPECT_EQ(sh[0], 0);
  vref(sh, {1}) = vref(m1, {1}) >> int16_t{20};  // as jnp: the sign fill
  EXPECT_EQ(sh[0], -1);
}

TEST(NarrowInts, Uint32IsUnsigned) {
  std::vector<uint32_t> x = {0u, 1u, 0x80000000u, 0xffffffffu, 0x80000001u, 7u, 12345678u, 3u};
  const int n = static_cast<int>(x.size());
  std::vector<uint32_t> y = {5u, 0u, 2u, 0xfffffffeu, 1u, 0u, 10u, 0x90000000u};
  auto xr = vref(x, {n}), yr = vref(y, {n});
  std::vector<uint32_t> o(x.size());
  auto orf = vref(o, {n});
  auto each = [&](auto expr, auto want) {
    orf = std::move(expr);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(o[i], want(x[i], y[i])) << i;
  };
  each(jnp::maximum(xr, yr), [](uint32_t a, uint32_t b) { return a > b ? a : b; });
  each(jnp::minimum(xr, yr), [](uint32_t a, uint32_t b) { return a < b ? a : b; });
  each(jnp::where(xr > yr, xr, yr), [](uint32_t a, uint32_t b) { return a > b ? a : b; });
  each(jnp::floor_divide(xr, yr),
       [](uint32_t a, uint32_t b) { return b == 0 ? 0xffffffffu : a / b; });
  each(xr % yr, [](uint32_t a, uint32_t b) { return b == 0 ? a : a % b; });
  each(xr >> 1u, [](uint32_t a, uint32_t) { return a >> 1; });
  each(jnp::abs(xr), [](uint32_t a, uint32_t) { return a; });
  each(jnp::sign(xr), [](uint32_t a, uint32_t) { return a != 0 ? 1u : 0u; });
  each(-xr, [](uint32_t a, uint32_t) { return 0u - a; });
  // To and from float: exact below 2^24, correctly rounded above; saturating, NaN -> 0.
  std::vector<float> f(x.size());
  vref(f, {n}) = xr.astype<float>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(f[i], static_cast<float>(x[i])) << i;
  std::vector<float> g = {-1.0f,         0.5f,          2147483648.0f,
                          4294967040.0f, 4294967296.0f, std::numeric_limits<float>::quiet_NaN(),
                          1e20f,         3.9f};
  orf = vref(g, {n}).astype<uint32_t>();
  const std::vector<uint32_t> want = {0u,          0u, 0x80000000u, 4294967040u,
                                      0xffffffffu, 0u, 0xffffffffu, 3u};
  EXPECT_EQ(o, want);
  // Reductions compare unsigned; sums wrap.
  std::vector<uint32_t> s(1);
  std::vector<int32_t> idx(1);
  vref(s, {}) = jnp::max(xr);
  EXPECT_EQ(s[0], 0xffffffffu);
  vref(s, {}) = jnp::min(xr);
  EXPECT_EQ(s[0], 0u);
  vref(idx, {}) = jnp::argmax(xr);
  EXPECT_EQ(idx[0], 3);
  vref(s, {}) = jnp::sum(xr);
  uint32_t total = 0;
  for (uint32_t v : x) total += v;
  EXPECT_EQ(s[0], total);
  // uint32 + int32 is int32 (jnp with 64-bit types off): the same bits.
  std::vector<int32_t> i32(x.size(), 1), io(x.size());
  vref(io, {n}) = xr + vref(i32, {n});
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(io[i], static_cast<int32_t>(x[i] + 1u)) << i;
}

TEST(NarrowInts, FloatConversionsSaturate) {
  // Expected values: jnp (jax 0.10.2, CPU) for the same float32 inputs.
  const std::vector<float> f = {300.f, -1.f, 1e10f, -1e10f, std::nanf(""), 2.5f, -2.5f, 65535.9f};
  const int n = static_cast<int>(f.size());
  std::vector<float> x = f;
  auto xr = vref(x, {n});
  std::vector<uint8_t> u8(f.size());
  std::vector<int16_t> i16(f.size());
  std::vector<uint16_t> u16(f.size());
  vref(u8, {n}) = xr.astype<uint8_t>();
  vref(i16, {n}) = xr.astype<int16_t>();
  vref(u16, {n}) = xr.astype<uint16_t>();
  EXPECT_EQ(u8, (std::vector<uint8_t>{255, 0, 255, 0, 0, 2, 0, 255}));
  EXPECT_EQ(i16, (std::vector<int16_t>{300, -1, 32767, -32768, 0, 2, -2, 32767}));
  EXPECT_EQ(u16, (std::vector<uint16_t>{300, 0, 65535, 0, 0, 2, 0, 65535}));
  // Integer conversions wrap (numpy's astype).
  std::vector<int32_t> big = {70000, -1, 255, 256, -32769, 0, 1, 2};
  vref(u8, {n}) = vref(big, {n}).astype<uint8_t>();
  vref(i16, {n}) = vref(big, {n}).astype<int16_t>();
  EXPECT_EQ(u8, (std::vector<uint8_t>{112, 255, 255, 0, 255, 0, 1, 2}));
  EXPECT_EQ(i16, (std::vector<int16_t>{4464, -1, 255, 256, 32767, 0, 1, 2}));
}

TEST(NarrowDtypes, ReductionsGiveJnpDtypes) {
  std::vector<uint8_t> u(300, 200);
  std::vector<int16_t> s(300, -300);
  std::vector<float16> h(300, float16(0.5f));
  std::vector<float8_e5m2> e(100, float8_e5m2(1.0f));
  static_assert(std::is_same_v<decltype(jnp::sum(vref(u, {300})))::value_type, uint32_t>);
  static_assert(std::is_same_v<decltype(jnp::sum(vref(s, {300})))::value_type, int32_t>);
  static_assert(std::is_same_v<decltype(jnp::sum(vref(h, {300})))::value_type, float16>);
  static_assert(std::is_same_v<decltype(jnp::max(vref(u, {300})))::value_type, uint8_t>);
  std::vector<uint32_t> su(1);
  std::vector<int32_t> ss(1);
  std::vector<float16> sh(1);
  std::vector<float8_e5m2> se(1);
  vref(su, {}) = jnp::sum(vref(u, {300}));
  vref(ss, {}) = jnp::sum(vref(s, {300}));
  vref(sh, {}) = jnp::sum(vref(h, {300}));
  vref(se, {}) = jnp::sum(vref(e, {100}));
  EXPECT_EQ(su[0], 60000u);
  EXPECT_EQ(ss[0], -90000);
  EXPECT_EQ(static_cast<float>(sh[0]), 150.0f);
  // Accumulated in float32, rounded once: 100 -> 96 (float8_e5m2 has steps of 16 there).
  EXPECT_EQ(static_cast<float>(se[0]), 96.0f);
}

// Checked mode's poison for fresh memory of each new dtype (the reads allowed): the integer
// maximum, or NaN for the floats; the "zero" mode gives zeros; and a kernel that writes its
// scratch first (the clean twin) sees its own values.
template <class T>
Array<T> copy_scratch(bool write_first, pltpu::UninitializedMemory mode) {
  pltpu::InterpretParams p = checked_testing::checked();
  p.allow_uninitialized_reads = true;
  p.uninitialized_memory = mode;
  return pl::kernel(pl::out_type<T>({128}), pltpu::TensorCoreMesh("core", 1),
                    pl::scratch_types(pltpu::VMEM<T>({128})),
                    p)([write_first](pltpu::HbmRef<T> o, pltpu::VmemRef<T> s) {
    if (write_first) s = jnp::full_like(s, T(3));
    pltpu::sync_copy(s, o);
  })();
}

template <class T>
void expect_poison(uint32_t bits) {
  const Array<T> a = copy_scratch<T>(false, pltpu::UninitializedMemory::nan);
  for (int64_t i = 0; i < 128; ++i) {
    uint32_t got = 0;
    std::memcpy(&got, &a[i], sizeof(T));
    ASSERT_EQ(got, bits) << dtype_name(dtype_of<T>) << " " << i;
  }
  const Array<T> z = copy_scratch<T>(false, pltpu::UninitializedMemory::zero);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(static_cast<double>(z[i]), 0.0);
  const Array<T> w = copy_scratch<T>(true, pltpu::UninitializedMemory::nan);
  for (int64_t i = 0; i < 128; ++i) ASSERT_EQ(static_cast<double>(w[i]), 3.0);
}

TEST(NarrowDtypes, CheckedModePoison) {
  expect_poison<int16_t>(0x7fff);
  expect_poison<uint8_t>(0xff);
  expect_poison<uint16_t>(0xffff);
  expect_poison<uint32_t>(0xffffffffu);
  expect_poison<float16>(0x7e00);
  expect_poison<float8_e4m3fn>(0x7f);
  expect_poison<float8_e5m2>(0x7e);
  expect_poison<float8_e4m3b11fnuz>(0x80);
}

// Blocks of the new dtypes through a pipelined pallas_call (DMA into VMEM windows, partial
// edge blocks), and a strided sync_copy.
TEST(NarrowDtypes, BlocksAndDma) {
  const int64_t M = 20, N = 300;
  Array<float8_e5m2> x({M, N});
  Array<uint16_t> y({M, N});
  for (int64_t i = 0; i < M * N; ++i) {
    x[i] = float8_e5m2(static_cast<float>(i % 17) - 8.0f);
    y[i] = static_cast<uint16_t>(i * 7);
  }
  const pl::BlockSpec spec({8, 128}, [](int i, int j) { return pl::idx(i, j); });
  auto add = pl::pallas_call(
      [](pltpu::VmemRef<const float8_e5m2> a, pltpu::VmemRef<const uint16_t> b,
         pltpu::VmemRef<float16> o) { o = a.astype<float16>() + b.astype<float16>(); },
      pl::out_shape<float16>({M, N}), pl::grid({pl::cdiv(M, 8), pl::cdiv(N, 128)}),
      pl::in_specs(spec, spec), pl::out_specs(spec));
  const Array<float16> z = add(x, y);
  for (int64_t i = 0; i < M * N; ++i) {
    const float want = float16(static_cast<float>(x[i])) + float16(static_cast<float>(y[i]));
    ASSERT_EQ(z[i].bits, float16(want).bits) << i;
  }
  std::vector<int16_t> src(64), dst(32, 0);
  for (int i = 0; i < 64; ++i) src[static_cast<size_t>(i)] = static_cast<int16_t>(i - 1000);
  pltpu::sync_copy(pltpu::VmemRef<int16_t>(src.data(), {64}).at(pl::ds(0, 32, 2)),
                   pltpu::VmemRef<int16_t>(dst.data(), {32}));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(dst[static_cast<size_t>(i)], 2 * i - 1000);
}

}  // namespace
