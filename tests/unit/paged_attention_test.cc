// Pallas' paged attention kernel, ported (examples/13_paged_attention.cc), against a float64
// reference of grouped-query attention: the cases of tpu_paged_attention_kernel_test.py
// (sequence lengths 0, 3, 256, 513, 1023 and 2048 in pages of 16, 32 or 64 tokens, blocks of 512
// tokens, 1 or 8 KV heads, 1, 4 or 8 query heads per KV head, head_dim 128 or 256, the megacore
// modes, a soft cap, int8 pages) in both engines, with the test's tolerances.
#include "paged_attention.h"

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

struct Case {
  bool bf16;
  int64_t page_size;
  int64_t num_kv_heads;
  int64_t ratio;
  int64_t head_dim;
  std::string megacore;
  std::optional<float> soft_cap;
  bool quantized = false;
};

constexpr int64_t kMaxLen = 2048;
constexpr int64_t kBlock = 512;
const std::vector<int32_t> kLengths = {0, 3, 256, 513, 1023, 2048};

struct Inputs {
  std::vector<float> q, k, v;  // the values, already rounded to the case's dtype
  std::vector<int32_t> pages;
};

Inputs make_inputs(const Case& c, uint64_t seed) {
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  const int64_t pps = kMaxLen / c.page_size;
  const int64_t total = batch * pps;
  auto next = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((seed >> 33) % 20001) / 10000.0f - 1.0f;
  };
  auto round = [&](float x) { return c.bf16 ? static_cast<float>(bfloat16(x)) : x; };
  Inputs in;
  const int64_t kv = c.num_kv_heads * total * c.page_size * c.head_dim;
  // Sized once and written in place: these are up to 50 MB each, filled under the sanitizers too.
  in.k.resize(static_cast<size_t>(kv));
  in.v.resize(static_cast<size_t>(kv));
  in.q.resize(static_cast<size_t>(batch * c.num_kv_heads * c.ratio * c.head_dim));
  for (float& x : in.k) x = round(next());
  for (float& x : in.v) x = round(next());
  for (float& x : in.q) x = round(next());
  for (int64_t p = 0; p < total; ++p) in.pages.push_back(static_cast<int32_t>(p));
  for (int64_t p = total - 1; p > 0; --p) {
    seed = seed * 6364136223846793005ull + 1;
    std::swap(in.pages[static_cast<size_t>(p)],
              in.pages[static_cast<size_t>((seed >> 33) % static_cast<uint64_t>(p + 1))]);
  }
  return in;
}

// grouped_query_attention_reference over the gathered pages, in float64. A sequence's keys and
// values are gathered once per KV head (the query heads of its group share them), so the inner
// loops read dense rows.
TESSERA_HOST_REFERENCE std::vector<double> reference(const Case& c, const Inputs& in) {
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  const int64_t pps = kMaxLen / c.page_size;
  const int64_t total = batch * pps;
  const int64_t hq = c.num_kv_heads * c.ratio;
  const int64_t d = c.head_dim;
  std::vector<double> out_v(static_cast<size_t>(batch * hq * d), 0.0);
  std::vector<double> k_v(static_cast<size_t>(kMaxLen * d)), v_v(k_v.size()), s_v(kMaxLen);
  double* const k = k_v.data();
  double* const v = v_v.data();
  double* const s = s_v.data();
  const float* const kin = in.k.data();
  const float* const vin = in.v.data();
  const float* const qin = in.q.data();
  const int32_t* const pages = in.pages.data();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = kLengths[static_cast<size_t>(b)];
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      for (int64_t t = 0; t < len; ++t) {
        const int64_t page = pages[b * pps + t / c.page_size];
        const int64_t from = ((h * total + page) * c.page_size + t % c.page_size) * d;
        for (int64_t e = 0; e < d; ++e) {
          k[t * d + e] = kin[from + e];
          v[t * d + e] = vin[from + e];
        }
      }
      for (int64_t qh = h * c.ratio; qh < (h + 1) * c.ratio; ++qh) {
        const float* const q = qin + (b * hq + qh) * d;
        double m = -INFINITY;
        for (int64_t t = 0; t < len; ++t) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[t * d + e];
          if (c.soft_cap) dot = std::tanh(dot / *c.soft_cap) * *c.soft_cap;
          s[t] = dot;
          m = std::max(m, dot);
        }
        double sum = 0;
        for (int64_t t = 0; t < len; ++t) sum += (s[t] = std::exp(s[t] - m));
        double* const o = out_v.data() + (b * hq + qh) * d;
        for (int64_t t = 0; t < len; ++t) {
          const double p = s[t] / sum;
          for (int64_t e = 0; e < d; ++e) o[e] += p * v[t * d + e];
        }
      }
    }
  }
  return out_v;
}

