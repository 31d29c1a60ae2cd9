// Misuse inside kernels (semaphores, DMAs, run_scoped, dot), of meshes, and of the TESSERA_*
// environment variables: each error names the value and the rule, at the user's line.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using tessera::testing::expect_kernel_error;

// True when TESSERA_INTERPRET makes every kernel checked (the checked_env ctest entries).
bool checked_by_environment() { return detail::forced_interpret() != nullptr; }

// ---------------------------------------------------------------------------------------------
// Semaphores.

struct SemCase {
  const char* name;
  int64_t amount;
  const char* says;
};

const SemCase kBadSignals[] = {
    {"Negative", -2, "inc=-2 is negative"},
    {"MostNegative", std::numeric_limits<int64_t>::min(), "inc=-9223372036854775808 is negative"},
    {"AboveInt32", int64_t{1} << 31, "inc=2147483648 is more than a semaphore holds"},
    {"Int64Max", std::numeric_limits<int64_t>::max(), "inc=9223372036854775807 is more than"},
};

class BadInputSemaphoreSignal : public ::testing::TestWithParam<SemCase> {};

TEST_P(BadInputSemaphoreSignal, Amount) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  const int64_t amount = GetParam().amount;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    line = __LINE__ + 1;
    pl::semaphore_signal(s, amount);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, GetParam().says, line);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputSemaphoreSignal, ::testing::ValuesIn(kBadSignals),
                         [](const auto& test) { return std::string(test.param.name); });

const SemCase kBadWaits[] = {
    {"Negative", -1, "value=-1 is negative"},
    {"AboveInt32", int64_t{1} << 40, "value=1099511627776 is more than a semaphore holds"},
};

class BadInputSemaphoreWait : public ::testing::TestWithParam<SemCase> {};

TEST_P(BadInputSemaphoreWait, Amount) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  const int64_t amount = GetParam().amount;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    line = __LINE__ + 1;
    pl::semaphore_wait(s, amount);
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, GetParam().says, line);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputSemaphoreWait, ::testing::ValuesIn(kBadWaits),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(BadInputSemaphore, SignalANegativeCore) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))([&](pltpu::SemaphoreRef s) {
    line = __LINE__ + 1;
    pl::semaphore_signal(s, 1, pl::core_index(-1));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kOutOfBounds, "core_index=-1 is outside 0..0", line);
}

TEST(BadInputSemaphore, ArrayWithoutAt) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR({4})))([&](pltpu::SemaphoreRef s) {
        line = __LINE__ + 1;
        pl::semaphore_signal(s);
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kShapeMismatch,
                      "needs a single semaphore (shape ()), but this REGULAR semaphore view has "
                      "shape (4,)",
                      line);
}

TEST(BadInputSemaphore, AtPastTheEnd) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1),
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR({4})))([&](pltpu::SemaphoreRef s) {
        line = __LINE__ + 1;
        pl::semaphore_signal(s.at(4));
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kOutOfBounds, "index 4 is outside 0..3", line);
}

TEST(BadInputSemaphore, SignalledButNeverWaitedLeaks) {
  const int line = __LINE__ + 2;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::SemaphoreType::REGULAR))(
      [](pltpu::SemaphoreRef s) { pl::semaphore_signal(s, 3); });
  expect_kernel_error([&] { k(); }, ErrorKind::kSemaphoreLeak, "holds 3 at kernel exit", line);
}

TEST(BadInputSemaphore, WaitMoreThanSignalledIsADeadlockWhenChecked) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pl::scratch_types(pltpu::SemaphoreType::REGULAR),
                 pltpu::InterpretParams{})([&](pltpu::SemaphoreRef s) {
        pl::semaphore_signal(s, 1);
        line = __LINE__ + 1;
        pl::semaphore_wait(s, 2);
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kDeadlock, "(holds 1, needs 2)", line);
}

