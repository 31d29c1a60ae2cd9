// Every example kernel of the project passes checked mode with zero diagnostics, under both DMA
// execution modes, with a randomised PARALLEL order, and gives the native engine's answer.
// The examples' code is unchanged: pltpu::ForceTpuInterpretMode runs them checked.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "grid_examples.h"
#include "matmul.h"
#include "pipelined_add.h"
#include "quickstart.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using Mode = pltpu::DmaExecutionMode;

pltpu::InterpretParams params(Mode m, bool shuffle) {
  pltpu::InterpretParams p;
  p.dma_execution_mode = m;
  p.allow_uninitialized_reads = false;  // the examples leave no garbage in their outputs
  if (shuffle) p.parallel_order_seed = 7;
  return p;
}

class CheckedExamples : public ::testing::TestWithParam<std::tuple<Mode, bool>> {
 protected:
  pltpu::InterpretParams p() const {
    return params(std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

template <class T>
void expect_same(const Array<T>& a, const Array<T>& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(static_cast<float>(a[i]), static_cast<float>(b[i])) << i;
  }
}

TEST_P(CheckedExamples, RunnersPass) {
  const pltpu::ForceTpuInterpretMode force(p());
  std::ostringstream out;
  EXPECT_TRUE(examples::run_quickstart(out)) << out.str();
  EXPECT_TRUE(examples::run_add(out)) << out.str();
  EXPECT_TRUE(examples::run_correct_sum(out)) << out.str();
  EXPECT_TRUE(examples::run_megacore_add(out)) << out.str();
  EXPECT_TRUE(examples::run_hbm_vmem(out)) << out.str();
  EXPECT_TRUE(examples::run_block_dynamic_slice(out)) << out.str();
  EXPECT_TRUE(examples::run_matmul(out)) << out.str();
}

TEST_P(CheckedExamples, SameAnswersAsNative) {
  Array<float> x({256, 384});
  Array<float> y({256, 384});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 101) * 0.25f;
    y[i] = static_cast<float>(i % 7) - 3.0f;
  }
  Array<float> a({256, 256});
  Array<float> b({256, 512});
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2.0f;
  for (int64_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) - 1.0f;
  const examples::MatmulBlocks blocks{128, 128, 128};
  const Array<float> add_native = examples::pipelined_add(x, y, 2);
  const Array<float> mm_native = examples::matmul(a, b, blocks, 2);
  const Array<float> fill_native = examples::fill_42();
  const Array<float> iota_native = examples::iota(2);
  const Array<float> hv_native = examples::hbm_vmem(x);
  const pltpu::ForceTpuInterpretMode force(p());
  expect_same(examples::pipelined_add(x, y, 2), add_native);
  expect_same(examples::matmul(a, b, blocks, 2), mm_native);
  expect_same(examples::fill_42(), fill_native);
  expect_same(examples::iota(2), iota_native);
  expect_same(examples::hbm_vmem(x), hv_native);
}

// Against a TPU generation (v5p: 2 TensorCores, 64 MiB of VMEM): the examples' blocks obey the
// tiling rules, their windows fit, their matmuls are supported.
TEST(CheckedExamplesOnChip, FitAV5p) {
  Array<float> x({512, 384});
  Array<float> y({512, 384});
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i % 11);
    y[i] = 1.0f;
  }
  Array<float> a({512, 512});
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 3) - 1.0f;
  const Array<float> add_native = examples::pipelined_add(x, y, 2);
  const Array<float> mm_native = examples::matmul(a, a, examples::kDefaultMatmulBlocks, 2);
  pltpu::InterpretParams p;
  p.chip = "v5p";
  const pltpu::ForceTpuInterpretMode force(p);
  expect_same(examples::pipelined_add(x, y, 2), add_native);
  expect_same(examples::matmul(a, a, examples::kDefaultMatmulBlocks, 2), mm_native);
  expect_same(examples::iota(2), examples::iota(2));
}

INSTANTIATE_TEST_SUITE_P(Modes, CheckedExamples,
                         ::testing::Combine(::testing::Values(Mode::eager, Mode::on_wait,
                                                              Mode::random),
                                            ::testing::Bool()));

}  // namespace
