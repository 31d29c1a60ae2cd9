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
#include <atomic>
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
#include <tuple>
#include <utility>
#include <vector>

#include "check/checked.h"
#include "runtime/transport.h"

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
  // Shadow cells below this may be non-zero. Atomic: on a device mesh another device's copy
  // marks a core's VMEM shadow (under the launch's mutex) while the core marks other bytes of it.
  std::atomic<size_t> dirty{0};
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
      std::memset(init, 0, std::min(dirty.load(std::memory_order_relaxed), cells()));
      ShadowCache::instance().give(init, cells());
    }
    dirty.store(0, std::memory_order_relaxed);
    init = nullptr;
    owned = false;
    base = 0;
    bytes = 0;
  }
  uint8_t* at(uintptr_t p) const noexcept { return init + ((p - base) >> shift); }
  void allocate() {
    init = ShadowCache::instance().take(cells());
    owned = true;
    dirty.store(0, std::memory_order_relaxed);
  }
  void touched(const uint8_t* last) noexcept {
    const size_t end = static_cast<size_t>(last - init) + 1;
    size_t seen = dirty.load(std::memory_order_relaxed);
    while (seen < end && !dirty.compare_exchange_weak(seen, end, std::memory_order_relaxed)) {
    }
  }
};

// Shadow states, one byte per byte of VMEM/SMEM and per element of an HBM output: never written,
// defined, or (kFirstOrigin and up) undefined, computed from undefined data by the statement that
// CheckedLaunch::origins[state - kFirstOrigin] records. The states travel with the data through
// copies and vector assignments (checked_values.cc), as definedness bits do in Valgrind's
// memcheck; reading one is an error only where an undefined value matters.
constexpr uint8_t kUnwritten = 0;
constexpr uint8_t kDefined = 1;
constexpr uint8_t kFirstOrigin = 2;
constexpr size_t kMaxOrigins = 254;  // the last one stands for "and later statements"

// Where undefined data was first computed on: the statement, its core and grid step, and the
// never-written memory it read.
struct Origin {
  SourceLocation where;
  int core = 0;
  std::vector<int64_t> step;
  std::string source;  // describe() of the never-written byte
  // A DMA read an HBM output's bytes before any core wrote them: with more than one core, most
  // likely a race with the core that writes them (a missing barrier).
  bool early_hbm_read = false;
};

// The address of the first byte of `runs` in `reg` that is not defined, or 0.
uintptr_t first_unwritten(const Region& reg, const Runs& runs);
uintptr_t first_unwritten_range(const Region& reg, uintptr_t lo, uintptr_t hi);
// The state of the `item` bytes at `p`: kDefined when all are, else the first other state.
uint8_t shadow_state(const Region& reg, uintptr_t p, int item);
void mark_range(Region& reg, uintptr_t lo, uintptr_t hi, uint8_t v);
void mark(Region& reg, const Runs& runs, uint8_t v);
// Fills fresh memory with the poison of `mode` for `dtype`.
void fill_poison(void* data, int64_t bytes, DType dtype, pltpu::UninitializedMemory mode);

struct Dma {
  uint64_t id = 0;
  // A remote copy's name: MPI ranks, one this core sent, until its wait_send; a device mesh in
  // process, a half of one carried in from an earlier call (`half`).
  std::string remote;
  CarriedCopy::Half half = CarriedCopy::Half::kLocal;
  std::shared_ptr<std::vector<std::byte>> staging;  // kRecv, not landed: its bytes (`src`)
  uint64_t carried_id = 0;                          // Transport::carried's id, or 0
  RawRef src;
  RawRef dst;
  SemaphoreCell* sem = nullptr;
  int64_t bytes = 0;
  SourceLocation made;
  SourceLocation started;
  Runs src_runs;
  Runs dst_runs;
  bool executed = false;
  VC vc_start;
};

// A view of an HBM array as a product of arithmetic progressions of array coordinates, one per
// axis: lo, lo + step, ..., lo + (count - 1) * step (`ok` false when the view's strides do not map
// onto the array's axes; then its byte runs decide). Strided views (every other column, rows of
// one core's share) are exact, not their bounding box.
struct Box {
  bool ok = false;
  int rank = 0;
  int64_t lo[8] = {};
  int64_t step[8] = {};
  int64_t count[8] = {};
};

