// Ports of tpu_pallas_test.py (docs/pallas-parity.md), third file: MiscellaneousTest's reshapes
// that change the last dim (test_reshape_*), each family over its Pallas parameters and dtypes.
// A reshape keeps the row-major order of the elements, so the output's elements are the input's,
// compared bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

using Dims = std::vector<int64_t>;

Shape cat(const Dims& a, const Dims& b) {
  Dims all = a;
  all.insert(all.end(), b.begin(), b.end());
  return Shape(all);
}

int64_t prod(const Dims& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

// `y_ref[...] = x_ref[...].reshape(out)` with x = np.arange(...).astype(T).reshape(in), or
// random values in [-10, 10) when `random` (test_reshape_small_last_two_dims).
template <class T>
void reshape_case(const Shape& in, const Shape& out, bool random = false) {
  Array<T> x = arange<T>(in);
  if (random) {
    Random r(42);
    for (T& v : x) v = static_cast<T>(10.0f * r.uniform());
  }
  const Array<T> y = pl::pallas_call(
      [out](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
        o[pl::ellipsis] = xr[pl::ellipsis].reshape(out);
      },
      pl::out_shape<T>(out))(x);
  ASSERT_EQ(y.size(), x.size());
  ASSERT_EQ(std::memcmp(y.data(), x.data(), static_cast<size_t>(x.size()) * sizeof(T)), 0)
      << in.to_string() << " -> " << out.to_string();
}

template <class F>
void for_four_dtypes(F&& f) {  // float32, uint32, bfloat16, int8
  f(float{});
  f(uint32_t{});
  f(bfloat16{});
  f(int8_t{});
}

template <class F>
void for_three_dtypes(F&& f) {  // float32, bfloat16, int8
  f(float{});
  f(bfloat16{});
  f(int8_t{});
}

// Runs reshape_case<T>(in, out) for each (in, out) pair over the four dtypes.
void four_dtypes(const std::vector<std::pair<Shape, Shape>>& cases) {
  for_four_dtypes([&](auto t) {
    using T = decltype(t);
    for (const auto& [in, out] : cases) reshape_case<T>(in, out);
  });
}

TEST(TpuPallasTest, MiscellaneousReshapeSmallLastTwoDims) {
  const std::vector<std::pair<Dims, Dims>> majors{
      {{}, {}}, {{9}, {9}}, {{1, 8}, {8}}, {{8}, {1, 8}}, {{4, 4}, {2, 2, 4}}, {{2, 2, 4}, {4, 4}}};
  const std::vector<Dims> minors{{2, 16}, {9, 63}, {8, 128}, {16, 64}, {17, 51}, {33, 99}};
  const auto run = [&](auto t) {
    using T = decltype(t);
    for (const auto& [in_major, out_major] : majors) {
      for (const Dims& mn : minors) {
        reshape_case<T>(cat(in_major, mn), cat(out_major, {mn[1], mn[0]}), true);
      }
    }
  };
  run(float{});
  run(int32_t{});
  run(bfloat16{});
  run(int8_t{});
  run(float8_e5m2{});
  run(float8_e4m3fn{});
  run(float8_e4m3b11fnuz{});
}

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldMinorDimToR2) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : std::vector<Dims>{{5, 512}, {9, 256}, {11, 128}, {1, 64}, {200, 1}}) {
    cases.push_back({Shape{d[0] * d[1]}, Shape{d[0], d[1]}});
  }
  four_dtypes(cases);
}

const std::vector<Dims> kUnfoldR3{{32, 16, 512}, {20, 19, 512}, {5, 3, 256},  {9, 15, 256},
                                  {3, 2, 256},   {4, 2, 1024},  {8, 4, 1024}, {32, 16, 500},
                                  {20, 19, 500}, {5, 3, 200},   {9, 15, 200}, {3, 2, 200},
                                  {5, 1, 300}};

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldMinorDimToR3) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kUnfoldR3) cases.push_back({Shape{d[0], d[1] * d[2]}, Shape(d)});
  four_dtypes(cases);
}

const std::vector<Dims> kQmnk{{3, 8, 17, 512}, {1, 8, 9, 256},  {1, 8, 3, 256},  {10, 1, 4, 256},
                              {1, 2, 2, 256},  {1, 9, 3, 256},  {3, 8, 17, 500}, {1, 8, 9, 200},
                              {1, 8, 3, 200},  {10, 1, 4, 200}, {1, 2, 2, 200},  {1, 9, 3, 200}};

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldMinorDimToR4) {
  std::vector<Dims> dims = kQmnk;
  dims.insert(dims.end(), {{3, 4, 2, 1024}, {5, 8, 4, 1024}, {4, 7, 1, 300}});
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : dims) cases.push_back({Shape{d[0], d[1], d[2] * d[3]}, Shape(d)});
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldLastDimToThreeMinorDims) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kQmnk) cases.push_back({Shape{d[0], d[1] * d[2] * d[3]}, Shape(d)});
  four_dtypes(cases);
}

const std::vector<Dims> kPqmnk{
    {5, 3, 8, 7, 512}, {6, 1, 8, 9, 256}, {16, 1, 8, 3, 256}, {3, 2, 1, 4, 256}, {1, 7, 2, 2, 256},
    {5, 3, 8, 7, 500}, {6, 1, 8, 9, 200}, {16, 1, 8, 3, 200}, {3, 2, 1, 4, 200}, {1, 7, 2, 2, 200}};

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldLastDimToFourMinorDims) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kPqmnk) cases.push_back({Shape{d[0], d[1] * d[2] * d[3] * d[4]}, Shape(d)});
  four_dtypes(cases);
}

