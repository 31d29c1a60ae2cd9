// Pallas' matmul tutorial: a blocked matrix product over a (M/bm, N/bn, K/bk) grid. The i and j
// axes are independent (PARALLEL, split over the cores); k is a reduction (ARBITRARY): the
// output block's index ignores k, so it stays in VMEM across the k steps and is written back
// once, after the last one.
#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "matmul.h"
#include "usage_error.h"

namespace tessera::examples {

namespace {

// The bodies take their input blocks as `VmemRef<const T>`: an engine may then read them where
// they lie in the big arrays (the native engine does) instead of copying each block into VMEM.
// The tile GEMM packs a B whose rows are strided before its kernel walks it (src/native/gemm.cc),
// so no copy is made that the GEMM does not want; at 2048³ f32 on 2 cores this measured 0.85-0.87
// of the best library with copied blocks and 0.90-0.96 without (docs/performance.md, "Inputs read
// where they lie").
int cores_or_default(int n) { return n > 0 ? n : pltpu::get_tpu_info().num_cores; }

// The largest divisor of `n` that is at most `cap` (n itself when n <= cap).
int64_t divisor_up_to(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

// a / b rounded up, for a >= 0 and b >= 1, for the block chooser: a block size a caller gives may
// be any int64_t, which pl::cdiv refuses where a + b - 1 overflows; here it rounds up without that
// sum, and product() then refuses the blocks with a message about their VMEM.
int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// The bytes of a kernel's double-buffered windows, plus `extra` bytes of scratch, as a double: a
// block size a caller gives may be any int64_t, whose products would overflow.
double window_bytes(const MatmulBlocks& b, int64_t item, int64_t extra = 0) {
  const auto bm = static_cast<double>(b.bm), bn = static_cast<double>(b.bn);
  const auto bk = static_cast<double>(b.bk);
  return 2 * (bm * bk + bk * bn + bm * bn) * static_cast<double>(item) + static_cast<double>(extra);
}

// The elements an output grid computes, padding included (a double, as window_bytes).
double padded_area(int64_t blocks, const MatmulBlocks& b) {
  return static_cast<double>(blocks) * static_cast<double>(b.bm) * static_cast<double>(b.bn);
}

// A block side for a dimension of `n` elements, about `cap` long (n itself when n <= cap): the
// largest divisor of n up to cap where it is at least half of min(n, cap), so that every block is
// full; else (n has no such divisor: 2047 = 23 x 89 would get blocks of 89) the multiple of
// `align` from cap / 2 to cap whose blocks pad n the least (the larger on a tie), the last block
// then partial (Pallas pads a partial edge block; only its valid part reaches the output). 2047
// with a cap of 1024 gets 1024 (blocks of 1024 and 1023 rows); 4099 columns with a cap of 512 get
// 384 (eleven blocks, 125 columns of padding; 512 would pad 509).
int64_t side_up_to(int64_t n, int64_t cap, int64_t align) {
  const int64_t d = divisor_up_to(n, cap);
  if (2 * d >= std::min(n, cap)) return d;
  const int64_t a = std::min(align, cap);
  int64_t best = cdiv(cdiv(n, cdiv(n, cap)), a) * a;  // the fewest pieces, as even as they can be
  for (int64_t w = cap / a * a; 2 * w >= cap; w -= a) {
    if (cdiv(n, w) * w < cdiv(n, best) * best) best = w;
  }
  return std::min(n, best);
}

// Output blocks of rows take a multiple of 8 (a float32 vreg's sublanes), of columns a multiple
// of 128 (its lanes), where they are partial: the tiling rule of a TPU's blocks.
constexpr int64_t kRowAlign = 8;
constexpr int64_t kColAlign = 128;

pl::BlockSpec x_spec(MatmulBlocks b) {
  return pl::BlockSpec({b.bm, b.bk}, [](int i, int, int k) { return pl::idx(i, k); });
}
pl::BlockSpec y_spec(MatmulBlocks b) {
  return pl::BlockSpec({b.bk, b.bn}, [](int, int j, int k) { return pl::idx(k, j); });
}
pl::BlockSpec z_spec(MatmulBlocks b) {
  return pl::BlockSpec({b.bm, b.bn}, [](int i, int j, int) { return pl::idx(i, j); });
}

// The output grid that blocks give an (m, n) product on `cores` cores, and how its blocks fall on
// the cores; sides given by the caller (`given`) are never changed.
struct OutputGrid {
  int64_t m, n;
  int cores;
  MatmulBlocks given;
  int64_t max_area;  // the largest output block the caches allow, bm * bn
  // Whether halve() takes the columns first (bfloat16: see default_matmul_blocks).
  bool columns_first = false;

  int64_t count(const MatmulBlocks& s) const { return cdiv(m, s.bm) * cdiv(n, s.bn); }
  bool even(const MatmulBlocks& s) const { return count(s) % cores == 0; }

  // Halves the larger side of `s` not given (to a divisor where one is near, else to a partial
  // cut, as side_up_to chooses); false where no side can shrink. With `columns_first`, the
  // columns unless the block is more than twice as tall as wide, or they have no divisor near
  // half that is a multiple of 128 (a TPU block's lanes; a partial cut would pad much).
  bool halve(MatmulBlocks& s) const {
    if (given.bm > 0 && given.bn > 0) return false;
    bool rows = given.bm <= 0 && (given.bn > 0 || s.bm >= s.bn);
    if (columns_first && given.bn <= 0 && s.bm <= 2 * s.bn) {
      const int64_t narrower = side_up_to(n, cdiv(s.bn, 2), kColAlign);
      if (narrower < s.bn && n % narrower == 0 && narrower % kColAlign == 0) rows = false;
    }
    int64_t& side = rows ? s.bm : s.bn;
    const int64_t smaller = side_up_to(rows ? m : n, cdiv(side, 2), rows ? kRowAlign : kColAlign);
    if (side <= 8 || smaller >= side) return false;
    side = smaller;
    return true;
  }

  // Every core gets an output block (the grid's PARALLEL axes are what the cores share): the
  // larger side not given is halved until it does.
  MatmulBlocks share(MatmulBlocks s) const {
    while (count(s) < cores && halve(s)) {
    }
    return s;
  }

  // Whether `t` splits evenly and beats `best`: the fewest elements computed, padding included,
  // then the larger block.
  bool better(const MatmulBlocks& t, const MatmulBlocks& best) const {
    if (!even(t)) return false;
    if (!even(best)) return true;
    const double work = padded_area(count(t), t), best_work = padded_area(count(best), best);
    return work < best_work || (work == best_work && padded_area(1, t) > padded_area(1, best));
  }

  // Blocks that do not divide evenly among the cores leave a core idle at the end (3072³ gets
  // nine (1024, 1024) blocks, five for one of two cores): a side not given is shrunk, by at most
  // half, to the largest divisor that evens the split, the side that keeps the larger block.
  // bfloat16 3072³ (docs/performance.md, "Taller blocks, split evenly"): 1,801-1,859 GFLOP/s
  // with (1024, 1024), 2,017-2,048 with (768, 1024) or (1024, 768). Where no divisor does, a side
  // is cut into one piece more or one fewer, as even as its alignment lets them be, the last one
  // partial (777³ on two cores: three (259, 777) blocks become two of 392 rows), the cut whose
  // padding computes the least; `b` itself where none evens the split.
  MatmulBlocks evened(const MatmulBlocks& b) const {
    if (even(b)) return b;
    MatmulBlocks best = b;
    for (const bool rows : {true, false}) {
      if ((rows ? given.bm : given.bn) > 0) continue;
      const int64_t dim = rows ? m : n, full = rows ? b.bm : b.bn;
      for (int64_t d = full - 1; 2 * d >= full; --d) {
        MatmulBlocks t = b;
        (rows ? t.bm : t.bn) = d;
        if (dim % d != 0 || !even(t)) continue;
        if (better(t, best)) best = t;
        break;
      }
    }
    return even(best) ? best : cut_unevenly(b);
  }

  // The partial cuts of evened(): `b` itself where none evens the split.
  MatmulBlocks cut_unevenly(const MatmulBlocks& b) const {
    MatmulBlocks best = b;
    for (const bool rows : {true, false}) {
      if ((rows ? given.bm : given.bn) > 0) continue;
      const int64_t dim = rows ? m : n, full = rows ? b.bm : b.bn;
      const int64_t align = rows ? kRowAlign : kColAlign;
      for (const int64_t p : {cdiv(dim, full) + 1, cdiv(dim, full) - 1}) {
        MatmulBlocks t = b;
        int64_t& side = rows ? t.bm : t.bn;
        side = std::min(dim, cdiv(cdiv(dim, std::max<int64_t>(p, 1)), align) * align);
        // One piece fewer only while every core keeps a block and the block stays within the
        // area the caches allow.
        const bool fits = side < full ||
                          (count(t) >= cores && padded_area(1, t) <= static_cast<double>(max_area));
        if (side != full && fits && better(t, best)) best = t;
      }
    }
    return best;
  }
};

// The double-buffered windows must fit a VMEM limit a kernel may ask for (at most 192 MiB): a
// long k step with an L2 of 4 MiB or more would pass it, so a k step not given is shortened then
// (to a divisor of k from 256 up); where it cannot be (given, or all of a k with no such
// divisor), the larger side of the output block not given is halved instead.
MatmulBlocks fit_windows(MatmulBlocks b, const OutputGrid& grid, int64_t k, int64_t item) {
  while (window_bytes(b, item) > static_cast<double>(int64_t{96} << 20)) {
    const int64_t shorter = grid.given.bk <= 0 ? divisor_up_to(k, b.bk / 2) : b.bk;
    if (shorter != b.bk && shorter >= 256) {
      b.bk = shorter;
    } else if (!grid.halve(b)) {
      break;
    }
  }
  return b;
}

}  // namespace

MatmulBlocks default_matmul_blocks(int64_t m, int64_t n, int64_t k, int64_t item, int cores,
                                   MatmulBlocks given) {
  const std::optional<pltpu::CpuInfo> cpu = pltpu::get_tpu_info().cpu;
  const int64_t l2 = cpu && cpu->l2_bytes > 0 ? cpu->l2_bytes : int64_t{1} << 20;
  cores = cores_or_default(cores);
  MatmulBlocks b = given;
  // A long k step spares the float32 accumulator block a round trip through memory at each
  // step. The float32 tile GEMM reads its inputs where they lie and packs B a column panel of
  // 64 at a time (src/native/gemm.cc), which then has to fit in half the L2; the bfloat16 one
  // packs all of its B per call and walks k in passes that fit the L1 (src/native/gemm_amx.cc),
  // and takes the same step: measured against k steps of 256 whose inputs fit the L2
  // (docs/performance.md, "Choosing the blocks"), 8-10% faster on 1 and on 2 cores at 2048³.
  if (b.bk <= 0) {
    const int64_t reach = std::max<int64_t>(256, l2 / 2 / (64 * 4));
    b.bk = divisor_up_to(k, reach);
    // A k with no divisor near the reach (a prime 4099 would take steps of 1) is taken whole: a
    // partial block of the contraction would add its padding into every sum.
    if (2 * b.bk < std::min(k, reach)) b.bk = k;
  }
  int64_t cap = 8;
  for (int64_t c = 8; c <= int64_t{1} << 14; c *= 2) {
    if (c * c * 4 <= 2 * l2) cap = c;
  }
  // bfloat16 halves the output block's columns first where it must be split (for the cores, or
  // the VMEM cap), unless the block is already more than twice as tall as wide: the AMX GEMM
  // packs all of its B block at every call and reads A where it lies (src/native/gemm_amx.cc),
  // so a core that takes half the columns packs half of B, where one that takes half the rows
  // packs all of it. Measured against halving the rows (docs/performance.md, "bfloat16: the
  // columns split among the cores"): 512³ (512, 256, 512) ~10% and 1024³ (1024, 512, 1024) ~4%
  // faster on 2 cores with AMX, alike or faster without it (AVX512-BF16 and AVX2 kernels).
  const OutputGrid grid{m, n, cores, given, cap * cap, item == 2};
  MatmulBlocks square = b;
  if (square.bm <= 0) square.bm = side_up_to(m, cap, kRowAlign);
  if (square.bn <= 0) square.bn = side_up_to(n, cap, kColAlign);
  b = grid.evened(grid.share(square));
  // float32 with a B block past half the L2: the tile GEMM packs the block's B one 64-column
  // panel at a time and streams the block's A past each panel (src/native/gemm.cc), so packing
  // costs in proportion to 1 / bm; an output block of the same area, four times as tall as it
  // is wide, packs each column of B for twice the rows. Measured against the square block
  // (docs/performance.md, "Taller blocks, split evenly"): 1-4% faster at 1024³ to 4096³ on 2
  // cores, alike or faster on 1 core and with the AVX2 kernels. The GEMM takes panels only for
  // more than two of them. Taken only where its blocks divide evenly among the cores: 1536³
  // would get three (1536, 512) blocks for two cores.
  const int64_t narrow = side_up_to(n, cap / 2, kColAlign);
  if (item == 4 && given.bm <= 0 && given.bn <= 0 && narrow > 2 * 64 &&
      static_cast<double>(b.bk) * static_cast<double>(narrow) * 4 > static_cast<double>(l2 / 2)) {
    MatmulBlocks tall = grid.share(MatmulBlocks{side_up_to(m, 2 * cap, kRowAlign), narrow, b.bk});
    // Partial blocks that split unevenly are cut again (4099³: (1368, 384) blocks, 33 of them,
    // become 22 of (2056, 384)).
    if (!grid.even(tall) && (m % tall.bm != 0 || n % tall.bn != 0)) tall = grid.cut_unevenly(tall);
    if (grid.even(tall)) b = tall;
  }
  // bfloat16: the AMX GEMM packs all of the block's B at every call and copies the block's rows
  // of A pass by pass (src/native/gemm_amx.cc), so packing costs in proportion to 1 / bm; a
  // block twice as tall (twice the area) measured 6-11% faster at 2048³ and 4096³, on 1 and 2
  // cores, and alike on the AVX512-BF16 and AVX2 paths of CPUs without AMX (docs/performance.md,
  // "Taller blocks, split evenly"). Wider as well was slower: the packed B of a pass over k then
  // outgrows half the L2. The taller block is shared among the cores by its rows, as measured.
  if (item == 2 && given.bm <= 0 && given.bn <= 0) {
    OutputGrid by_rows = grid;
    by_rows.columns_first = false;
    const MatmulBlocks tall =
        by_rows.share(MatmulBlocks{side_up_to(m, 2 * cap, kRowAlign), b.bn, b.bk});
    if (grid.even(tall) && tall.bm > b.bm) b = tall;
  }
  return fit_windows(b, grid, k, item);
}

namespace {

// An (m, k) x (k, n) product and its blocks: grid (cdiv(m, bm), cdiv(n, bn), k / bk).
struct Product {
  int64_t m, n, k;
  MatmulBlocks b;
  int64_t vmem_bytes = 0;  // the double-buffered windows and the scratch, plus 1 MiB
  Shape grid() const { return {pl::cdiv(m, b.bm), pl::cdiv(n, b.bn), k / b.bk}; }
  // No grid step to run: an empty output, or (K = 0) a sum of nothing, zeros.
  bool empty() const { return m == 0 || n == 0 || k == 0; }
};

// The largest VMEM budget a kernel may ask for (pltpu::CompilerParams::vmem_limit_bytes).
constexpr int64_t kMaxVmemBytes = int64_t{192} << 20;

// The product x @ y (x @ y.T where `transposed`) with its blocks chosen, or a UsageError at the
// caller's line: operands that are not matrices with one contraction size, a block size below 0,
// a k block that does not divide K (its padding would enter every sum), or blocks whose windows
// (and `scratch_item`-byte accumulator) pass the VMEM a kernel may ask for. Partial blocks of M
// and N are fine: Pallas pads them, and only their valid part reaches the output.
Product product(const char* name, const Shape& xs, const Shape& ys, bool transposed,
                MatmulBlocks given, int64_t item, int64_t scratch_item, int num_cores,
                std::source_location where) {
  auto fail = [&](const std::string& what, const std::string& hint) {
    usage_error(name, what, hint, where);
  };
  if (xs.rank() != 2 || ys.rank() != 2 || xs[1] != ys[transposed ? 1 : 0]) {
    fail(std::string("x is ") + xs.to_string() + " and y " + ys.to_string() +
             (transposed ? ": x @ y.T needs x (M, K) and y (N, K)"
                         : ": x @ y needs x (M, K) and y (K, N)"),
         "pass two 2-D arrays whose contraction sizes agree");
  }
  if (num_cores < 0) {
    fail("num_cores=" + std::to_string(num_cores) + " is below 0",
         "give the cores to run on, or 0 for this machine's");
  }
  if (given.bm < 0 || given.bn < 0 || given.bk < 0) {
    fail("the blocks (" + std::to_string(given.bm) + ", " + std::to_string(given.bn) + ", " +
             std::to_string(given.bk) + ") have a negative size",
         "give sizes from 1 up, or 0 to have one chosen for this CPU");
  }
  Product p{xs[0], ys[transposed ? 0 : 1], xs[1], {}};
  int64_t out_bytes = 0;
  if (__builtin_mul_overflow(p.m, p.n, &out_bytes) ||
      __builtin_mul_overflow(out_bytes, item, &out_bytes)) {
    fail("the output (" + std::to_string(p.m) + ", " + std::to_string(p.n) +
             ") has more bytes than a 64-bit count holds",
         "split the product into smaller ones");
  }
  p.b = default_matmul_blocks(p.m, p.n, p.k, item, num_cores, given);
  if (p.k % p.b.bk != 0) {
    fail("the k block " + std::to_string(p.b.bk) + " does not divide K = " + std::to_string(p.k) +
             ": a partial block of the contraction would add its padding into every sum",
         "give a divisor of K (or K itself), or 0 to have one chosen");
  }
  const double scratch = static_cast<double>(scratch_item) * padded_area(1, p.b);
  const double need = window_bytes(p.b, item) + scratch + (1 << 20);
  if (need > static_cast<double>(kMaxVmemBytes)) {
    fail("the blocks (" + std::to_string(p.b.bm) + ", " + std::to_string(p.b.bn) + ", " +
             std::to_string(p.b.bk) + ") need " + std::to_string(std::llround(need / (1 << 20))) +
             " MiB of VMEM for their double-buffered windows, more than the " +
             std::to_string(kMaxVmemBytes >> 20) + " MiB a kernel may ask for",
         "give smaller blocks, or 0 to have them chosen for this CPU");
  }
  p.vmem_bytes = static_cast<int64_t>(need);
  return p;
}

// pallas_call double-buffers each block; raise the VMEM limit when large blocks need it.
pltpu::CompilerParams params(const Product& p) {
  return pltpu::CompilerParams{
      .dimension_semantics = {pltpu::PARALLEL, pltpu::PARALLEL, pltpu::ARBITRARY},
      .vmem_limit_bytes = std::max<int64_t>(p.vmem_bytes, int64_t{16} << 20)};
}

}  // namespace

Array<float> matmul(const Array<float>& x, const Array<float>& y, MatmulBlocks b, int num_cores,
                    std::source_location where) {
  const Product p = product("matmul", x.shape(), y.shape(), false, b, 4, 0, num_cores, where);
  if (p.empty()) return Array<float>(Shape{p.m, p.n}, 0.0f);
  b = p.b;
  auto kernel = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
         pltpu::VmemRef<float> z_ref) {
        if (pl::program_id(2) == 0) z_ref = jnp::zeros_like(z_ref);
        z_ref += jnp::dot(x_ref, y_ref);  // z_ref[...] += x_ref[...] @ y_ref[...]
      },
      pl::out_shape<float>({p.m, p.n}), pl::grid(p.grid()), pl::in_specs(x_spec(b), y_spec(b)),
      pl::out_specs(z_spec(b)), params(p),
      pltpu::TensorCoreMesh("core", cores_or_default(num_cores), where), pl::name("matmul"));
  return kernel(x, y);
}