struct HbmAccess {
  Box box;
  Runs runs;
  int core = 0;
  uint32_t end = 0;
  VC start;
  bool write = false;
  SourceLocation where;
  const char* op = "";
};

struct HbmBuffer {
  Region region;
  DType dtype = DType::kFloat32;
  Shape shape;
  bool is_output = false;
  int index = 0;
  int device = -1;                       // on a device mesh: whose array it is
  MemorySpace space = MemorySpace::HBM;  // a pallas_call's VMEM or SMEM array stands there
  int core = -1;                         // >= 0: core `core`'s copy of an SMEM array
  std::vector<HbmAccess> history;
  size_t prune_at = kHistorySoftCap;  // the history size at which ordered accesses are pruned
};

struct Blocked {
  bool on = false;
  SemaphoreCell* cell = nullptr;
  int64_t slot = 0;
  int64_t amount = 0;
  std::string what;
  const char* op = "";
  const char* unit = "";
  SourceLocation where;
  std::vector<int64_t> step;
};

struct CheckedCore {
  CheckedLaunch* launch = nullptr;
  int core = 0;    // the index in the launch's books (device * cores per device + local)
  int device = 0;  // on a device mesh: the device, and the core within it
  int local = 0;
  Region vmem;
  Region smem;
  // Set once the core has begun and its VMEM and SMEM are made (shadows allocated, scratch
  // poisoned): bytes another rank copies into them may land from then on (checked_ranks.cc).
  std::atomic<bool> memories_made{false};
  std::vector<Dma> inflight;
  std::mt19937_64 rng;
  // Names of fresh buffers (pipeline windows, run_scoped), newest last; a later buffer at the
  // same bytes shadows an earlier one.
  struct Named {
    uintptr_t lo, hi;
    std::string what;
  };
  std::vector<Named> names;
  // The write-backs of each running pipeline (innermost last) in its last two grid steps: a
  // copy-in that reads their bytes (an input aliased to an output) races with them on a TPU,
  // where the next step's input prefetch and the last steps' write-backs are DMAs in flight at
  // the same time.
  struct WriteBack {
    Runs runs;
    int64_t step = 0;
    std::vector<int64_t> grid_step;
  };
  struct PipelineBooks {
    int64_t step = -1;
    std::vector<WriteBack> write_backs;
  };
  std::vector<PipelineBooks> pipelines;
  // MPI ranks (checked_history.cc): the core's recent accesses of its VMEM and SMEM, which a
  // copy landing from a message is checked against. Written by the core's thread, read by the
  // rank's engine thread, under history_mu (taken after the launch's mutex where both are).
  struct Access {
    uintptr_t lo = 0;  // the bytes [lo, hi), or (`runs` not empty) those runs
    uintptr_t hi = 0;
    Runs runs;
    uint32_t epoch = 0;  // the core's own clock entry at the access (max: an async copy in flight)
    bool write = false;
    uint64_t dma = 0;  // an async copy's id until the wait that completes it
    const char* op = "";
    SourceLocation where;
  };
  std::mutex history_mu;
  std::vector<Access> history;
  size_t history_pending = 0;  // entries with a dma
};

struct DeviceContext;
using SparseClock = std::map<std::pair<int, int>, uint32_t>;  // (device, core) -> epoch

// A device program's books that outlive its launches (checked_devices.cc): shared by every
// device in process; one per rank under MPI.
struct CheckedProgram {
  std::mutex mu;
  std::map<std::pair<int, int>, SparseClock> clocks;  // per (device, core)
  struct Barrier {
    SparseClock clock;  // joined from every signal
    bool waited = false;
    uint32_t wait_epoch = 0;  // the waiting core's epoch after its last wait
    uint64_t wait_seq = 0;
    std::string kernel;
    // MPI ranks: the signals that reached it from another device's later launch (its number
    // `seq`), kept until this device's launches reach that number (checked_ranks.cc).
    struct Early {
      uint64_t seq = 0;
      int device = 0;
      int core = 0;
      SourceLocation where;
    };
    std::vector<Early> early;
  };
  std::map<std::tuple<int, int, int64_t>, Barrier> barriers;  // (device, core, slot)
  // MPI ranks: the last launch this rank entered through the implicit start barrier.
  uint64_t last_barrier_seq = 0;
};

