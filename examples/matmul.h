// Pallas' matmul tutorial (docs/pallas/tpu/matmul): a blocked matrix product with
// pl::pallas_call and jnp::dot, in its four variants.
#pragma once

#include <tessera/tessera.h>

#include <cstdint>
#include <iosfwd>
#include <source_location>

namespace tessera::examples {

/// Block sizes of the matmul grid (bm, bn, bk): grid (cdiv(M, bm), cdiv(N, bn), K / bk). A size
/// of 0 is chosen for the shape and this CPU by default_matmul_blocks. bk must divide K; bm and
/// bn need not divide M and N (the last block of a side is then partial: Pallas pads it, and only
/// its valid part reaches the output).
struct MatmulBlocks {
  int64_t bm = 0;
  int64_t bn = 0;
  int64_t bk = 0;
};
/// The default: every block size chosen at run time from the CPU's caches.
inline constexpr MatmulBlocks kDefaultMatmulBlocks{};

/// Blocks for an (m, k) x (k, n) product of `item`-byte elements on `cores` cores (0: this
/// machine's), from the L2 cache the CPU reports (docs/performance.md, "Choosing the blocks"):
/// bk is the largest divisor of k for which a (bk, 64) float32 column panel of B fits in half the
/// L2 (at least 256), and bm = bn the largest power of two whose float32 output block, bm * bn * 4
/// bytes, fits in twice the L2, whatever the item. Each is then the largest divisor of m, n up to
/// it where that is at least half of it (else, for a size without one, the side that cuts it into
/// the fewest pieces up to it, as even as a multiple of 8 rows or 128 columns lets them be, the
/// last one partial; likewise all of k when k has no divisor from half the k reach up), halved
/// until every core has an output block (the larger side; for bfloat16 the columns first, to a
/// divisor that is a multiple of 128, unless the block is more than twice as tall as wide: its
/// GEMM packs B and reads A where it lies); where the blocks then do not divide evenly among the
/// cores, a side is narrowed (by at most half) to the largest divisor that evens them.
/// For float32, when a (bk, bn / 2) block of B would still pass half the L2 (B then goes through
/// the GEMM in column panels), the block of the same area four times as tall as wide is taken
/// instead (bm doubled, bn halved), where its blocks divide evenly among the cores. A bk not given
/// is then halved while the double-buffered windows, 2 * (bm * bk + bk * bn + bm * bn) * item
/// bytes, pass 96 MiB (and where it cannot be, the larger output side not given is halved).
/// Sizes already given in `given` are kept.
MatmulBlocks default_matmul_blocks(int64_t m, int64_t n, int64_t k, int64_t item, int cores,
                                   MatmulBlocks given = {});

/// z = x @ y for float32 x (M, K), y (K, N): grid (cdiv(M, bm), cdiv(N, bn), K / bk) with
/// (PARALLEL, PARALLEL, ARBITRARY) semantics, the output block zeroed at k == 0 and accumulated
/// in place. `num_cores` 0 means this machine's. Operands that are not (M, K) and (K, N)
/// matrices, a negative block size, or a bk that does not divide K raise a UsageError at
/// `where` (the variants below alike).
Array<float> matmul(const Array<float>& x, const Array<float>& y,
                    MatmulBlocks blocks = kDefaultMatmulBlocks, int num_cores = 0,
                    std::source_location where = std::source_location::current());

/// The bfloat16 variant: bf16 inputs, a float32 VMEM scratch accumulator zeroed at k == 0,
/// `acc += jnp::dot<float>(x, y)` (preferred_element_type=float32), and the accumulator rounded
/// to the bfloat16 output at the last k.
Array<bfloat16> matmul_bf16(const Array<bfloat16>& x, const Array<bfloat16>& y,
                            MatmulBlocks blocks = kDefaultMatmulBlocks, int num_cores = 0,
                            std::source_location where = std::source_location::current());

/// z = x @ y.T for float32 x (M, K), y (N, K), with the transpose fused into the dot:
/// y's BlockSpec is (bn, bk) -> (j, k) and the dot contracts dimension 1 of both blocks.
Array<float> matmul_transpose_rhs(const Array<float>& x, const Array<float>& y,
                                  MatmulBlocks blocks = kDefaultMatmulBlocks, int num_cores = 0,
                                  std::source_location where = std::source_location::current());

/// z = relu(x @ y) for float32, the activation applied to the output block at the last k.
Array<float> matmul_relu(const Array<float>& x, const Array<float>& y,
                         MatmulBlocks blocks = kDefaultMatmulBlocks, int num_cores = 0,
                         std::source_location where = std::source_location::current());

/// Runs the four variants on small inputs, checks each against a float64 reference with a
/// per-dtype tolerance, prints one line each; true when all pass.
bool run_matmul(std::ostream& out);

}  // namespace tessera::examples
