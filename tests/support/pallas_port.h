// Test support for the ports of Pallas' own tests (tests/unit/pallas_*_test.cc): inputs built as
// Pallas' tests build them (jnp.arange(...).reshape(...), fixed pseudo-random values), whether
// the run is checked (TESSERA_INTERPRET, as ctest's checked_env runs set it), and an error check
// by kind and message. docs/pallas-parity.md maps each Pallas test to its port.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace tessera::pallas_port {

/// `jnp.arange(n, dtype=T).reshape(shape)`: element i holds i, converted to T (wrapping for
/// narrow integers, as numpy's astype does).
template <class T>
Array<T> arange(Shape shape) {
  Array<T> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) {
    if constexpr ((std::is_integral_v<T> || is_narrow_int_v<T>)&&!std::is_same_v<T, bool>) {
      a[i] = static_cast<T>(static_cast<uint64_t>(i));
    } else {
      a[i] = static_cast<T>(static_cast<float>(i));
    }
  }
  return a;
}

/// Every element `v`.
template <class T>
Array<T> full(Shape shape, T v) {
  return Array<T>(std::move(shape), v);
}

/// A fixed pseudo-random sequence (splitmix64), for the inputs Pallas' tests draw from
/// jax.random: the tests assert properties that hold for any values.
class Random {
 public:
  explicit Random(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo));
  }
  /// Uniform in [-1, 1), a stand-in for jax.random.normal's values.
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 23) - 1.0f; }
  bool coin() { return (next() & 1) != 0; }

 private:
  uint64_t s_;
};

template <class T>
Array<T> random_array(Shape shape, uint64_t seed) {
  Random r(seed);
  Array<T> a(std::move(shape));
  for (int64_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      a[i] = r.coin();
    } else if constexpr (std::is_integral_v<T>) {
      a[i] = static_cast<T>(r.uniform_int(-100, 100));
    } else {
      a[i] = static_cast<T>(r.uniform());
    }
  }
  return a;
}

/// Whether kernels run checked by default in this process (ctest's checked_env runs set
/// TESSERA_INTERPRET).
inline bool checked_run() {
  const char* e = std::getenv("TESSERA_INTERPRET");
  if (e == nullptr) return false;
  const std::string v(e);
  return !v.empty() && v != "0" && v != "false" && v != "no" && v != "off";
}

/// Runs f; requires an error of type E and `kind` whose message contains `says`.
template <class E = Error, class F>
void expect_error(F&& f, ErrorKind kind, const std::string& says) {
  auto e = tessera::testing::catch_error<E>(f);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), kind) << e->what();
  EXPECT_NE(std::string(e->what()).find(says), std::string::npos)
      << e->what() << "\nexpected to contain: " << says;
}

}  // namespace tessera::pallas_port
