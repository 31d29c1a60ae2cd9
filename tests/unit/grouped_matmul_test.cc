// Pallas' grouped matmul kernels, ported (examples/14_grouped_matmul.cc), against a float64
// reference: the shapes of tpu_gmm_test.py ((128, 128, 128), (512, 2048, 256), and (128, 8, 16)
// for partial tiles), random group counts and sizes (empty groups included), every pairing of
// float32 and bfloat16 operands and outputs, a transposed rhs, the gradients the test takes (gmm
// with a transposed rhs for lhs, tgmm for rhs), sharded groups with an existing output, checked
// mode, and the refusals; make_group_metadata against the values Pallas' own function returns.
#include "grouped_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/host_reference.h"

namespace {

using namespace tessera;
using examples::GmmOptions;

// A small LCG: the same inputs on every run.
struct Rng {
  uint64_t state;
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  float uniform() { return static_cast<float>(next() % 20001) / 10000.0f - 1.0f; }
};

// random_dense(limit=1): uniform in [-1, 1], rounded to bfloat16 (then to T).
template <class T>
Array<T> random_dense(Rng& rng, Shape shape) {
  Array<T> a(std::move(shape));
  for (T& x : a) x = static_cast<T>(static_cast<float>(bfloat16(rng.uniform())));
  return a;
}

// group_sizes_strategy: num_groups - 1 sorted ends drawn from [0, m] (repeats make empty
// groups), the last group ending at m.
Array<int32_t> random_group_sizes(Rng& rng, int64_t m, int64_t num_groups) {
  std::vector<int64_t> ends;
  for (int64_t g = 0; g + 1 < num_groups; ++g) ends.push_back(rng.below(m + 1));
  std::sort(ends.begin(), ends.end());
  ends.push_back(m);
  Array<int32_t> sizes(Shape{num_groups});
  int64_t start = 0;
  for (int64_t g = 0; g < num_groups; ++g) {
    sizes[g] = static_cast<int32_t>(ends[static_cast<size_t>(g)] - start);
    start = ends[static_cast<size_t>(g)];
  }
  return sizes;
}

template <class T>
double at(const Array<T>& a, int64_t e) {
  return static_cast<double>(static_cast<float>(a.data()[e]));
}

template <class T>
std::vector<double> as_doubles(const Array<T>& a) {
  std::vector<double> v(static_cast<size_t>(a.size()));
  for (int64_t e = 0; e < a.size(); ++e) v[static_cast<size_t>(e)] = at(a, e);
  return v;
}

// reference_gmm in float64: row r of group g is lhs[r] @ rhs[g] (rhs[g]^T when transposed).
// (Loops in the order that reads both operands along rows: the sanitizer builds run them too.)
template <class L, class R>
TESSERA_HOST_REFERENCE std::vector<double> reference_gmm(const Array<L>& lhs_in,
                                                         const Array<R>& rhs_in,
                                                         const Array<int32_t>& sizes,
                                                         bool transpose_rhs) {
  const int64_t m = lhs_in.shape()[0], k = lhs_in.shape()[1];
  const int64_t n = transpose_rhs ? rhs_in.shape()[1] : rhs_in.shape()[2];
  const std::vector<double> lhs = as_doubles(lhs_in), rhs = as_doubles(rhs_in);
  std::vector<double> out(static_cast<size_t>(m * n), 0.0);
  int64_t row = 0;
  for (int64_t g = 0; g < sizes.size(); ++g) {
    for (int64_t r = row; r < row + sizes[g]; ++r) {
      const double* x = &lhs[static_cast<size_t>(r * k)];
      double* o = &out[static_cast<size_t>(r * n)];
      for (int64_t c = 0; transpose_rhs && c < n; ++c) {
        const double* y = &rhs[static_cast<size_t>((g * n + c) * k)];
        for (int64_t i = 0; i < k; ++i) o[c] += x[i] * y[i];
      }
      for (int64_t i = 0; !transpose_rhs && i < k; ++i) {
        const double* y = &rhs[static_cast<size_t>((g * k + i) * n)];
        for (int64_t c = 0; c < n; ++c) o[c] += x[i] * y[c];
      }
    }
    row += sizes[g];
  }
  return out;
}

// The weight gradient (tgmm's product): group g's lhs^T (k, m) columns times rhs (m, n) rows.
template <class L, class R>
TESSERA_HOST_REFERENCE std::vector<double> reference_tgmm(const Array<L>& lhs_t,
                                                          const Array<R>& rhs_in,
                                                          const Array<int32_t>& sizes) {
  const int64_t k = lhs_t.shape()[0], m = lhs_t.shape()[1], n = rhs_in.shape()[1];
  const std::vector<double> lt = as_doubles(lhs_t), rhs = as_doubles(rhs_in);
  std::vector<double> out(static_cast<size_t>(sizes.size() * k * n), 0.0);
  int64_t row = 0;
  for (int64_t g = 0; g < sizes.size(); ++g) {
    for (int64_t i = 0; i < k; ++i) {
      double* o = &out[static_cast<size_t>((g * k + i) * n)];
      for (int64_t r = row; r < row + sizes[g]; ++r) {
        const double x = lt[static_cast<size_t>(i * m + r)];
        const double* y = &rhs[static_cast<size_t>(r * n)];
        for (int64_t c = 0; c < n; ++c) o[c] += x * y[c];
      }
    }
    row += sizes[g];
  }
  return out;
}

// assert_allclose with tpu_gmm_test's tolerances: (1e-3, 1e-2) when a dtype is bfloat16, else
// (1e-3, 1e-5).
template <class Out>
void expect_close(const Array<Out>& got, const std::vector<double>& want, bool any_bf16) {
  ASSERT_EQ(static_cast<size_t>(got.size()), want.size());
  const double atol = 1e-3;
  const double rtol = any_bf16 ? 1e-2 : 1e-5;
  for (int64_t e = 0; e < got.size(); ++e) {
    const double w = want[static_cast<size_t>(e)];
    ASSERT_LE(std::abs(at(got, e) - w), atol + rtol * std::abs(w))
        << "element " << e << " of " << got.shape().to_string() << ": " << at(got, e) << " against "
        << w;
  }
}

struct Problem {
  int64_t m, k, n;
  examples::GmmTiling tiling{};
};

// gmm_test: one draw of groups, the forward product and both gradients (grad_lhs = gmm(dout,
// rhs, transpose_rhs), grad_rhs = tgmm(lhs^T, dout)), as megablox's custom VJP computes them.
// What a case checks: the forward product, the gradients, or both (the large shapes split them
// over two tests, to keep each short under the sanitizers).
enum class Part { kForward, kGradients, kBoth };

template <class L, class R, class Out>
void gmm_case(const Problem& p, uint64_t seed, bool transpose_rhs, Part part = Part::kBoth) {
  Rng rng{seed};
  const int64_t num_groups = 1 + rng.below(32);
  SCOPED_TRACE(::testing::Message()
               << "m " << p.m << " k " << p.k << " n " << p.n << " groups " << num_groups
               << " seed " << seed << " transpose_rhs " << transpose_rhs);
  constexpr bool kAnyBf16 =
      std::is_same_v<L, bfloat16> || std::is_same_v<R, bfloat16> || std::is_same_v<Out, bfloat16>;
  const Array<L> lhs = random_dense<L>(rng, {p.m, p.k});
  const Array<R> rhs = transpose_rhs ? random_dense<R>(rng, {num_groups, p.n, p.k})
                                     : random_dense<R>(rng, {num_groups, p.k, p.n});
  const Array<int32_t> sizes = random_group_sizes(rng, p.m, num_groups);
  if (part != Part::kGradients) {
    const Array<Out> out = examples::gmm<Out>(
        lhs, rhs, sizes, GmmOptions{.tiling = p.tiling, .transpose_rhs = transpose_rhs});
    ASSERT_EQ(out.shape(), (Shape{p.m, p.n}));
    expect_close(out, reference_gmm(lhs, rhs, sizes, transpose_rhs), kAnyBf16);
  }
  if (part == Part::kForward) return;

  // The gradients of a cotangent dout (m, n).
  const Array<Out> dout = random_dense<Out>(rng, {p.m, p.n});
  // grad_lhs = gmm(dout, rhs, transpose_rhs=not transpose_rhs): (m, k).
  const Array<L> grad_lhs = examples::gmm<L>(
      dout, rhs, sizes, GmmOptions{.tiling = p.tiling, .transpose_rhs = !transpose_rhs});
  expect_close(grad_lhs, reference_gmm(dout, rhs, sizes, !transpose_rhs), kAnyBf16);
  // grad_rhs = tgmm(lhs^T, dout): (groups, k, n).
  Array<L> lhs_t({p.k, p.m});
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t c = 0; c < p.k; ++c) lhs_t(c, r) = lhs(r, c);
  }
  const Array<R> grad_rhs = examples::tgmm<R>(lhs_t, dout, sizes, GmmOptions{.tiling = p.tiling});
  ASSERT_EQ(grad_rhs.shape(), (Shape{num_groups, p.k, p.n}));
  expect_close(grad_rhs, reference_tgmm(lhs_t, dout, sizes), kAnyBf16);
}