template <class T>
Array<T> to_array(const std::vector<float>& v, Shape s) {
  Array<T> a(std::move(s));
  T* const out = a.data();
  const float* const in = v.data();
  const int64_t size = a.size();  // v may hold more: the first `size` values are taken
  for (int64_t e = 0; e < size; ++e) out[e] = static_cast<T>(in[e]);
  return a;
}

// The pages quantized to int8, and `values` replaced by what they dequantize to
// (unquantize_from_int8 in float32: weight * scale / 127.5).
examples::QuantizedPages quantize(std::vector<float>& values, const Shape& shape) {
  examples::QuantizedPages q = examples::quantize_to_int8(to_array<float>(values, shape));
  const int64_t d = shape[3], size = q.weight.size();
  const int8_t* const weight = q.weight.data();
  const float* const scales = q.scales.data();
  float* const out = values.data();
  for (int64_t e = 0; e < size; ++e)
    out[e] = static_cast<float>(weight[e]) * scales[e / d] / 127.5f;
  return q;
}

template <class T>
void run_case(const Case& c, bool checked) {
  SCOPED_TRACE(::testing::Message()
               << (c.bf16 ? "bfloat16" : "float32") << " page_size " << c.page_size << " kv_heads "
               << c.num_kv_heads << " ratio " << c.ratio << " head_dim " << c.head_dim
               << " megacore '" << c.megacore << "' soft_cap " << (c.soft_cap ? *c.soft_cap : 0.0f)
               << (c.quantized ? " int8 pages" : "") << (checked ? " checked" : " native"));
  Inputs in = make_inputs(c, 7);
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  const int64_t pps = kMaxLen / c.page_size;
  const int64_t hq = c.num_kv_heads * c.ratio;
  const Shape kv_shape{c.num_kv_heads, batch * pps, c.page_size, c.head_dim};
  std::optional<pltpu::ForceTpuInterpretMode> force;
  if (checked) force.emplace(pltpu::InterpretParams{});
  const examples::PagedAttentionOptions options{.pages_per_compute_block = kBlock / c.page_size,
                                                .megacore_mode = c.megacore,
                                                .attn_logits_soft_cap = c.soft_cap};
  const Array<T> q = to_array<T>(in.q, {batch, hq, c.head_dim});
  const Array<int32_t> lengths({batch}, kLengths);
  const Array<int32_t> pages({batch, pps}, in.pages);
  Array<T> o;
  if (c.quantized) {
    const examples::QuantizedPages k = quantize(in.k, kv_shape);
    const examples::QuantizedPages v = quantize(in.v, kv_shape);
    o = examples::paged_attention(q, k, v, lengths, pages, options);
  } else {
    o = examples::paged_attention(q, to_array<T>(in.k, kv_shape), to_array<T>(in.v, kv_shape),
                                  lengths, pages, options);
  }
  ASSERT_EQ(o.shape(), (Shape{batch, hq, c.head_dim}));
  const std::vector<double> want = reference(c, in);
  // The Pallas test's tolerances (the output of a bfloat16 call is rounded to bfloat16).
  const double atol = c.ratio > 1 ? 1e-2 : 2e-1;
  const double rtol = c.ratio > 1 ? 2e-2 : 1e-1;
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (kLengths[static_cast<size_t>(b)] == 0) continue;  // unspecified, as in Pallas
    for (int64_t e = b * hq * c.head_dim; e < (b + 1) * hq * c.head_dim; ++e) {
      const double got = static_cast<double>(static_cast<float>(o.data()[e]));
      const double w = want[static_cast<size_t>(e)];
      ASSERT_LE(std::abs(got - w), atol + rtol * std::abs(w)) << "element " << e;
      worst = std::max(worst, std::abs(got - w));
    }
  }
  // Far inside the tolerances: a wrong block, page or mask would not be.
  EXPECT_LT(worst, c.bf16 ? 2e-2 : 1e-4);
}

