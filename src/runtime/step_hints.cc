// Step hints: the calling thread's current hints, and the prefetch queue's filling and draining.
#include "runtime/step_hints.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/cpu_caches.h"
#include "tessera/ref.h"
#include "tessera/tpu_info.h"

namespace tessera::detail {

namespace {
thread_local StepHints* t_step_hints = nullptr;
}  // namespace

StepHints* step_hints() noexcept { return t_step_hints; }

namespace {
std::atomic<int> g_prefetch_override{-1};
}  // namespace

void set_prefetch_next_blocks_for_test(int mode) noexcept {
  g_prefetch_override.store(mode, std::memory_order_relaxed);
}

namespace {
// The L1 data cache as the CPU reports it (sysfs / sysconf, read once); 32 KiB, the smallest of
// current x86 and Arm server cores, when it reports nothing.
int64_t l1d_bytes() noexcept {
  static const int64_t l1d = reported_cache_bytes(&pltpu::CpuInfo::l1d_bytes, int64_t{32} << 10);
  return l1d;
}

bool intel_cpu() noexcept {
  static const bool intel = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    return std::strcmp(vendor, "GenuineIntel") == 0;
#else
    return false;
#endif
  }();
  return intel;
}
}  // namespace

bool prefetch_next_blocks(int64_t step_lines) noexcept {
  const int forced = g_prefetch_override.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  return !intel_cpu() || step_lines * 64 <= l1d_bytes() / 4;
}

// Lines beyond half the L1 go to L2 everywhere (they would evict the step's own rows). Fewer go
// to L1 on Intel cores only: on an AMD Zen 4 class EPYC the pipelined add's small blocks ran
// faster with every prefetch sent to L2 ((8, 128) on one core 46.7-47.7 -> 38.9-39.5 ms, on two
// 27.8-30.7 -> 23.7-24.8; (8, 64) 4-11% faster; Highway's AVX-512 and AVX2 targets alike),
// while on a Sapphire Rapids class Xeon L2 measured no better (docs/performance.md, "Small blocks:
// the next ones prefetched on Intel too" and "Small blocks' prefetches to L2 on AMD").
namespace {
bool prefetch_to_l2(int64_t lines) noexcept { return !intel_cpu() || lines * 64 > l1d_bytes() / 2; }
}  // namespace

void choose_prefetch_level(PrefetchQueue& q, int64_t lines) noexcept {
  q.to_l2 = prefetch_to_l2(lines);
}

namespace {
std::atomic<int> g_distance_override{-1};

// The core's L2 as the CPU reports it (read once); 0 when it reports none, which turns off the
// choices that depend on it.
int64_t l2_bytes() noexcept {
  static const int64_t l2 = reported_cache_bytes(&pltpu::CpuInfo::l2_bytes, 0);
  return l2;
}
}  // namespace

void set_prefetch_distance_for_test(int distance) noexcept {
  g_distance_override.store(distance, std::memory_order_relaxed);
}

int prefetch_distance(int64_t step_rows, int64_t step_lines) noexcept {
  const int forced = g_distance_override.load(std::memory_order_relaxed);
  if (forced == 1 || forced == 2) return forced;
  const bool fits = step_lines > 0 && step_lines <= l2_bytes() / 64 / 3;  // L2 unknown: none
  return prefetch_to_l2(step_lines) && step_rows >= 32 && fits ? 2 : 1;
}

namespace {
std::atomic<int64_t> g_lead_override{-1};
}  // namespace

void set_prefetch_lead_rows_for_test(int64_t rows) noexcept {
  g_lead_override.store(rows, std::memory_order_relaxed);
}

int64_t prefetch_lead_rows(int64_t block_rows, int64_t step_rows, int64_t step_lines) noexcept {
  if (block_rows < 2) return 0;
  const int64_t forced = g_lead_override.load(std::memory_order_relaxed);
  if (forced >= 0) return std::min(forced, block_rows - 1);
  const int64_t quarter = l2_bytes() / 4;
  if (prefetch_distance(step_rows, step_lines) != 1 || !prefetch_to_l2(step_lines) ||
      step_rows < 32 || quarter <= 0 || step_lines <= quarter / 64) {
    return 0;
  }
  // block_rows * quarter / (step_lines * 64), in floating point: the rows may be any int64.
  const double lead = static_cast<double>(block_rows) * static_cast<double>(quarter) /
                      (static_cast<double>(step_lines) * 64.0);
  return std::clamp<int64_t>(static_cast<int64_t>(lead), 1, block_rows - 1);
}

HintsScope::HintsScope(StepHints* h) noexcept : saved_(t_step_hints) { t_step_hints = h; }
HintsScope::~HintsScope() { t_step_hints = saved_; }

int64_t queue_prefetch(PrefetchQueue& q, const RawRef& hbm) {
  if (q.num == PrefetchQueue::kMaxBlocks || hbm.shape.size() == 0) return 0;
  const int item = itemsize(hbm.dtype);
  PrefetchQueue::Block b;
  b.base = static_cast<const std::byte*>(hbm.data);
  int r = hbm.shape.rank();
  while (r > 0 && hbm.shape[r - 1] == 1) --r;
  if (r == 0) {
    b.row_bytes = item;
  } else {
    if (hbm.strides[r - 1] != 1) return 0;
    b.row_bytes = hbm.shape[r - 1] * item;
    int outer = 0;
    for (int d = r - 2; d >= 0; --d) {
      if (hbm.shape[d] == 1) continue;
      if (outer == 0) {
        b.n1 = hbm.shape[d];
        b.s1 = hbm.strides[d] * item;
      } else if (outer == 1) {
        b.n2 = hbm.shape[d];
        b.s2 = hbm.strides[d] * item;
      } else {
        return 0;
      }
      ++outer;
    }
  }
  q.blocks[q.num++] = b;
  return b.n1 * b.n2 * ((b.row_bytes + 126) / 64);  // a row may straddle one more line
}

void drain_prefetch(PrefetchQueue& q, int64_t stored_bytes) noexcept {
  q.materialize();
  q.credit += stored_bytes * q.ratio_q8;
  int64_t lines = q.credit >> 14;  // one line per 64 bytes x 256
  q.credit -= lines << 14;
  while (lines > 0 && q.cur < q.num) {
    const PrefetchQueue::Block& b = q.blocks[q.cur];
    const std::byte* row = b.base + q.r1 * b.s1 + q.r2 * b.s2;
    const auto first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{63};
    const auto end = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(b.row_bytes);
    for (; lines > 0; --lines) {
      const uintptr_t line = first + static_cast<uintptr_t>(q.byte);
      if (line >= end) break;
      // GCC and Clang map locality 2 to prefetcht1 (L2 and outwards) and 3 to prefetcht0.
      if (q.to_l2)
        __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
      else
        __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
      q.byte += 64;
    }
    if (first + static_cast<uintptr_t>(q.byte) < end) continue;
    q.byte = 0;
    if (++q.r1 < b.n1) continue;
    q.r1 = 0;
    if (++q.r2 < b.n2) continue;
    q.r2 = 0;
    ++q.cur;
  }
}

}  // namespace tessera::detail
