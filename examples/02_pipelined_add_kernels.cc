// The pipelined add (Pallas' pipelining tutorial): the body only computes (o = x + y on VMEM
// blocks); emit_pipeline moves the (128, 128) blocks between HBM and VMEM and walks the grid,
// splitting its first (PARALLEL) axis over the cores and running the second (ARBITRARY) in order on
// each.
#include <cstdint>
#include <ostream>
#include <random>
#include <string>

#include "pipelined_add.h"
#include "usage_error.h"

namespace tessera::examples {

Array<float> pipelined_add(const Array<float>& x, const Array<float>& y, int num_cores, int64_t bm,
                           int64_t bn, std::source_location where) {
  if (x.shape().rank() != 2 || x.shape() != y.shape()) {
    usage_error("pipelined_add",
                "x is " + x.shape().to_string() + " and y " + y.shape().to_string() +
                    ": the add takes two 2-D arrays of one shape",
                "reshape the operands to one (M, N)", where);
  }
  int64_t block_bytes = 0;
  if (bm < 1 || bn < 1 || __builtin_mul_overflow(bm, bn, &block_bytes) ||
      __builtin_mul_overflow(block_bytes, int64_t{4}, &block_bytes)) {
    usage_error("pipelined_add",
                "the block (" + std::to_string(bm) + ", " + std::to_string(bn) +
                    ") has a size below 1, or more bytes than a 64-bit count holds",
                "give block sizes from 1 up, that fit VMEM; (128, 128) is the tutorial's", where);
  }
  if (x.size() == 0) return Array<float>(x.shape());  // no element to add, no grid step to run
  const int64_t m = x.shape()[0];
  const int64_t n = x.shape()[1];
  auto kernel =
      pl::kernel(pl::out_type<float>({m, n}), pltpu::TensorCoreMesh("core", num_cores, where),
                 pl::name("pipelined_add"))([m, n, bm, bn](pltpu::HbmRef<const float> x_hbm,
                                                           pltpu::HbmRef<const float> y_hbm,
                                                           pltpu::HbmRef<float> o_hbm) {
        const pl::BlockSpec spec({bm, bn}, [](int i, int j) { return pl::idx(i, j); });
        // The inputs are refs to const: the body only reads them, which lets the native engine
        // read full blocks where they lie instead of copying them into VMEM.
        pltpu::emit_pipeline(
            [](pltpu::VmemRef<const float> x_vmem, pltpu::VmemRef<const float> y_vmem,
               pltpu::VmemRef<float> o_vmem) { o_vmem = x_vmem + y_vmem; },
            pltpu::grid({pl::cdiv(m, bm), pl::cdiv(n, bn)}), pl::in_specs(spec, spec),
            pl::out_specs(spec), pltpu::core_axis_name("core"),
            pltpu::dimension_semantics(pltpu::PARALLEL, pltpu::ARBITRARY))(x_hbm, y_hbm, o_hbm);
      });
  return kernel(x, y);
}

bool run_add(std::ostream& out) {
  const int cores = pltpu::get_tpu_info().num_cores;
  const Array<float> two({256, 256}, 2.0f);
  const Array<float> three({256, 256}, 3.0f);
  const Array<float> five = pipelined_add(two, three, cores);
  bool fives = true;
  for (float v : five) fives = fives && v == 5.0f;
  const PrintOptions brief{.threshold = 6, .edgeitems = 3, .linewidth = 75};
  out << "add(2, 3): shape " << five.shape().to_string() << " on " << cores
      << (cores == 1 ? " core  " : " cores  ") << (fives ? "ok" : "WRONG") << "\n"
      << five.to_string(brief) << "\n";

  // Random inputs with a ragged shape (partial edge blocks), against a plain loop; float
  // addition is exact to compare since both sides add the same two floats.
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Array<float> x({384, 520});
  Array<float> y({384, 520});
  for (float& v : x) v = dist(rng);
  for (float& v : y) v = dist(rng);
  const Array<float> o = pipelined_add(x, y, cores);
  int64_t wrong = 0;
  for (int64_t i = 0; i < o.size(); ++i) wrong += o[i] != x[i] + y[i] ? 1 : 0;
  out << "add(random): shape " << o.shape().to_string() << ", " << wrong
      << " elements differ from a plain loop  " << (wrong == 0 ? "ok" : "WRONG") << "\n";
  return fives && wrong == 0;
}

}  // namespace tessera::examples
