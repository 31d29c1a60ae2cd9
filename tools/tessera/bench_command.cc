// `tessera bench add --size N --cores C --repeats R [--json]`: the pipelined add (Pallas'
// pipelining tutorial) on N x N float32 against a plain multi-threaded loop computing the same sum,
// alternating the two so that both see the same machine state. Prints one JSON object with --json
// (docs/performance.md lists its fields).
#include "bench_command.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "int_option.h"
#include "matmul.h"
#include "pipelined_add.h"
#include "tessera/tessera.h"

namespace tessera::cli {

namespace {
int run_add(int64_t n, int cores, int repeats, bool json, const std::string& trace_path,
            bool check) {
  Array<float> x({n, n});
  Array<float> y({n, n});
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : x) v = d(rng);
  for (float& v : y) v = d(rng);
  const double bytes = 3.0 * 4.0 * static_cast<double>(n) * static_cast<double>(n);

  auto plain = [&] {
    Array<float> o(detail::Uninitialized{}, x.shape());
    const float* xp = x.data();
    const float* yp = y.data();
    float* op = o.data();
    const int64_t total = o.size();
#pragma omp parallel for num_threads(cores) schedule(static)
    for (int64_t i = 0; i < total; ++i) op[i] = xp[i] + yp[i];
    return o;
  };
  // Warm up both (pages, pools, caches of freed blocks), then alternate.
  double max_error = 0;
  {
    const Array<float> o = examples::pipelined_add(x, y, cores);
    for (int64_t i = 0; i < o.size(); ++i) {
      max_error = std::max(max_error, static_cast<double>(std::fabs(o[i] - (x[i] + y[i]))));
    }
    (void)plain();
  }
  std::vector<double> t_pipe, t_plain;
  {
    // With --trace the timed runs of the pipeline are traced (the plain loop has no kernels),
    // so the timings include what tracing costs; the summary goes to stderr.
    std::optional<trace::Session> session;
    if (!trace_path.empty()) {
      trace::Options o;
      o.trace_path = trace_path;
      session.emplace(std::move(o));
    }
    Progress progress("tessera bench add", repeats);
    for (int r = 0; r < repeats; ++r) {
      t_pipe.push_back(seconds([&] { (void)examples::pipelined_add(x, y, cores); }));
      t_plain.push_back(seconds([&] { (void)plain(); }));
      progress.done(r + 1);
    }
  }
  std::vector<double> t_checked;
  if (check) {
    const pltpu::ForceTpuInterpretMode force;
    (void)examples::pipelined_add(x, y, cores);  // warm-up, and any diagnostic
    for (int r = 0; r < repeats; ++r) {
      t_checked.push_back(seconds([&] { (void)examples::pipelined_add(x, y, cores); }));
    }
  }
  const Stats sp = stats_of(t_pipe);
  const Stats sr = stats_of(t_plain);
  nlohmann::json j;
  j["kernel"] = "add";
  j["dtype"] = "f32";
  j["shape"] = {n, n};
  j["cores"] = cores;
  j["block"] = {128, 128};
  j["seconds"] = {{"min", sp.min}, {"median", sp.median}, {"max", sp.max}};
  j["gbps"] = bytes / sp.median / 1e9;
  j["max_error"] = max_error;
  j["traced"] = !trace_path.empty();
  j["reference"] = {{"name", "plain loop (OpenMP)"},
                    {"seconds", {{"min", sr.min}, {"median", sr.median}, {"max", sr.max}}},
                    {"gbps", bytes / sr.median / 1e9}};
  j["ratio_gbps"] = sr.median / sp.median;
  // Each repeat times the two back to back, so their ratio cancels the drift of this machine's
  // memory bandwidth between repeats; the median of those ratios is the steadier figure.
  std::vector<double> paired;
  for (size_t r = 0; r < t_pipe.size(); ++r) paired.push_back(t_plain[r] / t_pipe[r]);
  const double ratio_paired = stats_of(paired).median;
  j["ratio_paired"] = ratio_paired;
  if (!t_checked.empty()) {
    const Stats sc = stats_of(t_checked);
    j["checked"] = {{"seconds", {{"min", sc.min}, {"median", sc.median}, {"max", sc.max}}},
                    {"over_native", sc.median / sp.median}};
  }
  if (json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "add " << n << "x" << n << " f32 on " << cores << " cores, " << repeats
              << " repeats (medians): pipeline " << sp.median * 1e3 << " ms ("
              << bytes / sp.median / 1e9 << " GB/s), plain loop " << sr.median * 1e3 << " ms ("
              << bytes / sr.median / 1e9 << " GB/s), ratio " << sr.median / sp.median
              << " (median of paired repeats " << ratio_paired << ")"
              << ", max error " << max_error << "\n";
    if (!t_checked.empty()) {
      const Stats sc = stats_of(t_checked);
      std::cout << "checked mode: " << sc.median * 1e3 << " ms, " << sc.median / sp.median
                << "x native\n";
    }
  }
  return max_error == 0 ? 0 : 1;
}
}  // namespace

