// The TPU generation tables behind `pltpu::get_tpu_info_for_chip`, and the description of this
// machine behind `pltpu::get_tpu_info`.
//
// The TPU numbers restate the published per-generation facts that Pallas' `tpu_info.py` carries
// (Pallas' pltpu.get_tpu_info tables and Google's published TPU system specifications). They are
// kept here as chip-level figures plus the count of physical TensorCores, and divided once in
// `info_from_spec`: Pallas reports every value per TensorCore, and on 2-TensorCore chips its
// sources divide the chip's HBM, CMEM, bandwidth and op rates by two. VMEM and SMEM are already
// per-TensorCore figures.
#include "tessera/tpu_info.h"

#include <fmt/format.h>
#include <hwy/targets.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/prctl.h>
#endif

#include "core/simd_target.h"
#include "tessera/detail/runtime.h"
#include "tessera/error.h"

namespace tessera::pltpu {
namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;

/// One generation's facts as published: per-TensorCore VMEM/SMEM, chip-level everything else.
struct ChipSpec {
  ChipVersion version;
  int generation;
  int physical_tensor_cores;  // per chip; the divisor for the chip-level figures below
  bool supports_megacore;     // both TensorCores may form one device (v4, v5p)
  int num_sublanes;
  int num_mxus;
  int num_accumulators;  // 0 where not published
  int64_t vmem_bytes;    // per TensorCore
  int64_t smem_bytes;    // per TensorCore
  int64_t chip_cmem_bytes;
  int64_t chip_hbm_bytes;
  int64_t chip_mem_bw_bytes_per_second;
  int64_t chip_bf16_ops_per_second;
  int64_t chip_int8_ops_per_second;  // 0: not available on this generation
  int64_t chip_fp8_ops_per_second;
  int64_t chip_int4_ops_per_second;
  std::optional<SparseCoreInfo> sparse_core;
};

// SparseCore descriptions: cores, vector subcores per core, lanes, VMEM per subcore, DMA granule.
constexpr SparseCoreInfo kSparseCoreV5P{4, 16, 8, 512 * kKiB, 32};
constexpr SparseCoreInfo kSparseCoreV6E{2, 16, 8, 256 * kKiB, 32};
constexpr SparseCoreInfo kSparseCore7{2, 16, 16, 512 * kKiB, 32};
constexpr SparseCoreInfo kSparseCore8I{1, 4, 16, 512 * kKiB, 64};
constexpr SparseCoreInfo kSparseCore8T{2, 16, 16, 256 * kKiB, 64};

// In generation order; `known_chips()` and the lookup below walk this table.
// Rates: bytes/s and ops/s for the whole chip (e.g. v5p: 2.46 TB/s, 459 bf16 TFLOP/s).
const std::array<ChipSpec, 11> kChips{{
    {ChipVersion::kV2, 2, 2, false, 8, 1, 0, 16 * kMiB, 16 * kKiB, 0, 16'000'000'000,
     716'000'000'000, 46'000'000'000'000, 0, 0, 0, std::nullopt},
    {ChipVersion::kV3, 3, 2, false, 8, 2, 0, 16 * kMiB, 16 * kKiB, 0, 34'400'000'000,
     825'000'000'000, 140'000'000'000'000, 0, 0, 0, std::nullopt},
    {ChipVersion::kV4I, 4, 1, false, 8, 4, 0, 16 * kMiB, 1 * kMiB, 134'000'000, 8'590'000'000,
     614'000'000'000, 137'000'000'000'000, 0, 0, 0, std::nullopt},
    {ChipVersion::kV4, 4, 2, true, 8, 4, 0, 16 * kMiB, 1 * kMiB, 134'000'000, 34'400'000'000,
     1'230'000'000'000, 275'000'000'000'000, 0, 0, 0, std::nullopt},
    {ChipVersion::kV5E, 5, 1, false, 8, 4, 0, 128 * kMiB, 1 * kMiB, 0, 17'200'000'000,
     820'000'000'000, 197'000'000'000'000, 394'000'000'000'000, 0, 788'000'000'000'000,
     std::nullopt},
    {ChipVersion::kV5P, 5, 2, true, 8, 4, 0, 64 * kMiB, 1 * kMiB, 0, 103'000'000'000,
     2'460'000'000'000, 459'000'000'000'000, 918'000'000'000'000, 0, 1'840'000'000'000'000,
     kSparseCoreV5P},
    {ChipVersion::kV6E, 6, 1, false, 8, 2, 0, 128 * kMiB, 1 * kMiB, 0, 34'400'000'000,
     1'640'000'000'000, 920'000'000'000'000, 1'840'000'000'000'000, 920'000'000'000'000,
     3'680'000'000'000'000, kSparseCoreV6E},
    {ChipVersion::k7, 7, 2, false, 8, 2, 128, 64 * kMiB, 1 * kMiB, 0, 206'000'000'000,
     7'400'000'000'000, 2'310'000'000'000'000, 0, 4'600'000'000'000'000, 0, kSparseCore7},
    {ChipVersion::k7X, 7, 2, false, 8, 2, 128, 64 * kMiB, 1 * kMiB, 0, 206'000'000'000,
     7'400'000'000'000, 2'310'000'000'000'000, 0, 4'600'000'000'000'000, 0, kSparseCore7},
    {ChipVersion::k8I, 8, 2, false, 8, 2, 256, 192 * kMiB, 1 * kMiB, 0, 309'000'000'000,
     8'600'000'000'000, 1'101'000'000'000'000, 0, 8'808'000'000'000'000, 0, kSparseCore8I},
    // 8t is the one generation with 16 sublanes per vreg.
    {ChipVersion::k8T, 8, 1, false, 16, 2, 256, 128 * kMiB, 1 * kMiB, 0, 231'000'000'000,
     6'400'000'000'000, 996'100'000'000'000, 996'100'000'000'000, 5'976'900'000'000'000,
     11'953'800'000'000'000, kSparseCore8T},
}};

const ChipSpec* find_spec(ChipVersion v) noexcept {
  for (const ChipSpec& s : kChips) {
    if (s.version == v) return &s;
  }
  return nullptr;
}

// Every spelling `get_tpu_info_for_chip` accepts, lower-cased with single spaces: the short
// names, Pallas' device-kind strings (`jax.Device.device_kind`), and the common "v7x"-style
// spellings of the generations whose Pallas short name has no "v".
struct ChipAlias {
  std::string_view name;
  ChipVersion version;
};
constexpr ChipAlias kAliases[] = {
    {"v2", ChipVersion::kV2},       {"tpu v2", ChipVersion::kV2},
    {"v3", ChipVersion::kV3},       {"tpu v3", ChipVersion::kV3},
    {"v4i", ChipVersion::kV4I},     {"tpu v4 lite", ChipVersion::kV4I},
    {"tpu v4i", ChipVersion::kV4I}, {"v4", ChipVersion::kV4},
    {"tpu v4", ChipVersion::kV4},   {"v5e", ChipVersion::kV5E},
    {"tpu v5e", ChipVersion::kV5E}, {"tpu v5 lite", ChipVersion::kV5E},
    {"v5p", ChipVersion::kV5P},     {"tpu v5", ChipVersion::kV5P},
    {"tpu v5p", ChipVersion::kV5P}, {"v6e", ChipVersion::kV6E},
    {"tpu v6e", ChipVersion::kV6E}, {"tpu v6 lite", ChipVersion::kV6E},
    {"7", ChipVersion::k7},         {"tpu7", ChipVersion::k7},
    {"tpu 7", ChipVersion::k7},     {"v7", ChipVersion::k7},
    {"7x", ChipVersion::k7X},       {"tpu7x", ChipVersion::k7X},
    {"tpu 7x", ChipVersion::k7X},   {"v7x", ChipVersion::k7X},
    {"8i", ChipVersion::k8I},       {"tpu8i", ChipVersion::k8I},
    {"tpu 8i", ChipVersion::k8I},   {"v8i", ChipVersion::k8I},
    {"8t", ChipVersion::k8T},       {"tpu8t", ChipVersion::k8T},
    {"tpu 8t", ChipVersion::k8T},   {"v8t", ChipVersion::k8T},
};

/// Lower-cases and collapses runs of blanks, so "  TPU  v5 Lite " matches "tpu v5 lite".
std::string normalize_name(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool pending_space = false;
  for (const char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::optional<ChipVersion> parse_chip(std::string_view name) {
  const std::string key = normalize_name(name);
  for (const ChipAlias& a : kAliases) {
    if (a.name == key) return a.version;
  }
  return std::nullopt;
}

TpuInfo info_from_spec(const ChipSpec& s, int num_cores) {
  const int64_t tcs = s.physical_tensor_cores;
  TpuInfo info;
  info.chip_version = s.version;
  info.generation = s.generation;
  info.num_cores = num_cores;
  info.num_lanes = 128;
  info.num_sublanes = s.num_sublanes;
  // The MXU grew from 128x128 to 256x256 systolic arrays with v6e.
  info.mxu_column_size = s.generation < 6 ? 128 : 256;
  info.num_mxus = s.num_mxus;
  info.num_accumulators = s.num_accumulators;
  info.vmem_capacity_bytes = s.vmem_bytes;
  info.smem_capacity_bytes = s.smem_bytes;
  // Chip-level figures become per-TensorCore ones. Megacore does not change them: Pallas reports
  // per-TensorCore values and lets num_cores say how many TensorCores the device spans.
  info.cmem_capacity_bytes = s.chip_cmem_bytes / tcs;
  info.hbm_capacity_bytes = s.chip_hbm_bytes / tcs;
  info.mem_bw_bytes_per_second = s.chip_mem_bw_bytes_per_second / tcs;
  info.bf16_ops_per_second = s.chip_bf16_ops_per_second / tcs;
  info.int8_ops_per_second = s.chip_int8_ops_per_second / tcs;
  info.fp8_ops_per_second = s.chip_fp8_ops_per_second / tcs;
  info.int4_ops_per_second = s.chip_int4_ops_per_second / tcs;
  info.sparse_core = s.sparse_core;
  return info;
}

// ---- This machine ------------------------------------------------------------------------------

/// The first line of a sysfs-style file, or "" when it cannot be read.
std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
    line.pop_back();
  }
  return line;
}

/// Parses a sysfs cache size ("48K", "2048K", "32M", "1024"); 0 when malformed.
int64_t parse_cache_size(std::string_view s) {
  int64_t value = 0;
  size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0; ++i) {
    value = value * 10 + (s[i] - '0');
  }
  if (i == 0) return 0;
  if (i < s.size()) {
    switch (std::toupper(static_cast<unsigned char>(s[i]))) {
      case 'K':
        return value * kKiB;
      case 'M':
        return value * kMiB;
      case 'G':
        return value * kMiB * kKiB;
      default:
        return 0;
    }
  }
  return value;
}

/// sysconf() as bytes, or 0 where the libc does not know (it returns -1 or 0 then).
int64_t sysconf_bytes(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? static_cast<int64_t>(v) : 0;
}

/// L1d / L2 / L3 of cpu0. sysfs first: it knows every level and is what lscpu reads; glibc's
/// sysconf cache values are 0 on many non-x86 systems, so they are only the fallback.
void detect_caches(CpuInfo& cpu) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int index = 0; index < 16; ++index) {
    const std::string dir = base + std::to_string(index) + "/";
    const std::string level = read_first_line(dir + "level");
    if (level.empty()) break;  // the indices are dense: the first gap ends the list
    const std::string type = read_first_line(dir + "type");
    if (type == "Instruction") continue;
    const int64_t size = parse_cache_size(read_first_line(dir + "size"));
    if (level == "1") cpu.l1d_bytes = std::max(cpu.l1d_bytes, size);
    if (level == "2") cpu.l2_bytes = std::max(cpu.l2_bytes, size);
    if (level == "3") cpu.l3_bytes = std::max(cpu.l3_bytes, size);
  }
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (cpu.l1d_bytes == 0) cpu.l1d_bytes = sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (cpu.l2_bytes == 0) cpu.l2_bytes = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (cpu.l3_bytes == 0) cpu.l3_bytes = sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
#endif
}

/// Model name and feature flags from /proc/cpuinfo (the first processor's block is enough: the
/// kernel reports the boot CPU's features, and Tessera does not schedule per core type).
void detect_cpuinfo(CpuInfo& cpu) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string flags;
  std::string fallback_model;  // non-x86 kernels name the part differently
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back())) != 0) {
      key.pop_back();
    }
    size_t start = colon + 1;
    while (start < line.size() && line[start] == ' ') ++start;
    const std::string value = line.substr(start);
    if (key == "model name" && cpu.model.empty()) {
      cpu.model = value;
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      flags = value;
    } else if ((key == "Hardware" || key == "cpu model" || key == "uarch" || key == "Processor") &&
               fallback_model.empty()) {
      fallback_model = value;
    }
  }
  if (cpu.model.empty()) cpu.model = fallback_model.empty() ? "unknown" : fallback_model;
  std::istringstream words(flags);
  std::string flag;
  while (words >> flag) {
    if (flag == "avx512_bf16") cpu.has_avx512_bf16 = true;
    if (flag == "amx_tile") cpu.has_amx = true;
  }
}