Array<bfloat16> matmul_bf16(const Array<bfloat16>& x, const Array<bfloat16>& y, MatmulBlocks b,
                            int num_cores, std::source_location where) {
  const Product p = product("matmul_bf16", x.shape(), y.shape(), false, b, 2, 4, num_cores, where);
  if (p.empty()) return Array<bfloat16>(Shape{p.m, p.n}, bfloat16(0.0f));
  b = p.b;
  auto kernel = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> x_ref, pltpu::VmemRef<const bfloat16> y_ref,
         pltpu::VmemRef<bfloat16> z_ref, pltpu::VmemRef<float> acc_ref) {
        if (pl::program_id(2) == 0) acc_ref = jnp::zeros_like(acc_ref);
        acc_ref += jnp::dot<float>(x_ref, y_ref);  // preferred_element_type=jnp.float32
        if (pl::program_id(2) == pl::num_programs(2) - 1) z_ref = acc_ref.astype<bfloat16>();
      },
      pl::out_shape<bfloat16>({p.m, p.n}), pl::grid(p.grid()), pl::in_specs(x_spec(b), y_spec(b)),
      pl::out_specs(z_spec(b)), pl::scratch_shapes(pltpu::VMEM<float>({b.bm, b.bn})), params(p),
      pltpu::TensorCoreMesh("core", cores_or_default(num_cores), where), pl::name("matmul_bf16"));
  return kernel(x, y);
}

