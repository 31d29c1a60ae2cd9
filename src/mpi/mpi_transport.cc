// The MPI transport (mpi_transport.h): launches published in the rank's directory, remote copies
// through the window, signals as messages, cancellation of every rank.
#include "mpi/mpi_transport.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/messages.h"
#include "runtime/context.h"
#include "runtime/core_pool.h"
#include "runtime/devices.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "runtime/spin.h"
#include "tessera/error.h"

namespace tessera::detail::mpi {

namespace {
bool is_barrier_slot(int64_t slot) { return slot >= kSemaphoresPerCore - kBarrierSemaphores; }

// What a core waits for while a remote operation waits for `target` to enter its launch.
std::string entry_wait(const CoreContext& ctx, const char* op, std::source_location where,
                       int target) {
  const DeviceLaunch& mine = *ctx.device->launch;
  return fmt::format(
      "device {} core {} waits in {} at {} for device {} to enter kernel '{}' "
      "(launch #{})",
      ctx.device->mesh->name(ctx.device->device), ctx.core, op, format_location(where),
      ctx.device->mesh->name(target), mine.spec->name, mine.seq);
}
}  // namespace

MpiTransport::MpiTransport(MeshInfo mesh, MpiRuntime& runtime)
    : rt_(runtime), rank_(runtime.rank()) {
  mesh_ = std::move(mesh);
  const auto n = static_cast<size_t>(mesh_.size);
  sent_ = std::make_unique<std::atomic<int64_t>[]>(n);
  for (size_t r = 0; r < n; ++r) sent_[r].store(0);
  received_.assign(n, 0);
  mailed_ = std::make_unique<std::atomic<int64_t>[]>(n);
  for (size_t r = 0; r < n; ++r) mailed_[r].store(0);
  received_mailed_.assign(n, 0);
  snapshots_.resize(n);
}

template <class Ready, class What, class Blocked>
void MpiTransport::wait_for(CoreContext& ctx, Ready ready, const char* op,
                            std::source_location where, What what, Blocked blocked) {
  const int64_t timeout_ms = ctx.launch->wait_timeout_ms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::microseconds(20);
  // Checked mode (this rank's books observe arrivals): the wait is registered for the deadlock
  // detection's confirmation, reported once and again whenever something reached this rank
  // (the snapshot sent before is then stale), and withdrawn when it ends.
  const bool report = observer() != nullptr;
  const std::function<bool()> still = [&] { return ready(); };
  uint64_t reported = 0;  // the version last reported (0: not registered)
  struct Withdraw {
    MpiTransport& t;
    CoreContext& ctx;
    const std::function<bool()>* still;
    const uint64_t& reported;
    ~Withdraw() {
      if (reported == 0) return;
      {
        std::lock_guard<std::mutex> lock(t.waits_mu_);
        std::erase(t.waiting_, still);
        t.version_.fetch_add(1);  // a snapshot that counted this wait is stale
      }
      if (ctx.engine != nullptr) ctx.engine->transport_unblocked(ctx);
    }
  } withdraw{*this, ctx, &still, reported};
  // First spin, taking what arrives (one host), while the process has a CPU for each of its
  // threads, as a blocked semaphore wait does (runtime/spin.h); then sleep between looks.
  if (polled() && !report && CorePool::current().spinning()) {
    const auto spin_end = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    while (!ready() && !failed_.load() && !ctx.launch->cancelled.load() &&
           std::chrono::steady_clock::now() < spin_end) {
      poll();
      for (int i = 0; i < 8; ++i) cpu_relax();
    }
  }
  for (;;) {
    const uint32_t seen = arrivals_.load();
    if (ready()) break;
    if (failed_.load() || ctx.launch->cancelled.load()) {
      raise(ErrorKind::kCancelled, op, where,
            "cancelled: a device of the mesh failed, and its error is the one the program reports");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      raise(ErrorKind::kTimeout, op, where,
            fmt::format("{} for {} ms (wait_timeout_ms); every device must run the same kernels "
                        "in the same order",
                        what(), timeout_ms));
    }
    if (report && version_.load() != reported) {
      if (reported == 0) {
        std::lock_guard<std::mutex> lock(waits_mu_);
        waiting_.push_back(&still);
      }
      reported = version_.load();
      if (ctx.engine != nullptr) {
        ctx.engine->transport_blocked(ctx, blocked());
      } else {
        publish(3, reported, blocked());
      }
    }
    // Until something arrives (what `ready` waits for on one host), or a while (a cancellation,
    // and across hosts what the engine fetches).
    {
      const Asleep asleep(this);
      arrival_sleepers_.fetch_add(1);
      futex_wait_for(arrivals_, seen,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(pause).count());
      arrival_sleepers_.fetch_sub(1);
    }
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

void MpiTransport::enter(int /*device*/, DeviceLaunch& launch, bool barrier) {
  // Publish the launch's arrays: their offsets in this rank's window.
  Directory& dir = *rt_.directory(rank_);
  std::byte* base = rt_.segment(rank_);
  if (launch.buffers.size() > static_cast<size_t>(Directory::kMaxArrays)) {
    raise(ErrorKind::kUnsupported, launch.spec->entry, launch.spec->where,
          fmt::format("the kernel has {} arrays; on MPI ranks a kernel may have at most {}",
                      launch.buffers.size(), Directory::kMaxArrays));
  }
  dir.count = static_cast<int64_t>(launch.buffers.size());
  for (size_t k = 0; k < launch.buffers.size(); ++k) {
    const auto* p = static_cast<const std::byte*>(launch.buffers[k].data);
    const bool inside = p >= base + kDirectoryBytes && p < base + rt_.window_bytes();
    dir.offset[k] = inside ? p - base : -1;
    dir.bytes[k] = launch.buffers[k].bytes;
  }
  dir.entered.store(launch.seq);  // seq_cst: after the table
  if (!rt_.shared_memory()) rt_.call([&] { MPI_Win_sync(rt_.window()); });
  std::exception_ptr race;
  {
    std::lock_guard<std::mutex> lock(mu_);
    launch_ = &launch;
    entered_ = launch.seq;
    // Signals that arrived before this launch was entered.
    std::erase_if(early_, [&](const Pending& p) { return apply(p, race, true); });
    if (failed_.load()) cancel_launch();
  }
  if (race) fail(rank_, race);
  if (failed_.load()) {
    leave(0, launch);
    raise(ErrorKind::kCancelled, launch.spec->entry, launch.spec->where,
          "cancelled: a device of the mesh failed, and its error is the one the program reports");
  }
  if (!barrier) return;
  // The implicit start barrier: every rank has entered (published) this launch. Each tells the
  // others with a message naming the launch, sent after it published it: an MPI_Ibarrier would
  // be left pending by a rank cancelled while it waits here and then match another rank's
  // next barrier.
  tell_others(kTagEnter, launch.seq, false);
  const MpiRuntime::Prompt prompt(rt_);
  CoreContext probe;
  probe.launch = launch.state;
  try {
    wait_for(
        probe,
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return arrived_at_barrier_[launch.seq] == mesh_.size - 1;
        },
        launch.spec->entry, launch.spec->where,
        [&] {
          return fmt::format("device {} waited at the start barrier of kernel '{}' (launch #{})",
                             mesh_.name(rank_), launch.spec->name, launch.seq);
        },
        [&] {
          return fmt::format(
              "device {} waits at the implicit start barrier of kernel '{}' "
              "(launch #{}) at {}, for every device to enter it (the kernel has no "
              "collective_id)",
              mesh_.name(rank_), launch.spec->name, launch.seq,
              format_location(launch.spec->where));
        });
  } catch (...) {
    leave(0, launch);
    throw;
  }
  std::lock_guard<std::mutex> lock(mu_);
  arrived_at_barrier_.erase(arrived_at_barrier_.begin(),
                            arrived_at_barrier_.upper_bound(launch.seq));
}

void MpiTransport::tell_others(int tag, uint64_t seq, bool with_count) {
  for (int r = 0; r < mesh_.size; ++r) {
    if (r == rank_) continue;
    // Counted with the signal messages (a message in flight for the snapshots).
    const int64_t count = sent_[static_cast<size_t>(r)].fetch_add(1) + 1;
    const int64_t mailed = mailed_[static_cast<size_t>(r)].load();
    const Mailbox::Kind kind = tag == kTagEnter ? Mailbox::Kind::kEnter : Mailbox::Kind::kBodies;
    if (rt_.mail(r, Mailbox::Letter{
                        kind, rank_,
                        Signal{rt_.program(), static_cast<int64_t>(seq), count, mailed + 1, 0}})) {
      mailed_[static_cast<size_t>(r)].fetch_add(1);
      continue;
    }
    std::vector<char> msg;
    put_i64(msg, rt_.program());
    put_i64(msg, static_cast<int64_t>(seq));
    if (with_count) {
      put_i64(msg, count);
      put_i64(msg, mailed);
    }
    rt_.send_bytes(r, tag, std::move(msg));
  }
}

void MpiTransport::bodies_done(CoreContext& ctx) {
  const DeviceLaunch& mine = *ctx.device->launch;
  const uint64_t seq = mine.seq;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (local_seq_ != seq) local_bodies_ = local_passed_ = 0;  // (a cancelled launch's are stale)
    local_seq_ = seq;
    last = ++local_bodies_ == mine.spec->num_cores;
  }
  // Every message this rank sent in the launch is counted before this one, so a receiver that
  // has applied as many from this rank has applied all of them.
  if (last) tell_others(kTagBodies, seq, true);
  const MpiRuntime::Prompt prompt(rt_);
  wait_for(
      ctx,
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        const auto it = bodies_.find(seq);
        if (it == bodies_.end() || it->second.ranks < mesh_.size - 1) return false;
        // Each kind in full: a letter of the next launch may arrive before a message of this
        // one, and the other way round.
        for (size_t r = 0; r < static_cast<size_t>(mesh_.size); ++r) {
          const int64_t letters = received_mailed_[r];
          const int64_t want_letters = it->second.expect_mailed[r];
          if (static_cast<int>(r) != rank_ &&
              (letters < want_letters ||
               received_[r] - letters < it->second.expect[r] - want_letters)) {
            return false;
          }
        }
        return !landings_waiting_.load();  // copies into a core's memory are stored too
      },
      mine.spec->entry, ctx.kernel_where,
      [&] {
        return fmt::format(
            "device {} waited at the end of kernel '{}' (launch #{}) for every "
            "device to finish its body (the kernel has semaphore operands)",
            mesh_.name(rank_), mine.spec->name, seq);
      },
      [&] {
        return fmt::format(
            "device {} core {} waits at the end of kernel '{}' (launch #{}) for "
            "every device to finish its body",
            mesh_.name(rank_), ctx.core, mine.spec->name, seq);
      });
  std::lock_guard<std::mutex> lock(mu_);
  if (++local_passed_ == mine.spec->num_cores) {
    bodies_.erase(bodies_.begin(), bodies_.upper_bound(seq));  // no core of this rank looks again
  }
}

