// The checked engine: shadow memory, DMA execution modes, vector-clock race detection, deadlock
// detection, capacity and block-shape rules. See checked.h for where the native code calls in,
// and docs/checked-mode.md for the diagnostics.
//
// Books, and who touches them:
//   - VMEM / SMEM shadow ("written" byte map) and the in-flight DMA list: one core only (VMEM,
//     SMEM and DMA semaphores are per core), so no lock.
//   - vector clocks, semaphore clocks, HBM shadow and HBM access history, blocked/finished
//     cores: the launch's mutex.
//
// Race model. Each core has a vector clock; its own entry ticks at every DMA start, DMA wait,
// sync copy and signal. A signal joins the signaller's clock into the semaphore's clock, a
// successful wait joins the semaphore's clock into the waiter's (core_barrier is signals plus a
// wait). HBM is only touched by DMAs: a DMA's accesses are recorded when it completes, with the
// issuer's clock at its start and the issuer's epoch at its completion; an earlier access E and
// a new access N (at least one a write, bytes overlapping) are ordered iff E.end <=
// N.start[E.core]. Within a core, compute and DMAs race when compute touches bytes of a copy that
// was started and not yet waited (whatever the execution mode: on a TPU the copy may land at any
// time in between), and two in-flight copies race when one writes bytes the other reads or writes.
#include "check/checked.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "core/messages.h"
#include "tessera/error.h"

namespace tessera::detail {

namespace {

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

Runs runs_of(const void* data, DType dtype, const Shape& shape, const SmallVec& strides) {
  Runs r;
  if (shape.size() == 0 || data == nullptr) return r;
  const int64_t item = itemsize(dtype);
  struct Ax {
    int64_t n;
    int64_t s;
  };
  std::vector<Ax> ax;
  int64_t lo_off = 0;
  int64_t hi_off = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    const int64_t s = strides[d] * item;
    ax.push_back({shape[d], s});
    (s < 0 ? lo_off : hi_off) += (shape[d] - 1) * s;
  }
  const auto base = reinterpret_cast<uintptr_t>(data);
  r.lo = base + static_cast<uintptr_t>(lo_off);
  r.hi = base + static_cast<uintptr_t>(hi_off + item);
  std::sort(ax.begin(), ax.end(),
            [](const Ax& a, const Ax& b) { return std::llabs(a.s) > std::llabs(b.s); });
  int64_t run = item;
  while (!ax.empty() && ax.back().s == run) {
    run *= ax.back().n;
    ax.pop_back();
  }
  int64_t rows = 1;
  for (const Ax& a : ax) {
    rows *= a.n;
    if (rows > kMaxRuns) break;
  }
  if (rows > kMaxRuns) {
    r.v.push_back({r.lo, r.hi});
    return r;
  }
  r.v.reserve(static_cast<size_t>(rows));
  std::vector<int64_t> idx(ax.size(), 0);
  int64_t off = 0;
  for (;;) {
    const uintptr_t p = base + static_cast<uintptr_t>(off);
    r.v.push_back({p, p + static_cast<uintptr_t>(run)});
    int k = static_cast<int>(ax.size()) - 1;
    for (; k >= 0; --k) {
      const size_t ku = static_cast<size_t>(k);
      if (++idx[ku] < ax[ku].n) {
        off += ax[ku].s;
        break;
      }
      off -= (ax[ku].n - 1) * ax[ku].s;
      idx[ku] = 0;
    }
    if (k < 0) break;
  }
  std::sort(r.v.begin(), r.v.end(), [](const Run& a, const Run& b) { return a.lo < b.lo; });
  size_t w = 0;
  for (size_t i = 1; i < r.v.size(); ++i) {
    if (r.v[i].lo <= r.v[w].hi) {
      r.v[w].hi = std::max(r.v[w].hi, r.v[i].hi);
    } else {
      r.v[++w] = r.v[i];
    }
  }
  r.v.resize(w + 1);
  return r;
}

Runs runs_of(const RawRef& r) { return runs_of(r.data, r.dtype, r.shape, r.strides); }

// The first byte both cover, or 0.
uintptr_t overlap(const Runs& a, const Runs& b) {
  if (a.empty() || b.empty() || a.hi <= b.lo || b.hi <= a.lo) return 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.v.size() && j < b.v.size()) {
    if (a.v[i].hi <= b.v[j].lo) {
      ++i;
    } else if (b.v[j].hi <= a.v[i].lo) {
      ++j;
    } else {
      return std::max(a.v[i].lo, b.v[j].lo);
    }
  }
  return 0;
}

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

void mark_range(Region& reg, uintptr_t lo, uintptr_t hi, uint8_t v) {
  lo = std::max(lo, reg.base);
  hi = std::min(hi, reg.base + static_cast<uintptr_t>(reg.bytes));
  if (lo >= hi) return;
  uint8_t* first = reg.at(lo);
  uint8_t* last = reg.at(hi - 1);
  std::memset(first, v, static_cast<size_t>(last - first + 1));
  if (v != 0) reg.touched(last);
}

void mark(Region& reg, const Runs& runs, uint8_t v) {
  if (reg.init == nullptr) return;
  for (const Run& r : runs.v) mark_range(reg, r.lo, r.hi, v);
}

// The address of the first unwritten byte of [lo, hi), or 0.
uintptr_t first_unwritten_range(const Region& reg, uintptr_t lo, uintptr_t hi) {
  lo = std::max(lo, reg.base);
  hi = std::min(hi, reg.base + static_cast<uintptr_t>(reg.bytes));
  if (lo >= hi) return 0;
  const uint8_t* first = reg.at(lo);
  const uint8_t* last = reg.at(hi - 1);
  const void* z = std::memchr(first, 0, static_cast<size_t>(last - first + 1));
  if (z == nullptr) return 0;
  const auto idx = static_cast<uintptr_t>(static_cast<const uint8_t*>(z) - reg.init);
  return std::max(lo, reg.base + (idx << reg.shift));
}

