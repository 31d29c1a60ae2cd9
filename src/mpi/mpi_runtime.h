// Internal: the MPI transport (the optional tessera::mpi component) — one device per MPI rank.
//
// When the process runs under an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in
// its environment) and TESSERA_TRANSPORT is not "inprocess", a program mapped over a mesh
// (jax::shard_map) runs here as the device of this rank; the mesh must have as many devices as
// the job has ranks. MPI is initialised (MPI_THREAD_MULTIPLE) on first use and finalised at exit.
//
// Memory. Each rank allocates one window of TESSERA_SYMMETRIC_HEAP bytes (default 2 GiB, sparse
// until touched) and every HBM array of the process comes from it (core/hbm_heap.h). Its first
// page is the rank's directory: the launch it is in and the offsets of that launch's arrays, so
// that a sender finds the same array on the target (remote copies land in HBM: an output or an
// aliased input; another process's VMEM is not reachable). The rank's mailbox follows it
// (mpi_mailbox.h).
//   - Same host (the default when every rank shares one node): each rank's segment is mapped in
//     every rank, from the host's reserved huge pages when it has enough for every rank's window,
//     otherwise from its shared memory with large blocks collapsed into huge pages
//     (mpi_huge_window.h; TESSERA_MPI_HUGE_PAGES=off declines both for MPI_Win_allocate_shared);
//     a remote copy is a strided copy by the sending core into the target's segment.
//   - Across hosts (or TESSERA_MPI_TRANSPORT=rma): MPI_Win_allocate with a passive-target epoch
//     (MPI_Win_lock_all) for the whole run; a remote copy is MPI_Put of each contiguous run and
//     MPI_Win_flush, issued by the rank's engine thread.
//
// The engine thread (one per rank) owns the MPI calls of the runtime: it sends and receives the
// small messages that carry semaphore signals and the bytes a copy added to a receive semaphore
// (a message after the data, so that the target's engine — which wakes the waiting core — learns
// of it without polling memory) and those of the launches' start barriers (each rank tells every
// other that it has entered launch n) — on one host those go through the ranks' mailboxes
// instead (mpi_mailbox.h), unless a mailbox is full or the checked engine sends them with its
// notes — runs the puts, the barriers that start and end a program
// (MPI_Ibarrier), the cancellation of every rank when one fails, and the exchange of errors at
// the end of a program.
// It polls with MPI_Iprobe / MPI_Test and sleeps in between, so it never holds a core that the
// kernels need. On one host every message rings the target's bell (a futex word in its
// directory) after it is sent, and so does a letter while a thread of the target sleeps, so the
// engine sleeps until one comes (5 ms at most, a safety net), polling every 20 µs only while a
// send, a barrier or a landing is pending. Across hosts
// nothing rings it: while a program runs it sleeps 20 µs, then longer each time up to 200 µs
// (20 µs while a launch waits for messages), and 5 ms between programs. A wake-up costs a
// machine whose cores all run kernels more than its own few microseconds: the engine takes a
// core from a kernel, and on 2 vCPUs waking every 200 µs made a 64 MiB ring all-reduce 1.8x
// slower (docs/devices.md).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/hbm_heap.h"
#include "mpi/mpi_huge_window.h"
#include "mpi/mpi_mailbox.h"
#include "runtime/distributed.h"
#include "runtime/transport.h"

namespace tessera::detail::mpi {

/// The first page of a rank's window: what its running launch publishes. It lies at the
/// window's base, which MPI need not align beyond 8 bytes (so no stricter alignment here).
struct Directory {
  static constexpr int kMaxArrays = 120;
  std::atomic<uint64_t> entered{0};  // the last launch entered (its number)
  std::atomic<uint64_t> left{0};     // the last launch left
  std::atomic<int64_t> writers{0};   // other ranks copying into this window (same host)
  std::atomic<int64_t> failed{0};    // set when this rank fails or is cancelled (before it
                                     // leaves its launch)
  // Same host: the rank's engine sleeps on this word; a rank that sends it a message, and this
  // rank's cores when they queue it a job, bump it and wake it (MpiRuntime::ring).
  std::atomic<uint32_t> bell{0};
  int64_t count = 0;
  int64_t offset[kMaxArrays] = {};  // byte offset in the window, -1: not in it
  int64_t bytes[kMaxArrays] = {};
};
inline constexpr int64_t kDirectoryPage = 4096;
static_assert(sizeof(Directory) <= kDirectoryPage);
// The rank's mailbox (mpi_mailbox.h) follows its directory page; the heap of HBM arrays begins
// after both.
inline constexpr int64_t kDirectoryBytes =
    kDirectoryPage + (static_cast<int64_t>(sizeof(Mailbox)) + 4095) / 4096 * 4096;

/// A first-fit heap over the window, for HBM arrays (core/hbm_heap.h).
class WindowHeap final : public HbmHeap {
 public:
  static constexpr int64_t kPageBytes = 4096;
  static constexpr auto kLargeBytes = static_cast<int64_t>(kLargeHbmBytes);
  /// `huge`: the window, when its blocks are to be collapsed into huge pages (collapsible()).
  WindowHeap(std::byte* base, int64_t bytes, HugeWindow* huge = nullptr);
  void* allocate(size_t bytes) noexcept override;
  bool owns(const void* p) const noexcept override;
  void free(void* p) noexcept override;
  const char* full_hint() const noexcept override;
  /// After MPI_Finalize: frees become no-ops (the memory is gone).
  void close() noexcept;