void MpiTransport::leave(int /*device*/, DeviceLaunch& launch) noexcept {
  Directory& dir = *rt_.directory(rank_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (launch_ != &launch) return;
    launch_ = nullptr;
  }
  dir.left.store(launch.seq);
  // Ranks copying into this window (same host) finish first: they counted themselves before
  // they looked at `left`.
  while (dir.writers.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

bool MpiTransport::apply(const Pending& p, std::exception_ptr& error, bool entering) {
  const Signal& s = p.s;
  CoreArena* arena = nullptr;
  if (is_barrier_slot(s.slot)) {
    // Barrier semaphores outlive launches: any launch, once the core exists. A checked sender's
    // signal waits for this rank's checked books (made before the launch is entered), which
    // must see it before a wait can take it.
    if (p.note != nullptr && !entering && !observer()) return false;
    arena = CorePool::instance().arena_if_made(static_cast<int>(s.core));
  } else if (launch_ != nullptr && launch_->seq == static_cast<uint64_t>(s.seq) &&
             s.core < launch_->spec->num_cores) {
    arena = &launch_->pool->arena(static_cast<int>(s.core));
  }
  if (arena == nullptr) return false;
  // A copy into this core's VMEM or SMEM: its bytes land before the semaphore counts them, and
  // not before the core's books have made those memories (checked mode), which would erase them.
  RawRef landed_at;
  if (p.data != nullptr) {
    if (const std::shared_ptr<ArrivalObserver> books = observer();
        books != nullptr && !books->core_begun(static_cast<int>(s.core))) {
      return false;
    }
    try {
      landed_at = store_data(p, *arena);
    } catch (...) {
      if (!error) error = std::current_exception();
      return true;
    }
  }
  // The checked books see it first: the core that takes it must find it recorded.
  if (p.note != nullptr) {
    if (const std::shared_ptr<ArrivalObserver> books = observer()) {
      CheckNote local;
      if (p.data != nullptr) {  // the destination, as this rank's memory holds it
        local = *p.note;
        local.dst = landed_at;
      }
      std::exception_ptr e =
          books->arrived(p.from, static_cast<uint64_t>(s.seq), p.data ? local : *p.note,
                         static_cast<int>(s.core), s.slot, s.inc);
      if (e && !error) error = e;
    }
  }
  arena->semaphores()[s.slot].fetch_add(s.inc);
  arena->wait_queue().wake();
  return true;
}

void MpiTransport::deliver(const Signal& s, int from, std::shared_ptr<const CheckNote> note,
                           std::shared_ptr<const DataCopy> data, bool mailed) {
  std::exception_ptr race;
  deliver_locked(Pending{s, from, std::move(note), std::move(data), mailed}, race);
  // After the semaphore changed: a core that found every core blocked before this reads a
  // newer version (wait snapshots).
  version_.fetch_add(1);
  arrived();
  if (published_stuck_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_launch();
  }
  if (race) fail(rank_, race);
}

void MpiTransport::wake_launch() noexcept {
  if (launch_ == nullptr) return;
  for (int c = 0; c < launch_->spec->num_cores; ++c) launch_->pool->arena(c).wait_queue().wake();
}

void MpiTransport::deliver_locked(const Pending& p, std::exception_ptr& race) {
  const Signal& s = p.s;
  std::lock_guard<std::mutex> lock(mu_);
  if (p.from != rank_) {
    ++received_[static_cast<size_t>(p.from)];
    if (p.mailed) ++received_mailed_[static_cast<size_t>(p.from)];
  }
  if (apply(p, race)) return;
  if (p.data != nullptr && launch_ != nullptr && launch_->seq == static_cast<uint64_t>(s.seq)) {
    early_.push_back(p);  // its core has not begun yet: retry_landings() applies it
    landings_waiting_.store(true);
    rt_.wake_engine();  // which polls while landings wait
    return;
  }
  if (is_barrier_slot(s.slot) || static_cast<uint64_t>(s.seq) > entered_ ||
      (launch_ == nullptr && static_cast<uint64_t>(s.seq) == entered_ + 1)) {
    early_.push_back(p);
    return;
  }
  // A signal for a launch this rank has left: nothing will ever take it. The caller fails the
  // program with it (deliver), which tells every rank.
  if (!failed_.load() && !race) {
    race = std::make_exception_ptr(KernelError(
        ErrorKind::kInvalidArgument,
        fmt::format("tessera: device {} received a signal of {} for its launch #{} after it had "
                    "left that kernel: a device must wait (semaphore_wait / wait_recv) for "
                    "everything sent to it before its kernel ends",
                    mesh_.name(rank_), s.inc, s.seq),
        SourceLocation{}));
  }
}

void MpiTransport::cancel_launch() noexcept {
  arrived();  // waits outside semaphores look at failed_ now
  if (launch_ == nullptr) return;
  launch_->state->cancelled.store(true);
  for (int c = 0; c < launch_->spec->num_cores; ++c) launch_->pool->arena(c).wait_queue().wake();
}

int64_t MpiTransport::target_offset(const CoreContext& ctx, const Directory& dir, int target,
                                    const RawRef& dst, const char* op,
                                    std::source_location where) const {
  const DeviceLaunch& mine = *ctx.device->launch;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  view_span(dst, lo, hi);
  for (size_t k = 0; k < mine.buffers.size(); ++k) {
    const LaunchBuffer& b = mine.buffers[k];
    const auto base = reinterpret_cast<uintptr_t>(b.data);
    if (lo < base || hi > base + static_cast<uintptr_t>(b.bytes) || b.bytes == 0) continue;
    if (static_cast<int64_t>(k) >= dir.count || dir.offset[k] < 0 || dir.bytes[k] != b.bytes) {
      raise(ErrorKind::kShapeMismatch, op, where,
            fmt::format("the destination, {} {} of {} bytes here, has no counterpart of that size "
                        "in device {}'s window (its shards must have the same shapes, and its "
                        "arrays must be made after MPI started)",
                        b.is_output ? "output" : "input", b.index, b.bytes, mesh_.name(target)));
    }
    return dir.offset[k] + static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst.data) - base);
  }
  raise(ErrorKind::kInvalidArgument, op, where,
        "the destination is none of this kernel's outputs, aliased inputs, VMEM/SMEM scratch or "
        "run_scoped buffers, so no other device has it (a remote copy writes the same buffer on "
        "the target device; inputs are read-only)");
}