// A remote copy of a checked launch on a device mesh (checked_devices.cc): started by core
// `from`, landing on core `to` (indices in the launch's books). It lives until the sender has
// waited for it (wait_send) and the receiver has taken its bytes (wait_recv).
struct RemoteDma {
  uint64_t id = 0;
  int from = 0;
  int to = 0;
  RawRef src;
  RawRef dst;  // the target's buffer
  Runs src_runs;
  Runs dst_runs;
  SemaphoreCell* send_sem = nullptr;
  int64_t send_slot = 0;
  SemaphoreCell* recv_sem = nullptr;  // the target core's
  int64_t recv_slot = 0;
  CoreArena* target_arena = nullptr;
  int64_t bytes = 0;
  VC vc_start;
  SourceLocation made;
  SourceLocation started;
  // A remote copy moves in two halves, as on a TPU: its bytes leave the source (into `staging`,
  // and send_sem gains them), then land in the destination (recv_sem gains them). The DMA
  // execution mode decides when each half runs; the receiver's wait may run both.
  std::vector<std::byte> staging;
  bool read = false;      // the bytes have left the source
  bool executed = false;  // they have landed
  bool sent = false;      // a wait_send has taken them
  bool received = false;  // a wait_recv has taken them
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
  std::mutex recorder_mu;  // serialises params.grid_point_recorder's calls
  // Guards every core's vmem/smem Region while it is set or reset, for readers on other cores
  // (describe() naming another core's memory). Taken last: nothing is locked while it is held.
  std::mutex regions_mu;
  std::vector<VC> vc;
  std::map<std::pair<int, int64_t>, VC> sem_vc;
  std::vector<Blocked> blocked;
  std::vector<uint8_t> finished;
  bool deadlock_reported = false;
  uint64_t next_dma = 1;
  std::vector<Origin> origins;     // under mu
  std::vector<CoreArena*> arenas;  // per core, once it has begun (to wake it)

  // ---- a launch on a device mesh (checked_devices.cc); one device otherwise ----
  int devices = 1;
  int cores_per_device = 1;
  LaunchSpec spec_copy;  // `spec` points here: the books outlive any one device's launch
  Transport* transport = nullptr;
  const MeshInfo* mesh = nullptr;
  uint64_t seq = 0;
  bool implicit_barrier = false;
  // A device launch whose books are this device's alone (MPI ranks): other devices may signal
  // any wait, so no deadlock is concluded here (a wait ends at its timeout instead).
  bool partial = false;
  // MPI ranks (checked_ranks.cc): the books of one rank's part of the launch, over every
  // device's cores (the others' are marked finished here); other ranks' operations arrive with
  // their clocks on the transport's messages.
  bool ranks = false;
  int rank = 0;
  struct Arrival {
    int64_t bytes = 0;
    std::string what;  // "4096 bytes (float32 (8, 128)) from device 1 core 0 started at k.cc:9"
    RawRef dst;        // where the copy landed
    SourceLocation started;
    std::string copy;  // "the remote copy of float32 (8, 128) from device 1 core 0 to ..."
  };
  std::map<std::pair<int, int64_t>, std::vector<Arrival>> arrivals;  // (core, slot), not taken
  std::shared_ptr<CheckedProgram> program;
  std::vector<VC> entry;            // per core: its clock when its device entered
  std::vector<RemoteDma> remote;    // under mu
  std::atomic<int> remote_live{0};  // remote.size(), read without the lock as a hint
  uint64_t next_remote = 1;
};

// Whether core `cc` keeps a history of its VMEM and SMEM accesses (checked_history.cc): where
// another device's remote copy can land in them (MPI ranks with more than one core in the books,
// device meshes of more than one device).
inline bool keeps_history(const CheckedCore& cc) {
  const CheckedLaunch& L = *cc.launch;
  return (L.ranks ? L.num_cores > 1 : L.devices > 1) && L.params.detect_races;
}
// Records an access of `runs` by core `cc` (its thread) when they lie in its VMEM or SMEM: at the
// core's current epoch, or (`dma` != 0) as an async copy in flight until remembered_copy_done.
void remember_access(CheckedCore& cc, const Runs& runs, bool write, const char* op,
                     SourceLocation where, uint64_t dma = 0);
// The wait that completes async copy `dma` leaves the core at `epoch` (under the launch mutex).
void remembered_copy_done(CheckedCore& cc, uint64_t dma, uint32_t epoch);
// A remote copy from `sender` lands on `runs` of core `g` (under the launch mutex): raises kRace
// for an access of the core there that its clock `note.clock` does not hold.
void check_landing_vs_history(CheckedLaunch& L, int g, const Runs& runs, const CheckNote& note,
                              const std::string& sender);
