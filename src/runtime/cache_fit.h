// Internal: whether a pipeline's arrays stay in this machine's caches from one pass to the next,
// which decides between regular and streaming (non-temporal) stores into its outputs.
#pragma once

#include <cstdint>
#include <mutex>

namespace tessera::detail {

/// Answers "does a working set of `bytes` stay in cache between two passes over it?" from the
/// cache sizes the CPU reports and, where those cannot settle it, one measurement per size class.
///
/// A virtual machine may report its host's whole last-level cache (480 MiB on one machine here)
/// while other tenants and the host's other cores share it, so an array "fits" the report and is
/// evicted anyway; a regular store then pays a read for ownership of every line it writes, and a
/// streaming store would have been 1.2-1.5x faster (docs/performance.md). So:
///   - larger than the reported last-level cache, or no cache reported: does not stay;
///   - at most `trusted` bytes (twice the core's L2): stays;
///   - otherwise the size is rounded up to a power of two (at most the reported cache) and the
///     probe times a read of a buffer of that size written just before, against the same read of
///     a `trusted`-sized buffer: it stays when it reads at least `kFitRatio` as fast (as fast as
///     the faster of two reference reads, the second made before a class is taken to fit). Answers
///     are kept, and used both ways (a size class that stays implies every smaller one does; one
///     that does not implies every larger one does not).
/// A slow probe of the class (the thread descheduled) can only make a working set look larger
/// than the cache, i.e. choose streaming stores, which costs a cache-resident output a re-read
/// from memory and never changes a result. A slow reference would do the opposite, which costs
/// more (regular stores into an output that leaves the cache), hence its second read.
class CacheFit {
 public:
  /// Read bandwidth (any unit; only ratios are used) of a `bytes`-sized buffer written just
  /// before the read.
  using Probe = double (*)(int64_t bytes);
  static constexpr double kFitRatio = 0.7;

  CacheFit(int64_t reported_llc, int64_t trusted, Probe probe)
      : llc_(reported_llc), trusted_(trusted), probe_(probe) {}

  bool stays(int64_t bytes);
  /// Probes made so far (for tests).
  int probes() const { return probes_; }

 private:
  int64_t size_class(int64_t bytes) const;

  int64_t llc_;
  int64_t trusted_;
  Probe probe_;
  std::mutex mu_;
  double reference_ = 0;       // the trusted size's bandwidth, once measured
  int64_t largest_fit_ = 0;    // the largest size class seen to stay
  int64_t smallest_miss_ = 0;  // the smallest size class seen not to (0: none)
  int probes_ = 0;
};

/// The process's answer for this machine (CPUID's cache sizes and `measure_read_bandwidth`).
bool stays_in_cache(int64_t bytes);

/// Reads a freshly written `bytes`-sized buffer a few times and returns the best rate in bytes
/// per second (the buffer is allocated and freed inside).
double measure_read_bandwidth(int64_t bytes);

}  // namespace tessera::detail
