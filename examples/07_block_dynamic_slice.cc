// Pallas' sparse doc, "dynamic block indexing with scalar prefetch": the block to copy is chosen
// at run time by an index array that pltpu::PrefetchScalarGridSpec puts in SMEM before the grid
// runs; the input's index map reads it.
#include <algorithm>
#include <limits>
#include <ostream>
#include <string>

#include "grid_examples.h"
#include "usage_error.h"

namespace tessera::examples {

Array<int32_t> block_dynamic_slice(const Array<int32_t>& x, int64_t start0, int64_t start1,
                                   int64_t size0, int64_t size1, std::source_location where) {
  // The block index is start / size, so a start must be a multiple of its size.
  if (size0 <= 0 || size1 <= 0 || start0 % size0 != 0 || start1 % size1 != 0) {
    usage_error("block_dynamic_slice",
                "starts must be multiples of the sizes (got starts (" + std::to_string(start0) +
                    ", " + std::to_string(start1) + "), sizes (" + std::to_string(size0) + ", " +
                    std::to_string(size1) + "))",
                "use block-aligned starts, as Pallas' checkify check asks", where);
  }
  // The block indices travel as int32 scalars (SMEM), as in Pallas.
  for (const int64_t index : {start0 / size0, start1 / size1}) {
    if (index < 0 || index > std::numeric_limits<int32_t>::max()) {
      usage_error("block_dynamic_slice",
                  "the block index " + std::to_string(index) +
                      " (start / size) is outside 0..2^31-1, the int32 scalar it is passed as",
                  "give starts from 0 up, within the array", where);
    }
  }
  const Array<int32_t> block_idx(
      {2}, {static_cast<int32_t>(start0 / size0), static_cast<int32_t>(start1 / size1)});
  auto kernel = pl::pallas_call(
      [](pltpu::SmemRef<int32_t> /*indices*/, pltpu::VmemRef<const int32_t> x_ref,
         pltpu::VmemRef<int32_t> o_ref) { o_ref = x_ref; },
      pl::out_shape<int32_t>({size0, size1}),
      pltpu::PrefetchScalarGridSpec<1>(
          pl::grid({1, 1}),
          pl::in_specs(pl::BlockSpec(
              {size0, size1},
              [](int, int, pltpu::SmemRef<int32_t> block) { return pl::idx(block(0), block(1)); })),
          pl::out_specs(pl::BlockSpec(
              {size0, size1}, [](int, int, pltpu::SmemRef<int32_t>) { return pl::idx(0, 0); }))),
      pl::name("dynamic_slice_kernel"));
  return kernel(block_idx, x);
}

bool run_block_dynamic_slice(std::ostream& out) {
  Array<int32_t> x({512, 512});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i);
  const Array<int32_t> r = block_dynamic_slice(x, 128, 256, 128, 128);
  int64_t max_diff = 0;
  for (int64_t i = 0; i < 128; ++i) {
    for (int64_t j = 0; j < 128; ++j) {
      const int64_t d = static_cast<int64_t>(r(i, j)) - x(128 + i, 256 + j);
      max_diff = std::max(max_diff, d < 0 ? -d : d);
    }
  }
  out << "block_dynamic_slice: the (128, 128) block at (128, 256) of a (512, 512) iota, chosen by "
         "a scalar-prefetch index; max |result - dynamic_slice| = "
      << max_diff << "  " << (max_diff == 0 ? "ok" : "WRONG") << "\n";
  return max_diff == 0;
}

}  // namespace tessera::examples
