// The per-kernel summary and its lints. Everything here is measured from the events, except the
// FLOP counts of VPU expressions (one op per element per elementwise node, at the destination's
// size: an estimate where a subexpression broadcasts) and the peaks, which come from the
// calibration file. docs/tracing.md lists the lints and their thresholds.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "trace/analysis.h"

namespace tessera::trace::detail {

namespace {

// Lint thresholds (docs/tracing.md).
constexpr int64_t kTinyBlockBytes = 16 * 1024;  // average DMA smaller than this ...
constexpr int64_t kTinyBlockMinDmas = 32;       // ... over at least this many DMAs
constexpr double kOverheadFraction = 0.5;       // step time outside ops, copies and waits
constexpr int64_t kOverheadMinSteps = 16;
constexpr double kIdleFraction = 0.05;  // a core idle this much of a launch with fewer steps

bool is_hbm(MemorySpace s) { return s == MemorySpace::HBM || s == MemorySpace::ANY; }

std::string bytes_str(int64_t b) {
  const auto d = static_cast<double>(b);
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", d / (1 << 30));
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", d / (1 << 20));
  if (b >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", d / (1 << 10));
  return fmt::format("{} B", b);
}

std::string time_str(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}

// Per (launch, core): what its steps contain.
struct CoreLaunch {
  std::vector<const Event*> steps;
  std::vector<const Event*> work;  // ops, waits and copies (things a step's time is spent on)
  int64_t core_ns = 0;
  std::map<const void*, std::pair<int64_t, int>> whole;  // array -> (bytes, pipelines)
};

// Per kernel: the times the derived fractions are computed from.
struct KernelTimes {
  int64_t copy_ns = 0;       // in copied DMAs
  int64_t dma_wait_ns = 0;   // in waits for DMAs
  int64_t step_ns = 0;       // in innermost grid steps
  int64_t step_work_ns = 0;  // in ops, copies and waits inside innermost grid steps
};

using PerCore = std::map<std::pair<int, int>, CoreLaunch>;  // (launch, core) -> contents

// One summary per kernel name, in order of first launch, with its launch count, core count and
// wall time; `kernel_of[l]` is launch l's summary.
std::vector<KernelSummary> group_launches(const Collected& c, std::vector<size_t>& kernel_of) {
  std::vector<KernelSummary> out;
  std::map<std::string, size_t> index;  // kernel name -> position in out
  kernel_of.assign(c.launches.size(), 0);
  for (size_t l = 0; l < c.launches.size(); ++l) {
    const LaunchRecord& r = c.launches[l];
    auto [it, fresh] = index.emplace(r.kernel, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().kernel = r.kernel;
    }
    KernelSummary& s = out[it->second];
    ++s.launches;
    s.cores = std::max(s.cores, r.num_cores);
    s.wall_s += static_cast<double>(r.t1 - r.t0) * 1e-9;
    kernel_of[l] = it->second;
  }
  return out;
}

// Adds one event to its kernel's totals and files it under its (launch, core).
void add_event(const Event& e, KernelSummary& s, KernelTimes& t, CoreLaunch& cl) {
  switch (e.kind) {
    case Kind::kCore:
      cl.core_ns = e.t1 - e.t0;
      break;
    case Kind::kStep:
      cl.steps.push_back(&e);
      break;
    case Kind::kVpu:
    case Kind::kMxu:
      s.flops += e.flops;
      cl.work.push_back(&e);
      break;
    case Kind::kWait:
      if (e.dma_wait) t.dma_wait_ns += e.t1 - e.t0;
      cl.work.push_back(&e);
      break;
    case Kind::kDma:
      ++s.dmas;
      if (is_hbm(e.src) && !is_hbm(e.dst)) s.bytes_in += e.bytes;
      if (!is_hbm(e.src) && is_hbm(e.dst)) s.bytes_out += e.bytes;
      if (e.mode == DmaMode::kCopied) {
        s.bytes_copied += e.bytes;
        t.copy_ns += e.t1 - e.t0;
        cl.work.push_back(&e);
      }
      if (e.mode == DmaMode::kPrefetched) s.bytes_prefetched += e.bytes;
      break;
    case Kind::kWholeArray: {
      auto& w = cl.whole[e.addr];
      w.first = e.bytes;
      ++w.second;
      break;
    }
  }
}

// Counts the innermost grid steps of one core's launch (a step that contains the next one is an
// outer step, left out so that nested pipelines are not counted twice) and the time its ops,
// copies and waits take inside them.
void count_steps(CoreLaunch& cl, KernelSummary& s, KernelTimes& t) {
  std::sort(cl.steps.begin(), cl.steps.end(),
            [](const Event* a, const Event* b) { return a->t0 < b->t0; });
  std::sort(cl.work.begin(), cl.work.end(),
            [](const Event* a, const Event* b) { return a->t0 < b->t0; });
  size_t w = 0;
  for (size_t i = 0; i < cl.steps.size(); ++i) {
    const Event& st = *cl.steps[i];
    const bool outer = i + 1 < cl.steps.size() && cl.steps[i + 1]->t0 < st.t1;
    if (outer) continue;
    ++s.grid_steps;
    t.step_ns += st.t1 - st.t0;
    while (w < cl.work.size() && cl.work[w]->t0 < st.t0) ++w;
    for (size_t j = w; j < cl.work.size() && cl.work[j]->t0 < st.t1; ++j) {
      t.step_work_ns += std::min(cl.work[j]->t1, st.t1) - cl.work[j]->t0;
    }
  }
}

// The lint for whole-array blocks that one core's launch set up more than once.
void lint_whole_array(int core, const CoreLaunch& cl, KernelSummary& s) {
  int operands = 0;
  int times = 0;
  int64_t bytes = 0;
  for (const auto& [addr, info] : cl.whole) {
    if (info.second < 2) continue;
    ++operands;
    times = std::max(times, info.second);
    bytes += info.first;
  }
  if (operands > 0) {
    s.lints.push_back(fmt::format(
        "whole-array block in a loop: on core {} {} pipeline operand{} whose BlockSpec covers "
        "the whole array ({} in all) {} set up {} times in one launch, so each pipeline moves "
        "the whole array again; copy it once outside the loop (pl::run_scoped + sync_copy) or "
        "give it a block that moves with the grid",
        core, operands, operands == 1 ? "" : "s", bytes_str(bytes), operands == 1 ? "was" : "were",
        times));
  }
}

// The lint for a launch whose cores ran different numbers of grid steps, one per core that ran
// fewer than the most and idled a noticeable part of the launch.
void lint_uneven_split(int launch, const std::vector<std::pair<int, const CoreLaunch*>>& cls,
                       const LaunchRecord& r, KernelSummary& s) {
  int64_t max_steps = 0, min_steps = INT64_MAX;
  for (const auto& [core, cl] : cls) {
    const auto n = static_cast<int64_t>(cl->steps.size());
    max_steps = std::max(max_steps, n);
    min_steps = std::min(min_steps, n);
  }
  const int64_t wall = std::max<int64_t>(r.t1 - r.t0, 1);
  if (max_steps == 0 || min_steps == max_steps) return;
  for (const auto& [core, cl] : cls) {
    const auto n = static_cast<int64_t>(cl->steps.size());
    const double idle = 1.0 - static_cast<double>(cl->core_ns) / static_cast<double>(wall);
    if (n < max_steps && idle > kIdleFraction) {
      s.lints.push_back(fmt::format(
          "uneven PARALLEL split: in launch {} core {} ran {} grid steps while another ran {}, "
          "and it idled {:.0f}% of the launch; make the PARALLEL axis a multiple of the {} "
          "cores (or split a larger axis)",
          launch, core, n, max_steps, idle * 100, r.num_cores));
    }
  }
}

// Steps: overhead, the split over cores, whole-array blocks re-copied.
void summarize_steps(const Collected& c, const std::vector<size_t>& kernel_of, PerCore& per_core,
                     std::vector<KernelSummary>& out, std::vector<KernelTimes>& times) {
  std::map<int, std::vector<std::pair<int, const CoreLaunch*>>> by_launch;
  for (auto& [key, cl] : per_core) {
    const size_t k = kernel_of[static_cast<size_t>(key.first)];
    by_launch[key.first].push_back({key.second, &cl});
    count_steps(cl, out[k], times[k]);
    lint_whole_array(key.second, cl, out[k]);
  }
  for (const auto& [launch, cls] : by_launch) {
    const size_t k = kernel_of[static_cast<size_t>(launch)];
    lint_uneven_split(launch, cls, c.launches[static_cast<size_t>(launch)], out[k]);
  }
}

// The rates and fractions of one kernel's summary, and its lints on block size and step
// overhead.
void finish_kernel(KernelSummary& s, const KernelTimes& t, const std::optional<Calibration>& cal) {
  const double wall = std::max(s.wall_s, 1e-12);
  s.gbps = static_cast<double>(s.bytes_in + s.bytes_out) / wall * 1e-9;
  s.gflops = static_cast<double>(s.flops) / wall * 1e-9;
  const double core_ns = wall * 1e9 * std::max(s.cores, 1);
  s.dma_copy_fraction = static_cast<double>(t.copy_ns) / core_ns;
  s.dma_wait_fraction = static_cast<double>(t.dma_wait_ns) / core_ns;
  if (t.step_ns > 0) {
    s.mean_step_s = static_cast<double>(t.step_ns) * 1e-9 / static_cast<double>(s.grid_steps);
    s.step_overhead_fraction =
        std::max(0.0, 1.0 - static_cast<double>(t.step_work_ns) / static_cast<double>(t.step_ns));
  }
  if (cal) {
    if (cal->peak_gbps() > 0) s.pct_peak_gbps = 100.0 * s.gbps / cal->peak_gbps();
    const double peak = cal->fma_gflops_per_core * std::max(s.cores, 1);
    if (peak > 0) s.pct_peak_gflops = 100.0 * s.gflops / peak;
  }
  if (s.dmas >= kTinyBlockMinDmas && (s.bytes_in + s.bytes_out) / s.dmas < kTinyBlockBytes) {
    s.lints.push_back(fmt::format(
        "tiny blocks: {} DMAs of {} on average; below about {} per block the fixed cost of each "
        "DMA and grid step dominates, so use larger blocks (e.g. (128, 128) f32 = 64 KiB or "
        "more)",
        s.dmas, bytes_str((s.bytes_in + s.bytes_out) / s.dmas), bytes_str(kTinyBlockBytes)));
  }
  if (s.grid_steps >= kOverheadMinSteps && s.step_overhead_fraction > kOverheadFraction) {
    s.lints.push_back(fmt::format(
        "per-step overhead dominates: {:.0f}% of grid-step time ({} per step) is spent outside "
        "ops, copies and waits; fewer, larger steps amortise it",
        s.step_overhead_fraction * 100,
        time_str(static_cast<double>(t.step_ns) * 1e-9 * s.step_overhead_fraction /
                 static_cast<double>(s.grid_steps))));
  }
}

}  // namespace

std::vector<KernelSummary> summarize(const Collected& c, const std::optional<Calibration>& cal) {
  std::vector<size_t> kernel_of;
  std::vector<KernelSummary> out = group_launches(c, kernel_of);
  PerCore per_core;
  std::vector<KernelTimes> times(out.size());
  for (const Event& e : c.events) {
    if (e.launch < 0 || static_cast<size_t>(e.launch) >= c.launches.size()) continue;
    const size_t k = kernel_of[static_cast<size_t>(e.launch)];
    add_event(e, out[k], times[k], per_core[{e.launch, e.core}]);
  }
  summarize_steps(c, kernel_of, per_core, out, times);
  for (size_t k = 0; k < out.size(); ++k) finish_kernel(out[k], times[k], cal);
  return out;
}

std::string summary_text(const std::vector<KernelSummary>& sums, const Collected& c,
                         const std::string& calibration_note) {
  std::string out =
      fmt::format("tessera trace: {} launch{} of {} kernel{}, {} events, {}\n", c.launches.size(),
                  c.launches.size() == 1 ? "" : "es", sums.size(), sums.size() == 1 ? "" : "s",
                  c.events.size(), time_str(static_cast<double>(c.duration_ns) * 1e-9));
  if (c.dropped > 0) {
    out += fmt::format(
        "  warning: {} events were dropped (no memory for trace buffers); the "
        "figures below miss them\n",
        c.dropped);
  }
  for (const KernelSummary& s : sums) {
    out += fmt::format("kernel '{}' ({} launch{}, {} core{})\n", s.kernel, s.launches,
                       s.launches == 1 ? "" : "es", s.cores, s.cores == 1 ? "" : "s");
    out += fmt::format("  wall time     {}\n", time_str(s.wall_s));
    out += fmt::format(
        "  HBM->VMEM     {}   VMEM->HBM {}   ({} copied, {} prefetched, the rest "
        "elided: used where it lies)\n",
        bytes_str(s.bytes_in), bytes_str(s.bytes_out), bytes_str(s.bytes_copied),
        bytes_str(s.bytes_prefetched));
    out += fmt::format("  bandwidth     {:.2f} GB/s{}\n", s.gbps,
                       s.pct_peak_gbps >= 0
                           ? fmt::format("  ({:.0f}% of the calibrated peak)", s.pct_peak_gbps)
                           : std::string());
    out +=
        fmt::format("  compute       {:.4g} GFLOP, {:.2f} GFLOP/s{}\n",
                    static_cast<double>(s.flops) * 1e-9, s.gflops,
                    s.pct_peak_gflops >= 0
                        ? fmt::format("  ({:.1f}% of the calibrated FMA peak)", s.pct_peak_gflops)
                        : std::string());
    out += fmt::format("  DMA stall     {:.1f}% of core time copying, {:.1f}% waiting\n",
                       s.dma_copy_fraction * 100, s.dma_wait_fraction * 100);
    if (s.grid_steps > 0) {
      out += fmt::format(
          "  grid steps    {} ({} per step, {:.0f}% of it outside ops, copies and "
          "waits)\n",
          s.grid_steps, time_str(s.mean_step_s), s.step_overhead_fraction * 100);
    }
    for (const std::string& l : s.lints) out += "  lint: " + l + "\n";
  }
  out += "  peaks: " + calibration_note + "\n";
  return out;
}

}  // namespace tessera::trace::detail