TEST(BadInputSemaphore, WaitMoreThanSignalledTimesOutNatively) {
  // The native engine has no deadlock detection: the wait runs into its timeout. Under
  // TESSERA_INTERPRET=1 the same kernel is checked and reports the deadlock at once.
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pl::scratch_types(pltpu::SemaphoreType::REGULAR),
                 pltpu::CompilerParams{.wait_timeout_ms = 20})([&](pltpu::SemaphoreRef s) {
        pl::semaphore_signal(s, 1);
        line = __LINE__ + 1;
        pl::semaphore_wait(s, 2);
      });
  if (checked_by_environment()) {
    expect_kernel_error([&] { k(); }, ErrorKind::kDeadlock, "needs 2", line);
  } else {
    expect_kernel_error([&] { k(); }, ErrorKind::kTimeout, "wait_timeout_ms=20", line);
  }
}

// ---------------------------------------------------------------------------------------------
// DMAs.

TEST(BadInputDma, SyncCopyShapeMismatch) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({64})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = 0.0f;
        line = __LINE__ + 1;
        pltpu::sync_copy(v, o);
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kShapeMismatch,
                      "source VMEM ref of shape (64,) and destination HBM ref of shape (128,)",
                      line);
}

TEST(BadInputDma, SyncCopyTransposedShapes) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({8, 16}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({16, 8})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = 0.0f;
        line = __LINE__ + 1;
        pltpu::sync_copy(v, o);
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kShapeMismatch, "shape (16, 8)", line);
}

TEST(BadInputDma, AsyncCopyShapeMismatch) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({256}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        line = __LINE__ + 1;
        pltpu::async_copy(v, o, sem).wait();
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kShapeMismatch, "shape (256,)", line);
}

TEST(BadInputDma, CopyFromASliceOutOfBounds) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128})))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        v = 0.0f;
        line = __LINE__ + 1;
        pltpu::sync_copy(v.at(pl::ds(64, 128)), o);
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kOutOfBounds, "covers elements 64..191", line);
}

TEST(BadInputDma, StartTwiceWithoutAWait) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        auto cp = pltpu::make_async_copy(v, o, sem);
        cp.start();
        line = __LINE__ + 1;
        cp.start();
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument,
                      "has not been waited since; each .start() needs a .wait()", line);
}

TEST(BadInputDma, WaitTwice) {
  // The second wait takes bytes no copy will bring: a deadlock when checked, a timeout natively.
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA),
                      pltpu::CompilerParams{.wait_timeout_ms = 20})(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        auto cp = pltpu::make_async_copy(v, o, sem);
        cp.start();
        cp.wait();
        line = __LINE__ + 1;
        cp.wait();
      });
  if (checked_by_environment()) {
    expect_kernel_error([&] { k(); }, ErrorKind::kDeadlock, "needs 512", line);
  } else {
    expect_kernel_error([&] { k(); }, ErrorKind::kTimeout, "async_copy.wait", line);
  }
}

TEST(BadInputDma, WaitTwiceIsADeadlockWhenChecked) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA),
                      pltpu::InterpretParams{})(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        auto cp = pltpu::make_async_copy(v, o, sem);
        cp.start();
        cp.wait();
        line = __LINE__ + 1;
        cp.wait();
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kDeadlock, "(holds 0 bytes, needs 512)", line);
}

TEST(BadInputDma, OverlappingCopiesInFlightAreARaceWhenChecked) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA({2})),
                      pltpu::InterpretParams{})(
      [&](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        auto a = pltpu::make_async_copy(v.at(pl::ds(0, 64)), o.at(pl::ds(0, 64)), sem.at(0));
        auto b = pltpu::make_async_copy(v.at(pl::ds(64, 64)), o.at(pl::ds(32, 64)), sem.at(1));
        a.start();
        line = __LINE__ + 1;
        b.start();
        a.wait();
        b.wait();
      });
  expect_kernel_error([&] { k(); }, ErrorKind::kRace, "overlaps the async copy started at", line);
}

