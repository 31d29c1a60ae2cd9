// Test support: a TPU bitcast of a host array (what Pallas' tests compute with
// jax._src.state.utils.bitcast), written out element by element from the rule it states.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/tessera.h"

namespace tessera::pallas_port {

/// To a type k times narrower, element (..., k * r + h, c) is part h (the lowest bits first) of
/// element (..., r, c) of `x`; to a type k times wider, the inverse. Rank >= 2.
template <class To, class From>
Array<To> bitcast_rows(const Array<From>& x) {
  const int rank = x.shape().rank();
  Shape s = x.shape();
  const int64_t rows = s[rank - 2], cols = s[rank - 1];
  const int64_t lead = x.size() / (rows * cols);
  const auto* src = reinterpret_cast<const unsigned char*>(x.data());
  if constexpr (sizeof(To) < sizeof(From)) {
    constexpr int64_t k = sizeof(From) / sizeof(To);
    s[rank - 2] = rows * k;
    Array<To> out(s);
    auto* dst = reinterpret_cast<unsigned char*>(out.data());
    for (int64_t l = 0; l < lead; ++l) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < k; ++h) {
          for (int64_t c = 0; c < cols; ++c) {
            std::memcpy(dst + ((l * rows * k + k * r + h) * cols + c) * sizeof(To),
                        src + ((l * rows + r) * cols + c) * sizeof(From) + h * sizeof(To),
                        sizeof(To));
          }
        }
      }
    }
    return out;
  } else {
    constexpr int64_t k = sizeof(To) / sizeof(From);
    s[rank - 2] = rows / k;
    Array<To> out(s);
    auto* dst = reinterpret_cast<unsigned char*>(out.data());
    for (int64_t l = 0; l < lead; ++l) {
      for (int64_t r = 0; r < rows / k; ++r) {
        for (int64_t h = 0; h < k; ++h) {
          for (int64_t c = 0; c < cols; ++c) {
            std::memcpy(dst + ((l * (rows / k) + r) * cols + c) * sizeof(To) + h * sizeof(From),
                        src + ((l * rows + k * r + h) * cols + c) * sizeof(From), sizeof(From));
          }
        }
      }
    }
    return out;
  }
}

/// The bits of an element, for comparisons that must not depend on NaN payloads.
template <class T>
uint64_t bits_of(const T& v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

}  // namespace tessera::pallas_port