uintptr_t first_unwritten(const Region& reg, const Runs& runs) {
  if (reg.init == nullptr) return 0;
  for (const Run& r : runs.v) {
    if (const uintptr_t p = first_unwritten_range(reg, r.lo, r.hi)) return p;
  }
  return 0;
}

void fill_poison(void* data, int64_t bytes, DType dtype, pltpu::UninitializedMemory mode) {
  if (bytes <= 0 || data == nullptr) return;
  if (mode == pltpu::UninitializedMemory::zero) {
    std::memset(data, 0, static_cast<size_t>(bytes));
    return;
  }
  auto fill = [&](auto v) {
    using V = decltype(v);
    V* p = static_cast<V*>(data);
    const int64_t n = bytes / static_cast<int64_t>(sizeof(V));
    std::fill(p, p + n, v);
  };
  switch (dtype) {
    case DType::kFloat32:
      fill(std::numeric_limits<float>::quiet_NaN());
      break;
    case DType::kBFloat16:
      fill(uint16_t{0x7fc0});
      break;
    case DType::kInt32:
      fill(std::numeric_limits<int32_t>::max());
      break;
    case DType::kInt8:
      fill(std::numeric_limits<int8_t>::max());
      break;
    case DType::kBool:
      fill(uint8_t{1});
      break;
    default:
      std::memset(data, 0xff, static_cast<size_t>(bytes));
  }
}

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

Box box_of(const HbmBuffer& b, const RawRef& r) {
  Box x;
  const int R = b.shape.rank();
  if (R < 1 || R > 8 || r.shape.size() == 0) return x;
  const int64_t item = itemsize(b.dtype);
  int64_t A[8];
  A[R - 1] = 1;
  for (int d = R - 2; d >= 0; --d) A[d] = A[d + 1] * b.shape[d + 1];
  int64_t off = static_cast<int64_t>(reinterpret_cast<uintptr_t>(r.data) - b.region.base) / item;
  x.rank = R;
  for (int d = 0; d < R; ++d) {
    x.lo[d] = off / A[d];
    off -= x.lo[d] * A[d];
    x.hi[d] = x.lo[d] + 1;
  }
  bool used[8] = {};
  for (int a = 0; a < r.shape.rank(); ++a) {
    const int64_t n = r.shape[a];
    const int64_t s = r.strides[a];
    if (n <= 1) continue;
    if (s <= 0) return x;
    int axis = -1;
    for (int d = 0; d < R; ++d) {
      if (!used[d] && s % A[d] == 0 && (axis < 0 || A[d] > A[axis])) axis = d;
    }
    if (axis < 0) return x;
    used[axis] = true;
    x.hi[axis] = x.lo[axis] + (n - 1) * (s / A[axis]) + 1;
    if (x.hi[axis] > b.shape[axis]) return x;
  }
  x.ok = true;
  return x;
}

// The address of the first element both boxes cover, or 0.
uintptr_t box_overlap(const HbmBuffer& b, const Box& p, const Box& q) {
  int64_t flat = 0;
  for (int d = 0; d < p.rank; ++d) {
    const int64_t lo = std::max(p.lo[d], q.lo[d]);
    if (lo >= std::min(p.hi[d], q.hi[d])) return 0;
    flat = flat * b.shape[d] + lo;
  }
  return b.region.base + static_cast<uintptr_t>(flat * itemsize(b.dtype));
}

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

}  // namespace

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