Array<float> matmul_transpose_rhs(const Array<float>& x, const Array<float>& y, MatmulBlocks b,
                                  int num_cores, std::source_location where) {
  const Product p =
      product("matmul_transpose_rhs", x.shape(), y.shape(), true, b, 4, 0, num_cores, where);
  if (p.empty()) return Array<float>(Shape{p.m, p.n}, 0.0f);
  b = p.b;
  auto kernel = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
         pltpu::VmemRef<float> z_ref) {
        if (pl::program_id(2) == 0) z_ref = jnp::zeros_like(z_ref);
        // x (bm, bk) contracted with y (bn, bk) on dimension 1 of both: x @ y.T, no transpose.
        z_ref += lax::dot_general(x_ref, y_ref, {{{1}, {1}}, {{}, {}}});
      },
      pl::out_shape<float>({p.m, p.n}), pl::grid(p.grid()),
      pl::in_specs(x_spec(b),
                   pl::BlockSpec({b.bn, b.bk}, [](int, int j, int kk) { return pl::idx(j, kk); })),
      pl::out_specs(z_spec(b)), params(p),
      pltpu::TensorCoreMesh("core", cores_or_default(num_cores), where),
      pl::name("matmul_transpose_rhs"));
  return kernel(x, y);
}

Array<float> matmul_relu(const Array<float>& x, const Array<float>& y, MatmulBlocks b,
                         int num_cores, std::source_location where) {
  const Product p = product("matmul_relu", x.shape(), y.shape(), false, b, 4, 0, num_cores, where);
  if (p.empty()) return Array<float>(Shape{p.m, p.n}, 0.0f);
  b = p.b;
  auto kernel = pl::pallas_call(
      [](pltpu::VmemRef<const float> x_ref, pltpu::VmemRef<const float> y_ref,
         pltpu::VmemRef<float> z_ref) {
        if (pl::program_id(2) == 0) z_ref = jnp::zeros_like(z_ref);
        z_ref += jnp::dot(x_ref, y_ref);
        if (pl::program_id(2) == pl::num_programs(2) - 1)
          z_ref = jnp::maximum(z_ref, 0.0f);  // relu
      },
      pl::out_shape<float>({p.m, p.n}), pl::grid(p.grid()), pl::in_specs(x_spec(b), y_spec(b)),
      pl::out_specs(z_spec(b)), params(p),
      pltpu::TensorCoreMesh("core", cores_or_default(num_cores), where), pl::name("matmul_relu"));
  return kernel(x, y);
}

