// File: tessera/tpu_info.h
//
// `pltpu::get_tpu_info()` and `pltpu::get_tpu_info_for_chip(name)`, as in
// Pallas' `jax/_src/tpu_info.py`: the per-TensorCore facts of a chip.
//
//   const auto me = pltpu::get_tpu_info();            // this machine, seen as a chip
//   me.num_cores;                                      // mesh cores a kernel gets by default
//   me.vmem_capacity_bytes;                            // the default per-core VMEM limit
//   const auto v5e = pltpu::get_tpu_info_for_chip("v5e");
//   v5e.vmem_capacity_bytes;                           // 128 MiB
//   v5e.is_matmul_supported(DType::kBFloat16, DType::kBFloat16);  // true
//
// Every value is per TensorCore, as in Pallas. For this machine ("cpu"):
// num_cores is the default mesh size (hardware threads, or TESSERA_NUM_CORES),
// vmem/smem capacities are the default per-core arena limits, and the `cpu`
// block describes caches and the SIMD target the native engine runs. Rates
// that Tessera has not measured are 0 (see `tessera info --calibrate`, later).
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "tessera/dtype.h"

namespace tessera::pltpu {

/// `pltpu.ChipVersion`: the TPU generations Tessera knows, plus this CPU.
enum class ChipVersion { kV2, kV3, kV4I, kV4, kV5E, kV5P, kV6E, k7, k7X, k8I, k8T, kCpu };

/// The short name Pallas uses ("v5e", "7x", ...); "cpu" for this machine.
const char* to_string(ChipVersion v) noexcept;

/// Physical TensorCores on one chip: 2 for v2, v3, v4, v5p, 7, 7x and 8i; 1 for v4i, v5e, v6e,
/// 8t and this CPU (whose cores are described by `TpuInfo::num_cores` instead).
int num_physical_tensor_cores_per_chip(ChipVersion v) noexcept;

/// `SparseCoreInfo`: the chip's SparseCores, where it has them.
struct SparseCoreInfo {
  int num_cores = 0;
  int num_subcores = 0;
  int num_lanes = 0;
  int64_t vmem_capacity_bytes = 0;
  int dma_granule_size_bytes = 0;
};

/// What the native engine runs on, when the "chip" is this CPU.
struct CpuInfo {
  std::string model;             ///< /proc/cpuinfo "model name"
  int hardware_threads = 0;      ///< std::thread::hardware_concurrency()
  int64_t l1d_bytes = 0;         ///< per core
  int64_t l2_bytes = 0;          ///< per core
  int64_t l3_bytes = 0;          ///< shared
  std::string simd_target;       ///< the Highway target chosen at run time, e.g. "AVX3_SPR"
  int simd_width_bits = 0;       ///< vector width of that target
  bool has_avx512_bf16 = false;  ///< vdpbf16ps available
  bool has_amx = false;          ///< AMX tiles available
};

/// `pltpu.TpuInfo`: per-TensorCore values of one chip.
struct TpuInfo {
  ChipVersion chip_version = ChipVersion::kCpu;
  int generation = 0;
  int num_cores = 1;  ///< TensorCores per device (2 only for megacore v4 / v5p)
  int num_lanes = 128;
  int num_sublanes = 8;
  int mxu_column_size = 128;
  int num_mxus = 0;
  int num_accumulators = 0;
  int64_t vmem_capacity_bytes = 0;
  int64_t cmem_capacity_bytes = 0;
  int64_t smem_capacity_bytes = 0;
  int64_t hbm_capacity_bytes = 0;
  int64_t mem_bw_bytes_per_second = 0;
  int64_t bf16_ops_per_second = 0;
  int64_t int8_ops_per_second = 0;
  int64_t fp8_ops_per_second = 0;
  int64_t int4_ops_per_second = 0;
  std::optional<SparseCoreInfo> sparse_core;
  std::optional<CpuInfo> cpu;  ///< set only for this machine

  /// v4i, v5e, v6e.
  bool is_lite() const noexcept;
  /// More than one TensorCore per device.
  bool is_megacore() const noexcept { return num_cores > 1; }
  /// A 2-TensorCore chip used one TensorCore per device (v2, v3, 7, 7x, 8i; v4 / v5p without
  /// megacore). Never true for this CPU.
  bool is_split_chip() const noexcept;
  /// Whether the MXU multiplies these operand dtypes natively (Pallas' table, restricted to
  /// the dtypes Tessera has). Always true for this CPU's supported pairs.
  bool is_matmul_supported(DType lhs, DType rhs) const noexcept;
  /// Sublanes of one native (sublane, lane) tile for `dtype`.
  int get_sublane_tiling(DType dtype) const noexcept;
};

/// This machine described as a chip (see the file comment).
TpuInfo get_tpu_info();

/// The published per-TensorCore table of a TPU generation: "v2", "v3", "v4i", "v4", "v5e",
/// "v5p", "v6e", "7", "7x", "8i", "8t" (also "TPU v5e", "TPU v5 lite", ... as device kinds).
/// `num_tensor_cores_per_logical_device` must be 1, or 2 on v4 / v5p (megacore).
/// Throws UsageError (kUnknownChip) naming the accepted names.
TpuInfo get_tpu_info_for_chip(const std::string& chip, int num_tensor_cores_per_logical_device = 1,
                              std::source_location where = std::source_location::current());

/// The chip names `get_tpu_info_for_chip` accepts, in generation order.
std::vector<std::string> known_chips();

}  // namespace tessera::pltpu
