// The collective kernels of the distributed tutorial and all_gather.py (examples/08-12), on
// in-process meshes of 1-8 devices with 1 or 2 cores each, native and checked (every DMA
// execution mode), against host references.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "distributed.h"
#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

// Sets TESSERA_NUM_CORES (the default TensorCoreMesh of the examples' pallas_calls) for a scope.
class DefaultCores {
 public:
  explicit DefaultCores(int cores) {
    if (const char* v = std::getenv("TESSERA_NUM_CORES")) saved_ = v;
    setenv("TESSERA_NUM_CORES", std::to_string(cores).c_str(), 1);
    detail::reread_environment();
  }
  ~DefaultCores() {
    if (saved_) {
      setenv("TESSERA_NUM_CORES", saved_->c_str(), 1);
    } else {
      unsetenv("TESSERA_NUM_CORES");
    }
    detail::reread_environment();
  }

 private:
  std::optional<std::string> saved_;
};

const char* const kCollectives[] = {"right_permute",
                                    "all_gather",
                                    "all_reduce",
                                    "reduce_scatter",
                                    "reduce_scatter_nested",
                                    "all_gather_bidirectional",
                                    "collective_matmul",
                                    "ring_all_reduce"};

// Runs one collective on meshes of 1-4 devices with 1 and 2 cores each (8 devices too for the
// ring kernels).
class Native : public ::testing::TestWithParam<const char*> {};

TEST_P(Native, MatchTheHostReferenceOnEveryMesh) {
  const std::string name = GetParam();
  for (int cores : {1, 2}) {
    const DefaultCores scope(cores);
    for (int devices : {1, 2, 3, 4, 8}) {
      if (devices == 8 && (cores == 2 || name.find("all_gather") != std::string::npos)) continue;
      std::ostringstream out;
      EXPECT_TRUE(examples::run_collective(name.c_str(), devices, out))
          << devices << " devices x " << cores << " cores: " << out.str();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tutorial, Native, ::testing::ValuesIn(kCollectives));

// The same in checked mode, in each DMA execution mode: no diagnostics, the same results.
using CheckedCase = std::tuple<const char*, pltpu::DmaExecutionMode>;
class Checked : public ::testing::TestWithParam<CheckedCase> {};

TEST_P(Checked, PassWithNoDiagnostics) {
  const auto& [name, mode] = GetParam();
  for (const auto& [devices, cores] : {std::pair{2, 1}, std::pair{3, 2}}) {
    const DefaultCores scope(cores);
    for (uint64_t seed : {1u, 2u}) {
      const pltpu::ForceTpuInterpretMode force(
          pltpu::InterpretParams{.dma_execution_mode = mode, .random_seed = seed});
      std::ostringstream out;
      EXPECT_TRUE(examples::run_collective(name, devices, out))
          << devices << " devices x " << cores << " cores, seed " << seed << ": " << out.str();
      if (mode != pltpu::DmaExecutionMode::random) break;
    }
  }
}

std::string checked_name(const ::testing::TestParamInfo<CheckedCase>& info) {
  const char* modes[] = {"eager", "on_wait", "random"};
  return std::string(std::get<0>(info.param)) + "_" +
         modes[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Tutorial, Checked,
                         ::testing::Combine(::testing::ValuesIn(kCollectives),
                                            ::testing::Values(pltpu::DmaExecutionMode::eager,
                                                              pltpu::DmaExecutionMode::on_wait,
                                                              pltpu::DmaExecutionMode::random)),
                         checked_name);

// Eight devices in checked mode (on_wait: copies land as late as possible, out of order).
TEST(Checked8, RingAndTutorialAllReduce) {
  const DefaultCores scope(1);
  const pltpu::ForceTpuInterpretMode force;
  for (const char* name : {"ring_all_reduce", "all_reduce", "reduce_scatter"}) {
    std::ostringstream out;
    EXPECT_TRUE(examples::run_collective(name, 8, out)) << out.str();
  }
}

TEST(RingAllReduce, SeveralCoresPerDevice) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  Array<float> x({64, 512}, 0.0f);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);
  const Array<float> y = examples::ring_all_reduce_mapped(x, mesh, 2);
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t j = 0; j < 256; ++j) {
      const float s = x(i, j) + x(i, j + 256);
      ASSERT_EQ(y(i, j), s);
      ASSERT_EQ(y(i, j + 256), s);
    }
  }
}

// The collective matmul at shapes its 128 blocks do not divide: partial blocks of rows and
// columns, and a k of 200 contracted in blocks of 100 (a k block must divide k).
TEST(CollectiveMatmul, ShapesItsBlocksDoNotDivide) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{200, 128, 128},
                                {16, 200, 128},
                                {16, 128, 200},
                                {136, 131, 72}}) {
    Array<float> x({2 * m, k});
    Array<float> w({k, 2 * n});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 5) - 2.0f;
    for (int64_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 3) % 7) - 3.0f;
    const Array<float> z = examples::collective_matmul(x, w, mesh);
    for (int64_t i = 0; i < 2 * m; ++i) {
      for (int64_t j = 0; j < 2 * n; ++j) {
        float s = 0;  // small integers: exact in float32
        for (int64_t p = 0; p < k; ++p) s += x(i, p) * w(p, j);
        ASSERT_EQ(z(i, j), s) << "m " << m << ", k " << k << ", n " << n << " at (" << i << ", "
                              << j << ")";
      }
    }
  }
}

// Shapes the fixed-shape collectives cannot take raise a UsageError at the caller's line instead
// of reading past a shard or leaving rows unsummed.
TEST(Collectives, ShapesTheyCannotTakeRaiseAtTheCallersLine) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  const Array<float> odd({24, 200}, 1.0f);
  // clang-format off
  int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::reduce_scatter(odd, mesh), UsageError, ErrorKind::kInvalidArgument, "the kernel takes (32, 128)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::reduce_scatter_nested(Array<float>({32, 256}, 1.0f), mesh, 32, 128), UsageError, ErrorKind::kInvalidArgument, "the kernel takes (64, 128)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::reduce_scatter_nested(odd, mesh, 12, 100), UsageError, ErrorKind::kInvalidArgument, "rows a multiple of 16 and columns a multiple of 128", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::ring_all_reduce_mapped(Array<float>({100, 512}, 1.0f), mesh, 1), UsageError, ErrorKind::kInvalidArgument, "multiple of devices * cores * 8 = 16", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::ring_all_reduce_mapped(Array<float>({64, 512}, 1.0f), mesh, 0), UsageError, ErrorKind::kInvalidArgument, "at least one core", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::collective_matmul(odd, Array<float>({100, 256}, 1.0f), mesh), UsageError, ErrorKind::kInvalidArgument, "x @ w needs x (M, K) and w (K, N)", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::collective_matmul(Array<float>({0, 128}), Array<float>({128, 256}), mesh), UsageError, ErrorKind::kInvalidArgument, "none of M, K, N zero", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::collective_matmul(Array<float>({32, 0}), Array<float>({0, 256}), mesh), UsageError, ErrorKind::kInvalidArgument, "none of M, K, N zero", line);
  line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR((void)examples::ring_all_reduce_mapped(Array<float>({0, 512}), mesh, 1), UsageError, ErrorKind::kInvalidArgument, "a non-empty 2-D array", line);
  // clang-format on
}

}  // namespace