void register_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand(
      "bench",
      "Time a kernel against a reference computed in the same process.\nKernels:\n  "
      "add     the pipelined add (emit_pipeline, 128x128 blocks) vs a plain loop\n  "
      "matmul  the Pallas matmul tutorial (pallas_call + jnp::dot) vs oneDNN and OpenBLAS");
  static std::string kernel;
  static int64_t size = 8192;
  static int cores = 0;
  static int repeats = 5;
  static bool json = false;
  static std::string trace_path;
  bench->add_option("kernel", kernel, "The kernel to time")
      ->required()
      ->check(CLI::IsMember({"add", "matmul"}));
  bench->add_option("--size", size, "N for N x N inputs (default 8192)")
      ->check(integer_in(1, 65536));
  bench->add_option("--cores", cores, "Mesh cores (default: this machine's)")
      ->check(integer_in(1, 256));
  bench->add_option("--repeats", repeats, "Timed repetitions (default 5)")
      ->check(integer_in(1, 1000));
  bench->add_flag("--json", json, "Print one JSON object (fields: docs/performance.md)");
  bench
      ->add_option("--trace", trace_path,
                   "Trace the timed runs of the Tessera kernel (Chrome JSON to FILE, summary to "
                   "stderr); the timings then include tracing's cost")
      ->type_name("FILE");
  static bool check = false;
  bench->add_flag("--check", check,
                  "Also time the kernel in checked mode (docs/checked-mode.md) and report its "
                  "ratio to native");
  static MatmulBenchOptions mm{2048,
                               2048,
                               2048,
                               examples::kDefaultMatmulBlocks.bm,
                               examples::kDefaultMatmulBlocks.bn,
                               examples::kDefaultMatmulBlocks.bk,
                               "f32",
                               0,
                               5,
                               false};
  bench->add_option("--m", mm.m, "matmul: M (default 2048)")->check(integer_in(1, 1 << 16));
  bench->add_option("--n", mm.n, "matmul: N (default 2048)")->check(integer_in(1, 1 << 16));
  bench->add_option("--k", mm.k, "matmul: K (default 2048)")->check(integer_in(1, 1 << 16));
  bench->add_option("--bm", mm.bm, "matmul: block rows (default: the example's)")
      ->check(integer_in(1, 1 << 16));
  bench->add_option("--bn", mm.bn, "matmul: block columns")->check(integer_in(1, 1 << 16));
  bench->add_option("--bk", mm.bk, "matmul: block depth")->check(integer_in(1, 1 << 16));
  bench->add_option("--dtype", mm.dtype, "matmul: f32 or bf16 (default f32)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  bench->callback([] {
    const int c = cores > 0 ? cores : pltpu::get_tpu_info().num_cores;
    if (kernel == "matmul") {
      mm.cores = c;
      mm.repeats = repeats;
      mm.json = json;
      mm.trace_path = trace_path;
      mm.check = check;
      const int rc = run_matmul_bench(mm);
      if (rc != 0) throw CLI::RuntimeError(rc);
      return;
    }
    const int rc = run_add(size, c, repeats, json, trace_path, check);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tessera::cli
