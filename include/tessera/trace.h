// File: tessera/trace.h
//
// Tracing: what every core did during a run, on any machine. A `trace::Session` records, while it
// lives, every kernel launched in the process: per core, the launch, each grid step, each DMA
// (bytes, source and destination memory spaces, and whether the native engine copied it, used
// the block where it lies — elided — or prefetched it), each semaphore or DMA wait (the stall),
// and each VPU expression and MXU product (name, FLOPs, bytes). When it stops it writes what was
// asked for: a Chrome Trace Event JSON file (open it in https://ui.perfetto.dev), a per-core
// SVG timeline, and a per-kernel summary (time, bytes HBM<->VMEM, GB/s, FLOP/s, % of this
// machine's calibrated peaks, DMA stall, and lints).
//
//   {
//     tessera::trace::Session trace({.trace_path = "add.json", .timeline_path = "add.svg"});
//     auto o = add(x, y);
//   }   // writes add.json and add.svg, prints the summary to stderr
//
// The environment variable TESSERA_TRACE=file.json traces every kernel of the process and writes
// the file (and the summary, to stderr) at exit; `tessera run <example> --trace F` does the same
// for one example. Tracing is off by default; when off, each hook costs one relaxed atomic load
// at coarse points (launch, grid step, DMA, wait, op), never per element. The CMake option
// TESSERA_ENABLE_TRACE=OFF compiles the hooks out; a Session then throws a UsageError saying so.
//
// One session records at a time (a second one throws UsageError). Stop a session (or let it go
// out of scope) when no kernel is running. The event schema and the lints: docs/tracing.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace tessera::trace {

/// This machine's measured peaks (`tessera info --calibrate`), cached in
/// $XDG_CACHE_HOME/tessera/calibration.json (default ~/.cache/tessera/calibration.json).
struct Calibration {
  int cores = 0;          // threads used for the measurement
  double add_gbps = 0;    // STREAM add c = a + b (bytes read + written), all cores
  double copy_gbps = 0;   // copy (bytes read + written), all cores
  double fma_gflops = 0;  // f32 FMA peak, all cores (2 FLOPs per FMA)
  double fma_gflops_per_core = 0;
  double peak_gbps() const noexcept { return add_gbps > copy_gbps ? add_gbps : copy_gbps; }
};

/// Measures this machine with `cores` threads (about two seconds).
Calibration calibrate(int cores);
/// Where the calibration is cached. Throws UsageError when neither XDG_CACHE_HOME nor HOME is set.
std::string calibration_path();
/// Writes `c` to calibration_path() (creating its folder); returns the path. Throws UsageError
/// naming the path and the reason when it cannot be written.
std::string save_calibration(const Calibration& c);
/// The cached calibration, or nothing when there is none. Throws UsageError when the file exists
/// but cannot be read or is damaged (naming it, and how to redo it).
std::optional<Calibration> load_calibration();

/// What a traced run of one kernel (all its launches together) did.
struct KernelSummary {
  std::string kernel;
  int launches = 0;
  int cores = 0;
  double wall_s = 0;             // sum of its launches' wall time
  int64_t bytes_in = 0;          // HBM -> VMEM/SMEM, as the kernel asked (copied + elided)
  int64_t bytes_out = 0;         // VMEM/SMEM -> HBM
  int64_t bytes_copied = 0;      // of both, what the native engine really copied
  int64_t bytes_prefetched = 0;  // of bytes_in, elided blocks whose lines were prefetched
  int64_t dmas = 0;              // DMA events (copied, elided or prefetched)
  int64_t flops = 0;             // VPU + MXU
  int64_t grid_steps = 0;        // innermost grid steps, over all cores and launches
  double mean_step_s = 0;        // their mean duration
  double gbps = 0;               // (bytes_in + bytes_out) / wall
  double gflops = 0;
  double pct_peak_gbps = -1;          // of the calibrated bandwidth; -1 without a calibration
  double pct_peak_gflops = -1;        // of the calibrated FMA peak for `cores` cores
  double dma_copy_fraction = 0;       // of core time (wall x cores): copying
  double dma_wait_fraction = 0;       // of core time: blocked in DMA waits
  double step_overhead_fraction = 0;  // of grid-step time: outside ops, copies and waits
  std::vector<std::string> lints;
};

/// What a Session writes when it stops. Empty paths write nothing.
struct Options {
  std::string trace_path;     // Chrome Trace Event JSON
  std::string timeline_path;  // SVG timeline
  bool print_summary = true;  // the per-kernel summary, to `summary_stream` (default: stderr)
  std::ostream* summary_stream = nullptr;
};

/// True when this build records traces (TESSERA_ENABLE_TRACE=ON).
bool compiled_in() noexcept;

/// A trace session: records from construction until stop() or destruction. Construction checks
/// that the output paths can be written (UsageError naming the path otherwise).
class [[nodiscard]] Session {
 public:
  explicit Session(Options options = {},
                   std::source_location where = std::source_location::current());
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Stops recording and writes the outputs (once; later calls do nothing). Throws UsageError
  /// when a file cannot be written. The destructor stops too, and prints such errors to stderr.
  void stop();

  /// After stop(): the per-kernel summaries, the summary as text, the Chrome JSON, the SVG.
  const std::vector<KernelSummary>& summary() const;
  std::string summary_text() const;
  std::string chrome_json() const;
  std::string timeline_svg() const;
  /// After stop(): the number of events recorded.
  size_t num_events() const;

 private:
  struct Data;
  std::unique_ptr<Data> data_;
};

}  // namespace tessera::trace