const Problem kSmall{128, 128, 128};
const Problem kBig{512, 2048, 256};
const Problem kPartial{128, 8, 16};
// Four m tiles of 32 rows and k and n tiles of 64 (three k tiles, the last partial).
const Problem kSmallTiles{128, 136, 128, {32, 64, 64}};

TEST(GroupedMatmul, MetadataIsPallas) {
  // Expected values: Pallas' make_group_metadata (megablox/gmm.py) on the same arguments.
  struct Want {
    std::vector<int32_t> sizes;
    int64_t m, tm, start, count;
    bool visit_empty;
    std::vector<int32_t> offsets, ids, tiles;
    int64_t num_tiles;
  };
  // One case a row: (sizes, m, tm, start, count, visit_empty), then (offsets, ids, tiles,
  // num_tiles).
  // clang-format off
  const std::vector<Want> cases = {
      {{3, 0, 70, 55}, 128, 32, 0, 4, false,
       {0, 3, 3, 73, 128}, {0, 2, 2, 2, 3, 3, 3}, {0, 0, 1, 2, 2, 3, 3}, 6},
      {{3, 0, 70, 55}, 128, 32, 0, 4, true,
       {0, 3, 3, 73, 128}, {0, 1, 2, 2, 2, 3, 3}, {0, 0, 0, 1, 2, 2, 3}, 7},
      {{0, 64, 0, 64}, 128, 32, 1, 2, false,
       {0, 0, 64, 64, 128}, {1, 1, 3, 3, 3, 3, 3}, {0, 1, 2, 3, 3, 3, 3}, 2},
      {{0, 64, 0, 64}, 128, 32, 1, 2, true,
       {0, 0, 64, 64, 128}, {1, 1, 2, 3, 3, 3, 0}, {0, 1, 2, 2, 3, 3, 0}, 3},
      {{128}, 128, 128, 0, 1, true, {0, 128}, {0}, {0}, 1},
      {{10, 20, 0, 98}, 128, 64, 2, 2, true,
       {0, 10, 30, 30, 128}, {2, 3, 3, 0, 1}, {0, 0, 1, 0, 0}, 3},
      {{0, 0, 0}, 64, 32, 0, 3, true, {0, 0, 0, 0}, {0, 1, 2, 2}, {0, 0, 0, 0}, 3},
      {{0, 0, 0}, 64, 32, 0, 3, false, {0, 0, 0, 0}, {2, 2, 2, 2}, {0, 1, 1, 1}, 0},
  };
  // clang-format on
  for (const Want& w : cases) {
    const Array<int32_t> sizes({static_cast<int64_t>(w.sizes.size())}, w.sizes);
    const examples::GroupMetadata md =
        examples::make_group_metadata(sizes, w.m, w.tm, w.start, w.count, w.visit_empty);
    auto values = [](const Array<int32_t>& a) { return std::vector<int32_t>(a.begin(), a.end()); };
    EXPECT_EQ(values(md.group_offsets), w.offsets);
    EXPECT_EQ(values(md.group_ids), w.ids);
    EXPECT_EQ(values(md.m_tile_ids), w.tiles);
    EXPECT_EQ(md.num_tiles, w.num_tiles);
  }
}

