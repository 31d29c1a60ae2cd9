// Device meshes (device.h): the mesh and PartitionSpecs, shard_map's shards, the mesh axes
// inside and outside kernels, and every error of the API before anything communicates.
#include "runtime/devices.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

Array<float> iota(Shape shape) {
  Array<float> a(std::move(shape), 0.0f);
  for (int64_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  return a;
}

TEST(Mesh, ShapeNamesAndCoordinates) {
  const Mesh mesh = jax::make_mesh({2, 3}, {"x", "y"});
  EXPECT_EQ(mesh.size(), 6);
  EXPECT_EQ(mesh.axis_size("y"), 3);
  EXPECT_EQ(mesh.coords(4), (std::vector<int>{1, 1}));
  EXPECT_EQ(mesh.coords(2), (std::vector<int>{0, 2}));
}

TEST(Mesh, BadMeshesAreUsageErrors) {
  EXPECT_TESSERA_ERROR(jax::make_mesh({0}, {"x"}), UsageError, ErrorKind::kInvalidArgument,
                       "axis \"x\" has extent 0", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::make_mesh({2, 2}, {"x", "x"}), UsageError, ErrorKind::kInvalidArgument,
                       "used twice", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::make_mesh({2}, {"x", "y"}), UsageError, ErrorKind::kInvalidArgument,
                       "1 extents and 2 axis names", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::make_mesh({512}, {"x"}), UsageError, ErrorKind::kInvalidArgument,
                       "more than 256 devices", __LINE__ - 1);
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  EXPECT_TESSERA_ERROR(mesh.axis_size("z"), UsageError, ErrorKind::kUnknownAxis,
                       "the mesh has no axis \"z\"", __LINE__ - 1);
}

TEST(ShardMap, SplitsAndJoinsArrays) {
  const Mesh mesh = jax::make_mesh({2, 2}, {"x", "y"});
  const Array<float> x = iota({4, 6});
  std::mutex mu;
  std::vector<std::vector<float>> seen(4);
  auto f = [&](const Array<float>& shard) {
    const int d = lax::axis_index("x") * 2 + lax::axis_index("y");
    std::lock_guard<std::mutex> lock(mu);
    seen[static_cast<size_t>(d)] = shard.to_vector();
    return Array<float>(shard);
  };
  // Rows over x, columns over y: device (1, 0) holds rows 2..3, columns 0..2.
  const Array<float> y = jax::shard_map(f, mesh, P("x", "y"), P("x", "y"))(x);
  EXPECT_EQ(seen[2], (std::vector<float>{12, 13, 14, 18, 19, 20}));
  EXPECT_EQ(y.to_vector(), x.to_vector());
  // Both mesh axes on one dimension (x major), and an unsplit output taken from coordinate 0.
  const Array<float> x8 = iota({4, 8});
  const Array<float> z = jax::shard_map(f, mesh, P(None, {"x", "y"}), P(None, {"x", "y"}))(x8);
  EXPECT_EQ(seen[1], (std::vector<float>{2, 3, 10, 11, 18, 19, 26, 27}));
  EXPECT_EQ(z.to_vector(), x8.to_vector());
  const Array<float> r = jax::shard_map(f, mesh, P("x"), P("x"))(x);
  EXPECT_EQ(r.shape(), Shape({4, 6}));
  EXPECT_EQ(r.to_vector(), x.to_vector());
}

TEST(ShardMap, AxesOutsideAndInsideKernels) {
  const Mesh mesh = jax::make_mesh({3}, {"x"});
  std::atomic<int> sum{0};
  auto kernel = pl::kernel(pl::out_type<float>({8}),
                           pltpu::TensorCoreMesh("core", 2))([&](pltpu::HbmRef<float>) {
    EXPECT_EQ(lax::axis_size("x"), 3);
    EXPECT_EQ(lax::axis_size("core"), 2);
    sum += lax::axis_index("x") * 10 + lax::axis_index("core");
  });
  auto f = [&](const Array<float>&) {
    EXPECT_EQ(lax::axis_size("x"), 3);
    (void)kernel();
  };
  jax::shard_map(f, mesh, P("x"), {})(iota({6}));
  EXPECT_EQ(sum.load(), (0 + 10 + 20) * 2 + 3);
}

TEST(ShardMap, BadSpecsAreUsageErrors) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  auto id = [](const Array<float>& a) { return Array<float>(a); };
  EXPECT_TESSERA_ERROR(jax::shard_map(id, mesh, P("z"), P("x"))(iota({4})), UsageError,
                       ErrorKind::kUnknownAxis, "names the axis \"z\"", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::shard_map(id, mesh, P("x"), P("x"))(iota({3})), UsageError,
                       ErrorKind::kShapeMismatch, "is not a multiple of 2", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::shard_map(id, mesh, P("x", None, None), P("x"))(iota({4})), UsageError,
                       ErrorKind::kInvalidArgument, "has 3 entries", __LINE__ - 1);
  EXPECT_TESSERA_ERROR(jax::shard_map(id, mesh, {P("x"), P()}, P("x"))(iota({4})), UsageError,
                       ErrorKind::kInvalidArgument, "in_specs has 2 PartitionSpecs", __LINE__ - 1);
  const int line = __LINE__ + 1;
  EXPECT_TESSERA_ERROR(jax::shard_map(id, mesh, P("x", "x"), P("x"))(iota({4, 4})), UsageError,
                       ErrorKind::kInvalidArgument, "uses the axis \"x\" twice", line);
}