void MpiTransport::put(CoreContext& ctx, const RemoteCopy& copy) {
  constexpr const char* op = "remote_copy.start";
  const DeviceLaunch& mine = *ctx.device->launch;
  const int target = copy.target.device;
  const int core = copy.target.core >= 0 ? copy.target.core : ctx.core;
  const Signal landed{rt_.program(), static_cast<int64_t>(mine.seq), core, copy.recv_slot,
                      copy.bytes};
  if (put_core_memory(ctx, copy, target, landed)) return;
  if (target == rank_) {
    // This device's HBM (copies into VMEM and SMEM went through put_core_memory).
    native_engine().copy(nullptr, copy.src, copy.dst, op, copy.where);
    std::shared_ptr<const CheckNote> note;
    if (copy.note != nullptr) {
      auto n = std::make_shared<CheckNote>(*copy.note);
      n->dst = copy.dst;
      note = std::move(n);
    }
    deliver(landed, rank_, std::move(note));
    return;
  }
  if (!rt_.shared_memory()) {
    Directory dir;
    wait_for(
        ctx,
        [&] {
          // On the engine thread, which alone touches `dir` while the wait lasts.
          bool entered = false;
          rt_.call([&] {
            MPI_Get(&dir, sizeof(Directory), MPI_BYTE, target, 0, sizeof(Directory), MPI_BYTE,
                    rt_.window());
            MPI_Win_flush(target, rt_.window());
            entered = dir.entered.load() >= mine.seq || dir.failed.load() != 0;
          });
          return entered;
        },
        op, copy.where,
        [&] {
          return fmt::format("device {} has not entered launch #{}", mesh_.name(target), mine.seq);
        },
        [&] { return entry_wait(ctx, op, copy.where, target); });
    if (dir.failed.load() != 0) {
      failed_.store(true);  // its error is on its way (a cancel message)
      raise(ErrorKind::kCancelled, op, copy.where,
            fmt::format("cancelled: device {} failed, and its error is the one the program reports",
                        mesh_.name(target)));
    }
    if (dir.left.load() >= mine.seq || dir.entered.load() > mine.seq) {
      raise(ErrorKind::kInvalidArgument, op, copy.where,
            fmt::format("device {} has already left kernel '{}' (launch #{})", mesh_.name(target),
                        mine.spec->name, mine.seq));
    }
    const int64_t offset = target_offset(ctx, dir, target, copy.dst, op, copy.where);
    put_rma(ctx, copy, offset);
    send_signal(target, landed, copy.note, offset);
    return;
  }
  Directory& dir = *rt_.directory(target);
  wait_for(
      ctx, [&] { return dir.entered.load() >= mine.seq || dir.failed.load() != 0; }, op, copy.where,
      [&] {
        return fmt::format("device {} has not entered launch #{}", mesh_.name(target), mine.seq);
      },
      [&] { return entry_wait(ctx, op, copy.where, target); });
  // Count this writer, then look (leave() marks the launch left, then waits for writers).
  dir.writers.fetch_add(1);
  struct Release {
    Directory& d;
    ~Release() { d.writers.fetch_sub(1); }
  } guard{dir};
  if (dir.failed.load() != 0) {
    failed_.store(true);  // its error is on its way (a cancel message)
    raise(ErrorKind::kCancelled, op, copy.where,
          fmt::format("cancelled: device {} failed, and its error is the one the program reports",
                      mesh_.name(target)));
  }
  if (dir.left.load() >= mine.seq || dir.entered.load() != mine.seq) {
    raise(ErrorKind::kInvalidArgument, op, copy.where,
          fmt::format("device {} has already left kernel '{}' (launch #{}): nothing there waits "
                      "for this any more",
                      mesh_.name(target), mine.spec->name, mine.seq));
  }
  RawRef dst = copy.dst;
  const int64_t offset = target_offset(ctx, dir, target, copy.dst, op, copy.where);
  dst.data = rt_.segment(target) + offset;
  {
    const CopyEvent event(copy.src, dst, op);
    native_engine().copy(nullptr, copy.src, dst, op, copy.where);
  }
  // The bytes are in the target's memory before the message that tells it so is sent.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  send_signal(target, landed, copy.note, offset);
}

