// `tessera bench suite [--json] [--quick]`: every benchmark of `tessera bench` at the sizes the
// performance targets name (docs/performance.md), one line (one JSON object with --json) per
// benchmark, a progress line per benchmark on stderr. Each line has the common fields of
// suite_line; `detail` is what the benchmark's own --json prints.
#include <cstdint>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bench_timing.h"
#include "matmul.h"
#include "tessera/tessera.h"

namespace tessera::cli {

namespace {

// One line of `bench suite --json`: the common fields of every benchmark. `rate` and
// `ref_rate` are in `unit` (higher is better), so `ratio` > 1 means ours is faster.
nlohmann::ordered_json suite_line(const std::string& kernel, nlohmann::json shape,
                                  const std::string& dtype, int cores, double secs, double rate,
                                  const std::string& unit, const std::string& ref_name,
                                  double ref_rate, nlohmann::json detail) {
  nlohmann::ordered_json j;
  j["kernel"] = kernel;
  j["shape"] = std::move(shape);
  j["dtype"] = dtype;
  j["cores"] = cores;
  j["seconds"] = secs;
  j["rate"] = rate;
  j["unit"] = unit;
  j["reference"] = {{"name", ref_name}, {"rate", ref_rate}};
  j["ratio"] = rate / ref_rate;
  const pltpu::CpuInfo cpu = *pltpu::get_tpu_info().cpu;
  j["cpu"] = {{"model", cpu.model}, {"simd_target", cpu.simd_target}};
  j["detail"] = std::move(detail);
  return j;
}

struct Item {
  std::string what;
  std::function<nlohmann::ordered_json()> run;
};

// The pipelined add: 8192^2 with (128, 128) blocks on all cores and on one, the other block
// shapes the targets compare, and the smaller sizes.
void add_items(std::vector<Item>& items, int cores, bool quick, int reps) {
  struct Case {
    int64_t n, bm, bn;
    int cores;
  };
  const int64_t big = quick ? 512 : 8192;
  std::vector<Case> cases = {{big, 128, 128, cores}};
  if (cores > 1) cases.push_back({big, 128, 128, 1});
  cases.push_back({big, 512, 512, cores});
  cases.push_back({big, 8, 128, cores});
  if (!quick) {
    cases.push_back({2048, 128, 128, cores});
    cases.push_back({4096, 128, 128, cores});
  }
  for (const Case& c : cases) {
    const std::string what = "add " + std::to_string(c.n) + "^2 f32, (" + std::to_string(c.bm) +
                             ", " + std::to_string(c.bn) + ") blocks, " + std::to_string(c.cores) +
                             (c.cores == 1 ? " core" : " cores");
    items.push_back({what, [c, reps] {
                       AddOptions o;
                       o.n = c.n;
                       o.bm = c.bm;
                       o.bn = c.bn;
                       o.cores = c.cores;
                       o.repeats = reps;
                       const nlohmann::json d = bench_add(o);
                       const double bytes = 12.0 * static_cast<double>(c.n * c.n);
                       return suite_line(
                           "add", {c.n, c.n}, "f32", c.cores, d["seconds"]["median"].get<double>(),
                           d["gbps"].get<double>(), "GB/s", "plain loop (OpenMP)",
                           bytes / d["reference"]["seconds"]["median"].get<double>() / 1e9, d);
                     }});
  }
}

// The empty-body pipeline's cost per step, and the tiny launch.
void overhead_items(std::vector<Item>& items, int cores, bool quick) {
  const int64_t steps = quick ? 256 : 4096;
  items.push_back({"steps " + std::to_string(steps) + " (empty body, 1 core)", [steps, quick] {
                     const nlohmann::json d = bench_steps(steps, 1, quick ? 3 : 21);
                     const double per_step = d["seconds_per_step"]["median"].get<double>();
                     return suite_line("steps", {steps}, "f32", 1,
                                       per_step * static_cast<double>(steps), 1.0 / per_step,
                                       "steps/s", "target: 100 ns per step", 1e7, d);
                   }});
  items.push_back({"launch (" + std::to_string(cores) + " cores)", [cores, quick] {
                     // Fresh processes: one process's launch and OpenMP figures are one draw
                     // (bench_launch.cc).
                     const nlohmann::json d =
                         quick ? bench_launch(cores, 3, 50) : bench_launch_processes(cores, 9, 5);
                     const double t = d["seconds"]["median"].get<double>();
                     const double tr = d["reference"]["seconds"]["median"].get<double>();
                     return suite_line("launch", {128 * cores}, "f32", cores, t, 1.0 / t,
                                       "launches/s", "OpenMP parallel region", 1.0 / tr, d);
                   }});
}

// The Pallas matmul: float32 at every size the targets name, bfloat16 at 2048^3 and 4096^3,
// with the blocks chosen from this CPU's caches.
void matmul_items(std::vector<Item>& items, int cores, bool quick) {
  struct Case {
    int64_t size;
    const char* dtype;
    int repeats;
  };
  std::vector<Case> cases;
  if (quick) {
    cases = {{256, "f32", 2}, {256, "bf16", 2}};
  } else {
    cases = {{512, "f32", 21}, {1024, "f32", 11}, {2048, "f32", 7},
             {4096, "f32", 3}, {2048, "bf16", 7}, {4096, "bf16", 3}};
  }
  for (const Case& c : cases) {
    items.push_back(
        {"matmul " + std::to_string(c.size) + "^3 " + c.dtype, [c, cores, quick] {
           const int64_t s = c.size;
           const int64_t blk = quick ? 128 : 0;  // 0: chosen from the CPU's caches
           MatmulBenchOptions o{s, s, s, blk, blk, blk, c.dtype, cores, c.repeats, true};
           const nlohmann::json d = *matmul_bench_json(o, false);
           const double t = d["seconds"]["median"].get<double>();
           double best_t = 0;
           for (const auto& r : d["references"]) {
             if (r["name"] == d["best_reference"]) best_t = r["seconds"]["median"].get<double>();
           }
           const double flops = 2.0 * static_cast<double>(s * s * s);
           return suite_line("matmul", {s, s, s}, c.dtype, cores, t, flops / t / 1e9, "GFLOP/s",
                             d["best_reference"].get<std::string>(), flops / best_t / 1e9, d);
         }});
  }
}

// Decode-sized dots against oneDNN, and bfloat16 -> float32 conversion against memcpy.
void dot_items(std::vector<Item>& items, bool quick) {
  for (const DotBenchOptions& shape : dot_shapes(quick)) {
    DotBenchOptions d = shape;
    d.repeats = quick ? 2 : 7;
    items.push_back({"dot " + dot_label(d), [d] {
                       const nlohmann::json j = dot_bench_json(d);
                       const double t = j["seconds"]["median"].get<double>();
                       return suite_line("dot", {d.m, d.n, d.k}, d.dtype, 1, t,
                                         j["gflops"].get<double>(), "GFLOP/s",
                                         j["reference"]["name"].get<std::string>(),
                                         j["reference"]["gflops"].get<double>(), j);
                     }});
  }
  for (const int64_t rows : {int64_t{128}, int64_t{512}}) {
    items.push_back({"convert bf16->f32 (" + std::to_string(rows) + ", 128)", [rows, quick] {
                       const nlohmann::json j = convert_bench_json(rows, 128, quick ? 2 : 7);
                       const double t = j["seconds"]["median"].get<double>();
                       // Rates in the memcpy's terms (the float32 result's bytes, read + written).
                       const double bytes = 8.0 * static_cast<double>(rows * 128);
                       return suite_line("convert", j["shape"], "bf16->f32", 1, t, bytes / t / 1e9,
                                         "GB/s", j["reference"]["name"].get<std::string>(),
                                         j["reference"]["gbps"].get<double>(), j);
                     }});
  }
}

// Whether a line's own correctness check passed (exact adds, launches and int8 dots).
bool line_ok(const nlohmann::ordered_json& line) {
  const auto& d = line["detail"];
  if (line["kernel"] == "add" && d.contains("max_error")) return d["max_error"] == 0;
  if (d.contains("right")) return d["right"].get<bool>();
  if (line["kernel"] == "dot" && line["dtype"] == "int8") {
    return d["max_abs_diff_from_reference"] == 0;
  }
  return true;
}

void print_line(const nlohmann::ordered_json& line, bool json) {
  if (json) {
    std::cout << line.dump() << "\n" << std::flush;
    return;
  }
  std::cout << line["kernel"].get<std::string>() << " " << line["shape"].dump() << " "
            << line["dtype"].get<std::string>() << ", " << line["cores"].get<int>()
            << " cores: " << line["rate"].get<double>() << " " << line["unit"].get<std::string>()
            << " vs " << line["reference"]["name"].get<std::string>() << " "
            << line["reference"]["rate"].get<double>() << ", ratio " << line["ratio"].get<double>()
            << "\n"
            << std::flush;
}

}  // namespace

std::vector<DotBenchOptions> dot_shapes(bool quick) {
  std::vector<DotBenchOptions> v;
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    if (quick) {
      v.push_back(DotBenchOptions{8, 64, 64, dtype, true, 2});
      continue;
    }
    for (const int64_t m : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{16}, int64_t{32}}) {
      v.push_back(DotBenchOptions{m, 512, 128, dtype, true, 7});
    }
    for (const int64_t m : {int64_t{1}, int64_t{8}, int64_t{32}}) {
      v.push_back(DotBenchOptions{m, 256, 4096, dtype, true, 7});
    }
    v.push_back(DotBenchOptions{8, 512, 128, dtype, false, 7});
    v.push_back(DotBenchOptions{8, 256, 4096, dtype, false, 7});  // x @ y with a long k
  }
  return v;
}