namespace {

void join(VC& into, const VC& from) {
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

std::string elem_at(uintptr_t addr, uintptr_t base, DType dtype, const Shape& shape) {
  const int64_t item = itemsize(dtype);
  const int64_t flat = static_cast<int64_t>(addr - base) / item;
  if (shape.rank() == 0) return "";
  return fmt::format(" element {}", unravel_index(flat, shape));
}

HbmBuffer* hbm_of(CheckedLaunch& L, uintptr_t p) {
  for (auto& b : L.hbm) {
    if (b->region.contains(p)) return b.get();
  }
  return nullptr;
}

// Names the memory at `addr` for messages: "output 0 float32(256,) element (130,)", "VMEM
// scratch #1 VMEM<float32>(8, 128) element (0, 3)", "a VMEM buffer (pipeline window, run_scoped
// or temporary) at byte 4096".
std::string describe(const CoreContext& ctx, uintptr_t addr) {
  CheckedCore& cc = *ctx.checked;
  CheckedLaunch& L = *cc.launch;
  if (HbmBuffer* b = hbm_of(L, addr)) {
    return fmt::format("HBM {} {} {}{}", b->is_output ? "output" : "input", b->index,
                       std::string(dtype_name(b->dtype)) + b->shape.to_string(),
                       elem_at(addr, b->region.base, b->dtype, b->shape));
  }
  const LaunchSpec& spec = *L.spec;
  for (const Region* reg : {&cc.vmem, &cc.smem}) {
    if (!reg->contains(addr)) continue;
    const MemorySpace space = reg == &cc.vmem ? MemorySpace::VMEM : MemorySpace::SMEM;
    const int64_t off = static_cast<int64_t>(addr - reg->base);
    for (size_t i = 0; i < spec.scratch.size(); ++i) {
      const ScratchRequest& r = spec.scratch[i];
      if (r.space != space || off < spec.offsets[i] || off >= spec.offsets[i] + r.bytes) continue;
      return fmt::format(
          "{} scratch #{} {}<{}>{}{}", to_string(space), i, to_string(space), dtype_name(r.dtype),
          r.shape.to_string(),
          elem_at(addr, reg->base + static_cast<uintptr_t>(spec.offsets[i]), r.dtype, r.shape));
    }
    for (auto it = cc.names.rbegin(); it != cc.names.rend(); ++it) {
      if (addr >= it->lo && addr < it->hi) {
        return fmt::format("{} (byte {} of it)", it->what, addr - it->lo);
      }
    }
    return fmt::format(
        "a {} buffer (a pipeline window or a run_scoped buffer) at byte offset {} "
        "of the core's {}",
        to_string(space), off, to_string(space));
  }
  return fmt::format("memory at {:#x}", addr);
}

Region* region_of(CoreContext& ctx, uintptr_t p) {
  CheckedCore& cc = *ctx.checked;
  if (cc.vmem.contains(p)) return &cc.vmem;
  if (cc.smem.contains(p)) return &cc.smem;
  if (HbmBuffer* b = hbm_of(*cc.launch, p)) return &b->region;
  return nullptr;
}

bool is_hbm(CheckedCore& cc, uintptr_t p) { return hbm_of(*cc.launch, p) != nullptr; }

std::string dma_text(const CoreContext& ctx, const Dma& d) {
  return fmt::format("the async copy started at {} ({} {} -> {}, {} bytes)",
                     format_location(d.started), dtype_name(d.src.dtype), d.src.shape.to_string(),
                     describe(ctx, reinterpret_cast<uintptr_t>(d.dst.data)), d.bytes);
}

// Compute reading (`write` false) or writing `runs` against the core's in-flight copies.
void check_compute_vs_dma(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                          std::source_location where) {
  CheckedCore& cc = *ctx.checked;
  if (!cc.launch->params.detect_races) return;
  for (const Dma& d : cc.inflight) {
    if (const uintptr_t p = overlap(runs, d.dst_runs)) {
      raise(ErrorKind::kRace, op, where,
            fmt::format("{} {} while {} may still be writing it (started, not yet waited); on a "
                        "TPU the copy lands at any moment until its .wait() returns: wait on the "
                        "copy before touching its destination",
                        write ? "writes" : "reads", describe(ctx, p), dma_text(ctx, d)));
    }
    if (write) {
      if (const uintptr_t p = overlap(runs, d.src_runs)) {
        raise(ErrorKind::kRace, op, where,
              fmt::format("writes {} while {} may still be reading it (started, not yet "
                          "waited); wait on the copy before overwriting its source",
                          describe(ctx, p), dma_text(ctx, d)));
      }
    }
  }
}

// A new copy (src_runs -> dst_runs) against the core's in-flight copies.
void check_dma_vs_dma(CoreContext& ctx, const Runs& src_runs, const Runs& dst_runs, const char* op,
                      std::source_location where) {
  CheckedCore& cc = *ctx.checked;
  if (!cc.launch->params.detect_races) return;
  for (const Dma& d : cc.inflight) {
    uintptr_t p = overlap(dst_runs, d.dst_runs);
    const char* how = "both write";
    if (p == 0) {
      p = overlap(dst_runs, d.src_runs);
      how = "this copy writes what the other reads:";
    }
    if (p == 0) {
      p = overlap(src_runs, d.dst_runs);
      how = "this copy reads what the other writes:";
    }
    if (p != 0) {
      raise(ErrorKind::kRace, op, where,
            fmt::format("overlaps {}, which is still in flight: {} {}; two copies in flight may "
                        "land in either order, so wait on the first before starting the second",
                        dma_text(ctx, d), how, describe(ctx, p)));
    }
  }
}

// Records DMA accesses of HBM (under the launch mutex) and checks them against other accesses.
void record_hbm(CoreContext& ctx, const RawRef& view, const Runs& runs, bool write, const VC& start,
                uint32_t end, const char* op, std::source_location where) {
  CheckedCore& cc = *ctx.checked;
  CheckedLaunch& L = *cc.launch;
  if (runs.empty() || !L.params.detect_races) return;
  HbmBuffer* b = hbm_of(L, runs.lo);
  // Inputs are read-only (HbmRef<const T>; an aliased input is its output's buffer), and reads
  // only race with writes: nothing to record.
  if (b == nullptr || !b->is_output) return;
  const Box box = box_of(*b, view);
  for (const HbmAccess& e : b->history) {
    if (!(e.write || write)) continue;
    if (e.end <= start[static_cast<size_t>(e.core)]) continue;  // ordered before this access
    const uintptr_t p = box.ok && e.box.ok ? box_overlap(*b, box, e.box) : overlap(runs, e.runs);
    if (p != 0) {
      const std::string other =
          e.core == cc.core
              ? fmt::format("an earlier {} of this core at {}", e.op, format_location(e.where))
              : fmt::format("core {}'s {} at {}", e.core, e.op, format_location(e.where));
      raise(ErrorKind::kRace, op, where,
            fmt::format("this copy {} {}, which {} {} with no happens-before order between them "
                        "(no semaphore signal/wait or core_barrier orders the two); order them "
                        "with a semaphore or core_barrier, or give each core its own part",
                        write ? "writes" : "reads", describe(ctx, p), other,
                        e.write ? "writes" : "reads"));
    }
  }
  if (b->history.size() >= b->prune_at) {
    // An access every live core's clock has passed is ordered before all future ones.
    std::vector<HbmAccess>& h = b->history;
    h.erase(
        std::remove_if(h.begin(), h.end(),
                       [&](const HbmAccess& e) {
                         for (int c = 0; c < L.num_cores; ++c) {
                           if (L.finished[static_cast<size_t>(c)]) continue;
                           if (L.vc[static_cast<size_t>(c)][static_cast<size_t>(e.core)] < e.end)
                             return false;
                         }
                         return true;
                       }),
        h.end());
    if (h.size() >= kHistoryHardCap)
      h.erase(h.begin(), h.begin() + static_cast<long>(h.size() / 2));
    b->prune_at = std::max(kHistorySoftCap, 2 * h.size());
  }
  HbmAccess acc{box, {}, cc.core, end, start, write, where, op};
  if (!box.ok) acc.runs = runs;  // boxes are enough where they exist
  b->history.push_back(std::move(acc));
}

// Copies the shadow of src's elements to dst's (same shapes).
void copy_shadow(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& dst_runs) {
  Region* dreg = region_of(ctx, dst_runs.lo);
  if (dreg == nullptr || dreg->init == nullptr) return;
  Region* sreg = region_of(ctx, reinterpret_cast<uintptr_t>(src.data));
  if (sreg == nullptr || sreg->init == nullptr) {
    mark(*dreg, dst_runs, 1);
    return;
  }
  const int rank = src.shape.rank();
  const int64_t item = itemsize(src.dtype);
  const auto s0 = reinterpret_cast<uintptr_t>(src.data);
  const auto d0 = reinterpret_cast<uintptr_t>(dst.data);
  auto element = [&](uintptr_t sp, uintptr_t dp) {
    const bool written = first_unwritten_range(*sreg, sp, sp + static_cast<uintptr_t>(item)) == 0;
    mark_range(*dreg, dp, dp + static_cast<uintptr_t>(item), written ? 1 : 0);
  };
  if (rank == 0) {
    element(s0, d0);
    return;
  }
  const int64_t n = src.shape[rank - 1];
  const int64_t ss = src.strides[rank - 1] * item;
  const int64_t ds = dst.strides[rank - 1] * item;
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (;;) {
    int64_t so = 0;
    int64_t dof = 0;
    for (int a = 0; a < rank - 1; ++a) {
      so += idx[static_cast<size_t>(a)] * src.strides[a] * item;
      dof += idx[static_cast<size_t>(a)] * dst.strides[a] * item;
    }
    const uintptr_t sp = s0 + static_cast<uintptr_t>(so);
    const uintptr_t dp = d0 + static_cast<uintptr_t>(dof);
    const auto len = static_cast<uintptr_t>(n * item);
    if (ss == item && ds == item && first_unwritten_range(*sreg, sp, sp + len) == 0) {
      mark_range(*dreg, dp, dp + len, 1);  // the common case: a written row
    } else if (ss == item && ds == item && sreg->shift == dreg->shift) {
      std::memcpy(dreg->at(dp), sreg->at(sp), static_cast<size_t>(len >> dreg->shift));
      dreg->touched(dreg->at(dp + len - 1));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        element(sp + static_cast<uintptr_t>(i * ss), dp + static_cast<uintptr_t>(i * ds));
      }
    }
    int a = rank - 2;
    for (; a >= 0; --a) {
      if (++idx[static_cast<size_t>(a)] < src.shape[a]) break;
      idx[static_cast<size_t>(a)] = 0;
    }
    if (a < 0) break;
  }
}

// Moves a copy's bytes and their shadow. HBM shadows are shared: under the mutex.
void move_bytes(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& src_runs,
                const Runs& dst_runs) {
  CheckedCore& cc = *ctx.checked;
  if (is_hbm(cc, dst_runs.lo) || is_hbm(cc, src_runs.lo)) {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    copy_shadow(ctx, src, dst, dst_runs);
  } else {
    copy_shadow(ctx, src, dst, dst_runs);
  }
  dma_copy_raw(src, dst);
}

void execute(CoreContext& ctx, Dma& d) {
  move_bytes(ctx, d.src, d.dst, d.src_runs, d.dst_runs);
  d.executed = true;
  d.sem->fetch_add(d.bytes);
}

bool try_take(SemaphoreCell& cell, int64_t amount) {
  int64_t v = cell.load();
  while (v >= amount) {
    if (cell.compare_exchange_weak(v, v - amount)) return true;
  }
  return false;
}

CheckedCore& core_of(CoreContext& ctx) { return *ctx.checked; }

}  // namespace