TEST(BadInputDma, StartedButNeverWaitedLeaks) {
  const int kernel_line = __LINE__ + 2;  // g++ places the bound body at its options' last line
  auto k = pl::kernel(pl::out_type<float>({128}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({128}), pltpu::SemaphoreType::DMA))(
      [](pltpu::HbmRef<float> o, pltpu::VmemRef<float> v, pltpu::DmaSemaphoreRef sem) {
        v = 0.0f;
        pltpu::async_copy(v, o, sem);
      });
  const int start_line = kernel_line + 3;
  auto e = tessera::testing::catch_error<KernelError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kSemaphoreLeak) << e->what();
  // Natively the leak is the semaphore's (at the kernel's line); checked, the copy's (its start).
  if (!checked_by_environment()) {
    EXPECT_EQ(static_cast<int>(e->where().line()), kernel_line) << e->what();
    EXPECT_TRUE(contains(e->what(), "SemaphoreType.DMA holds 512 bytes at kernel exit"))
        << e->what();
  } else {
    EXPECT_EQ(static_cast<int>(e->where().line()), start_line) << e->what();
    EXPECT_TRUE(contains(e->what(), "was never waited before the kernel ended")) << e->what();
  }
}

// ---------------------------------------------------------------------------------------------
// run_scoped capacity and shapes.

TEST(BadInputRunScoped, VmemOverTheLimit) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                      pltpu::CompilerParams{.vmem_limit_bytes = 64 << 10})([&] {
    line = __LINE__ + 1;
    pl::run_scoped([](pltpu::VmemRef<float>) {}, pltpu::VMEM<float>({32 << 10}));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kCapacityExceeded, "131072 bytes", line);
}

TEST(BadInputRunScoped, SmemOverTheCapacity) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 1;
    pl::run_scoped([](pltpu::SmemRef<int32_t>) {}, pltpu::SMEM<int32_t>({1 << 20}));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kCapacityExceeded, "4194304 bytes", line);
}

TEST(BadInputRunScoped, NegativeShape) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 1;
    pl::run_scoped([](pltpu::VmemRef<float>) {}, pltpu::VMEM<float>({8, -128}));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, "negative extent -128 in axis 1",
                      line);
}

TEST(BadInputRunScoped, OverflowingShape) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 2;
    pl::run_scoped([](pltpu::VmemRef<float>) {},
                   pltpu::VMEM<float>({int64_t{1} << 40, int64_t{1} << 40}));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kInvalidArgument, "holds more elements", line);
}

// ---------------------------------------------------------------------------------------------
// jnp::dot shapes (host refs: UsageError).

struct DotBufs {
  std::vector<float> a = std::vector<float>(8 * 16);
  std::vector<float> b = std::vector<float>(16 * 4);
  std::vector<float> c = std::vector<float>(8 * 4);
  std::vector<float> d = std::vector<float>(16);
};

TEST(BadInputDot, ContractedExtentsDiffer) {
  DotBufs m;
  const pltpu::VmemRef<float> x(m.a.data(), Shape{8, 16});
  pltpu::VmemRef<float> o(m.c.data(), Shape{8, 4});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(o = jnp::dot(x, x), UsageError, ErrorKind::kShapeMismatch,
                       "the contracted extents must be equal", line_);
}

TEST(BadInputDot, Rank1Operand) {
  DotBufs m;
  const pltpu::VmemRef<float> v(m.d.data(), Shape{16});
  const pltpu::VmemRef<float> y(m.b.data(), Shape{16, 4});
  pltpu::VmemRef<float> o(m.c.data(), Shape{8, 4});
  // A vector lhs is allowed ((K,) @ (K, N) is (N,)); the destination then has the wrong shape.
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(o = jnp::dot(v, y), UsageError, ErrorKind::kShapeMismatch,
                       "has shape (4,), but the destination ref has shape (8, 4)", line_);
}

TEST(BadInputDot, DestinationShapeDiffers) {
  DotBufs m;
  const pltpu::VmemRef<float> x(m.a.data(), Shape{8, 16});
  const pltpu::VmemRef<float> y(m.b.data(), Shape{16, 4});
  pltpu::VmemRef<float> o(m.c.data(), Shape{4, 8});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(o += jnp::dot(x, y), UsageError, ErrorKind::kShapeMismatch,
                       "shape (8, 4), but the destination ref has shape (4, 8)", line_);
}

