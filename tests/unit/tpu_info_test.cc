// Tests of tessera/tpu_info.h: the TPU generation tables (against Pallas' pltpu.get_tpu_info
// values, per TensorCore), chip-name parsing, the megacore rule and its errors, the dtype rules,
// and this machine described as a chip.
#include "tessera/tpu_info.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/error.h"

namespace {

using tessera::DType;
using tessera::ErrorKind;
using tessera::pltpu::ChipVersion;
using tessera::pltpu::get_tpu_info;
using tessera::pltpu::get_tpu_info_for_chip;
using tessera::pltpu::TpuInfo;

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;

/// Runs `f`, which must throw tessera::UsageError; returns the error (or nullopt after a
/// recorded failure).
template <class F>
std::optional<tessera::UsageError> usage_error_of(F&& f) {
  try {
    f();
  } catch (const tessera::UsageError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tessera::UsageError, got: " << e.what();
    return std::nullopt;
  }
  ADD_FAILURE() << "expected tessera::UsageError, nothing was thrown";
  return std::nullopt;
}

TEST(TpuInfo, V4PerTensorCore) {
  const TpuInfo v4 = get_tpu_info_for_chip("v4");
  EXPECT_EQ(v4.chip_version, ChipVersion::kV4);
  EXPECT_EQ(v4.generation, 4);
  EXPECT_EQ(v4.num_cores, 1);
  EXPECT_EQ(v4.num_lanes, 128);
  EXPECT_EQ(v4.num_sublanes, 8);
  EXPECT_EQ(v4.mxu_column_size, 128);
  EXPECT_EQ(v4.num_mxus, 4);
  EXPECT_EQ(v4.vmem_capacity_bytes, 16 * kMiB);
  EXPECT_EQ(v4.smem_capacity_bytes, 1 * kMiB);
  // Chip-level figures halved: two TensorCores per v4 chip.
  EXPECT_EQ(v4.cmem_capacity_bytes, 67'000'000);
  EXPECT_EQ(v4.hbm_capacity_bytes, 17'200'000'000);
  EXPECT_EQ(v4.mem_bw_bytes_per_second, 615'000'000'000);
  EXPECT_EQ(v4.bf16_ops_per_second, 137'500'000'000'000);
  EXPECT_EQ(v4.int8_ops_per_second, 0);
  EXPECT_FALSE(v4.sparse_core.has_value());
  EXPECT_FALSE(v4.cpu.has_value());
  EXPECT_FALSE(v4.is_lite());
  EXPECT_FALSE(v4.is_megacore());
  EXPECT_TRUE(v4.is_split_chip());
}

TEST(TpuInfo, V5ePerTensorCore) {
  const TpuInfo v5e = get_tpu_info_for_chip("v5e");
  EXPECT_EQ(v5e.chip_version, ChipVersion::kV5E);
  EXPECT_EQ(v5e.generation, 5);
  EXPECT_EQ(v5e.num_cores, 1);
  EXPECT_EQ(v5e.mxu_column_size, 128);
  EXPECT_EQ(v5e.vmem_capacity_bytes, 128 * kMiB);
  EXPECT_EQ(v5e.smem_capacity_bytes, 1 * kMiB);
  EXPECT_EQ(v5e.hbm_capacity_bytes, 17'200'000'000);
  EXPECT_EQ(v5e.mem_bw_bytes_per_second, 820'000'000'000);
  EXPECT_EQ(v5e.bf16_ops_per_second, 197'000'000'000'000);
  EXPECT_EQ(v5e.int8_ops_per_second, 394'000'000'000'000);
  EXPECT_EQ(v5e.fp8_ops_per_second, 0);
  EXPECT_EQ(v5e.int4_ops_per_second, 788'000'000'000'000);
  EXPECT_FALSE(v5e.sparse_core.has_value());
  EXPECT_TRUE(v5e.is_lite());
  EXPECT_FALSE(v5e.is_split_chip());
}

TEST(TpuInfo, V5pPerTensorCore) {
  const TpuInfo v5p = get_tpu_info_for_chip("v5p");
  EXPECT_EQ(v5p.generation, 5);
  EXPECT_EQ(v5p.num_cores, 1);
  EXPECT_EQ(v5p.mxu_column_size, 128);
  EXPECT_EQ(v5p.vmem_capacity_bytes, 64 * kMiB);
  EXPECT_EQ(v5p.smem_capacity_bytes, 1 * kMiB);
  EXPECT_EQ(v5p.hbm_capacity_bytes, 51'500'000'000);
  EXPECT_EQ(v5p.mem_bw_bytes_per_second, 1'230'000'000'000);
  EXPECT_EQ(v5p.bf16_ops_per_second, 229'500'000'000'000);
  EXPECT_EQ(v5p.int8_ops_per_second, 459'000'000'000'000);
  EXPECT_EQ(v5p.int4_ops_per_second, 920'000'000'000'000);
  ASSERT_TRUE(v5p.sparse_core.has_value());
  EXPECT_EQ(v5p.sparse_core->num_cores, 4);
  EXPECT_EQ(v5p.sparse_core->num_subcores, 16);
  EXPECT_EQ(v5p.sparse_core->num_lanes, 8);
  EXPECT_EQ(v5p.sparse_core->vmem_capacity_bytes, 512 * kKiB);
  EXPECT_EQ(v5p.sparse_core->dma_granule_size_bytes, 32);
  EXPECT_FALSE(v5p.is_lite());
}

TEST(TpuInfo, V6ePerTensorCore) {
  const TpuInfo v6e = get_tpu_info_for_chip("v6e");
  EXPECT_EQ(v6e.generation, 6);
  EXPECT_EQ(v6e.num_cores, 1);
  EXPECT_EQ(v6e.mxu_column_size, 256);  // 256-wide MXU from generation 6 on
  EXPECT_EQ(v6e.num_mxus, 2);
  EXPECT_EQ(v6e.vmem_capacity_bytes, 128 * kMiB);
  EXPECT_EQ(v6e.smem_capacity_bytes, 1 * kMiB);
  EXPECT_EQ(v6e.hbm_capacity_bytes, 34'400'000'000);
  EXPECT_EQ(v6e.mem_bw_bytes_per_second, 1'640'000'000'000);
  EXPECT_EQ(v6e.bf16_ops_per_second, 920'000'000'000'000);
  EXPECT_EQ(v6e.fp8_ops_per_second, 920'000'000'000'000);
  ASSERT_TRUE(v6e.sparse_core.has_value());
  EXPECT_EQ(v6e.sparse_core->num_cores, 2);
  EXPECT_EQ(v6e.sparse_core->vmem_capacity_bytes, 256 * kKiB);
  EXPECT_TRUE(v6e.is_lite());
}

TEST(TpuInfo, V7xPerTensorCore) {
  const TpuInfo v7x = get_tpu_info_for_chip("7x");
  EXPECT_EQ(v7x.chip_version, ChipVersion::k7X);
  EXPECT_EQ(v7x.generation, 7);
  EXPECT_EQ(v7x.num_cores, 1);
  EXPECT_EQ(v7x.mxu_column_size, 256);
  EXPECT_EQ(v7x.num_accumulators, 128);
  EXPECT_EQ(v7x.vmem_capacity_bytes, 64 * kMiB);
  EXPECT_EQ(v7x.smem_capacity_bytes, 1 * kMiB);
  EXPECT_EQ(v7x.hbm_capacity_bytes, 103'000'000'000);
  EXPECT_EQ(v7x.mem_bw_bytes_per_second, 3'700'000'000'000);
  EXPECT_EQ(v7x.bf16_ops_per_second, 1'155'000'000'000'000);
  EXPECT_EQ(v7x.fp8_ops_per_second, 2'300'000'000'000'000);
  EXPECT_EQ(v7x.int8_ops_per_second, 0);
  ASSERT_TRUE(v7x.sparse_core.has_value());
  EXPECT_EQ(v7x.sparse_core->num_lanes, 16);
  EXPECT_FALSE(v7x.is_lite());
  EXPECT_TRUE(v7x.is_split_chip());
}

TEST(TpuInfo, OtherGenerationsSpotChecks) {
  EXPECT_EQ(get_tpu_info_for_chip("v2").smem_capacity_bytes, 16 * kKiB);
  EXPECT_EQ(get_tpu_info_for_chip("v3").smem_capacity_bytes, 16 * kKiB);
  EXPECT_EQ(get_tpu_info_for_chip("v3").bf16_ops_per_second, 70'000'000'000'000);
  EXPECT_EQ(get_tpu_info_for_chip("v4i").cmem_capacity_bytes, 134'000'000);  // one TensorCore
  EXPECT_EQ(get_tpu_info_for_chip("8i").vmem_capacity_bytes, 192 * kMiB);
  EXPECT_EQ(get_tpu_info_for_chip("8i").bf16_ops_per_second, 550'500'000'000'000);
  const TpuInfo v8t = get_tpu_info_for_chip("8t");
  EXPECT_EQ(v8t.num_sublanes, 16);
  EXPECT_EQ(v8t.vmem_capacity_bytes, 128 * kMiB);
  EXPECT_EQ(v8t.int4_ops_per_second, 11'953'800'000'000'000);
}

TEST(TpuInfo, KnownChipsRoundTrip) {
  const std::vector<std::string> expected = {"v2",  "v3", "v4i", "v4", "v5e", "v5p",
                                             "v6e", "7",  "7x",  "8i", "8t"};
  ASSERT_EQ(tessera::pltpu::known_chips(), expected);
  int previous_generation = 0;
  for (const std::string& name : expected) {
    const TpuInfo info = get_tpu_info_for_chip(name);
    EXPECT_EQ(tessera::pltpu::to_string(info.chip_version), name);
    EXPECT_GE(info.generation, previous_generation) << name;  // the list is in generation order
    previous_generation = info.generation;
  }
  EXPECT_STREQ(tessera::pltpu::to_string(ChipVersion::kCpu), "cpu");
}

TEST(TpuInfo, DeviceKindAliases) {
  const auto version_of = [](const char* kind) { return get_tpu_info_for_chip(kind).chip_version; };
  EXPECT_EQ(version_of("TPU v2"), ChipVersion::kV2);
  EXPECT_EQ(version_of("TPU v3"), ChipVersion::kV3);
  EXPECT_EQ(version_of("TPU v4"), ChipVersion::kV4);
  EXPECT_EQ(version_of("TPU v4 lite"), ChipVersion::kV4I);
  EXPECT_EQ(version_of("TPU v5e"), ChipVersion::kV5E);
  EXPECT_EQ(version_of("TPU v5 lite"), ChipVersion::kV5E);
  EXPECT_EQ(version_of("TPU v5"), ChipVersion::kV5P);
  EXPECT_EQ(version_of("TPU v5p"), ChipVersion::kV5P);
  EXPECT_EQ(version_of("TPU v6e"), ChipVersion::kV6E);
  EXPECT_EQ(version_of("TPU v6 lite"), ChipVersion::kV6E);
  EXPECT_EQ(version_of("TPU7"), ChipVersion::k7);
  EXPECT_EQ(version_of("TPU7x"), ChipVersion::k7X);
  EXPECT_EQ(version_of("TPU8i"), ChipVersion::k8I);
  EXPECT_EQ(version_of("TPU8t"), ChipVersion::k8T);
  // Case and spacing do not matter.
  EXPECT_EQ(version_of("V5E"), ChipVersion::kV5E);
  EXPECT_EQ(version_of("  tpu   V5 Lite "), ChipVersion::kV5E);
  EXPECT_EQ(version_of("v7x"), ChipVersion::k7X);
}

TEST(TpuInfo, MegacoreAllowedOnV4AndV5p) {
  for (const char* chip : {"v4", "v5p"}) {
    const TpuInfo mega = get_tpu_info_for_chip(chip, 2);
    const TpuInfo split = get_tpu_info_for_chip(chip, 1);
    EXPECT_EQ(mega.num_cores, 2) << chip;
    EXPECT_TRUE(mega.is_megacore()) << chip;
    EXPECT_FALSE(mega.is_split_chip()) << chip;
    // Values stay per TensorCore: only num_cores says the device spans two.
    EXPECT_EQ(mega.vmem_capacity_bytes, split.vmem_capacity_bytes) << chip;
    EXPECT_EQ(mega.hbm_capacity_bytes, split.hbm_capacity_bytes) << chip;
    EXPECT_EQ(mega.mem_bw_bytes_per_second, split.mem_bw_bytes_per_second) << chip;
    EXPECT_EQ(mega.bf16_ops_per_second, split.bf16_ops_per_second) << chip;
  }
}

TEST(TpuInfo, MegacoreRejectedOnV5e) {
  const int line = __LINE__ + 1;
  const auto e = usage_error_of([] { (void)get_tpu_info_for_chip("v5e", 2); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  const std::string message = e->what();
  EXPECT_NE(message.find("get_tpu_info_for_chip"), std::string::npos) << message;
  EXPECT_NE(message.find("num_tensor_cores_per_logical_device is 2"), std::string::npos) << message;
  EXPECT_NE(message.find("v5e"), std::string::npos) << message;
  EXPECT_NE(message.find("it must be 1, or 2 on the megacore chips v4 and v5p"), std::string::npos)
      << message;
  EXPECT_NE(message.find("tpu_info_test.cc:" + std::to_string(line)), std::string::npos) << message;
}

TEST(TpuInfo, MegacoreRejectedOnDualCoreChipsWithoutIt) {
  const auto e = usage_error_of([] { (void)get_tpu_info_for_chip("7x", 2); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e->what()).find("no megacore"), std::string::npos) << e->what();
}

TEST(TpuInfo, CoreCountsOtherThanOneOrTwoRejected) {
  for (const int n : {0, -1, 3, 4}) {
    const auto e = usage_error_of([n] { (void)get_tpu_info_for_chip("v4", n); });
    ASSERT_TRUE(e.has_value()) << n;
    EXPECT_EQ(e->kind(), ErrorKind::kInvalidArgument) << n;
    EXPECT_NE(std::string(e->what()).find("is " + std::to_string(n) + " for chip 'v4'"),
              std::string::npos)
        << e->what();
  }
}

TEST(TpuInfo, UnknownChipNamesTheValueAndTheKnownChips) {
  const int line = __LINE__ + 1;
  const auto e = usage_error_of([] { (void)get_tpu_info_for_chip("v99"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind(), ErrorKind::kUnknownChip);
  EXPECT_EQ(static_cast<int>(e->where().line()), line);
  const std::string message = e->what();
  EXPECT_NE(message.find("'v99'"), std::string::npos) << message;
  EXPECT_NE(message.find("v5e"), std::string::npos) << message;
  EXPECT_NE(message.find("v2, v3, v4i, v4, v5e, v5p, v6e, 7, 7x, 8i, 8t"), std::string::npos)
      << message;
  // Neither the empty name nor "cpu" is a TPU table.
  EXPECT_EQ(usage_error_of([] { (void)get_tpu_info_for_chip(""); }).value().kind(),
            ErrorKind::kUnknownChip);
  EXPECT_EQ(usage_error_of([] { (void)get_tpu_info_for_chip("cpu"); }).value().kind(),
            ErrorKind::kUnknownChip);
}

TEST(TpuInfo, ThisMachineIsSane) {
  const TpuInfo me = get_tpu_info();
  EXPECT_EQ(me.chip_version, ChipVersion::kCpu);
  EXPECT_EQ(me.generation, 0);
  EXPECT_GE(me.num_cores, 1);
  EXPECT_EQ(me.num_lanes, 128);
  EXPECT_EQ(me.num_sublanes, 8);
  EXPECT_EQ(me.mxu_column_size, 128);
  EXPECT_GT(me.vmem_capacity_bytes, 0);
  EXPECT_GT(me.smem_capacity_bytes, 0);
  EXPECT_GT(me.hbm_capacity_bytes, me.vmem_capacity_bytes);
  EXPECT_EQ(me.bf16_ops_per_second, 0);  // not measured
  EXPECT_FALSE(me.sparse_core.has_value());
  EXPECT_FALSE(me.is_lite());
  EXPECT_FALSE(me.is_split_chip());
  ASSERT_TRUE(me.cpu.has_value());
  EXPECT_FALSE(me.cpu->model.empty());
  EXPECT_GE(me.cpu->hardware_threads, 1);
  EXPECT_GT(me.cpu->l1d_bytes, 0);
  EXPECT_GT(me.cpu->l2_bytes, 0);
  EXPECT_FALSE(me.cpu->simd_target.empty());
  EXPECT_NE(me.cpu->simd_target, "Unknown");
  EXPECT_GE(me.cpu->simd_width_bits, 32);
}

TEST(TpuInfo, ThisMachineDetectionIsStableAcrossThreads) {
  const TpuInfo first = get_tpu_info();
  std::vector<std::string> targets(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&targets, i] { targets[i] = get_tpu_info().cpu->simd_target; });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& t : targets) EXPECT_EQ(t, first.cpu->simd_target);
}

TEST(TpuInfo, MatmulSupport) {
  const TpuInfo v2 = get_tpu_info_for_chip("v2");
  EXPECT_TRUE(v2.is_matmul_supported(DType::kFloat32, DType::kFloat32));
  EXPECT_FALSE(v2.is_matmul_supported(DType::kBFloat16, DType::kBFloat16));

  const TpuInfo v4 = get_tpu_info_for_chip("v4");
  EXPECT_TRUE(v4.is_matmul_supported(DType::kBFloat16, DType::kInt8));
  EXPECT_TRUE(v4.is_matmul_supported(DType::kFloat32, DType::kBFloat16));
  EXPECT_FALSE(v4.is_matmul_supported(DType::kInt8, DType::kInt8));

  const TpuInfo v5e = get_tpu_info_for_chip("v5e");
  EXPECT_TRUE(v5e.is_matmul_supported(DType::kBFloat16, DType::kBFloat16));
  EXPECT_TRUE(v5e.is_matmul_supported(DType::kInt8, DType::kInt8));
  EXPECT_FALSE(v5e.is_matmul_supported(DType::kInt8, DType::kBFloat16));

  const TpuInfo v7x = get_tpu_info_for_chip("7x");
  EXPECT_TRUE(v7x.is_matmul_supported(DType::kBFloat16, DType::kFloat32));
  EXPECT_FALSE(v7x.is_matmul_supported(DType::kInt8, DType::kInt8));
  // float8 pairs, as Pallas' table lists them: e5m2 (not e4m3fn) from v5e on, both from 7.
  EXPECT_TRUE(v5e.is_matmul_supported(DType::kFloat8E5M2, DType::kBFloat16));
  EXPECT_FALSE(v5e.is_matmul_supported(DType::kFloat8E4M3FN, DType::kFloat8E4M3FN));
  EXPECT_TRUE(v5e.is_matmul_supported(DType::kUInt8, DType::kInt8));
  EXPECT_TRUE(v7x.is_matmul_supported(DType::kFloat8E4M3FN, DType::kFloat8E5M2));
  EXPECT_TRUE(v7x.is_matmul_supported(DType::kBFloat16, DType::kFloat8E4M3FN));
  EXPECT_FALSE(v7x.is_matmul_supported(DType::kFloat8E4M3FN, DType::kBFloat16));
  EXPECT_FALSE(v4.is_matmul_supported(DType::kFloat8E5M2, DType::kFloat8E5M2));
  // float8_e4m3b11fnuz pairs with float32, bfloat16, float8_e5m2 and itself on v5e, v5p and
  // v6e only (Pallas' table; its tests skip the format on generations <= 4 and on 7x).
  for (const std::string& chip : tessera::pltpu::known_chips()) {
    const TpuInfo info = get_tpu_info_for_chip(chip);
    const bool gen56 = chip == "v5e" || chip == "v5p" || chip == "v6e";
    const DType b11 = DType::kFloat8E4M3B11FNUZ;
    EXPECT_EQ(info.is_matmul_supported(DType::kBFloat16, b11), gen56) << chip;
    EXPECT_EQ(info.is_matmul_supported(b11, DType::kFloat32), gen56) << chip;
    EXPECT_EQ(info.is_matmul_supported(b11, DType::kFloat8E5M2), gen56) << chip;
    EXPECT_EQ(info.is_matmul_supported(b11, b11), gen56) << chip;
    EXPECT_FALSE(info.is_matmul_supported(b11, DType::kFloat8E4M3FN)) << chip;
    EXPECT_FALSE(info.is_matmul_supported(b11, DType::kInt8)) << chip;
  }

  // bool and int32 are never MXU operands.
  for (const std::string& chip : tessera::pltpu::known_chips()) {
    const TpuInfo info = get_tpu_info_for_chip(chip);
    EXPECT_FALSE(info.is_matmul_supported(DType::kInt32, DType::kInt32)) << chip;
    EXPECT_FALSE(info.is_matmul_supported(DType::kBool, DType::kBool)) << chip;
    EXPECT_FALSE(info.is_matmul_supported(DType::kFloat16, DType::kFloat16)) << chip;
    EXPECT_FALSE(info.is_matmul_supported(DType::kUInt32, DType::kUInt32)) << chip;
    EXPECT_FALSE(info.is_matmul_supported(DType::kInt16, DType::kInt16)) << chip;
  }

  const TpuInfo me = get_tpu_info();
  EXPECT_TRUE(me.is_matmul_supported(DType::kFloat32, DType::kFloat32));
  EXPECT_TRUE(me.is_matmul_supported(DType::kBFloat16, DType::kBFloat16));
  EXPECT_TRUE(me.is_matmul_supported(DType::kInt8, DType::kInt8));
  EXPECT_FALSE(me.is_matmul_supported(DType::kFloat32, DType::kBFloat16));
  EXPECT_FALSE(me.is_matmul_supported(DType::kInt32, DType::kInt32));
  EXPECT_FALSE(me.is_matmul_supported(DType::kBool, DType::kBool));
}

TEST(TpuInfo, SublaneTiling) {
  // Before generation 7, 16-bit types keep the 32-bit tile; 8-bit types (bool too) pack 4x.
  const TpuInfo v5e = get_tpu_info_for_chip("v5e");
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kFloat32), 8);
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kInt32), 8);
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kBFloat16), 8);
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kInt8), 32);
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kBool), 32);
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kInt4), 64);  // tiled by bit width, as on a TPU
  EXPECT_EQ(v5e.get_sublane_tiling(DType::kUInt2), 128);

  // From generation 7, every narrow type packs along the sublanes.
  const TpuInfo v7x = get_tpu_info_for_chip("7x");
  EXPECT_EQ(v7x.get_sublane_tiling(DType::kFloat32), 8);
  EXPECT_EQ(v7x.get_sublane_tiling(DType::kBFloat16), 16);
  EXPECT_EQ(v7x.get_sublane_tiling(DType::kInt8), 32);

  const TpuInfo v8t = get_tpu_info_for_chip("8t");  // 16 sublanes
  EXPECT_EQ(v8t.get_sublane_tiling(DType::kFloat32), 16);
  EXPECT_EQ(v8t.get_sublane_tiling(DType::kBFloat16), 32);
  EXPECT_EQ(v8t.get_sublane_tiling(DType::kInt8), 64);

  // This CPU follows the generation-7 rule.
  const TpuInfo me = get_tpu_info();
  EXPECT_EQ(me.get_sublane_tiling(DType::kFloat32), 8);
  EXPECT_EQ(me.get_sublane_tiling(DType::kBFloat16), 16);
  EXPECT_EQ(me.get_sublane_tiling(DType::kInt8), 32);
}

}  // namespace
