// The dot tests' operands and their reference (tests/unit/dot_test.cc, dot_few_rows_test.cc):
// random_values<T>(n, seed), n values from a seeded std::mt19937 (uniform over int8's whole range
// for int8_t, else uniform in [-1, 1) and converted to T); reference(x, y, lc, rc), the product of
// two 2-D refs in float64 with its bound, Σ|x · y|; expect_close, which checks a float result
// against it within float32's accumulation bound, (k + 2) · 2^-24 · Σ|x · y|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "support/host_reference.h"
#include "tessera/tessera.h"

namespace tessera::testing {

template <class T>
std::vector<T> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_same_v<T, int8_t>) {
    std::uniform_int_distribution<int> d(-128, 127);
    for (auto& x : v) x = static_cast<int8_t>(d(rng));
  } else {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

template <class T>
pltpu::VmemRef<T> vref(std::vector<T>& v, Shape s) {
  return pltpu::VmemRef<T>(v.data(), std::move(s));
}

// Element (i, j) of a 2-D ref, as double.
template <class T, MemorySpace S>
double at(const pl::Ref<T, S>& r, int64_t i, int64_t j) {
  return static_cast<double>(static_cast<float>(r.data()[i * r.strides()[0] + j * r.strides()[1]]));
}
template <MemorySpace S>
double at(const pl::Ref<int8_t, S>& r, int64_t i, int64_t j) {
  return r.data()[i * r.strides()[0] + j * r.strides()[1]];
}
template <MemorySpace S>
double at(const pl::Ref<int32_t, S>& r, int64_t i, int64_t j) {
  return r.data()[i * r.strides()[0] + j * r.strides()[1]];
}

struct Reference {
  std::vector<double> value;  // (m, n)
  std::vector<double> bound;  // sum |products|
};

// out(i, j) = sum_p x(i or p) * y(p or j), with the contracting dimensions lc, rc. The operands
// are first gathered as doubles with p contiguous (x as (m, k), y as (n, k)), so that the triple
// loop reads two dense rows: the reference is most of these tests' time, under the sanitizers too.
template <class X, class Y>
TESSERA_HOST_REFERENCE Reference reference(const X& x, const Y& y, int lc, int rc) {
  const int64_t m = x.shape()[1 - lc], n = y.shape()[1 - rc], k = x.shape()[lc];
  std::vector<double> xd(static_cast<size_t>(m * k)), yd(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      xd[static_cast<size_t>(i * k + p)] = lc == 1 ? at(x, i, p) : at(x, p, i);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p)
      yd[static_cast<size_t>(j * k + p)] = rc == 0 ? at(y, p, j) : at(y, j, p);
  Reference r{std::vector<double>(static_cast<size_t>(m * n)),
              std::vector<double>(static_cast<size_t>(m * n))};
  for (int64_t i = 0; i < m; ++i) {
    const double* xi = xd.data() + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const double* yj = yd.data() + j * k;
      double s = 0, b = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = xi[p] * yj[p];
        s += t;
        b += std::fabs(t);
      }
      r.value[static_cast<size_t>(i * n + j)] = s;
      r.bound[static_cast<size_t>(i * n + j)] = b;
    }
  }
  return r;
}

// Checks out == before + ref (before = 0 unless accumulating) within the float32 bound.
template <class O>
void expect_close(const O& out, const Reference& ref, int64_t k, const std::vector<double>& before,
                  double result_rel, const std::string& what, double result_abs = 0.0) {
  const int64_t m = out.shape()[0], n = out.shape()[1];
  int bad = 0;
  for (int64_t i = 0; i < m && bad < 5; ++i) {
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double want = (before.empty() ? 0.0 : before[e]) + ref.value[e];
      const double tol = static_cast<double>(k + 2) * std::ldexp(1.0, -24) * ref.bound[e] +
                         result_rel * (std::fabs(want) + ref.bound[e]) + result_abs + 1e-30;
      const double got = at(out, i, j);
      if (!(std::fabs(got - want) <= tol)) {
        ADD_FAILURE() << what << ": out(" << i << ", " << j << ") = " << got << ", want " << want
                      << " (tolerance " << tol << ")";
        ++bad;
      }
    }
  }
}

}  // namespace tessera::testing