// ---- launch ----------------------------------------------------------------------------------

void CheckedLaunchDeleter::operator()(CheckedLaunch* p) const noexcept { delete p; }

CheckedLaunchPtr checked_begin(const LaunchSpec& spec, const pltpu::InterpretParams& params,
                               const LaunchBuffer* buffers, int num_buffers, int64_t vmem_limit) {
  CheckedLaunchPtr L(new CheckedLaunch());
  L->spec = &spec;
  L->params = params;
  L->num_cores = spec.num_cores;
  L->vmem_limit = vmem_limit;
  if (!L->params.chip.empty()) {
    L->chip = pltpu::get_tpu_info_for_chip(L->params.chip, 1, spec.where);
    const pltpu::TpuInfo& chip = *L->chip;
    const int phys = pltpu::num_physical_tensor_cores_per_chip(chip.chip_version);
    if (spec.num_cores > phys) {
      throw UsageError(
          ErrorKind::kUnsupported,
          fmt::format("tessera: pl::kernel at {} (kernel '{}', before launch): the mesh has {} "
                      "cores but a {} chip has {} TensorCore{}; use "
                      "pltpu::TensorCoreMesh(\"{}\", {}) or check against another chip",
                      format_location(spec.where), spec.name, spec.num_cores, L->params.chip, phys,
                      phys == 1 ? "" : "s", spec.axis_name, phys),
          spec.where, -1, {}, spec.name);
    }
    L->vmem_limit = std::min(vmem_limit, chip.vmem_capacity_bytes);
    auto over = [&](MemorySpace space, int64_t used, int64_t cap) {
      if (used <= cap) return;
      std::vector<size_t> idx;
      for (size_t i = 0; i < spec.scratch.size(); ++i) {
        if (spec.scratch[i].space == space) idx.push_back(i);
      }
      std::sort(idx.begin(), idx.end(),
                [&](size_t a, size_t b) { return spec.scratch[a].bytes > spec.scratch[b].bytes; });
      std::vector<std::string> top;
      for (size_t k = 0; k < idx.size() && k < 3; ++k)
        top.push_back(describe_scratch(spec.scratch[idx[k]], idx[k]));
      throw UsageError(
          ErrorKind::kCapacityExceeded,
          fmt::format("tessera: pl::kernel at {} (kernel '{}', before launch): scratch needs {} "
                      "bytes of {} per core but a {} TensorCore has {} bytes; largest buffers: "
                      "{}; shrink them (this kernel would not fit on that chip)",
                      format_location(spec.where), spec.name, used, to_string(space),
                      L->params.chip, cap, fmt::join(top, ", ")),
          spec.where, -1, {}, spec.name);
    };
    over(MemorySpace::VMEM, spec.vmem_used, chip.vmem_capacity_bytes);
    over(MemorySpace::SMEM, spec.smem_used, chip.smem_capacity_bytes);
  }
  int in_index = 0;
  for (int i = 0; i < num_buffers; ++i) {
    const LaunchBuffer& b = buffers[i];
    if (!b.is_output) {
      bool aliased = false;
      for (int j = 0; j < num_buffers; ++j)
        aliased |= buffers[j].is_output && buffers[j].data == b.data;
      const int index = in_index++;
      if (aliased || b.bytes == 0) continue;  // the output's entry stands for it
      auto h = std::make_unique<HbmBuffer>();
      h->region.base = reinterpret_cast<uintptr_t>(b.data);
      h->region.bytes = b.bytes;
      h->dtype = b.dtype;
      h->shape = b.shape;
      h->index = index;
      L->hbm.push_back(std::move(h));
      continue;
    }
    if (b.bytes == 0) continue;
    bool aliased = false;
    for (int j = 0; j < num_buffers; ++j)
      aliased |= !buffers[j].is_output && buffers[j].data == b.data;
    auto h = std::make_unique<HbmBuffer>();
    h->region.base = reinterpret_cast<uintptr_t>(b.data);
    h->region.bytes = b.bytes;
    h->dtype = b.dtype;
    h->shape = b.shape;
    h->is_output = true;
    h->index = b.index;
    if (!aliased) {
      // A fresh output: never written (aliased outputs start as their input). Its bytes are
      // poisoned only when reads of unwritten bytes are allowed: otherwise any read of them
      // (a DMA moves the shadow with the bytes) or the caller's (checked_finish) raises first.
      h->region.shift = std::countr_zero(static_cast<unsigned>(itemsize(b.dtype)));
      h->region.allocate();
      if (L->params.allow_uninitialized_reads) {
        fill_poison(const_cast<void*>(b.data), b.bytes, b.dtype, L->params.uninitialized_memory);
      }
    }
    L->hbm.push_back(std::move(h));
  }
  L->vc.assign(static_cast<size_t>(spec.num_cores), VC(static_cast<size_t>(spec.num_cores), 0));
  L->blocked.resize(static_cast<size_t>(spec.num_cores));
  L->finished.assign(static_cast<size_t>(spec.num_cores), 0);
  for (int c = 0; c < spec.num_cores; ++c) {
    auto cc = std::make_unique<CheckedCore>();
    cc->launch = L.get();
    cc->core = c;
    cc->rng.seed(L->params.random_seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(c));
    L->cores.push_back(std::move(cc));
  }
  return L;
}