void MpiTransport::put_rma(CoreContext& ctx, const RemoteCopy& copy, int64_t offset) {
  // Pack the source, then put each contiguous row of the destination view.
  const int64_t item = itemsize(copy.src.dtype);
  std::vector<std::byte> packed(static_cast<size_t>(copy.bytes));
  const RawRef staged{packed.data(), copy.src.dtype, MemorySpace::VMEM, copy.src.shape,
                      row_major_strides(copy.src.shape)};
  native_engine().copy(nullptr, copy.src, staged, "remote_copy.start", copy.where);
  const RawRef& d = copy.dst;
  const int rank = d.shape.rank();
  const bool contiguous_rows = rank == 0 || d.strides[rank - 1] == 1;
  const int64_t row = rank == 0 ? 1 : (contiguous_rows ? d.shape[rank - 1] : 1);
  const int64_t rows = copy.bytes / item / row;
  std::vector<int64_t> idx(static_cast<size_t>(std::max(rank, 1)), 0);
  const int target = copy.target.device;
  (void)ctx;
  rt_.call([&] {
    for (int64_t r = 0; r < rows; ++r) {
      // The element offset of this row's first element in the destination view.
      int64_t elem = 0;
      int64_t rest = r * row;
      for (int a = rank - 1; a >= 0; --a) {
        const int64_t i = rest % d.shape[a];
        rest /= d.shape[a];
        elem += i * d.strides[a];
      }
      MPI_Put(packed.data() + r * row * item, static_cast<int>(row * item), MPI_BYTE, target,
              static_cast<MPI_Aint>(offset + elem * item), static_cast<int>(row * item), MPI_BYTE,
              rt_.window());
    }
    MPI_Win_flush(target, rt_.window());
  });
}