// The same for a copy of a device mesh started at `where` with the sender's clock `clock`: at its
// start(), where it goes in flight.
void check_landing_vs_history(CheckedLaunch& L, int g, const Runs& runs, const VC& clock,
                              SourceLocation where, const std::string& sender);

// Calls f(element offset, flat index) for every element of a strided view, in row-major order.
template <class F>
void for_each_element(const Shape& shape, const SmallVec& strides, F&& f) {
  const int r = shape.rank();
  if (shape.size() == 0) return;
  SmallVec idx(r, 0);
  int64_t off = 0;
  for (int64_t flat = 0;; ++flat) {
    f(off, flat);
    int a = r - 1;
    for (; a >= 0; --a) {
      if (++idx[a] < shape[a]) {
        off += strides[a];
        break;
      }
      off -= (shape[a] - 1) * strides[a];
      idx[a] = 0;
    }
    if (a < 0) return;
  }
}

inline void join(VC& into, const VC& from) {
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}
// "core 1", or "device 2 core 1" on a device mesh (`core`: an index in the launch's books).
std::string core_name(const CheckedLaunch& L, int core);
// Wakes every core of the launch (of every device) that sleeps in a wait (takes the mutex).
void wake_all(CheckedLaunch& L) noexcept;
// Records a DMA's access of HBM by core `core` (under the launch mutex) and raises kRace when an
// earlier access of another core or copy overlaps it with no happens-before order.
void record_hbm(CoreContext& ctx, int core, const RawRef& view, const Runs& runs, bool write,
                const VC& start, uint32_t end, const char* op, SourceLocation where);
// Copies the shadow of a copy's source to its destination (under the mutex for HBM).
void copy_shadow(CoreContext& ctx, const RawRef& src, const RawRef& dst, const Runs& dst_runs,
                 SourceLocation where);
// ---- devices (checked_devices.cc) ----
// Hands over the halves of this launch's remote copies on `sem` that this core sends or
// receives and has not waited (runtime/resident.h): their bytes leave the source now if they
// have not; a half whose array is scratch stays (the kernel's end reports it).
void carry_remote_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out);
// A wait took `bytes` from `cell` of core `core` (under the mutex): marks this launch's remote
// copies it completes as taken, oldest first (`kinds`: send halves, receive halves, or both);
// returns the bytes left over. The destinations of the receive halves it takes are appended to
// `received` when given.
enum class RemoteKinds { kSend, kRecv, kBoth };
int64_t take_remote(CheckedLaunch& L, int core, const SemaphoreCell* cell, int64_t bytes,
                    RemoteKinds kinds, std::vector<Runs>* received = nullptr);
// Runs copies in flight that would add to `sem` while it holds less than `bytes`, as late as
// possible: this core's (local copies, remote halves carried in), then this launch's remote
// copies (on a device mesh in process).
void run_pending_copies(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes);
// After a wait took `bytes` from `sem`: the copies it completes leave the books, oldest first
// (this core's whose half is in `kinds`, then this launch's remote copies), their accesses
// recorded.
// `where` is the wait's line (the landings it takes enter the core's access history there).
void complete_copies(CoreContext& ctx, SemaphoreCell* sem, int64_t bytes, RemoteKinds kinds,
                     SourceLocation where);
// Whether a blocked wait on `cell` by core `core` may still be satisfied by a remote copy that
// has not landed, or (a barrier semaphore) by a device in a later launch (under the mutex).
bool remote_may_satisfy(const CheckedLaunch& L, int core, const SemaphoreCell* cell, int64_t slot);
// Compute or a local copy touching `runs` (VMEM/SMEM) against remote copies in flight into or
// out of this core; raises kRace.
void check_vs_remote(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                     SourceLocation where);
// Lands a remote copy that would satisfy a wait on `cell` by this core, if one was started and
// has not landed (under the mutex); true when one landed.
bool run_pending_remote(CoreContext& ctx, SemaphoreCell& cell);
// What arrived on a DMA semaphore from other devices and is not yet taken, for messages.
std::string remote_arrivals(const CheckedLaunch& L, const SemaphoreCell* cell);
// A signal or a take on a barrier semaphore: the program's books (under the mutex).
void barrier_signalled(CheckedLaunch& L, int from, int device, int core, int64_t slot, int64_t inc,
                       SourceLocation where);