int64_t checked_vmem_limit(const CheckedLaunch& launch, int64_t vmem_limit) noexcept {
  return std::min(vmem_limit, launch.vmem_limit);
}

void checked_core_begin(CheckedLaunch& L, CoreContext& ctx, void* const* scratch) {
  CheckedCore& cc = *L.cores[static_cast<size_t>(ctx.core)];
  ctx.checked = &cc;
  cc.vmem.base = reinterpret_cast<uintptr_t>(ctx.arena->vmem());
  cc.vmem.bytes = ctx.vmem_limit;
  cc.vmem.allocate();
  cc.smem.base = reinterpret_cast<uintptr_t>(ctx.arena->smem());
  cc.smem.bytes = smem_capacity_bytes();
  cc.smem.allocate();
  const LaunchSpec& spec = *L.spec;
  for (size_t i = 0; i < spec.scratch.size(); ++i) {
    const ScratchRequest& r = spec.scratch[i];
    if (r.space == MemorySpace::SEMAPHORE) continue;
    fill_poison(scratch[i], r.bytes, r.dtype, L.params.uninitialized_memory);
  }
  t_checked_core = true;
}

void checked_core_end(CoreContext& ctx) {
  CheckedCore& cc = core_of(ctx);
  if (cc.inflight.empty()) return;
  const Dma& d = cc.inflight.front();
  raise(ErrorKind::kSemaphoreLeak, "async_copy.start", d.started,
        fmt::format("{} was never waited before the kernel ended; every started copy needs a "
                    ".wait() on its descriptor (or one of the same size on the same semaphore), "
                    "or its semaphore is left non-zero and the destination may not be written",
                    dma_text(ctx, d)));
}

void checked_core_finished(CoreContext& ctx) noexcept {
  if (ctx.checked == nullptr) return;
  CheckedCore& cc = core_of(ctx);
  {
    std::lock_guard<std::mutex> lock(cc.launch->mu);
    cc.launch->finished[static_cast<size_t>(cc.core)] = 1;
    cc.launch->blocked[static_cast<size_t>(cc.core)].on = false;
  }
  cc.inflight.clear();
  cc.vmem.reset();
  cc.smem.reset();
  ctx.checked = nullptr;
  t_checked_core = false;
}

void checked_finish(CheckedLaunch& L, LaunchState& state) noexcept {
  if (state.first_error || L.params.allow_uninitialized_reads) return;
  try {
    for (auto& b : L.hbm) {
      if (!b->is_output || b->region.init == nullptr) continue;
      Runs all;
      all.v.push_back({b->region.base, b->region.base + static_cast<uintptr_t>(b->region.bytes)});
      all.lo = all.v[0].lo;
      all.hi = all.v[0].hi;
      const uintptr_t p = first_unwritten(b->region, all);
      if (p == 0) continue;
      int64_t unwritten = 0;
      const int64_t cells = b->region.bytes >> b->region.shift;
      for (int64_t i = 0; i < cells; ++i) unwritten += b->region.init[i] == 0 ? 1 : 0;
      const LaunchSpec& spec = *L.spec;
      state.first_error = std::make_exception_ptr(KernelError(
          ErrorKind::kUninitialized,
          fmt::format("tessera: pl::kernel at {} (kernel '{}', checked): output {} {}{}{} was "
                      "never written by any core ({} of its {} elements were not); the caller "
                      "would read garbage. Write every element (check the grid covers the "
                      "output, each core's slice and the last partial block), or pass "
                      "InterpretParams{{.allow_uninitialized_reads = true}}",
                      format_location(spec.where), spec.name, b->index, dtype_name(b->dtype),
                      b->shape.to_string(), elem_at(p, b->region.base, b->dtype, b->shape),
                      unwritten, b->shape.size()),
          spec.where, -1, {}, spec.name));
      return;
    }
  } catch (...) {
    state.first_error = std::current_exception();
  }
}