/// Vector width of a Highway target, by its name (names are stable across Highway versions,
/// the bit values are not). Scalable targets report what this process's vectors hold where
/// the OS says so, else the architectural minimum.
int simd_width_of(std::string_view target) {
  if (target.rfind("AVX3", 0) == 0) return 512;  // AVX3, AVX3_DL (and later AVX3_* variants)
  if (target == "AVX2" || target == "SVE_256" || target == "WASM_EMU256") return 256;
  if (target == "SCALAR") return 32;  // one lane at a time
  if (target == "SVE" || target == "SVE2") {
#if defined(__aarch64__) && defined(__linux__) && defined(PR_SVE_GET_VL)
    const int vl = ::prctl(PR_SVE_GET_VL);
    if (vl > 0) return (vl & PR_SVE_VL_LEN_MASK) * 8;
#endif
    return 128;
  }
  return 128;  // SSSE3, SSE4, NEON, SVE2_128, PPC8, WASM, EMU128; RVV's guaranteed minimum
}

/// Highway's choice for dynamic dispatch: the best target that is both supported by this CPU
/// and compiled into the library. Highway numbers better targets with lower bits.
void detect_simd(CpuInfo& cpu) {
  detail::apply_simd_target_override();
  int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  if (targets == 0) targets = HWY_STATIC_TARGET;
  const int64_t best = targets & -targets;
  cpu.simd_target = hwy::TargetName(best);
  cpu.simd_width_bits = simd_width_of(cpu.simd_target);
}