TEST(ShardMap, AnErrorOnOneDeviceIsRethrownAndStopsTheOthers) {
  const Mesh mesh = jax::make_mesh({3}, {"x"});
  auto kernel = pl::kernel(pltpu::TensorCoreMesh("core", 1),
                           pltpu::CompilerParams{.wait_timeout_ms = 5000})([](auto...) {});
  auto f = [&](const Array<float>&) {
    if (lax::axis_index("x") == 1) throw std::runtime_error("device 1 gives up");
    kernel();  // the start barrier waits for device 1, which never comes
  };
  try {
    jax::shard_map(f, mesh, P("x"), {})(iota({3}));
    ADD_FAILURE() << "did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "device 1 gives up")) << e.what();
  }
}

// A core fails while the other core of its device waits on a semaphore nobody signals: that core
// is woken and fails with kCancelled, and may tell the mesh before the failing core does (the
// hook holds the failing core back 100 ms, src/runtime/launch.cc). The program still rethrows the
// first error, not the cancellation.
TEST(ShardMap, TheFirstErrorOfADeviceIsTheOneRethrown) {
  struct Hook {
    Hook() { detail::set_first_error_report_delay_for_test(100); }
    ~Hook() { detail::set_first_error_report_delay_for_test(0); }
  } hook;
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  auto k =
      pl::kernel(pltpu::TensorCoreMesh("core", 2), pltpu::CompilerParams{.wait_timeout_ms = 20000},
                 pl::scratch_types(pltpu::SemaphoreType::REGULAR, pltpu::SemaphoreType::REGULAR))(
          [](pltpu::SemaphoreRef never, pltpu::SemaphoreRef go) {
            if (lax::axis_index("core") == 1) {
              pl::semaphore_wait(go);  // core 0 is about to block
              if (lax::axis_index("x") == 0) throw std::runtime_error("core 1 of device 0 failed");
            } else {
              pl::semaphore_signal(go, 1, pl::core_index(1));
            }
            pl::semaphore_wait(never);  // every other core blocks here until cancelled
          });
  for (int round = 0; round < 3; ++round) {
    try {
      jax::shard_map([&](const Array<float>&) { k(); }, mesh, P("x"), {})(iota({2}));
      ADD_FAILURE() << "did not throw";
    } catch (const Error& e) {
      ADD_FAILURE() << "a Tessera error instead of the failing core's: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(contains(e.what(), "core 1 of device 0 failed")) << e.what();
    }
  }
}

TEST(ShardMap, NestingIsAnError) {
  const Mesh mesh = jax::make_mesh({2}, {"x"});
  const int line = __LINE__ + 2;
  auto inner = [&](const Array<float>&) {
    jax::shard_map([](const Array<float>&) {}, mesh, P("x"), {})(iota({2}));
  };
  EXPECT_TESSERA_ERROR(jax::shard_map(inner, mesh, P("x"), {})(iota({2})), UsageError,
                       ErrorKind::kInvalidArgument, "mapped programs cannot nest", line);
}

}  // namespace
