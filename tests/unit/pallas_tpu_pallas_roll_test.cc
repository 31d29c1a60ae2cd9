// Ports of tpu_pallas_test.py's rolls (docs/pallas-parity.md): MiscellaneousTest's
// pltpu.roll cases, without a stride (np.roll along one axis) and with one (slice i along the
// stride axis rolled by shift + i * stride, Pallas' definition of pltpu.roll's stride). Every
// result is compared with a host reference. Pallas skips the strided cases a TPU cannot lower
// (shapes not aligned to the tiling, strides that would roll a row past its extent, 8-bit types
// before v6); Tessera rolls any shape, so they run too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

template <class T>
void roll_major_dim(const Shape& shape, int shift, bool dynamic) {
  const Array<T> x = arange<T>(shape);
  const Array<T> out =
      dynamic ? pl::pallas_call([](pltpu::VmemRef<const T> xr, pltpu::SmemRef<const int32_t> s,
                                   pltpu::VmemRef<T> o) { o = pltpu::roll(xr, s(0), 0); },
                                pl::in_specs(pl::BlockSpec(), pl::BlockSpec(MemorySpace::SMEM)),
                                pl::out_shape<T>(shape))(x, Array<int32_t>({1}, {shift}))
              : pl::pallas_call([shift](pltpu::VmemRef<const T> xr,
                                        pltpu::VmemRef<T> o) { o = pltpu::roll(xr, shift, 0); },
                                pl::out_shape<T>(shape))(x);
  // np.roll(x, shift, axis=0)
  const int64_t n = shape[0], inner = shape.size() / n;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = ((i - shift) % n + n) % n;
    for (int64_t k = 0; k < inner; ++k) ASSERT_EQ(out[i * inner + k], x[src * inner + k]);
  }
}

TEST(TpuPallasTest, MiscellaneousRollWithMajorDimShift) {
  for (const Shape& s : {Shape{5, 8, 64}, Shape{15, 4, 128}, Shape{8, 3, 256}, Shape{7, 32, 384}}) {
    for (int shift : {0, 2, 3, 19}) {
      for (bool dynamic : {false, true}) {
        roll_major_dim<float>(s, shift, dynamic);
        roll_major_dim<bfloat16>(s, shift, dynamic);
        roll_major_dim<int8_t>(s, shift, dynamic);
        roll_major_dim<int4>(s, shift, dynamic);
      }
    }
  }
}

template <class T>
void roll_no_stride(const Shape& shape, int shift, int axis) {
  const Array<T> x = arange<T>(shape);
  const Array<T> out =
      pl::pallas_call([shift, axis](pltpu::VmemRef<const T> xr,
                                    pltpu::VmemRef<T> o) { o = pltpu::roll(xr, shift, axis); },
                      pl::out_shape<T>(shape))(x);
  const int64_t rows = shape[0], cols = shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t sr = axis == 0 ? ((r - shift) % rows + rows) % rows : r;
      const int64_t sc = axis == 1 ? ((c - shift) % cols + cols) % cols : c;
      ASSERT_EQ(out(r, c), x(sr, sc)) << r << "," << c << " shift " << shift << " axis " << axis;
    }
  }
}

TEST(TpuPallasTest, MiscellaneousRollWithNoStride) {
  // The dynamic-shift half of the parameters goes through the same roll (a run-time int).
  for (const Shape& s :
       {Shape{3, 16}, Shape{8, 64}, Shape{8, 128}, Shape{15, 256}, Shape{16, 256}, Shape{20, 200},
        Shape{32, 300}, Shape{64, 8}, Shape{64, 256}, Shape{128, 64}}) {
    for (int shift : {0, 1, 2, 3, 8, 9, 15, 31, 129}) {
      for (int axis : {0, 1}) {
        roll_no_stride<float>(s, shift, axis);
        roll_no_stride<bfloat16>(s, shift, axis);
        roll_no_stride<int8_t>(s, shift, axis);
        roll_no_stride<int4>(s, shift, axis);
      }
    }
  }
}