TEST(GroupedMatmul, SmallFloat32) {
  for (uint64_t seed : {1, 2, 3}) {
    gmm_case<float, float, float>(kSmall, seed, false);
    gmm_case<float, float, float>(kSmall, seed + 10, true);
  }
}

TEST(GroupedMatmul, SmallMixedDtypes) {
  gmm_case<bfloat16, bfloat16, bfloat16>(kSmall, 4, false);
  gmm_case<bfloat16, float, float>(kSmall, 5, true);
  gmm_case<float, bfloat16, bfloat16>(kSmall, 6, false);
  gmm_case<bfloat16, bfloat16, float>(kSmall, 7, true);
}

TEST(GroupedMatmul, BigFloat32) { gmm_case<float, float, float>(kBig, 8, false, Part::kForward); }

TEST(GroupedMatmul, BigFloat32Gradients) {
  gmm_case<float, float, float>(kBig, 8, false, Part::kGradients);
}

TEST(GroupedMatmul, BigBfloat16TransposedRhs) {
  gmm_case<bfloat16, bfloat16, bfloat16>(kBig, 9, true, Part::kForward);
}

TEST(GroupedMatmul, BigBfloat16TransposedRhsGradients) {
  gmm_case<bfloat16, bfloat16, bfloat16>(kBig, 9, true, Part::kGradients);
}