void MpiTransport::signal(CoreContext& ctx, DeviceTarget target, int64_t slot, int64_t inc,
                          const char* /*op*/, std::source_location /*where*/,
                          const CheckNote* note) {
  const int core = target.core >= 0 ? target.core : ctx.core;
  const Signal s{rt_.program(), static_cast<int64_t>(ctx.device->launch->seq), core, slot, inc};
  if (target.device == rank_) {
    deliver(s, rank_, note == nullptr ? nullptr : std::make_shared<CheckNote>(*note));
  } else {
    send_signal(target.device, s, note);
  }
}

void MpiTransport::fail(int /*device*/, std::exception_ptr error) noexcept {
  // A cancellation is the consequence of a failure, not one: it stops this rank's launch only.
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kCancelled) {
      // Another device failed (its error arrives, or has arrived, as a cancel message): what
      // reaches this rank after its launch has stopped is no error of its own.
      publish_failed();
      std::lock_guard<std::mutex> lock(mu_);
      failed_.store(true);
      cancel_launch();
      return;
    }
  } catch (...) {
  }
  publish_failed();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) {
      failure_ = error;
      first = true;
    }
    failed_.store(true);
    cancel_launch();
  }
  if (!first) return;
  // Tell the other ranks, with the error's text, so that each can stop and report it.
  int kind = static_cast<int>(ErrorKind::kUserException);
  std::string text = "an exception that is not a std::exception";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    kind = static_cast<int>(e.kind());
    text = e.what();
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
  }
  rt_.send_cancel(kind, text);
}

