// Pallas' pipelining doc, "reductions": accumulate into an output block that the grid revisits
// on consecutive steps. The output's index map ignores the reduction axis, so its VMEM window is
// written back only once, after the last step; the body must zero it on the first step.
#include <ostream>

#include "grid_examples.h"

namespace tessera::examples {

bool run_correct_sum(std::ostream& out) {
  constexpr int64_t kBlocks = 8;
  Array<float> x({8, 128 * kBlocks});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 257) * 0.25f;
  auto correct_sum = pl::pallas_call(
      [](pltpu::VmemRef<float> x_ref, pltpu::VmemRef<float> o_ref) {
        if (pl::program_id(0) == 0) o_ref = jnp::zeros_like(o_ref);
        o_ref = o_ref + x_ref;
      },
      pl::out_shape<float>({8, 128}), pl::grid({kBlocks}),
      pl::in_specs(pl::BlockSpec({8, 128}, [](int i) { return pl::idx(0, i); })),
      pl::out_specs(pl::BlockSpec({8, 128}, [](int) { return pl::idx(0, 0); })),
      pl::name("correct_sum"));
  const Array<float> o = correct_sum(x);
  int64_t wrong = 0;
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      float want = 0;
      for (int64_t b = 0; b < kBlocks; ++b) want += x(r, b * 128 + c);
      wrong += o(r, c) == want ? 0 : 1;
    }
  }
  out << "correct_sum: " << kBlocks << " blocks of (8, 128) summed, " << wrong
      << " elements differ from a plain loop  " << (wrong == 0 ? "ok" : "WRONG") << "\n";
  return wrong == 0;
}

}  // namespace tessera::examples
