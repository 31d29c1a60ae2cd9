// pltpu.roll / jnp.roll and jnp.cumsum on a node's operand, laid out as contiguous 32-bit lanes
// (the lowering of non-elementwise nodes, vector_evaluate.cc).
#include "native/lane_scans.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tessera::detail {

namespace {

/// `node`'s shape seen around its axis: `outer` rows of `n` steps of `inner` contiguous lanes.
struct AxisExtents {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
AxisExtents axis_extents(const ExprNode& node) {
  AxisExtents e;
  for (int i = 0; i < node.axis; ++i) e.outer *= node.shape[i];
  for (int i = node.axis + 1; i < node.shape.rank(); ++i) e.inner *= node.shape[i];
  e.n = node.shape[node.axis];
  return e;
}

/// pltpu.roll with a stride axis after the rolled one: the shift varies inside a row. Along the
/// rolled axis, runs of `tail` lanes at stride index i (of e) within each of `mid` blocks move by
/// their own shift, iconst + i * roll_stride (mod n).
void roll_lanes_inner_stride(const ExprNode& node, const std::byte* src, std::byte* dst) {
  const auto [outer, n, inner] = axis_extents(node);
  const int sa = node.stride_axis;
  const int64_t stride = node.roll_stride;  // 0 <= stride < n
  int64_t mid = 1, tail = 1;
  for (int d = node.axis + 1; d < sa; ++d) mid *= node.shape[d];
  for (int d = sa + 1; d < node.shape.rank(); ++d) tail *= node.shape[d];
  const int64_t e = node.shape[sa];
  const int64_t row = n * inner * 4;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t m = 0; m < mid; ++m) {
        int64_t s = node.iconst;
        for (int64_t i = 0; i < e; ++i) {
          const int64_t from = k >= s ? k - s : k - s + n;
          const int64_t lane = (m * e + i) * tail;
          std::memcpy(dst + o * row + (k * inner + lane) * 4,
                      src + o * row + (from * inner + lane) * 4, static_cast<size_t>(tail * 4));
          s = s + stride >= n ? s + stride - n : s + stride;
        }
      }
    }
  }
}

}  // namespace

/// A roll of contiguous 32-bit lanes along `node.axis` by `node.iconst`; with a stride axis
/// (pltpu.roll's stride), slice i along it by iconst + i * roll_stride (mod n).
void roll_lanes(const ExprNode& node, const void* operand, void* result) {
  const auto* src = static_cast<const std::byte*>(operand);
  auto* dst = static_cast<std::byte*>(result);
  const int sa = node.stride_axis;
  if (sa > node.axis) return roll_lanes_inner_stride(node, src, dst);
  // One shift per row; with a stride axis before the rolled one it steps every `below` rows.
  const auto [outer, n, inner] = axis_extents(node);
  const int64_t row = n * inner * 4;
  const int64_t stride = node.roll_stride;  // 0 <= stride < n
  int64_t below = 1, e = 1;
  if (sa >= 0) {
    for (int d = sa + 1; d < node.axis; ++d) below *= node.shape[d];
    e = node.shape[sa];
  }
  int64_t s = node.iconst;  // 0 <= s < n
  for (int64_t o = 0; o < outer; ++o) {
    if (sa >= 0 && o > 0 && o % below == 0) {
      s = (o / below) % e == 0 ? node.iconst : (s + stride >= n ? s + stride - n : s + stride);
    }
    // out[s:] = in[:n-s], out[:s] = in[n-s:]
    std::memcpy(dst + o * row + s * inner * 4, src + o * row,
                static_cast<size_t>((n - s) * inner * 4));
    std::memcpy(dst + o * row, src + o * row + (n - s) * inner * 4,
                static_cast<size_t>(s * inner * 4));
  }
}

/// A running sum of contiguous 32-bit lanes along `node.axis` (float, or int32 wrapping).
void cumsum_lanes(const ExprNode& node, bool flt, const void* operand, void* result) {
  const auto [outer, n, inner] = axis_extents(node);
  auto scan = [&](const auto* src, auto* dst) {
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = o * n * inner;
      for (int64_t j = 0; j < inner; ++j) dst[base + j] = src[base + j];
      for (int64_t k = 1; k < n; ++k) {
        const int64_t row = base + k * inner;
        for (int64_t j = 0; j < inner; ++j) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*src)>, float>) {
            dst[row + j] = dst[row - inner + j] + src[row + j];
          } else {
            dst[row + j] = static_cast<int32_t>(static_cast<uint32_t>(dst[row - inner + j]) +
                                                static_cast<uint32_t>(src[row + j]));
          }
        }
      }
    }
  };
  if (flt) {
    scan(static_cast<const float*>(operand), static_cast<float*>(result));
  } else {
    scan(static_cast<const int32_t*>(operand), static_cast<int32_t*>(result));
  }
}

}  // namespace tessera::detail
