// The native evaluator's fused conversions and fills (src/native/vector_kernels.cc): a bfloat16 <->
// float32 astype of a ref and a constant fill give exactly what the dtypes' own conversions give
// (round to nearest even, NaNs kept and made quiet, infinities, subnormals, -0), on contiguous
// rows with tails and on strided 2-D views, in the native engine and in checked mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/tessera.h"

namespace {
using namespace tessera;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Values whose rounding to bfloat16 is worth checking, repeated to `n` with small changes.
std::vector<float> tricky_values(int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> base = {0.0f,
                                   -0.0f,
                                   1.0f,
                                   -1.5f,
                                   inf,
                                   -inf,
                                   std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::denorm_min(),
                                   -1e-40f,
                                   from_bits(0x3f808000u),  // tie, even
                                   from_bits(0x3f818000u),  // tie, odd
                                   from_bits(0x3f808001u),
                                   from_bits(0x7fc00001u),  // quiet NaN with a payload
                                   from_bits(0x7f800001u),  // signalling NaN
                                   from_bits(0xff812345u),
                                   3.14159265f,
                                   -2.71828f,
                                   65504.0f,
                                   1e30f};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float b = base[static_cast<size_t>(i) % base.size()];
    v[static_cast<size_t>(i)] = std::isfinite(b) && i >= static_cast<int64_t>(base.size())
                                    ? b * (1.0f + static_cast<float>(i) * 0x1p-12f)
                                    : b;
  }
  return v;
}

// Runs `body(x, h, back)` on (rows, cols) VMEM views of `x` (float32), `h` (bfloat16) and `back`
// (float32), each a window of a wider buffer (row stride cols + 13), in a 1-core kernel; `h` and
// `back` come back with what the kernel wrote, the rest of their buffers as they were.
template <class Body>
void in_kernel(const std::vector<float>& x, std::vector<bfloat16>& h, std::vector<float>& back,
               int64_t rows, int64_t cols, Body body) {
  const int64_t ld = cols + 13;
  auto to_array = [&](const auto& v) {
    Array<typename std::decay_t<decltype(v)>::value_type> a({rows, ld});
    for (int64_t e = 0; e < a.size(); ++e) a[e] = v[static_cast<size_t>(e)];
    return a;
  };
  auto k = pl::kernel(
      pl::out_type(ShapeDtypeStruct<bfloat16>{{rows, ld}}, ShapeDtypeStruct<float>{{rows, ld}}),
      pltpu::TensorCoreMesh("core", 1),
      pl::scratch_types(pltpu::VMEM<float>({rows, ld}), pltpu::VMEM<bfloat16>({rows, ld}),
                        pltpu::VMEM<float>({rows, ld})))(
      [&](pltpu::HbmRef<const float> x_hbm, pltpu::HbmRef<const bfloat16> h0,
          pltpu::HbmRef<const float> b0, pltpu::HbmRef<bfloat16> h_hbm, pltpu::HbmRef<float> b_hbm,
          pltpu::VmemRef<float> xs, pltpu::VmemRef<bfloat16> hs, pltpu::VmemRef<float> bs) {
        pltpu::sync_copy(x_hbm, xs);
        pltpu::sync_copy(h0, hs);
        pltpu::sync_copy(b0, bs);
        const auto win = [&](auto r) { return r.at(pl::all, pl::ds(3, cols)); };
        body(win(xs), win(hs), win(bs));
        pltpu::sync_copy(hs, h_hbm);
        pltpu::sync_copy(bs, b_hbm);
      });
  const auto [ho, bo] = k(to_array(x), to_array(h), to_array(back));
  for (int64_t e = 0; e < ho.size(); ++e) h[static_cast<size_t>(e)] = ho[e];
  for (int64_t e = 0; e < bo.size(); ++e) back[static_cast<size_t>(e)] = bo[e];
}

void check_round_trip(bool checked) {
  for (const int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{37}, int64_t{128}}) {
    const int64_t rows = 3, ld = cols + 13;
    std::vector<float> x = tricky_values(rows * ld);
    std::vector<bfloat16> h(x.size(), bfloat16::from_bits(0x1234));
    std::vector<float> back(x.size(), -7.0f);
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace();
    in_kernel(x, h, back, rows, cols, [](auto xs, auto hs, auto bs) {
      hs = xs.template astype<bfloat16>();
      bs = hs.template astype<float>();
    });
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < ld; ++j) {
        const size_t e = static_cast<size_t>(i * ld + j);
        const bool inside = j >= 3 && j < 3 + cols;
        if (!inside) {  // untouched outside the window
          ASSERT_EQ(h[e].bits, 0x1234) << i << ", " << j;
          ASSERT_EQ(back[e], -7.0f) << i << ", " << j;
          continue;
        }
        ASSERT_EQ(h[e].bits, bfloat16(x[e]).bits) << "cols " << cols << " at " << i << ", " << j;
        uint32_t want = static_cast<uint32_t>(h[e].bits) << 16, got;
        std::memcpy(&got, &back[e], 4);
        ASSERT_EQ(got, want) << "cols " << cols << " at " << i << ", " << j;
      }
    }
  }
}

