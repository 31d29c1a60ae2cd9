// Internal: the books of a checked launch, shared by the files of the checked engine
// (checked.cc: launch and rules; checked_shadow.cc: shadow memory and compute hooks;
// checked_sync.cc: copies, semaphores, races and deadlocks). Nothing outside src/check includes
// this; the engine's hooks (checked.cc) call in through checked.h.
//
// Books, and who touches them:
//   - VMEM / SMEM shadow ("written" byte map) and the in-flight DMA list: one core only (VMEM,
//     SMEM and DMA semaphores are per core), so no lock.
//   - vector clocks, semaphore clocks, HBM shadow and HBM access history, blocked/finished
//     cores: the launch's mutex.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "check/checked.h"

namespace tessera::detail {

using VC = std::vector<uint32_t>;

constexpr int64_t kMaxRuns = 16384;       // beyond: a view is judged by its bounding range
constexpr size_t kHistorySoftCap = 64;    // prune ordered accesses above this
constexpr size_t kHistoryHardCap = 1024;  // then drop the oldest (may miss races, never false)

struct Run {
  uintptr_t lo;
  uintptr_t hi;
};

// The bytes of a strided view as sorted, merged [lo, hi) runs.
struct Runs {
  std::vector<Run> v;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  bool empty() const noexcept { return v.empty(); }
};

Runs runs_of(const void* data, DType dtype, const Shape& shape, const SmallVec& strides);
Runs runs_of(const RawRef& r);
// The first byte both cover, or 0.
uintptr_t overlap(const Runs& a, const Runs& b);

// Shadow buffers are kept for reuse, zeroed, keyed by size: a fresh calloc of a large shadow
// costs a page fault per 4 KiB on first touch, every launch.
class ShadowCache {
 public:
  static ShadowCache& instance() {
    static ShadowCache* c = new ShadowCache();  // never destroyed: cores may outlive statics
    return *c;
  }
  uint8_t* take(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(n);
      if (it != free_.end()) {
        uint8_t* p = it->second;
        free_.erase(it);
        cached_ -= n;
        return p;
      }
    }
    auto* p = static_cast<uint8_t*>(std::calloc(n, 1));
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  // `p` must be all zero again.
  void give(uint8_t* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + n > kMaxCached) {
      std::free(p);
      return;
    }
    free_.emplace(n, p);
    cached_ += n;
  }

 private:
  static constexpr size_t kMaxCached = size_t{1} << 30;
  std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;
  size_t cached_ = 0;
};

// A region with a "written" shadow byte per 2^shift bytes (init == null: always written). VMEM
// and SMEM hold every dtype (shift 0); an HBM array has one shadow byte per element.
struct Region {
  uintptr_t base = 0;
  int64_t bytes = 0;
  uint8_t* init = nullptr;
  int shift = 0;
  bool owned = false;
  size_t dirty = 0;  // shadow cells below this may be non-zero
  bool contains(uintptr_t p) const noexcept {
    return p >= base && p < base + static_cast<uintptr_t>(bytes);
  }
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() { reset(); }
  size_t cells() const noexcept {
    return static_cast<size_t>(std::max<int64_t>(bytes >> shift, 1));
  }
  void reset() noexcept {
    if (owned) {
      std::memset(init, 0, std::min(dirty, cells()));
      ShadowCache::instance().give(init, cells());
    }
    dirty = 0;
    init = nullptr;
    owned = false;
    base = 0;
    bytes = 0;
  }
  uint8_t* at(uintptr_t p) const noexcept { return init + ((p - base) >> shift); }
  void allocate() {
    init = ShadowCache::instance().take(cells());
    owned = true;
    dirty = 0;
  }
  void touched(const uint8_t* last) noexcept {
    dirty = std::max(dirty, static_cast<size_t>(last - init) + 1);
  }
};

// The address of the first unwritten byte of `runs` in `reg`, or 0.
uintptr_t first_unwritten(const Region& reg, const Runs& runs);
// Fills fresh memory with the poison of `mode` for `dtype`.
void fill_poison(void* data, int64_t bytes, DType dtype, pltpu::UninitializedMemory mode);

struct Dma {
  uint64_t id = 0;
  RawRef src;
  RawRef dst;
  SemaphoreCell* sem = nullptr;
  int64_t bytes = 0;
  std::source_location made;
  std::source_location started;
  Runs src_runs;
  Runs dst_runs;
  bool executed = false;
  VC vc_start;
};

// A view of an HBM array as a box of array coordinates [lo, hi) per axis (`ok` false when the
// view's strides do not map onto the array's axes; then its byte runs decide).
struct Box {
  bool ok = false;
  int rank = 0;
  int64_t lo[8] = {};
  int64_t hi[8] = {};
};

struct HbmAccess {
  Box box;
  Runs runs;
  int core = 0;
  uint32_t end = 0;
  VC start;
  bool write = false;
  std::source_location where;
  const char* op = "";
};

struct HbmBuffer {
  Region region;
  DType dtype = DType::kFloat32;
  Shape shape;
  bool is_output = false;
  int index = 0;
  std::vector<HbmAccess> history;
  size_t prune_at = kHistorySoftCap;  // the history size at which ordered accesses are pruned
};

struct Blocked {
  bool on = false;
  SemaphoreCell* cell = nullptr;
  int64_t amount = 0;
  std::string what;
  const char* op = "";
  const char* unit = "";
  std::source_location where;
  std::vector<int64_t> step;
};

struct CheckedCore {
  CheckedLaunch* launch = nullptr;
  int core = 0;
  Region vmem;
  Region smem;
  std::vector<Dma> inflight;
  std::mt19937_64 rng;
  // Names of fresh buffers (pipeline windows, run_scoped), newest last; a later buffer at the
  // same bytes shadows an earlier one.
  struct Named {
    uintptr_t lo, hi;
    std::string what;
  };
  std::vector<Named> names;
};

struct CheckedLaunch {
  const LaunchSpec* spec = nullptr;
  pltpu::InterpretParams params;
  std::optional<pltpu::TpuInfo> chip;
  int num_cores = 1;
  int64_t vmem_limit = 0;
  std::vector<std::unique_ptr<HbmBuffer>> hbm;
  std::vector<std::unique_ptr<CheckedCore>> cores;
  std::mutex mu;
  std::vector<VC> vc;
  std::map<std::pair<int, int64_t>, VC> sem_vc;
  std::vector<Blocked> blocked;
  std::vector<uint8_t> finished;
  bool deadlock_reported = false;
  uint64_t next_dma = 1;
};

// " element (i, j)" of the element of an array at `addr`, or "" for rank 0.
std::string elem_at(uintptr_t addr, uintptr_t base, DType dtype, const Shape& shape);
// The HBM buffer holding `p`, or null.
HbmBuffer* hbm_of(CheckedLaunch& L, uintptr_t p);
// Names the memory at `addr` for messages.
std::string describe(const CoreContext& ctx, uintptr_t addr);
bool is_hbm(CheckedCore& cc, uintptr_t p);
// Names an in-flight copy for messages.
std::string dma_text(const CoreContext& ctx, const Dma& d);
// Moves a copy's bytes and their shadow.
void move_bytes(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& src_runs,
                const Runs& dst_runs);
// Runs an in-flight copy: moves its bytes and signals its semaphore.
void execute(CoreContext& ctx, Dma& d);
CheckedCore& core_of(const CoreContext& ctx);
// Compute reading (`write` false) or writing `runs` against the core's in-flight copies.
void check_compute_vs_dma(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                          std::source_location where);

}  // namespace tessera::detail
