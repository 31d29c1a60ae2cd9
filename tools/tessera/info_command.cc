// `tessera info`: prints `pltpu::get_tpu_info()` (this machine as a chip) or, with `--chip`,
// `pltpu::get_tpu_info_for_chip()` (a TPU generation's per-TensorCore table).
//
//   tessera info                  # aligned table: cores, VMEM/SMEM limits, caches, SIMD target
//   tessera info --json           # one JSON object, every TpuInfo field by its snake_case name
//   tessera info --chip v5e       # the v5e table
//   tessera info --chip v5p --cores 2 --json   # megacore v5p
//   tessera info --calibrate      # measure bandwidth and FMA peak, cache them for traces
#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "int_option.h"
#include "tessera/error.h"
#include "tessera/tpu_info.h"
#include "tessera/trace.h"

namespace {

using tessera::pltpu::CpuInfo;
using tessera::pltpu::SparseCoreInfo;
using tessera::pltpu::TpuInfo;

/// What `tessera info` was asked for. Shared with the callback, which runs after parsing.
struct InfoOptions {
  bool json = false;
  std::string chip = "cpu";
  int cores = 1;
  bool calibrate = false;
};

/// printf into a std::string (the CLI does not link fmt; the library keeps it private).
template <class... Args>
std::string printf_string(const char* spec, Args... args) {
  const int n = std::snprintf(nullptr, 0, spec, args...);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

/// "128 MiB (134217728 bytes)", "17.2 GB (17200000000 bytes)", "23.5 GiB (25275990016 bytes)".
/// Round decimal sizes (the TPU tables' HBM and CMEM) get decimal units; everything else
/// (VMEM, caches, physical memory) the largest binary unit that fits.
/// With `exact` false, only the scaled figure ("512 KiB").
std::string bytes_text(int64_t bytes, bool exact = true) {
  const std::string raw = printf_string("%" PRId64 " bytes", bytes);
  if (bytes < 1024) return raw;
  const auto with_raw = [&](const std::string& scaled) {
    return exact ? scaled + " (" + raw + ")" : scaled;
  };
  static constexpr const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB"};
  static constexpr const char* kDecimal[] = {"kB", "MB", "GB", "TB"};
  if (bytes % 1'000'000 == 0) {
    double scaled = static_cast<double>(bytes) / 1e6;
    int i = 1;
    while (i < 3 && scaled >= 1000.0) {
      scaled /= 1000.0;
      ++i;
    }
    return with_raw(printf_string("%.6g %s", scaled, kDecimal[i]));
  }
  int i = 0;
  while (i < 3 && bytes >= (int64_t{1} << (10 * (i + 2)))) ++i;
  const int64_t unit = int64_t{1} << (10 * (i + 1));
  if (bytes % unit == 0) {
    return with_raw(printf_string("%" PRId64 " %s", bytes / unit, kBinary[i]));
  }
  return with_raw(
      printf_string("%.1f %s", static_cast<double>(bytes) / static_cast<double>(unit), kBinary[i]));
}

/// A rate in the unit the TPU tables use ("820 GB/s", "197 TFLOP/s"); 0 says why it is 0.
std::string rate_text(int64_t value, double unit, const char* unit_name, bool is_cpu) {
  if (value == 0) return is_cpu ? "0 (not measured yet)" : "0 (not available)";
  return printf_string("%.7g %s", static_cast<double>(value) / unit, unit_name);
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

/// Rows of label/value pairs, printed with the values aligned in one column.
class Table {
 public:
  void add(std::string label, std::string value) {
    rows_.emplace_back(std::move(label), std::move(value));
  }
  void print(std::ostream& out) const {
    size_t width = 0;
    for (const auto& row : rows_) width = std::max(width, row.first.size());
    for (const auto& [label, value] : rows_) {
      out << label << std::string(width + 3 - label.size(), ' ') << value << '\n';
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

void print_table(const TpuInfo& info, std::ostream& out) {
  const bool is_cpu = info.chip_version == tessera::pltpu::ChipVersion::kCpu;
  out << (is_cpu ? "This machine as a chip (per mesh core)\n"
                 : "TPU " + std::string(to_string(info.chip_version)) + " (per TensorCore)\n");
  Table t;
  t.add("chip", to_string(info.chip_version));
  t.add("generation", std::to_string(info.generation));
  t.add("num_cores", std::to_string(info.num_cores) +
                         (is_cpu ? " (mesh cores by default)" : " (TensorCores per device)"));
  if (!is_cpu) {
    t.add("lite", yes_no(info.is_lite()));
    t.add("megacore", yes_no(info.is_megacore()));
  }
  t.add("tile (sublanes x lanes)",
        std::to_string(info.num_sublanes) + " x " + std::to_string(info.num_lanes));
  t.add("mxu_column_size", std::to_string(info.mxu_column_size));
  t.add("num_mxus", std::to_string(info.num_mxus));
  t.add("num_accumulators", std::to_string(info.num_accumulators));
  t.add("vmem_capacity", bytes_text(info.vmem_capacity_bytes));
  t.add("cmem_capacity", bytes_text(info.cmem_capacity_bytes));
  t.add("smem_capacity", bytes_text(info.smem_capacity_bytes));
  t.add(is_cpu ? "hbm_capacity (memory)" : "hbm_capacity", bytes_text(info.hbm_capacity_bytes));
  t.add("mem_bw", rate_text(info.mem_bw_bytes_per_second, 1e9, "GB/s", is_cpu));
  t.add("bf16_ops", rate_text(info.bf16_ops_per_second, 1e12, "TFLOP/s", is_cpu));
  t.add("int8_ops", rate_text(info.int8_ops_per_second, 1e12, "TOP/s", is_cpu));
  t.add("fp8_ops", rate_text(info.fp8_ops_per_second, 1e12, "TFLOP/s", is_cpu));
  t.add("int4_ops", rate_text(info.int4_ops_per_second, 1e12, "TOP/s", is_cpu));
  if (const auto& sc = info.sparse_core) {
    t.add("sparse_core",
          printf_string("%d cores x %d subcores, %d lanes, %s VMEM per subcore, %d B DMA granule",
                        sc->num_cores, sc->num_subcores, sc->num_lanes,
                        bytes_text(sc->vmem_capacity_bytes, false).c_str(),
                        sc->dma_granule_size_bytes));
  } else if (!is_cpu) {
    t.add("sparse_core", "none");
  }
  if (const auto& cpu = info.cpu) {
    t.add("cpu.model", cpu->model);
    t.add("cpu.hardware_threads", std::to_string(cpu->hardware_threads));
    t.add("cpu.l1d (per core)", bytes_text(cpu->l1d_bytes));
    t.add("cpu.l2 (per core)", bytes_text(cpu->l2_bytes));
    t.add("cpu.l3 (shared)", bytes_text(cpu->l3_bytes));
    t.add("cpu.simd_target",
          cpu->simd_target + " (" + std::to_string(cpu->simd_width_bits) + "-bit vectors)");
    t.add("cpu.avx512_bf16", yes_no(cpu->has_avx512_bf16));
    t.add("cpu.amx", yes_no(cpu->has_amx));
  }
  t.print(out);
}

nlohmann::ordered_json sparse_core_json(const SparseCoreInfo& sc) {
  return {{"num_cores", sc.num_cores},
          {"num_subcores", sc.num_subcores},
          {"num_lanes", sc.num_lanes},
          {"vmem_capacity_bytes", sc.vmem_capacity_bytes},
          {"dma_granule_size_bytes", sc.dma_granule_size_bytes}};
}

nlohmann::ordered_json cpu_json(const CpuInfo& cpu) {
  return {{"model", cpu.model},
          {"hardware_threads", cpu.hardware_threads},
          {"l1d_bytes", cpu.l1d_bytes},
          {"l2_bytes", cpu.l2_bytes},
          {"l3_bytes", cpu.l3_bytes},
          {"simd_target", cpu.simd_target},
          {"simd_width_bits", cpu.simd_width_bits},
          {"has_avx512_bf16", cpu.has_avx512_bf16},
          {"has_amx", cpu.has_amx}};
}

/// Every TpuInfo field in declaration order (ordered_json keeps it), plus the derived
/// properties; `cpu` appears only for this machine, `sparse_core` is null where absent.
nlohmann::ordered_json info_json(const TpuInfo& info) {
  nlohmann::ordered_json j;
  j["chip_version"] = to_string(info.chip_version);
  j["generation"] = info.generation;
  j["num_cores"] = info.num_cores;
  j["num_lanes"] = info.num_lanes;
  j["num_sublanes"] = info.num_sublanes;
  j["mxu_column_size"] = info.mxu_column_size;
  j["num_mxus"] = info.num_mxus;
  j["num_accumulators"] = info.num_accumulators;
  j["vmem_capacity_bytes"] = info.vmem_capacity_bytes;
  j["cmem_capacity_bytes"] = info.cmem_capacity_bytes;
  j["smem_capacity_bytes"] = info.smem_capacity_bytes;
  j["hbm_capacity_bytes"] = info.hbm_capacity_bytes;
  j["mem_bw_bytes_per_second"] = info.mem_bw_bytes_per_second;
  j["bf16_ops_per_second"] = info.bf16_ops_per_second;
  j["int8_ops_per_second"] = info.int8_ops_per_second;
  j["fp8_ops_per_second"] = info.fp8_ops_per_second;
  j["int4_ops_per_second"] = info.int4_ops_per_second;
  j["sparse_core"] = info.sparse_core ? sparse_core_json(*info.sparse_core) : nullptr;
  if (info.cpu) j["cpu"] = cpu_json(*info.cpu);
  j["is_lite"] = info.is_lite();
  j["is_megacore"] = info.is_megacore();
  j["is_split_chip"] = info.is_split_chip();
  return j;
}

bool is_this_machine(const std::string& chip) {
  if (chip.size() != 3) return false;
  std::string lower = chip;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "cpu";
}

void run_info(const InfoOptions& opts, bool cores_given) {
  TpuInfo info;
  if (is_this_machine(opts.chip)) {
    if (cores_given) {
      throw CLI::ValidationError(
          "--cores",
          "applies only to a TPU chip (e.g. --chip v5p --cores 2); this machine's "
          "core count comes from TESSERA_NUM_CORES or the hardware threads");
    }
    info = tessera::pltpu::get_tpu_info();
  } else {
    // An unknown name throws tessera::UsageError (main prints it); a core count the chip cannot
    // take is reported against --cores.
    info = tessera::pltpu::get_tpu_info_for_chip(opts.chip, 1);
    if (opts.cores != 1) {
      try {
        info = tessera::pltpu::get_tpu_info_for_chip(opts.chip, opts.cores);
      } catch (const tessera::Error&) {
        throw CLI::ValidationError(
            "--cores",
            std::to_string(opts.cores) + " TensorCores per device is not possible on " + opts.chip +
                ": only the megacore chips v4 and v5p take 2; use --cores 1 (or omit it)");
      }
    }
  }
  if (opts.json) {
    std::cout << info_json(info).dump(2) << '\n';
  } else {
    print_table(info, std::cout);
  }
}

/// `tessera info --calibrate`: measures this machine's bandwidth and FMA peak, caches them for
/// the trace summary's "% of peak", and prints them.
void run_calibrate(bool json) {
  const int cores = tessera::pltpu::get_tpu_info().num_cores;
  if (!json) {
    std::cerr << "tessera info --calibrate: measuring memory bandwidth and FMA peak on " << cores
              << " cores (a few seconds)...\n";
  }
  const tessera::trace::Calibration c = tessera::trace::calibrate(cores);
  const std::string path = tessera::trace::save_calibration(c);
  if (json) {
    nlohmann::json j;
    j["cores"] = c.cores;
    j["add_gbps"] = c.add_gbps;
    j["copy_gbps"] = c.copy_gbps;
    j["fma_gflops"] = c.fma_gflops;
    j["fma_gflops_per_core"] = c.fma_gflops_per_core;
    j["path"] = path;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << printf_string(
                   "memory bandwidth  %.1f GB/s (STREAM add c = a + b), %.1f GB/s (copy), "
                   "%d cores\n",
                   c.add_gbps, c.copy_gbps, c.cores)
            << printf_string("f32 FMA peak      %.1f GFLOP/s (%d cores), %.1f GFLOP/s per core\n",
                             c.fma_gflops, c.cores, c.fma_gflops_per_core)
            << "cached in         " << path << "\n";
}

std::string known_chips_list() {
  std::string out;
  for (const std::string& name : tessera::pltpu::known_chips()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

void register_info_command(CLI::App& app) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* info = app.add_subcommand(
      "info",
      "Show this machine as a TPU chip (cores, VMEM/SMEM, caches, SIMD target), or a TPU "
      "generation's per-TensorCore table with --chip");
  info->footer("Chips: cpu (this machine, the default), " + known_chips_list() +
               "; Pallas device kinds such as \"TPU v5 lite\" or \"TPU7x\" work too.\n"
               "TPU values are per TensorCore, as pltpu.get_tpu_info() reports them.\n"
               "Examples:\n"
               "  tessera info\n"
               "  tessera info --chip v5e\n"
               "  tessera info --chip v5p --cores 2 --json\n");
  info->add_flag("--json", opts->json,
                 "Print one JSON object with every TpuInfo field by its snake_case name");
  CLI::Option* chip =
      info->add_option("--chip", opts->chip, "The chip to describe: cpu, or a TPU generation")
          ->type_name("NAME")
          ->capture_default_str();
  CLI::Option* cores = info->add_option("--cores", opts->cores,
                                        "TensorCores per device with --chip: 1, or 2 for "
                                        "megacore on v4 / v5p")
                           ->type_name("N")
                           ->capture_default_str()
                           ->check(tessera::cli::integer_in(1, 2))
                           ->needs(chip);
  info->add_flag("--calibrate", opts->calibrate,
                 "Measure this machine's memory bandwidth and f32 FMA peak and cache them "
                 "($XDG_CACHE_HOME/tessera/calibration.json, default ~/.cache/tessera) for the "
                 "trace summary's % of peak")
      ->excludes(chip);
  info->callback([opts, cores] {
    if (opts->calibrate) {
      run_calibrate(opts->json);
      return;
    }
    run_info(*opts, cores->count() > 0);
  });
}