TEST(FusedConvert, BFloat16RoundTripMatchesTheDtype) { check_round_trip(false); }
TEST(FusedConvert, BFloat16RoundTripMatchesTheDtypeChecked) { check_round_trip(true); }

// Rows of 64 whose 16-element vectors hold, in turn: no subnormal (NaNs with payloads, ties,
// the largest floats, infinities, -0), one subnormal among such values, only subnormals, and
// values of every magnitude. AVX512-BF16's conversion, which the native engine takes where the
// CPU has it, flushes subnormals: a vector that holds one must be rounded exactly all the same.
std::vector<float> vectors_with_and_without_subnormals(int64_t rows, int64_t ld) {
  const uint32_t normal[16] = {0x7fc00001u, 0x7f800001u, 0xffa00003u, 0x3f808000u,
                               0x3f818000u, 0x3f808001u, 0x7f7fffffu, 0x7f7f8000u,
                               0xff7f8000u, 0x7f800000u, 0xff800000u, 0x80000000u,
                               0x00800000u, 0x0080ffffu, 0xc0490fdbu, 0x00000000u};
  std::vector<float> x(static_cast<size_t>(rows * ld), 1.0f);
  for (int64_t i = 0; i < rows; ++i) {
    float* row = x.data() + i * ld + 3;  // the window of in_kernel
    for (int j = 0; j < 16; ++j) {
      row[j] = from_bits(normal[(j + i) % 16]);
      row[16 + j] = j == 5 ? from_bits(0x00018000u + static_cast<uint32_t>(i)) : row[j];
      row[32 + j] = from_bits(0x807f8000u + static_cast<uint32_t>(j * 1024 + i));
      row[48 + j] =
          std::ldexp(1.0f + static_cast<float>(j) * 0x1p-9f, static_cast<int>(8 * j - 64 - i));
    }
  }
  return x;
}

TEST(FusedConvert, BFloat16RoundingOfVectorsWithAndWithoutSubnormals) {
  const int64_t rows = 3, cols = 64, ld = cols + 13;
  const std::vector<float> x = vectors_with_and_without_subnormals(rows, ld);
  for (const bool checked : {false, true}) {
    std::optional<pltpu::ForceTpuInterpretMode> force;
    if (checked) force.emplace();
    std::vector<bfloat16> h(x.size()), h2(x.size());
    std::vector<float> back(x.size()), back2(x.size());
    // The fused conversion of a ref, and the tile evaluator's rounding of a node of a tree.
    in_kernel(x, h, back, rows, cols,
              [](auto xs, auto hs, auto) { hs = xs.template astype<bfloat16>(); });
    in_kernel(x, h2, back2, rows, cols,
              [](auto xs, auto hs, auto) { hs = (xs + 0.0f).template astype<bfloat16>(); });
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 3; j < 3 + cols; ++j) {
        const size_t e = static_cast<size_t>(i * ld + j);
        ASSERT_EQ(h[e].bits, bfloat16(x[e]).bits)
            << (checked ? "checked" : "native") << ", astype at " << i << ", " << j;
        volatile float zero = 0.0f;  // x + 0 as the kernel computes it (a NaN made quiet)
        ASSERT_EQ(h2[e].bits, bfloat16(x[e] + zero).bits)
            << (checked ? "checked" : "native") << ", (x + 0).astype at " << i << ", " << j;
      }
    }
  }
}

TEST(FusedConvert, FillsWriteOnlyTheWindow) {
  const int64_t rows = 4, cols = 37, ld = cols + 13;
  std::vector<float> x(static_cast<size_t>(rows * ld), 1.0f);
  std::vector<bfloat16> h(x.size(), bfloat16::from_bits(0x1234));
  std::vector<float> back(x.size(), -7.0f);
  in_kernel(x, h, back, rows, cols, [](auto, auto hs, auto bs) {
    hs = jnp::zeros_like(hs);
    bs = jnp::full_like(bs, 2.5f);
  });
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < ld; ++j) {
      const size_t e = static_cast<size_t>(i * ld + j);
      const bool inside = j >= 3 && j < 3 + cols;
      EXPECT_EQ(h[e].bits, inside ? 0 : 0x1234) << i << ", " << j;
      EXPECT_EQ(back[e], inside ? 2.5f : -7.0f) << i << ", " << j;
    }
  }
}

}  // namespace