namespace {

template <class T>
Array<T> random_array(int64_t rows, int64_t cols, uint32_t seed) {
  Array<T> a({rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t e = 0; e < a.size(); ++e) a[e] = static_cast<T>(d(rng));
  return a;
}

// Checks z against the float64 product of x and y (y transposed when `transposed`), within
// (K + 2) * 2^-24 * sum_p |x_ip y_pj| (float32 accumulation) plus `rel` * |z| (the output's
// own rounding: 2^-8 for bfloat16). Prints one line.
template <class T, class Z>
bool check(std::ostream& out, const std::string& what, const Array<T>& x, const Array<T>& y,
           const Array<Z>& z, bool transposed, bool relu, double rel, MatmulBlocks b) {
  const int64_t m = x.shape()[0], k = x.shape()[1];
  const int64_t n = transposed ? y.shape()[0] : y.shape()[1];
  double max_err = 0, worst_ratio = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, bound = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double xv = static_cast<float>(x[i * k + p]);
        const double yv = static_cast<float>(transposed ? y[j * k + p] : y[p * n + j]);
        s += xv * yv;
        bound += std::fabs(xv * yv);
      }
      if (relu) s = std::max(s, 0.0);
      const double tol =
          static_cast<double>(k + 2) * std::ldexp(1.0, -24) * bound + rel * std::fabs(s) + 1e-30;
      const double err = std::fabs(static_cast<double>(static_cast<float>(z[i * n + j])) - s);
      max_err = std::max(max_err, err);
      worst_ratio = std::max(worst_ratio, err / tol);
    }
  }
  const bool ok = worst_ratio <= 1.0;
  out << what << " (" << m << ", " << k << ") x (" << y.shape()[0] << ", " << y.shape()[1] << ")"
      << (transposed ? ".T" : "") << ", blocks (" << b.bm << ", " << b.bn << ", " << b.bk
      << "): max error " << max_err << ", worst error / tolerance " << worst_ratio << "  "
      << (ok ? "ok" : "WRONG") << "\n";
  return ok;
}

}  // namespace