 private:
  // Collapses the whole huge pages of a new block that no earlier block has collapsed.
  void collapse(int64_t off, int64_t bytes) noexcept;
  std::byte* base_;
  int64_t bytes_;
  HugeWindow* huge_ = nullptr;
  std::vector<bool> collapsed_;  // per huge page of the window, from its base (under mu_)
  mutable std::mutex mu_;
  std::map<int64_t, int64_t> free_;  // offset -> size
  std::map<int64_t, int64_t> used_;
  bool closed_ = false;
  std::string hint_;
};

/// The checked engine's note on a signal message (after the Signal; CheckNote on the wire),
/// followed by the destination's shape and strides (int64 each, `rank` of them), the clock
/// (uint32, `clock_len`) and the sender's file name (`file_len` chars).
struct NoteWire {
  int32_t from_core;
  int32_t cores_per_device;
  int32_t line;
  int32_t copy;
  int32_t clock_len;
  int32_t file_len;
  int32_t dtype;
  int32_t rank;
  int32_t states_len;  // CheckNote::states, after the file name; then each origin
  int32_t origins;     // as an OriginWire and its file name and source
  int64_t barrier_seq;
  int64_t offset;  // a copy's destination: its byte offset in the target's window
  int64_t bytes;
};

struct OriginWire {
  int32_t line;
  int32_t core;
  int32_t file_len;
  int32_t source_len;
};

// Message tags of the wait snapshots (mpi_transport.h): a rank's snapshot to rank 0, rank 0's
// confirmation request, the rank's answer.
inline constexpr int kTagWaits = 103;
inline constexpr int kTagWaitsConfirm = 104;
inline constexpr int kTagWaitsAck = 105;
// A rank has entered a launch with an implicit start barrier (program, launch).
inline constexpr int kTagEnter = 106;
// Every core of a rank has run its body in a launch whose semaphores outlive it (program, launch,
// and how many messages the rank has sent to the receiver so far, this one included).
inline constexpr int kTagBodies = 107;

// Message bytes: an int64 appended, and read at `at` (0 past the end), advancing it.
inline void put_i64(std::vector<char>& out, int64_t v) {
  const size_t at = out.size();
  out.resize(at + sizeof(v));
  std::memcpy(out.data() + at, &v, sizeof(v));
}
inline int64_t get_i64(const std::vector<char>& in, size_t& at) {
  int64_t v = 0;
  if (at + sizeof(v) <= in.size()) std::memcpy(&v, in.data() + at, sizeof(v));
  at += sizeof(v);
  return v;
}
// A remote copy into another rank's VMEM or SMEM, with its bytes (DataWire).
inline constexpr int kTagData = 110;

/// A remote copy whose destination is the target core's VMEM or SMEM, which no window holds: its
/// bytes travel in the message and the target's engine thread stores them when it applies the
/// landing. On the wire (kTagData): the Signal, this header, the destination view's shape and
/// strides (int64 each, `rank` of them), the packed bytes, then what a signal message carries
/// after its Signal.
struct DataWire {
  int32_t space;  // MemorySpace::VMEM or SMEM
  int32_t dtype;
  int32_t rank;
  int32_t unused;
  int64_t offset;  // the view's first element: its byte offset from the core's VMEM/SMEM base
  int64_t bytes;   // the packed bytes that follow the strides
};

/// A received DataWire: where the bytes go in the target core's memory, and the bytes.
struct DataCopy {
  MemorySpace space = MemorySpace::VMEM;
  DType dtype = DType::kFloat32;
  Shape shape;
  SmallVec strides;
  int64_t offset = 0;
  std::vector<std::byte> bytes;
};

class MpiTransport;

/// The rank's runtime: MPI, the window, the engine thread.
class MpiRuntime final : public DistributedRuntime {
 public:
  static MpiRuntime& instance();
  bool active() override;
  int rank() override;
  int size() override;
  void run_program(const Mesh& mesh, FunctionRef<void(int)> job,
                   std::source_location where) override;