// The cases, two to a test (each runs in seconds, also under the sanitizers).
TEST(PagedAttention, OneCoreFloat32) {
  run_case<float>({false, 16, 1, 1, 128, "", std::nullopt}, false);
  run_case<float>({false, 32, 8, 1, 256, "", 1.0f}, false);
}

TEST(PagedAttention, MegacoreBatch) {
  run_case<bfloat16>({true, 16, 8, 8, 128, "batch", std::nullopt}, false);
  run_case<bfloat16>({true, 64, 1, 4, 128, "batch", 1.0f}, false);
}

TEST(PagedAttention, MegacoreKvHead) {
  run_case<bfloat16>({true, 32, 8, 4, 256, "kv_head", 1.0f}, false);  // groups of 4: float32 inside
  run_case<float>({false, 64, 8, 8, 128, "kv_head", std::nullopt}, false);
}

TEST(PagedAttention, Int8Pages) {
  run_case<float>({false, 16, 8, 8, 128, "batch", std::nullopt, true}, false);
  run_case<bfloat16>({true, 64, 1, 4, 256, "", 1.0f, true}, false);
}

TEST(PagedAttention, CheckedModeFindsNothingAndAgrees) {
  run_case<bfloat16>({true, 64, 8, 8, 128, "batch", std::nullopt}, true);
  run_case<float>({false, 32, 1, 4, 128, "", 1.0f}, true);
}

TEST(PagedAttention, CheckedModeWithInt8Pages) {
  run_case<bfloat16>({true, 32, 8, 8, 128, "kv_head", std::nullopt, true}, true);
}

TEST(PagedAttention, RefusesWhatPallasRefusesAndReportsBadPages) {
  const Case c{false, 16, 2, 2, 128, "", std::nullopt};
  const Inputs in = make_inputs(c, 3);
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  const int64_t pps = kMaxLen / c.page_size;
  const Shape kv_shape{2, batch * pps, 16, 128};
  const Array<float> q = to_array<float>(in.q, {batch, 4, 128});
  const Array<float> k = to_array<float>(in.k, kv_shape);
  const Array<float> v = to_array<float>(in.v, kv_shape);
  const Array<int32_t> lengths({batch}, kLengths);
  Array<int32_t> pages({batch, pps}, in.pages);
  const int line = __LINE__ + 2;
  auto call = [&](examples::PagedAttentionOptions o) {
    (void)examples::paged_attention(q, k, v, lengths, pages, o);
  };
  EXPECT_TESSERA_ERROR(call({.pages_per_compute_block = 5}), UsageError,
                       ErrorKind::kInvalidArgument, "must divide the pages per sequence", line);
  // Three KV heads' worth of queries: not an even split over the cores.
  const Array<float> q3 = to_array<float>(in.q, {batch, 3, 128});
  EXPECT_THROW(
      (void)examples::paged_attention(q3, k, v, lengths, pages, {.pages_per_compute_block = 32}),
      UsageError);
  EXPECT_THROW(call({.pages_per_compute_block = 32, .megacore_mode = "core"}), UsageError);
  const Array<int32_t> odd_lengths({3}, {1, 2, 3});
  EXPECT_THROW(
      (void)examples::paged_attention(q, k, v, odd_lengths, pages, {.pages_per_compute_block = 32}),
      UsageError);
  // A page index past the pages: the async copy that would read it raises, naming the bounds.
  pages(3, 1) = static_cast<int32_t>(batch * pps);
  auto err = tessera::testing::catch_error<KernelError>(
      [&] { call({.pages_per_compute_block = 32, .megacore_mode = "kv_head"}); });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind(), ErrorKind::kOutOfBounds) << err->what();
}

}  // namespace