// ---- hooks -----------------------------------------------------------------------------------

void checked_sync_copy(CoreContext& ctx, const RawRef& src, const RawRef& dst, const char* op,
                       std::source_location where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  const Runs sr = runs_of(src);
  const Runs dr = runs_of(dst);
  check_dma_vs_dma(ctx, sr, dr, op, where);
  const bool hbm = is_hbm(cc, sr.lo) || is_hbm(cc, dr.lo);
  if (hbm && L.params.detect_races) {
    std::lock_guard<std::mutex> lock(L.mu);
    VC& mine = L.vc[static_cast<size_t>(cc.core)];
    const uint32_t e = ++mine[static_cast<size_t>(cc.core)];
    const VC start = mine;
    record_hbm(ctx, src, sr, false, start, e, op, where);
    record_hbm(ctx, dst, dr, true, start, e, op, where);
  }
  move_bytes(ctx, src, dst, sr, dr);
}

void checked_dma_start(CoreContext& ctx, const RawRef& src, const RawRef& dst, SemaphoreCell* sem,
                       std::source_location made, std::source_location where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  Dma d;
  d.src = src;
  d.dst = dst;
  d.sem = sem;
  d.bytes = src.shape.size() * itemsize(src.dtype);
  d.made = made;
  d.started = where;
  d.src_runs = runs_of(src);
  d.dst_runs = runs_of(dst);
  check_dma_vs_dma(ctx, d.src_runs, d.dst_runs, "async_copy.start", where);
  {
    std::lock_guard<std::mutex> lock(L.mu);
    d.id = L.next_dma++;
    VC& mine = L.vc[static_cast<size_t>(cc.core)];
    ++mine[static_cast<size_t>(cc.core)];
    d.vc_start = mine;
  }
  bool now = L.params.dma_execution_mode == pltpu::DmaExecutionMode::eager;
  if (L.params.dma_execution_mode == pltpu::DmaExecutionMode::random) now = (cc.rng() & 1) != 0;
  cc.inflight.push_back(std::move(d));
  if (now) execute(ctx, cc.inflight.back());
}