CpuInfo detect_cpu() {
  CpuInfo cpu;
  detect_cpuinfo(cpu);
  cpu.hardware_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  detect_caches(cpu);
  detect_simd(cpu);
  return cpu;
}

const CpuInfo& cached_cpu_info() {
  // A function-local static: detection (file reads, CPUID) runs once, and C++11 makes its
  // initialisation thread-safe.
  static const CpuInfo info = detect_cpu();
  return info;
}

std::string known_chips_text() { return fmt::format("{}", fmt::join(known_chips(), ", ")); }

}  // namespace

const char* to_string(ChipVersion v) noexcept {
  switch (v) {
    case ChipVersion::kV2:
      return "v2";
    case ChipVersion::kV3:
      return "v3";
    case ChipVersion::kV4I:
      return "v4i";
    case ChipVersion::kV4:
      return "v4";
    case ChipVersion::kV5E:
      return "v5e";
    case ChipVersion::kV5P:
      return "v5p";
    case ChipVersion::kV6E:
      return "v6e";
    case ChipVersion::k7:
      return "7";
    case ChipVersion::k7X:
      return "7x";
    case ChipVersion::k8I:
      return "8i";
    case ChipVersion::k8T:
      return "8t";
    case ChipVersion::kCpu:
      return "cpu";
  }
  return "unknown";
}