  // ---- for the transport ----
  bool shared_memory() const noexcept { return shm_; }
  /// The directory and window segment of `rank` (same host: mapped here; otherwise only this
  /// rank's own).
  Directory* directory(int rank) const noexcept;
  std::byte* segment(int rank) const noexcept;
  int64_t window_bytes() const noexcept { return heap_bytes_; }
  /// MPI's window (none when the same-host segments are huge pages of our own).
  MPI_Win window() const noexcept { return win_; }
  /// Whether the same-host segments are the host's reserved huge pages (mpi_huge_window.h).
  bool huge_pages() const noexcept { return huge_.mapped() && !huge_.collapsible(); }
  /// Whether they are memfds of the host's shared memory whose large blocks the heap collapses
  /// into huge pages (mpi_huge_window.h; no reservation had room).
  bool collapsed_pages() const noexcept { return huge_.collapsible(); }
  /// Runs `job` on the engine thread and waits for it (rethrowing what it throws).
  void call(const std::function<void()>& job);
  /// Queues `job` for the engine thread without waiting.
  void post(std::function<void()> job);
  /// Same host: `rank`'s mailbox (mpi_mailbox.h).
  Mailbox& mailbox(int rank) const noexcept;
  /// Same host: puts `letter` into `rank`'s mailbox, and rings its engine when a thread of that
  /// rank sleeps in a wait. False (nothing sent) across hosts or when the mailbox is full.
  bool mail(int rank, const Mailbox::Letter& letter) noexcept;
  /// Takes every letter of this rank's mailbox to `t` (the running program's transport): from
  /// the engine thread, or from a core that polls while it waits. True when one came.
  bool drain_mail(MpiTransport& t);
  /// Sends `s` to `rank` (through its mailbox on one host, else the engine sends it;
  /// non-blocking for the caller), with the checked engine's `note` when there is one, which
  /// always goes through MPI (`offset`: a copy's destination in the target's window). True when
  /// it went as a letter.
  bool send_signal(int rank, const Signal& s, const CheckNote* note = nullptr, int64_t offset = -1);
  /// Sends a copy into `rank`'s VMEM or SMEM: `data` (its bytes packed row-major) lands at the
  /// target core's memory when the target applies `s` (the landing); `note` as send_signal's.
  void send_data(int rank, const Signal& s, const DataCopy& data, const CheckNote* note = nullptr);
  /// Sends `bytes` with `tag` to `rank` (the engine sends them).
  void send_bytes(int rank, int tag, std::vector<char> bytes);
  /// Tells every other rank that this one failed with `message` (kind `kind`).
  void send_cancel(int kind, const std::string& message);
  /// Starts a barrier over the ranks (MPI_Ibarrier on the engine thread); the flag turns true
  /// when every rank has reached it.
  std::shared_ptr<std::atomic<bool>> barrier();
  MpiTransport* transport() const noexcept { return transport_; }
  /// While one lives, the engine thread polls for messages at its shortest interval (a launch
  /// waits for them; across hosts only: on one host every message rings the engine's bell).
  class Prompt {
   public:
    explicit Prompt(MpiRuntime& rt) : rt_(rt) { rt_.prompt_.fetch_add(1); }
    ~Prompt() { rt_.prompt_.fetch_sub(1); }
    Prompt(const Prompt&) = delete;
    Prompt& operator=(const Prompt&) = delete;

   private:
    MpiRuntime& rt_;
  };
  std::thread::id engine_id() const noexcept { return engine_.get_id(); }
  /// Wakes this rank's engine thread (to look at what it polls for).
  void wake_engine() noexcept { ring(rank_); }
  /// The number of the running program (every rank counts its programs alike).
  int64_t program() const noexcept { return program_; }

 private:
  MpiRuntime() = default;
  void init();
  void finalize() noexcept;
  void engine_main();
  bool poll_messages();  // true when a message came
  // Bumps `rank`'s bell and wakes its engine (same host; otherwise only this rank's own).
  void ring(int rank) noexcept;
  bool engine_busy() const;  // something the engine must poll MPI for is pending
  // From the engine thread: sends `bytes` to `rank` and rings its bell.
  void isend(int rank, int tag, std::unique_ptr<std::vector<char>> bytes);
  void handle_message(int source, const std::vector<char>& bytes, int tag);
  void handle_data(int source, const std::vector<char>& bytes);  // a kTagData message

  std::once_flag once_;
  bool active_ = false;
  bool initialised_here_ = false;
  int rank_ = 0;
  int size_ = 1;
  bool shm_ = true;
  int64_t heap_bytes_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the runtime's own communicator (a dup of the world)
  MPI_Win win_ = MPI_WIN_NULL;
  HugeWindow huge_;
  std::vector<std::byte*> segments_;  // per rank (same host), else only this rank's
  std::unique_ptr<WindowHeap> heap_;
  MpiTransport* transport_ = nullptr;  // the running program's
  int64_t program_ = 0;

  // The engine thread and its queue.
  std::thread engine_;
  std::mutex mu_;
  std::deque<std::function<void()>> jobs_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> kick_{0};  // the engine's bell across hosts (same host: the directory's)
  std::atomic<uint32_t>* bell_ = &kick_;
  std::atomic<int> prompt_{0};  // live Prompts
  // One thread at a time takes this rank's letters, so that they are applied in the order they
  // came (MpiTransport::bodies_done counts them).
  std::mutex mail_mu_;
  struct Send {
    MPI_Request request;
    int target;
    std::unique_ptr<std::vector<char>> bytes;  // kept until the send completes
  };
  std::vector<Send> sends_;
  std::vector<std::pair<MPI_Request, std::shared_ptr<std::atomic<bool>>>> barriers_;
};

}  // namespace tessera::detail::mpi