void MpiTransport::publish_failed() noexcept {
  // For the others' remote copies, before this rank leaves its launch (across hosts, read by
  // MPI_Get after a sync): it stopped because a device failed.
  rt_.directory(rank_)->failed.store(1);
  if (!rt_.shared_memory()) {
    try {
      rt_.post([this] { MPI_Win_sync(rt_.window()); });
    } catch (...) {
    }
  }
}

void MpiTransport::cancelled_by(int rank, int kind, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_) {
    // A deadlock over every rank is every rank's error, not the reporting rank's.
    failure_ = std::make_exception_ptr(KernelError(
        static_cast<ErrorKind>(kind),
        static_cast<ErrorKind>(kind) == ErrorKind::kDeadlock
            ? message
            : fmt::format("device {} (rank {}) failed: {}", mesh_.name(rank), rank, message),
        SourceLocation{}));
  }
  failed_.store(true);
  cancel_launch();
}

void MpiTransport::finished(int /*device*/) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  publish(2, version_.load(), fmt::format("device {} has finished its program", mesh_.name(rank_)));
}

std::exception_ptr MpiTransport::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

uint64_t MpiTransport::entered(int device) const {
  if (device == rank_) return entered_;
  return rt_.shared_memory() ? rt_.directory(device)->entered.load() : 0;
}

bool MpiTransport::done(int device) const { return device == rank_ && done_; }

}  // namespace tessera::detail::mpi
