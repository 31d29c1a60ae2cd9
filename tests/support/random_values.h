// random_values<T>(n, seed): n values of T from a seeded std::mt19937, uniform over int8's whole
// range for int8_t, else uniform in [-1, 1) and converted to T (rounded for bfloat16 and the other
// narrow floats). The dot tests' operands (tests/unit/dot_test.cc, dot_few_rows_test.cc).
#pragma once

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

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