TEST(BadInputDot, ContractingDimensionOutOfRange) {
  DotBufs m;
  const pltpu::VmemRef<float> x(m.a.data(), Shape{8, 16});
  const pltpu::VmemRef<float> y(m.b.data(), Shape{16, 4});
  pltpu::VmemRef<float> o(m.c.data(), Shape{8, 4});
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(o = lax::dot_general(x, y, {{{5}, {0}}}), UsageError,
                       ErrorKind::kInvalidArgument, "contracting dimension 5 of the lhs", line_);
}

// ---------------------------------------------------------------------------------------------
// Meshes and chips.

class BadInputMeshCores : public ::testing::TestWithParam<int> {};

TEST_P(BadInputMeshCores, OutsideTheRange) {
  const int n = GetParam();
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("core", n), UsageError, ErrorKind::kInvalidArgument,
                       "num_cores=" + std::to_string(n) + " is outside 1..256", line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputMeshCores,
                         ::testing::Values(0, -1, 257, std::numeric_limits<int>::min(),
                                           std::numeric_limits<int>::max()));

TEST(BadInputMesh, EmptyAxisName) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("", 2), UsageError, ErrorKind::kInvalidArgument,
                       "the axis name is empty", line_);
}

TEST(BadInputMesh, MoreCoresThanTheCheckedChipHas) {
  const int line_ = __LINE__ + 2;
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 2), pltpu::InterpretParams{.chip = "v5e"})([] {});
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kUnsupported,
                       "the mesh has 2 cores but a v5e chip has 1 TensorCore", line_);
}

TEST(BadInputMesh, UnknownAxisInTheBody) {
  std::atomic<int> line{0};  // set by every core that runs the statement
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([&] {
    line = __LINE__ + 1;
    static_cast<void>(lax::axis_index("x"));
  });
  expect_kernel_error([&] { k(); }, ErrorKind::kUnknownAxis, "the mesh has no axis \"x\"", line);
}

TEST(BadInputMesh, UnknownChip) {
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(static_cast<void>(pltpu::get_tpu_info_for_chip("v99")), UsageError,
                       ErrorKind::kUnknownChip, "v99", line_);
}

TEST(BadInputMesh, UnknownChipInInterpretParams) {
  const int line_ = __LINE__ + 2;
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 1), pltpu::InterpretParams{.chip = "tpu9"})([] {});
  auto e = tessera::testing::catch_error<UsageError>([&] { k(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), ErrorKind::kUnknownChip) << e->what();
  EXPECT_TRUE(contains(e->what(), "tpu9")) << e->what();
  EXPECT_EQ(static_cast<int>(e->where().line()), line_) << e->what();
}

// ---------------------------------------------------------------------------------------------
// TESSERA_* environment variables. Each case sets the variable, asks the runtime to re-read the
// environment, and restores both afterwards.

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
    detail::reread_environment();
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
    detail::reread_environment();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct EnvCase {
  const char* name;
  const char* value;
  const char* says;
};

const EnvCase kBadNumCores[] = {
    {"Word", "abc", "TESSERA_NUM_CORES='abc' is not a core count (not an integer)"},
    {"TrailingJunk", "4x", "TESSERA_NUM_CORES='4x' is not a core count ('x' follows the number)"},
    {"Negative", "-2", "TESSERA_NUM_CORES='-2' is not a core count (it is negative)"},
    {"Zero", "0", "TESSERA_NUM_CORES='0' is not a core count (it is outside 1..256)"},
    {"TooMany", "257", "TESSERA_NUM_CORES='257' is not a core count (it is outside 1..256)"},
    {"Overflows", "99999999999999999999", "(it does not fit a 64-bit integer)"},
    {"LeadingSpace", " 4", "TESSERA_NUM_CORES=' 4' is not a core count (not an integer)"},
    {"Decimal", "2.5", "('.5' follows the number)"},
};