bool run_matmul(std::ostream& out) {
  constexpr int64_t M = 256, N = 384, K = 512;
  const MatmulBlocks b{128, 128, 128};
  out << "tolerance: (K + 2) * 2^-24 * sum_k |x*y| (float32 accumulation), plus 2^-8 * |z| for "
         "a bfloat16 output\n";
  bool ok = true;
  const auto x = random_array<float>(M, K, 1);
  const auto y = random_array<float>(K, N, 2);
  ok &= check(out, "matmul f32", x, y, matmul(x, y, b), false, false, 0.0, b);
  const auto xb = random_array<bfloat16>(M, K, 3);
  const auto yb = random_array<bfloat16>(K, N, 4);
  ok &= check(out, "matmul bf16", xb, yb, matmul_bf16(xb, yb, b), false, false, std::ldexp(1.0, -8),
              b);
  const auto yt = random_array<float>(N, K, 5);
  ok &=
      check(out, "matmul x @ y.T f32", x, yt, matmul_transpose_rhs(x, yt, b), true, false, 0.0, b);
  ok &= check(out, "matmul relu f32", x, y, matmul_relu(x, y, b), false, true, 0.0, b);
  // Blocks that divide neither M nor N: the last row and column of blocks are partial.
  const auto xr = random_array<float>(200, K, 6);
  const auto yr = random_array<float>(K, 300, 7);
  ok &= check(out, "matmul f32, partial edge blocks", xr, yr, matmul(xr, yr, b), false, false, 0.0,
              b);
  return ok;
}

}  // namespace tessera::examples
