// File: tessera/slice.h
//
// Indexers for `Ref::at(...)`, the counterpart of Pallas' `ref.at[...]`:
//
//   Pallas                          Tessera
//   x.at[pl.ds(i * 128, 128)]       x.at(pl::ds(i * 128, 128))
//   x.at[pl.ds(0, 8, 2)]            x.at(pl::ds(0, 8, 2))        // stride 2
//   x.at[0]                         x.at(0)                      // squeezes axis 0
//   x.at[:, pl.ds(j, 128)]          x.at(pl::all, pl::ds(j, 128))
//
// Missing trailing indexers mean whole axes, as in numpy.
#pragma once

#include <cstdint>

namespace tessera {
namespace pl {

/// `pl.Slice`: `size` elements from `start`, every `stride`-th (stride >= 1).
struct Slice {
  int64_t start = 0;
  int64_t size = 0;
  int64_t stride = 1;
};

/// `pl.ds(start, size)`: elements start .. start + size - 1.
constexpr Slice ds(int64_t start, int64_t size) noexcept { return Slice{start, size, 1}; }
/// `pl.ds(start, size, stride)`: `size` elements start, start + stride, ...
constexpr Slice ds(int64_t start, int64_t size, int64_t stride) noexcept {
  return Slice{start, size, stride};
}

/// The whole axis (Python's `:`).
struct All {};
inline constexpr All all{};

/// Every axis (Python's `...`): `x_ref[pl::ellipsis]` is Pallas' `x_ref[...]`.
struct Ellipsis {};
inline constexpr Ellipsis ellipsis{};

}  // namespace pl
}  // namespace tessera