class BadInputEnvNumCores : public ::testing::TestWithParam<EnvCase> {};

TEST_P(BadInputEnvNumCores, DefaultMesh) {
  if (checked_by_environment() && !detail::forced_interpret()->chip.empty()) {
    GTEST_SKIP() << "a forced chip sets the default mesh; TESSERA_NUM_CORES is not read";
  }
  const ScopedEnv env("TESSERA_NUM_CORES", GetParam().value);
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("core"), UsageError, ErrorKind::kInvalidArgument,
                       GetParam().says, line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputEnvNumCores, ::testing::ValuesIn(kBadNumCores),
                         [](const auto& test) { return std::string(test.param.name); });

TEST(BadInputEnv, GoodNumCoresIsRead) {
  // The control: a valid value is taken, so the cases above fail only for their values.
  if (checked_by_environment() && !detail::forced_interpret()->chip.empty()) GTEST_SKIP();
  const ScopedEnv env("TESSERA_NUM_CORES", "3");
  EXPECT_EQ(pltpu::TensorCoreMesh("core").num_cores(), 3);
}

const EnvCase kBadTimeouts[] = {
    {"Word", "soon",
     "TESSERA_WAIT_TIMEOUT_MS='soon' is not a timeout in milliseconds (not an "
     "integer)"},
    {"Unit", "10ms",
     "TESSERA_WAIT_TIMEOUT_MS='10ms' is not a timeout in milliseconds ('ms' "
     "follows the number)"},
    {"Zero", "0",
     "TESSERA_WAIT_TIMEOUT_MS='0' is not a timeout in milliseconds (it is outside "
     "1..1099511627776)"},
    {"Negative", "-1",
     "TESSERA_WAIT_TIMEOUT_MS='-1' is not a timeout in milliseconds (it is "
     "negative)"},
    {"Overflows", "99999999999999999999",
     "TESSERA_WAIT_TIMEOUT_MS='99999999999999999999' is not a timeout in milliseconds (it does "
     "not fit a 64-bit integer)"},
};

class BadInputEnvWaitTimeout : public ::testing::TestWithParam<EnvCase> {};

TEST_P(BadInputEnvWaitTimeout, AtTheLaunch) {
  const ScopedEnv env("TESSERA_WAIT_TIMEOUT_MS", GetParam().value);
  const int line_ = __LINE__ + 1;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([] {});
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kInvalidArgument, GetParam().says, line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputEnvWaitTimeout, ::testing::ValuesIn(kBadTimeouts),
                         [](const auto& test) { return std::string(test.param.name); });

const EnvCase kBadInterpret[] = {
    {"Word", "bogus", "TESSERA_INTERPRET='bogus' is neither a switch"},
    {"UnknownChip", "v99", "TESSERA_INTERPRET='v99' is neither a switch"},
    {"Number", "2", "TESSERA_INTERPRET='2' is neither a switch (1/true/yes/on or 0/false/no/off)"},
};

class BadInputEnvInterpret : public ::testing::TestWithParam<EnvCase> {};

TEST_P(BadInputEnvInterpret, AtTheLaunch) {
  const ScopedEnv env("TESSERA_INTERPRET", GetParam().value);
  const int line_ = __LINE__ + 1;
  auto k = pl::kernel(pltpu::TensorCoreMesh("core", 1))([] {});
  EXPECT_TESSERA_ERROR(k(), UsageError, ErrorKind::kInvalidArgument, GetParam().says, line_);
}

TEST_P(BadInputEnvInterpret, AtTheDefaultMesh) {
  const ScopedEnv env("TESSERA_INTERPRET", GetParam().value);
  const int line_ = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(pltpu::TensorCoreMesh("core"), UsageError, ErrorKind::kInvalidArgument,
                       GetParam().says, line_);
}

INSTANTIATE_TEST_SUITE_P(All, BadInputEnvInterpret, ::testing::ValuesIn(kBadInterpret),
                         [](const auto& test) { return std::string(test.param.name); });

}  // namespace