const std::vector<std::pair<Dims, Dims>> kMajorChanges{
    {{1, 8}, {8}}, {{8}, {1, 8}}, {{4, 4}, {2, 2, 4}}, {{2, 2, 4}, {4, 4}}, {{2, 3}, {6}}};
const std::vector<Dims> kMinors{{8, 128},    {4, 256},    {8, 120},    {5, 32},    {5, 7},
                                {2, 8, 128}, {3, 4, 256}, {1, 8, 120}, {9, 5, 32}, {6, 5, 7}};

TEST(TpuPallasTest, MiscellaneousReshapeLastDimToTwoMinorDimsChangeMajorDim) {
  for_three_dtypes([&](auto t) {
    using T = decltype(t);
    for (const auto& [in_major, out_major] : kMajorChanges) {
      for (const Dims& minor : kMinors) {
        reshape_case<T>(cat(in_major, {prod(minor)}), cat(out_major, minor));
      }
    }
  });
}

TEST(TpuPallasTest, MiscellaneousReshapeTwoMinorDimsToLastDimChangeMajorDim) {
  for_three_dtypes([&](auto t) {
    using T = decltype(t);
    for (const auto& [in_major, out_major] : kMajorChanges) {
      for (const Dims& minor : kMinors) {
        reshape_case<T>(cat(in_major, minor), cat(out_major, {prod(minor)}));
      }
    }
  });
}

TEST(TpuPallasTest, MiscellaneousReshapeTwoMinorDimsToR1) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : std::vector<Dims>{{5, 512}, {9, 256}, {11, 128}, {1, 64}, {200, 1}}) {
    cases.push_back({Shape(d), Shape{d[0] * d[1]}});
  }
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeTwoMinorDimsToR2AndPaddedLastDim) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : std::vector<Dims>{{32, 16, 512},
                                         {20, 19, 512},
                                         {5, 3, 256},
                                         {9, 15, 256},
                                         {3, 2, 256},
                                         {32, 16, 500},
                                         {20, 19, 500},
                                         {5, 3, 200},
                                         {9, 15, 200},
                                         {3, 2, 200},
                                         {5, 1, 300}}) {
    cases.push_back({Shape(d), Shape{d[0], d[1] * d[2]}});
  }
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeTwoMinorDimsToR3AndPaddedLastDim) {
  std::vector<Dims> dims = kQmnk;
  dims.push_back({4, 7, 1, 300});
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : dims) cases.push_back({Shape(d), Shape{d[0], d[1], d[2] * d[3]}});
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldThreeMinorDimsToR2) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kQmnk) cases.push_back({Shape(d), Shape{d[0], d[1] * d[2] * d[3]}});
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldFourMinorDimsToR2) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kPqmnk) cases.push_back({Shape(d), Shape{d[0], d[1] * d[2] * d[3] * d[4]}});
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeTwoMinorDimsPreserveRank) {
  // Two reshapes in a row: (q, m, n, k) -> (q, m, n * k) -> (q, 1, m, n * k).
  for_four_dtypes([&](auto t) {
    using T = decltype(t);
    const Array<T> x = arange<T>({10, 1, 4, 256});
    const Array<T> y = pl::pallas_call(
        [](pltpu::VmemRef<const T> xr, pltpu::VmemRef<T> o) {
          o[pl::ellipsis] = xr[pl::ellipsis].reshape({10, 1, 1024}).reshape({10, 1, 1, 1024});
        },
        pl::out_shape<T>({10, 1, 1, 1024}))(x);
    ASSERT_EQ(std::memcmp(y.data(), x.data(), static_cast<size_t>(x.size()) * sizeof(T)), 0);
  });
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldTwoLeadingDimsAndTwoMinorDimsR4ToR2) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : std::vector<Dims>{
           {3, 9, 17, 512}, {1, 8, 9, 256}, {1, 8, 3, 384}, {10, 1, 4, 256}, {1, 2, 2, 256}}) {
    cases.push_back({Shape(d), Shape{d[0] * d[1], d[2] * d[3]}});
  }
  four_dtypes(cases);
}

const std::vector<Dims> kLeading{{2, 2, 17, 512}, {3, 2, 3, 256}, {1, 5, 4, 384}};

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldLeadingDimAndFoldTwoMinorDimsR3ToR3) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kLeading) {
    cases.push_back({Shape{d[0] * d[1], d[2], d[3]}, Shape{d[0], d[1], d[2] * d[3]}});
  }
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeUnfoldLeadingAndMinorDimsR2ToR4) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : kLeading) cases.push_back({Shape{d[0] * d[1], d[2] * d[3]}, Shape(d)});
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldLeadingDimsAndUnfoldMinorDim) {
  std::vector<std::pair<Shape, Shape>> cases;
  for (const Dims& d : std::vector<Dims>{{2, 2, 17, 512}, {3, 2, 8, 256}, {1, 5, 4, 384}}) {
    cases.push_back({Shape{d[0], d[1], d[2] * d[3]}, Shape{d[0] * d[1], d[2], d[3]}});
  }
  four_dtypes(cases);
}

TEST(TpuPallasTest, MiscellaneousReshapeShiftFactorFromMinorToMajor) {
  for_three_dtypes([](auto t) { reshape_case<decltype(t)>({1, 3, 7680}, {3, 10, 768}); });
}

TEST(TpuPallasTest, MiscellaneousReshapeFoldMinormostDim) {
  reshape_case<float>({8, 128}, {1, 8 * 128}, true);
  reshape_case<bfloat16>({16, 128}, {1, 16 * 128}, true);
  reshape_case<float8_e4m3fn>({32, 128}, {1, 32 * 128}, true);
}

}  // namespace