std::string dot_label(const DotBenchOptions& d) {
  return d.dtype + " (" + std::to_string(d.m) + ", " + std::to_string(d.k) + ") x " +
         (d.transpose_rhs ? "(" + std::to_string(d.n) + ", " + std::to_string(d.k) + ").T"
                          : "(" + std::to_string(d.k) + ", " + std::to_string(d.n) + ")");
}

int run_suite(int cores, bool quick, bool json, int repeats_override) {
  const pltpu::CpuInfo cpu = *pltpu::get_tpu_info().cpu;
  const int reps = repeats_override > 0 ? repeats_override : (quick ? 2 : 7);
  std::vector<Item> items;
  add_items(items, cores, quick, reps);
  overhead_items(items, cores, quick);
  matmul_items(items, cores, quick);
  dot_items(items, quick);
  std::cerr << "tessera bench suite: " << items.size() << " benchmarks on " << cpu.model << " ("
            << cpu.simd_target << "), " << cores << " cores" << (quick ? ", quick sizes" : "")
            << "\n";
  int i = 0;
  bool ok = true;
  for (const Item& it : items) {
    std::cerr << "tessera bench suite: [" << ++i << "/" << items.size() << "] " << it.what << "\n"
              << std::flush;
    // The throughput probe before and after the benchmark, on the calling thread
    // (bench_timing.h): how much of its core this thread got around the figures.
    const double probe_before = throughput_probe_ns();
    nlohmann::ordered_json line = it.run();
    line["throughput_probe_ns"] = {{"before", probe_before}, {"after", throughput_probe_ns()}};
    ok = line_ok(line) && ok;
    print_line(line, json);
  }
  return ok ? 0 : 1;
}

}  // namespace tessera::cli