int num_physical_tensor_cores_per_chip(ChipVersion v) noexcept {
  const ChipSpec* s = find_spec(v);
  return s == nullptr ? 1 : s->physical_tensor_cores;
}

bool TpuInfo::is_lite() const noexcept {
  return chip_version == ChipVersion::kV4I || chip_version == ChipVersion::kV5E ||
         chip_version == ChipVersion::kV6E;
}

bool TpuInfo::is_split_chip() const noexcept {
  return num_cores == 1 && num_physical_tensor_cores_per_chip(chip_version) > 1;
}

bool TpuInfo::is_matmul_supported(DType lhs, DType rhs) const noexcept {
  // Pallas' table (tpu_info.py), restricted to Tessera's dtypes: the MXU never takes bool,
  // int16/uint16 or 32-bit integer operands (int32 is an accumulator type only), nor float16;
  // Pallas' int4 pairs are left out, as jnp::dot does not take the sub-byte integers.
  const auto is_float = [](DType d) { return d == DType::kFloat32 || d == DType::kBFloat16; };
  const auto is_byte_int = [](DType d) { return d == DType::kInt8 || d == DType::kUInt8; };
  // The float8s of generation 7 on (float8_e4m3b11fnuz is not among them).
  const auto is_f8 = [](DType d) { return d == DType::kFloat8E4M3FN || d == DType::kFloat8E5M2; };
  switch (chip_version) {
    case ChipVersion::kV2:
    case ChipVersion::kV3:
      return lhs == DType::kFloat32 && rhs == DType::kFloat32;
    case ChipVersion::kV4I:
    case ChipVersion::kV4:
      // Float lhs against a float or int8 rhs (weights-only int8).
      return is_float(lhs) && (is_float(rhs) || rhs == DType::kInt8);
    case ChipVersion::kV5E:
    case ChipVersion::kV5P:
    case ChipVersion::kV6E: {
      // float32, bfloat16, float8_e5m2 and float8_e4m3b11fnuz in any pair; 8-bit integers in
      // any pair.
      const auto f = [&](DType d) {
        return is_float(d) || d == DType::kFloat8E5M2 || d == DType::kFloat8E4M3B11FNUZ;
      };
      return (f(lhs) && f(rhs)) || (is_byte_int(lhs) && is_byte_int(rhs));
    }
    case ChipVersion::k7:
    case ChipVersion::k7X:
    case ChipVersion::k8I:
      // Float lhs against a float or float8 rhs, or float8 against float8 (no int8: float8
      // takes that role).
      return (is_float(lhs) && (is_float(rhs) || is_f8(rhs))) || (is_f8(lhs) && is_f8(rhs));
    case ChipVersion::k8T:
      // Provisional upstream: float against float, or float/float8 against float8.
      return (is_float(lhs) && is_float(rhs)) || ((is_float(lhs) || is_f8(lhs)) && is_f8(rhs));
    case ChipVersion::kCpu:
      // The native tile GEMM has kernels for matching operand types only.
      return lhs == rhs &&
             (lhs == DType::kFloat32 || lhs == DType::kBFloat16 || lhs == DType::kInt8);
  }
  return false;
}