TEST(GroupedMatmul, PartialTiles) {
  for (uint64_t seed : {10, 11, 12}) {
    gmm_case<float, float, float>(kPartial, seed, false);
    gmm_case<bfloat16, bfloat16, float>(kPartial, seed + 10, true);
  }
}

// test_gmm_sharded_groups: the groups split into shards of group_stride, each a gmm of its rhs
// groups with group_offset, the later ones adding to the earlier output (existing_out); the
// weight gradient per shard with tgmm (group_offset, num_actual_groups), concatenated.
template <class T>
void sharded_case(const Problem& p, uint64_t seed, Part part = Part::kBoth) {
  Rng rng{seed};
  const int64_t group_stride = 1 + rng.below(8);
  const int64_t num_groups = group_stride * (1 + rng.below(32 / group_stride));
  SCOPED_TRACE(::testing::Message() << "m " << p.m << " k " << p.k << " n " << p.n << " groups "
                                    << num_groups << " stride " << group_stride);
  const Array<T> lhs = random_dense<T>(rng, {p.m, p.k});
  const Array<T> rhs = random_dense<T>(rng, {num_groups, p.k, p.n});
  const Array<int32_t> sizes = random_group_sizes(rng, p.m, num_groups);
  auto shard_of = [&](int64_t first) {
    Array<T> s(Shape{group_stride, p.k, p.n});
    std::copy(rhs.data() + first * p.k * p.n, rhs.data() + (first + group_stride) * p.k * p.n,
              s.data());
    return s;
  };
  constexpr bool kBf16 = std::is_same_v<T, bfloat16>;
  if (part != Part::kGradients) {
    Array<T> out = examples::gmm<T>(lhs, shard_of(0), sizes, GmmOptions{.tiling = p.tiling});
    for (int64_t go = group_stride; go < num_groups; go += group_stride) {
      out = examples::gmm<T>(
          lhs, shard_of(go), sizes, out,
          GmmOptions{.tiling = p.tiling, .group_offset = static_cast<int32_t>(go)});
    }
    expect_close(out, reference_gmm(lhs, rhs, sizes, false), kBf16);
  }
  if (part == Part::kForward) return;

  const Array<T> dout = random_dense<T>(rng, {p.m, p.n});
  Array<T> lhs_t({p.k, p.m});
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t c = 0; c < p.k; ++c) lhs_t(c, r) = lhs(r, c);
  }
  Array<T> grad_rhs(Shape{num_groups, p.k, p.n});
  for (int64_t go = 0; go < num_groups; go += group_stride) {
    const Array<T> shard = examples::tgmm<T>(lhs_t, dout, sizes,
                                             GmmOptions{.tiling = p.tiling,
                                                        .group_offset = static_cast<int32_t>(go),
                                                        .num_actual_groups = group_stride});
    std::copy(shard.begin(), shard.end(), grad_rhs.data() + go * p.k * p.n);
  }
  expect_close(grad_rhs, reference_tgmm(lhs_t, dout, sizes), kBf16);
}

TEST(GroupedMatmul, SmallTiles) {
  gmm_case<float, float, float>(kSmallTiles, 13, false);
  gmm_case<bfloat16, bfloat16, bfloat16>(kSmallTiles, 14, true);
}