// The host reference with stride_axis 0: np.split(x, x.shape[0], 0); np.roll(slice i,
// shift + i * stride, axis); np.concatenate(..., 0). Slice i is (outer, n, inner) around `axis`,
// and out[i][o][k][j] = x[i][o][(k - shift - i * stride) mod n][j].
template <class T>
Array<T> host_strided_roll(const Array<T>& x, int64_t shift, int axis, int64_t stride) {
  const Shape& s = x.shape();
  Array<T> out(s);
  int64_t outer = 1, inner = 1;
  for (int d = 1; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  for (int64_t i = 0; i < s[0]; ++i) {
    const int64_t by = ((shift + i * stride) % n + n) % n;
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = (i * outer + o) * n * inner;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t from = (k - by + n) % n;
        for (int64_t j = 0; j < inner; ++j) {
          out[base + k * inner + j] = x[base + from * inner + j];
        }
      }
    }
  }
  return out;
}

template <class T>
void expect_same_bits(const Array<T>& got, const Array<T>& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(std::memcmp(got.data(), want.data(), static_cast<size_t>(got.size()) * sizeof(T)), 0)
      << what;
}

template <class T>
void roll_lane_shift_with_stride(const Shape& shape, int shift, int stride) {
  const Array<T> x = arange<T>(shape);
  const Array<T> out = pl::pallas_call(
      [=](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
        o[pl::ellipsis] = pltpu::roll(xr[pl::ellipsis], shift, 1, stride, 0);
      },
      pl::out_shape<T>(shape))(x);
  expect_same_bits(
      out, host_strided_roll(x, shift, 1, stride),
      shape.to_string() + " shift " + std::to_string(shift) + " stride " + std::to_string(stride));
}

TEST(TpuPallasTest, MiscellaneousRollStaticLaneShiftWithStrideAndAlignedShape) {
  for (const Shape& s : {Shape{2, 128}, Shape{8, 128}, Shape{16, 256}, Shape{64, 256}}) {
    for (int shift : {0, 2, 3, 129}) {
      for (int stride : {1, 2}) {
        roll_lane_shift_with_stride<float>(s, shift, stride);
        roll_lane_shift_with_stride<bfloat16>(s, shift, stride);
        roll_lane_shift_with_stride<int8_t>(s, shift, stride);
      }
    }
  }
}

template <class T>
void roll_major_stride(const Shape& shape, int shift, int axis, int stride, bool dynamic) {
  const Array<T> x = arange<T>(shape);
  const Array<T> out =
      dynamic ? pl::pallas_call(
                    [=](pltpu::VmemRef<const T> xr, pltpu::SmemRef<const int32_t> s,
                        pltpu::VmemRef<T> o) { o = pltpu::roll(xr, s(0), axis, stride, 0); },
                    pl::in_specs(pl::BlockSpec(), pl::BlockSpec(MemorySpace::SMEM)),
                    pl::out_shape<T>(shape))(x, Array<int32_t>({1}, {shift}))
              : pl::pallas_call(
                    [=](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
                      o = pltpu::roll(xr, shift, axis, stride, 0);
                    },
                    pl::out_shape<T>(shape))(x);
  expect_same_bits(out, host_strided_roll(x, shift, axis, stride),
                   shape.to_string() + " shift " + std::to_string(shift) + " axis " +
                       std::to_string(axis) + " stride " + std::to_string(stride));
}

TEST(TpuPallasTest, MiscellaneousRollWithMajorStride) {
  // The dynamic-shift half (the shift read from SMEM) runs for float32; the shift is a run-time
  // int either way, so the other dtypes take the static half.
  for (const Shape& s :
       {Shape{2, 128, 128}, Shape{3, 64, 256}, Shape{4, 64, 200}, Shape{5, 30, 512}}) {
    for (int shift : {0, 2, 3, 17, 34, 129}) {
      for (int axis : {1, 2}) {
        for (int stride : {1, 2, 129}) {
          roll_major_stride<float>(s, shift, axis, stride, false);
          roll_major_stride<float>(s, shift, axis, stride, true);
          roll_major_stride<bfloat16>(s, shift, axis, stride, false);
          roll_major_stride<int8_t>(s, shift, axis, stride, false);
          roll_major_stride<int4>(s, shift, axis, stride, false);
        }
      }
    }
  }
}

}  // namespace