void checked_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes, const RawRef& src,
                      const char* op, std::source_location where) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  // Run pending copies on this semaphore, as late as possible: only while the count is short.
  for (;;) {
    if (sem->load() >= bytes) break;
    std::vector<size_t> pending;
    for (size_t i = 0; i < cc.inflight.size(); ++i) {
      if (cc.inflight[i].sem == sem && !cc.inflight[i].executed) pending.push_back(i);
    }
    if (pending.empty()) break;
    size_t pick = pending.back();  // on_wait: the latest first (out of order)
    if (L.params.dma_execution_mode == pltpu::DmaExecutionMode::random) {
      pick = pending[static_cast<size_t>(cc.rng() % pending.size())];
    }
    execute(ctx, cc.inflight[pick]);
  }
  checked_block_until(
      ctx, *sem, -1, bytes, op, where,
      fmt::format("{} (the DMA semaphore of a copy of {} {})", describe_semaphore(ctx, sem),
                  dtype_name(src.dtype), src.shape.to_string()),
      " bytes");
  // The copies this wait completes: executed ones on the semaphore, oldest first.
  std::vector<Dma> done;
  int64_t left = bytes;
  for (size_t i = 0; i < cc.inflight.size() && left > 0;) {
    Dma& d = cc.inflight[i];
    if (d.sem == sem && d.executed) {
      left -= d.bytes;
      done.push_back(std::move(d));
      cc.inflight.erase(cc.inflight.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  if (!L.params.detect_races) return;
  std::lock_guard<std::mutex> lock(L.mu);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  const uint32_t e = ++mine[static_cast<size_t>(cc.core)];
  for (const Dma& d : done) {
    record_hbm(ctx, d.src, d.src_runs, false, d.vc_start, e, "async copy", d.started);
    record_hbm(ctx, d.dst, d.dst_runs, true, d.vc_start, e, "async copy", d.started);
  }
}

void checked_signal(CoreContext& ctx, int target, int64_t slot, int64_t inc) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  std::lock_guard<std::mutex> lock(L.mu);
  VC& mine = L.vc[static_cast<size_t>(cc.core)];
  VC& s = L.sem_vc[{target, slot}];
  if (s.empty()) s.assign(mine.size(), 0);
  join(s, mine);
  ++mine[static_cast<size_t>(cc.core)];
  (target == ctx.core ? *ctx.arena : core_arena(target)).semaphores()[slot].fetch_add(inc);
}

void checked_block_until(CoreContext& ctx, SemaphoreCell& cell, int64_t slot, int64_t amount,
                         const char* op, std::source_location where, const std::string& what,
                         const char* unit) {
  CheckedCore& cc = core_of(ctx);
  CheckedLaunch& L = *cc.launch;
  LaunchState& state = *ctx.launch;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::milliseconds(std::min<int64_t>(state.wait_timeout_ms, int64_t{1} << 40));
  Blocked& me = L.blocked[static_cast<size_t>(cc.core)];
  struct Leave {
    CheckedLaunch& l;
    Blocked& b;
    ~Leave() {
      std::lock_guard<std::mutex> lock(l.mu);
      b.on = false;
    }
  } leave{L, me};
  for (int spins = 0;; ++spins) {
    if (try_take(cell, amount)) break;
    if (state.cancelled.load()) {
      raise(ErrorKind::kCancelled, op, where,
            fmt::format("cancelled while waiting on {}: another core of this launch failed, and "
                        "its error is the one the launch reports",
                        what));
    }
    std::string deadlock;
    {
      std::lock_guard<std::mutex> lock(L.mu);
      me.on = true;
      me.cell = &cell;
      me.amount = amount;
      me.what = what;
      me.op = op;
      me.unit = unit;
      me.where = where;
      me.step = ctx.grid_step;
      if (try_take(cell, amount)) {
        me.on = false;
        break;
      }
      bool stuck = !L.deadlock_reported;
      for (int c = 0; c < L.num_cores && stuck; ++c) {
        if (c == cc.core || L.finished[static_cast<size_t>(c)]) continue;
        const Blocked& b = L.blocked[static_cast<size_t>(c)];
        stuck = b.on && b.cell->load() < b.amount;
      }
      if (stuck) {
        L.deadlock_reported = true;
        std::vector<std::string> parts;
        for (int c = 0; c < L.num_cores; ++c) {
          const Blocked& b = L.blocked[static_cast<size_t>(c)];
          if (L.finished[static_cast<size_t>(c)]) {
            parts.push_back(fmt::format("core {} has finished", c));
          } else if (b.on) {
            std::string step;
            if (!b.step.empty()) step = fmt::format(" at grid step ({})", fmt::join(b.step, ", "));
            parts.push_back(fmt::format("core {} waits in {} at {}{} on {} (holds {}{}, needs {})",
                                        c, b.op, format_location(b.where), step, b.what,
                                        b.cell->load(), b.unit, b.amount));
          }
        }
        deadlock = fmt::format(
            "deadlock: every core of the mesh is blocked or finished, so no signal can ever "
            "come: {}. Each wait needs matching signals (or started copies) from a core that "
            "is still running; check which core signals whom, and loop bounds",
            fmt::join(parts, "; "));
      }
    }
    if (!deadlock.empty()) raise(ErrorKind::kDeadlock, op, where, deadlock);
    if (std::chrono::steady_clock::now() > deadline) {
      raise(ErrorKind::kTimeout, op, where,
            fmt::format("{} holds {}{} after {} ms, short of the {}{} this wait needs "
                        "(wait_timeout_ms={}), while another core is still running",
                        what, cell.load(), unit, state.wait_timeout_ms, amount, unit,
                        state.wait_timeout_ms));
    }
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (slot >= 0 && L.params.detect_races) {
    std::lock_guard<std::mutex> lock(L.mu);
    auto it = L.sem_vc.find({cc.core, slot});
    if (it != L.sem_vc.end()) join(L.vc[static_cast<size_t>(cc.core)], it->second);
  }
}

void checked_evaluate(CoreContext& ctx, const ExprProgram& prog, const RawRef& dst) {
  CheckedCore& cc = core_of(ctx);
  const pltpu::InterpretParams& P = cc.launch->params;
  constexpr const char* op = "vector assignment";
  for (const ExprNode& n : prog.nodes) {
    if (n.op != OpCode::kLoad) continue;
    const Runs r = runs_of(n.data, n.dtype, n.shape, n.strides);
    // A race is the cause when the bytes are also unwritten (on_wait: the copy has not run).
    check_compute_vs_dma(ctx, r, false, op, n.where.line() != 0 ? n.where : prog.where);
    if (!P.allow_uninitialized_reads) {
      if (Region* reg = region_of(ctx, r.lo)) {
        if (const uintptr_t p = first_unwritten(*reg, r)) {
          raise(ErrorKind::kUninitialized, op, n.where.line() != 0 ? n.where : prog.where,
                fmt::format("reads {}, which nothing has written since it was allocated (fresh "
                            "scratch, output windows and run_scoped buffers hold garbage on a "
                            "TPU; here: poison); write it first, e.g. initialise an "
                            "accumulator under `if (pl::program_id(k) == 0)`",
                            describe(ctx, p)));
        }
      }
    }
  }
  const Runs d = runs_of(dst);
  check_compute_vs_dma(ctx, d, true, op, prog.where);
  if (Region* reg = region_of(ctx, d.lo)) mark(*reg, d, 1);
}

void checked_dot(CoreContext& ctx, const DotCall& call, const RawRef& dst, bool accumulate) {
  CheckedCore& cc = core_of(ctx);
  const pltpu::InterpretParams& P = cc.launch->params;
  if (cc.launch->chip && !cc.launch->chip->is_matmul_supported(call.lhs.dtype, call.rhs.dtype)) {
    raise(ErrorKind::kUnsupported, call.op, call.where,
          fmt::format("a {} x {} matmul is not supported by the MXU of {} (pltpu::TpuInfo::"
                      "is_matmul_supported); convert the operands with astype first",
                      dtype_name(call.lhs.dtype), dtype_name(call.rhs.dtype), P.chip));
  }
  auto read = [&](const RawRef& r) {
    const Runs runs = runs_of(r);
    check_compute_vs_dma(ctx, runs, false, call.op, call.where);
    if (!P.allow_uninitialized_reads) {
      if (Region* reg = region_of(ctx, runs.lo)) {
        if (const uintptr_t p = first_unwritten(*reg, runs)) {
          raise(ErrorKind::kUninitialized, call.op, call.where,
                fmt::format("reads {}, which nothing has written since it was allocated; an "
                            "accumulator must be initialised before `acc += jnp::dot(...)` "
                            "(e.g. under `if (pl::program_id(k) == 0)`)",
                            describe(ctx, p)));
        }
      }
    }
  };
  read(call.lhs);
  read(call.rhs);
  if (accumulate) read(dst);
  const Runs d = runs_of(dst);
  check_compute_vs_dma(ctx, d, true, call.op, call.where);
  if (Region* reg = region_of(ctx, d.lo)) mark(*reg, d, 1);
}

void checked_element(const void* p, int size, bool is_const, std::source_location where) {
  CoreContext* ctx = current_context();
  if (ctx == nullptr || ctx->checked == nullptr) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  Runs r;
  r.v.push_back({a, a + static_cast<uintptr_t>(size)});
  r.lo = a;
  r.hi = a + static_cast<uintptr_t>(size);
  // A ref of non-const elements may be written through: judged as a write (it must not touch
  // the source of an in-flight copy either); read through a ref of const elements to read only.
  check_compute_vs_dma(*ctx, r, !is_const, "Ref element access", where);
  Region* reg = region_of(*ctx, a);
  if (is_const && reg != nullptr && !ctx->checked->launch->params.allow_uninitialized_reads) {
    if (first_unwritten(*reg, r) != 0) {
      raise(ErrorKind::kUninitialized, "Ref element read", where,
            fmt::format("reads {}, which nothing has written since it was allocated; write it "
                        "first",
                        describe(*ctx, a)));
    }
  }
  if (!is_const && reg != nullptr) mark(*reg, r, 1);
}

void checked_fresh(CoreContext& ctx, void* data, int64_t bytes, DType dtype, std::string what) {
  CheckedCore& cc = core_of(ctx);
  const auto lo = reinterpret_cast<uintptr_t>(data);
  if (cc.names.empty() || cc.names.back().lo != lo || cc.names.back().what != what) {
    if (cc.names.size() >= 64) cc.names.erase(cc.names.begin());
    cc.names.push_back({lo, lo + static_cast<uintptr_t>(bytes), std::move(what)});
  }
  fill_poison(data, bytes, dtype, cc.launch->params.uninitialized_memory);
  Runs r;
  const auto a = reinterpret_cast<uintptr_t>(data);
  r.v.push_back({a, a + static_cast<uintptr_t>(bytes)});
  r.lo = a;
  r.hi = r.v[0].hi;
  if (Region* reg = region_of(ctx, a)) mark(*reg, r, 0);
}

void checked_pad(CoreContext& ctx, void* data, int64_t bytes, DType dtype) {
  CheckedCore& cc = core_of(ctx);
  fill_poison(data, bytes, dtype, cc.launch->params.uninitialized_memory);
  Runs r;
  const auto a = reinterpret_cast<uintptr_t>(data);
  r.v.push_back({a, a + static_cast<uintptr_t>(bytes)});
  r.lo = a;
  r.hi = r.v[0].hi;
  if (Region* reg = region_of(ctx, a)) mark(*reg, r, 1);
}

const pltpu::InterpretParams& checked_params(const CoreContext& ctx) noexcept {
  return ctx.checked->launch->params;
}

const pltpu::TpuInfo* checked_chip(const CoreContext& ctx) noexcept {
  return ctx.checked->launch->chip ? &*ctx.checked->launch->chip : nullptr;
}

std::vector<std::vector<int64_t>> checked_parallel_order(
    const CoreContext& ctx, const Shape& grid,
    const std::vector<pltpu::GridDimensionSemantics>& semantics) {
  const pltpu::InterpretParams& P = checked_params(ctx);
  std::vector<std::vector<int64_t>> perms;
  if (!P.parallel_order_seed) return perms;
  std::mt19937_64 rng(*P.parallel_order_seed);  // the same on every core
  perms.resize(static_cast<size_t>(grid.rank()));
  for (int a = 0; a < grid.rank(); ++a) {
    if (static_cast<size_t>(a) >= semantics.size() ||
        semantics[static_cast<size_t>(a)] != pltpu::PARALLEL) {
      continue;
    }
    std::vector<int64_t>& p = perms[static_cast<size_t>(a)];
    p.resize(static_cast<size_t>(grid[a]));
    for (int64_t i = 0; i < grid[a]; ++i) p[static_cast<size_t>(i)] = i;
    std::shuffle(p.begin(), p.end(), rng);
  }
  return perms;
}

void checked_block_shape(const Shape& array, const SmallVec& block, DType dtype, int operand,
                         bool is_output, const char* op, std::source_location where) {
  const int r = block.size();
  const std::string which = fmt::format("{} {}", is_output ? "output" : "input", operand);
  auto shape_str = [](const SmallVec& v) {
    std::vector<int64_t> x(v.begin(), v.end());
    if (x.size() == 1) return fmt::format("({},)", x[0]);
    return fmt::format("({})", fmt::join(x, ", "));
  };
  if (r < 1) {
    raise(ErrorKind::kBlockShape, op, where,
          fmt::format("{} has a block of rank 0; the TPU lowering supports blocks of rank >= 1",
                      which));
  }
  if (r == 1) {
    const int64_t bs = block[0];
    const int64_t as = array[0];
    const int bits = dtype == DType::kBool ? 32 : itemsize(dtype) * 8;
    const int64_t min_tiling = int64_t{128} * (32 / bits);
    const bool pow2 = bs > 0 && (bs & (bs - 1)) == 0;
    if (bs == as || bs % (8 * 128) == 0 || (pow2 && bs >= min_tiling)) return;
    raise(ErrorKind::kBlockShape, op, where,
          fmt::format("{} has the rank-1 block {} over an array of {} {}; a TPU needs a rank-1 "
                      "block equal to the array, a multiple of 1024 (8 x 128), or a power of 2 "
                      "of at least {} (128 x 32 / {} bits); pick e.g. {}",
                      which, shape_str(block), dtype_name(dtype), array.to_string(), min_tiling,
                      bits, std::max<int64_t>(min_tiling, 1024)));
  }
  const int64_t b0 = block[r - 1];
  const int64_t b1 = block[r - 2];
  const int64_t a0 = array[array.rank() - 1];
  const int64_t a1 = array[array.rank() - 2];
  const bool ok0 = b0 == a0 || b0 % 128 == 0;
  const bool ok1 = b1 == a1 || b1 % 8 == 0;
  if (ok0 && ok1) return;
  raise(ErrorKind::kBlockShape, op, where,
        fmt::format("{} has the block {} over an array of shape {}: its last two dimensions "
                    "must be divisible by 8 and 128 respectively, or equal the array's ({} and "
                    "{}); {} breaks the rule. Round the block to a multiple of (8, 128) (a "
                    "partial edge block is fine)",
                    which, shape_str(block), array.to_string(), a1, a0,
                    !ok0 ? fmt::format("the last dimension {}", b0)
                         : fmt::format("the second-to-last dimension {}", b1)));
}

}  // namespace tessera::detail