void barrier_taken(CoreContext& ctx, int64_t slot, int64_t amount, SourceLocation where);

// ---- MPI ranks (checked_ranks.cc) ----
void checked_rank_dma_start(CoreContext& ctx, const RemoteCopy& copy);
void checked_rank_dma_wait(CoreContext& ctx, SemaphoreCell* sem, int64_t slot, int64_t bytes,
                           const WaitSite& site, bool recv);
void checked_rank_signal(CoreContext& ctx, const DeviceTarget& target, int64_t slot, int64_t inc,
                         std::source_location where);
// A wait took `amount` from semaphore `slot` of core `core`: the arrivals it took (oldest first)
// leave the books (under the mutex).
void rank_taken(CheckedLaunch& L, int core, int64_t slot, int64_t amount);
/// On MPI ranks, at the end of a kernel (under no lock): the copies that landed in this core's
/// HBM on `sem`, a semaphore the pallas_call returns, and that no wait took, as receiving halves
/// carried into the call that takes the semaphore.
void rank_carry_out(CoreContext& ctx, SemaphoreCell* sem, std::vector<CarriedCopy>& out);
/// On MPI ranks: `c`, a remote copy core `core` started in this launch, becomes the sending
/// half carried on its send_sem, registered with the transport until a wait takes it.
void rank_sent_half(CheckedLaunch& L, int core, CarriedCopy& c);
// What arrived on semaphore `slot` of core `core` from other ranks and is not yet taken.
std::string rank_arrivals(const CheckedLaunch& L, int core, int64_t slot);
// The calling core's wait at `site` takes from its barrier semaphore `slot` (under the launch's
// mutex): raises kRace when a signal of another device's later launch reached it first.
void rank_barrier_taken(CoreContext& ctx, int64_t slot, const WaitSite& site);

// ---- checked_devices.cc's parts that checked_ranks.cc shares ----
void join_sparse(SparseClock& into, const CheckedLaunch& L, const VC& from);
std::shared_ptr<CheckedLaunch> make_books(const LaunchSpec& spec,
                                          const pltpu::InterpretParams& params, int64_t vmem_limit,
                                          DeviceContext& dev, uint64_t seq,
                                          std::shared_ptr<CheckedProgram> program);
void attach(CheckedLaunch& L, int device, const DeviceLaunch& launch);

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
                const Runs& dst_runs, SourceLocation where);
// Runs an in-flight copy: moves its bytes and signals its semaphore.
void execute(CoreContext& ctx, Dma& d);
CheckedCore& core_of(const CoreContext& ctx);
// The region (VMEM, SMEM of this core, or an HBM output) holding `p`, or null.
Region* region_of(CoreContext& ctx, uintptr_t p);
// Records where undefined data read at `read` was first computed on; returns its shadow state.
uint8_t add_origin(CoreContext& ctx, SourceLocation where, uintptr_t read);
/// `where` when it has a line, else the statement running on this thread, by its code address
/// (StatementScope in tessera/detail/runtime.h), resolved only if a report names it.
inline SourceLocation statement_site(const SourceLocation& where) {
  return where.line() != 0 ? where : SourceLocation::of_code(t_statement);
}
// The same with the launch's mutex held.
uint8_t add_origin_locked(CheckedLaunch& L, Origin o);
// Before raising kUninitialized for data of state `state` on a launch of several cores: when the
// data came from an HBM output read before any core wrote it, waits until every other core has
// finished or blocks, so that the race with the core that writes it, which is the cause, is the
// error the launch reports (this core then stops with kCancelled).
void settle_before_uninitialized(CoreContext& ctx, uint8_t state, const char* op,
                                 SourceLocation where);
// For a message about undefined data of state `state` found at `addr`: what it is and, for a
// computed value, where it came from.
std::string undefined_text(CoreContext& ctx, uintptr_t addr, uint8_t state);
const Origin* origin_of(const CheckedLaunch& L, uint8_t state);
// Compute reading (`write` false) or writing `runs` against the core's in-flight copies.
void check_compute_vs_dma(CoreContext& ctx, const Runs& runs, bool write, const char* op,
                          SourceLocation where);

}  // namespace tessera::detail