int TpuInfo::get_sublane_tiling(DType dtype) const noexcept {
  // bool is stored as one byte in Tessera (and numpy), so it tiles like int8; int4 and int2
  // tile by their bit width, as on a TPU (Tessera's one byte per element is host storage).
  const int bits = dtype_bits(dtype);
  if (bits <= 0) return num_sublanes;
  // Before generation 7, XLA's default layout keeps 16-bit types on the 32-bit tile and only
  // packs narrower types along the sublanes; from 7 on, every type below 32 bits packs
  // (bf16 16, int8 32). This CPU follows the newer rule: it is what kernels should target.
  const bool packs_16_bit = chip_version == ChipVersion::kCpu || generation >= 7;
  if (!packs_16_bit && (bits == 16 || bits == 32)) return num_sublanes;
  return num_sublanes * (32 / bits);
}

TpuInfo get_tpu_info() {
  TpuInfo info;
  info.chip_version = ChipVersion::kCpu;
  info.generation = 0;
  info.num_cores = detail::default_num_cores();
  // Kernels are written against the TPU's (8, 128) tile and 128-wide MXU; the native engine
  // keeps those shapes rather than the host's vector width.
  info.num_lanes = 128;
  info.num_sublanes = 8;
  info.mxu_column_size = 128;
  info.num_mxus = 0;
  info.num_accumulators = 0;
  info.vmem_capacity_bytes = detail::default_vmem_limit_bytes();
  info.cmem_capacity_bytes = 0;
  info.smem_capacity_bytes = detail::smem_capacity_bytes();
  // The host's memory, read once: sysconf(_SC_PHYS_PAGES) is a system call, and kernels that
  // pick their blocks at every call (examples::default_matmul_blocks) ask for this info each time.
  static const int64_t host_memory = sysconf_bytes(_SC_PHYS_PAGES) * sysconf_bytes(_SC_PAGESIZE);
  info.hbm_capacity_bytes = host_memory;
  // Rates stay 0 until Tessera measures them.
  info.cpu = cached_cpu_info();
  return info;
}