TEST(GroupedMatmul, ShardedGroups) {
  sharded_case<float>(kSmall, 21);
  sharded_case<float>(kSmallTiles, 25);
  sharded_case<bfloat16>(kSmall, 22);
  sharded_case<float>(kPartial, 23);
}

TEST(GroupedMatmul, ShardedGroupsBig) { sharded_case<bfloat16>(kBig, 24, Part::kForward); }

TEST(GroupedMatmul, ShardedGroupsBigGradients) {
  sharded_case<bfloat16>(kBig, 24, Part::kGradients);
}

// tgmm adding to an existing output, and gmm rows past the last group (zero; Pallas leaves them
// unspecified), kept from an existing output also where a computed group's tile holds them.
void existing_outputs_case() {
  Rng rng{31};
  const Array<float> lhs = random_dense<float>(rng, {128, 64});
  const Array<float> rhs = random_dense<float>(rng, {3, 64, 128});
  const Array<int32_t> sizes({3}, {40, 0, 50});  // rows 90..127 belong to no group
  const Array<float> out =
      examples::gmm<float>(lhs, rhs, sizes, GmmOptions{.tiling = {32, 64, 128}});
  std::vector<double> want = reference_gmm(lhs, rhs, sizes, false);
  expect_close(out, want, false);
  for (int64_t r = 90; r < 128; ++r) ASSERT_EQ(out(r, 5), 0.0f);
  // With an existing output those rows keep its values.
  const Array<float> existing = random_dense<float>(rng, {128, 128});
  const Array<float> kept =
      examples::gmm<float>(lhs, rhs, sizes, existing, GmmOptions{.tiling = {32, 64, 128}});
  for (int64_t e = 90 * 128; e < 128 * 128; ++e) want[static_cast<size_t>(e)] = existing.data()[e];
  expect_close(kept, want, false);

  const Array<float> lhs_t = random_dense<float>(rng, {64, 128});
  const Array<float> dout = random_dense<float>(rng, {128, 128});
  const Array<float> base = random_dense<float>(rng, {3, 64, 128});
  const Array<float> grad = examples::tgmm<float>(lhs_t, dout, sizes, base, {});
  std::vector<double> want_grad = reference_tgmm(lhs_t, dout, sizes);
  for (int64_t e = 0; e < base.size(); ++e) want_grad[static_cast<size_t>(e)] += base.data()[e];
  expect_close(grad, want_grad, false);
}

TEST(GroupedMatmul, ExistingOutputsAndRowsOfNoGroup) { existing_outputs_case(); }

// Calls whose grid would be empty launch nothing and give the products' values: a shard of empty
// groups, no rows (m = 0), no columns (n = 0), an empty contraction (k = 0).
TEST(GroupedMatmul, EmptyGridsGiveTheProductsValues) {
  Rng rng{61};
  const Array<float> lhs = random_dense<float>(rng, {128, 64});
  const Array<float> rhs = random_dense<float>(rng, {2, 64, 128});
  const Array<float> existing = random_dense<float>(rng, {128, 128});
  const Array<int32_t> sizes({4}, {64, 0, 0, 64});
  const GmmOptions shard{.group_offset = 1};  // groups 1 and 2: no rows
  const Array<float> kept = examples::gmm<float>(lhs, rhs, sizes, existing, shard);
  for (int64_t e = 0; e < kept.size(); ++e) ASSERT_EQ(kept.data()[e], existing.data()[e]);
  const Array<float> zeros = examples::gmm<float>(lhs, rhs, sizes, shard);
  for (float v : zeros) ASSERT_EQ(v, 0.0f);
  // k = 0: the computed groups' rows (64..127 for group 1 of {64, 64}) are zero, the rest kept.
  const Array<int32_t> two({2}, {64, 64});
  const Array<float> no_k =
      examples::gmm<float>(Array<float>(Shape{128, 0}), Array<float>(Shape{1, 0, 128}), two,
                           existing, GmmOptions{.group_offset = 1});
  for (int64_t r = 0; r < 128; ++r) ASSERT_EQ(no_k(r, 7), r < 64 ? existing(r, 7) : 0.0f) << r;
  EXPECT_EQ(examples::gmm<float>(Array<float>(Shape{128, 64}), Array<float>(Shape{2, 64, 0}), two)
                .shape(),
            (Shape{128, 0}));
  EXPECT_EQ(
      examples::gmm<float>(Array<float>(Shape{0, 64}), rhs, Array<int32_t>({2}, {0, 0})).shape(),
      (Shape{0, 128}));
  // tgmm without rows: every group's product is zero (plus existing_out).
  const Array<int32_t> none({2}, {0, 0});
  const Array<float> t0 =
      examples::tgmm<float>(Array<float>(Shape{64, 0}), Array<float>(Shape{0, 128}), none);
  ASSERT_EQ(t0.shape(), (Shape{2, 64, 128}));
  for (float v : t0) ASSERT_EQ(v, 0.0f);
  const Array<float> base = random_dense<float>(rng, {2, 64, 128});
  const Array<float> t1 = examples::tgmm<float>(Array<float>(Shape{64, 0}),
                                                Array<float>(Shape{0, 128}), none, base, {});
  for (int64_t e = 0; e < base.size(); ++e) ASSERT_EQ(t1.data()[e], base.data()[e]);
}