TpuInfo get_tpu_info_for_chip(const std::string& chip, int num_tensor_cores_per_logical_device,
                              std::source_location where) {
  const std::optional<ChipVersion> version = parse_chip(chip);
  const ChipSpec* spec = version ? find_spec(*version) : nullptr;
  if (spec == nullptr) {
    detail::raise(ErrorKind::kUnknownChip, "get_tpu_info_for_chip", where,
                  fmt::format("unknown TPU chip '{}'; the chip must be one of {} (or a device "
                              "kind such as \"TPU v5 lite\" or \"TPU7x\"); hint: use "
                              "pltpu::get_tpu_info() for this machine",
                              chip, known_chips_text()));
  }
  const int n = num_tensor_cores_per_logical_device;
  if (n != 1 && !(n == 2 && spec->supports_megacore)) {
    // For n == 2, say why this chip cannot: it has one TensorCore, or two without megacore.
    const char* name = to_string(spec->version);
    std::string why;
    if (n == 2) {
      why = spec->physical_tensor_cores == 1
                ? fmt::format(" ({} has 1 TensorCore per chip)", name)
                : fmt::format(" ({} has 2 TensorCores per chip but no megacore mode)", name);
    }
    detail::raise(ErrorKind::kInvalidArgument, "get_tpu_info_for_chip", where,
                  fmt::format("num_tensor_cores_per_logical_device is {} for chip '{}'; it must "
                              "be 1, or 2 on the megacore chips v4 and v5p{}; hint: pass 1 "
                              "(one TensorCore per device)",
                              n, name, why));
  }
  return info_from_spec(*spec, n);
}

std::vector<std::string> known_chips() {
  std::vector<std::string> names;
  names.reserve(kChips.size());
  for (const ChipSpec& s : kChips) names.emplace_back(to_string(s.version));
  return names;
}

}  // namespace tessera::pltpu