// Checked mode runs the same kernels (a shared output tile's first visit reads the fresh window
// and selects it away; partial k tiles read padding and mask it) and reports nothing.
TEST(GroupedMatmul, CheckedModeFindsNothingAndAgrees) {
  const pltpu::ForceTpuInterpretMode force(pltpu::InterpretParams{});
  gmm_case<float, float, float>(kSmall, 41, false);
  gmm_case<bfloat16, bfloat16, bfloat16>(kPartial, 42, true);
  sharded_case<float>(kPartial, 43);
  sharded_case<bfloat16>(kSmallTiles, 44);
  existing_outputs_case();
}

TEST(GroupedMatmul, RefusesWhatPallasRefuses) {
  Rng rng{51};
  const Array<float> lhs = random_dense<float>(rng, {128, 64});
  const Array<float> rhs = random_dense<float>(rng, {2, 64, 128});
  const Array<int32_t> sizes({2}, {64, 64});
  const int line = __LINE__ + 2;
  auto call = [&](const Array<int32_t>& s, GmmOptions o) {
    (void)examples::gmm<float>(lhs, rhs, s, o);
  };
  EXPECT_TESSERA_ERROR(call(sizes, {.tiling = {48, 128, 128}}), UsageError,
                       ErrorKind::kInvalidArgument,
                       "128 must be divisible by x-dimension tile size (48)", line);
  EXPECT_TESSERA_ERROR(call(Array<int32_t>({2}, {100, 29}), {}), UsageError,
                       ErrorKind::kInvalidArgument, "sum to at most m = 128", line);
  EXPECT_TESSERA_ERROR(call(Array<int32_t>({2}, {-1, 29}), {}), UsageError,
                       ErrorKind::kInvalidArgument, "group 0 has size -1", line);
  EXPECT_TESSERA_ERROR(
      call(sizes, {.tiling_lut = [](int64_t, int64_t, int64_t) { return std::nullopt; }}),
      UsageError, ErrorKind::kInvalidArgument,
      "no tuned tiling found for (m, k, n) = (128, 64, 128)", line);
  EXPECT_TESSERA_ERROR(call(sizes, {.group_offset = 1}), UsageError, ErrorKind::kInvalidArgument,
                       "must lie within group_sizes' 2 groups", line);
  EXPECT_TESSERA_ERROR(call(sizes, {.transpose_rhs = true}), UsageError,
                       ErrorKind::kInvalidArgument, "disagree on k", line);
  EXPECT_THROW((void)examples::gmm<float>(rhs, rhs, sizes), UsageError);   // a 3-D lhs
  EXPECT_THROW((void)examples::tgmm<float>(lhs, lhs, sizes), UsageError);  // (k, m) against (m, n)
  // A LUT's tiling is used.
  const Array<float> out = examples::gmm<float>(
      lhs, rhs, sizes, GmmOptions{.tiling_lut = [](int64_t m, int64_t k, int64_t n) {
        return std::optional<examples::GmmTiling>({m / 4, k, n});
      }});
  expect_close(out, reference_gmm(lhs, rhs, sizes, false), false);
}

}  // namespace
