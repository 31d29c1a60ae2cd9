// The MPI runtime (mpi_runtime.h): MPI and the window, the engine thread, programs run as this
// rank's device, and the registration that makes the core library use it.
#include "mpi/mpi_runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

#include "core/input_checks.h"
#include "mpi/mpi_huge_window.h"
#include "mpi/mpi_transport.h"
#include "runtime/core_pool.h"
#include "runtime/spin.h"
#include "tessera/device.h"
#include "tessera/error.h"

// Linked in through tessera::mpi's interface link options (--undefined), so that the static
// registration below runs in every program that links the component.
extern "C" {
int tessera_mpi_anchor = 0;
}

namespace tessera::detail::mpi {

namespace {
constexpr int kTagSignal = 101;
constexpr int kTagCancel = 102;
constexpr int64_t kDefaultHeap = int64_t{2} << 30;

bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

std::string lower(const char* s) {
  std::string r = s == nullptr ? "" : s;
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

struct Registration {
  Registration() { register_distributed_runtime(&MpiRuntime::instance()); }
} g_registration;
}  // namespace

// ---- the runtime
// -----------------------------------------------------------------------------------

MpiRuntime& MpiRuntime::instance() {
  static MpiRuntime* r = new MpiRuntime();  // never destroyed: finalised at exit
  return *r;
}

bool MpiRuntime::active() {
  std::call_once(once_, [this] {
    if (!under_launcher() || lower(std::getenv("TESSERA_TRANSPORT")) == "inprocess") return;
    init();
    active_ = true;
  });
  return active_;
}

int MpiRuntime::rank() { return rank_; }
int MpiRuntime::size() { return size_; }

void MpiRuntime::init() {
  // Read before MPI starts: a setting that is not one raises here, on every rank alike.
  const bool huge_allowed = huge_window_allowed();
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    initialised_here_ = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  shm_ = node_size == size_ && lower(std::getenv("TESSERA_MPI_TRANSPORT")) != "rma";
  heap_bytes_ = env_integer("TESSERA_SYMMETRIC_HEAP", int64_t{1} << 20, int64_t{1} << 40,
                            "a byte count", "MPI start", std::source_location::current())
                    .value_or(kDefaultHeap);
  void* base = nullptr;
  segments_.assign(static_cast<size_t>(size_), nullptr);
  // Every rank takes part in map() (collective), whatever its own TESSERA_MPI_HUGE_PAGES says.
  if (shm_ && huge_.map(comm_, heap_bytes_, huge_allowed)) {
    for (int r = 0; r < size_; ++r) segments_[static_cast<size_t>(r)] = huge_.segment(r);
    base = segments_[static_cast<size_t>(rank_)];
  } else if (shm_) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    MPI_Win_allocate_shared(heap_bytes_, 1, info, node, &base, &win_);
    MPI_Info_free(&info);
    for (int r = 0; r < size_; ++r) {
      MPI_Aint bytes = 0;
      int disp = 0;
      void* p = nullptr;
      MPI_Win_shared_query(win_, r, &bytes, &disp, &p);
      segments_[static_cast<size_t>(r)] = static_cast<std::byte*>(p);
    }
  } else {
    MPI_Win_allocate(heap_bytes_, 1, MPI_INFO_NULL, comm_, &base, &win_);
    segments_[static_cast<size_t>(rank_)] = static_cast<std::byte*>(base);
  }
  MPI_Comm_free(&node);
  if (win_ != MPI_WIN_NULL) MPI_Win_lock_all(MPI_MODE_NOCHECK, win_);
  auto* dir = new (base) Directory();
  new (static_cast<std::byte*>(base) + kDirectoryPage) Mailbox();
  if (shm_) bell_ = &dir->bell;
  if (win_ != MPI_WIN_NULL) MPI_Win_sync(win_);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  MPI_Barrier(comm_);  // every directory exists before anyone reads one
  heap_ = std::make_unique<WindowHeap>(static_cast<std::byte*>(base) + kDirectoryBytes,
                                       heap_bytes_ - kDirectoryBytes, &huge_);
  set_hbm_heap(heap_.get());
  engine_ = std::thread([this] { engine_main(); });
  std::atexit([] { instance().finalize(); });
}

void MpiRuntime::finalize() noexcept {
  if (!engine_.joinable()) return;
  stop_.store(true);
  ring(rank_);
  engine_.join();
  heap_->close();
  if (win_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  huge_.unmap();
  MPI_Comm_free(&comm_);
  if (initialised_here_) MPI_Finalize();
}

Directory* MpiRuntime::directory(int rank) const noexcept {
  return reinterpret_cast<Directory*>(segments_[static_cast<size_t>(rank)]);
}

std::byte* MpiRuntime::segment(int rank) const noexcept {
  return segments_[static_cast<size_t>(rank)];
}

// ---- the engine thread
// -------------------------------------------------------------------------------

void MpiRuntime::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  ring(rank_);
}

void MpiRuntime::ring(int rank) noexcept {
  if (!shm_) {
    if (rank != rank_) return;  // another host's engine polls
    kick_.fetch_add(1);
    futex_wake(kick_, true);
    return;
  }
  std::atomic<uint32_t>& bell = directory(rank)->bell;
  bell.fetch_add(1);
  futex_wake(bell, true, /*shared=*/true);
}

void MpiRuntime::call(const std::function<void()>& job) {
  if (std::this_thread::get_id() == engine_.get_id()) return job();
  std::atomic<uint32_t> done{0};
  std::exception_ptr error;
  post([&] {
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    done.store(1);
    futex_wake(done, true);
  });
  while (done.load() == 0) futex_wait_for(done, 0u, 1000000);
  if (error) std::rethrow_exception(error);
}

namespace {
template <class T>
void append(std::vector<char>& out, const T* p, size_t n) {
  const auto* b = reinterpret_cast<const char*>(p);
  out.insert(out.end(), b, b + n * sizeof(T));
}

// Interned file names: a SourceLocation keeps a pointer to its file name.
const char* intern(std::string name) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>();  // never destroyed: errors may outlive statics
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(std::move(name)).first->c_str();
}
}  // namespace

namespace {
// A signal message's bytes: the Signal, then the checked note if there is one.
std::vector<char> signal_bytes(const Signal& s, const CheckNote* note, int64_t offset) {
  std::vector<char> buf;
  buf.reserve(sizeof(Signal) + (note != nullptr ? sizeof(NoteWire) + 256 : 0));
  append(buf, &s, 1);
  if (note != nullptr) {
    const std::string file = note->where.file_name() == nullptr ? "" : note->where.file_name();
    const RawRef& d = note->dst;
    const NoteWire w{note->from_core,
                     note->cores_per_device,
                     static_cast<int32_t>(note->where.line()),
                     note->copy ? 1 : 0,
                     static_cast<int32_t>(note->clock.size()),
                     static_cast<int32_t>(file.size()),
                     static_cast<int32_t>(d.dtype),
                     note->copy ? d.shape.rank() : 0,
                     static_cast<int32_t>(note->states.size()),
                     static_cast<int32_t>(note->origins.size()),
                     static_cast<int64_t>(note->barrier_seq),
                     offset,
                     note->bytes};
    append(buf, &w, 1);
    for (int a = 0; a < w.rank; ++a) {
      const int64_t v = d.shape[a];
      append(buf, &v, 1);
    }
    for (int a = 0; a < w.rank; ++a) {
      const int64_t v = d.strides[a];
      append(buf, &v, 1);
    }
    append(buf, note->clock.data(), note->clock.size());
    append(buf, file.data(), file.size());
    append(buf, note->states.data(), note->states.size());
    for (const CheckNote::Origin& o : note->origins) {
      const std::string f = o.where.file_name() == nullptr ? "" : o.where.file_name();
      const OriginWire ow{static_cast<int32_t>(o.where.line()), o.core,
                          static_cast<int32_t>(f.size()), static_cast<int32_t>(o.source.size())};
      append(buf, &ow, 1);
      append(buf, f.data(), f.size());
      append(buf, o.source.data(), o.source.size());
    }
  }
  return buf;
}
}  // namespace

bool MpiRuntime::send_signal(int rank, const Signal& s, const CheckNote* note, int64_t offset) {
  if (note == nullptr && mail(rank, Mailbox::Letter{Mailbox::Kind::kSignal, rank_, s})) return true;
  send_bytes(rank, kTagSignal, signal_bytes(s, note, offset));
  return false;
}

void MpiRuntime::send_data(int rank, const Signal& s, const DataCopy& data, const CheckNote* note) {
  const std::vector<char> signal = signal_bytes(s, note, -1);
  const int rank_of_view = data.shape.rank();
  const DataWire w{static_cast<int32_t>(data.space),
                   static_cast<int32_t>(data.dtype),
                   rank_of_view,
                   0,
                   data.offset,
                   static_cast<int64_t>(data.bytes.size())};
  std::vector<char> buf;
  buf.reserve(signal.size() + sizeof(DataWire) + data.bytes.size() +
              2 * sizeof(int64_t) * static_cast<size_t>(rank_of_view));
  append(buf, &s, 1);
  append(buf, &w, 1);
  append(buf, data.shape.begin(), static_cast<size_t>(rank_of_view));
  append(buf, data.strides.data(), static_cast<size_t>(rank_of_view));
  append(buf, data.bytes.data(), data.bytes.size());
  buf.insert(buf.end(), signal.begin() + sizeof(Signal), signal.end());
  send_bytes(rank, kTagData, std::move(buf));
}

void MpiRuntime::send_bytes(int rank, int tag, std::vector<char> bytes) {
  post([this, rank, tag, bytes = std::move(bytes)]() mutable {
    isend(rank, tag, std::make_unique<std::vector<char>>(std::move(bytes)));
  });
}

void MpiRuntime::isend(int rank, int tag, std::unique_ptr<std::vector<char>> bytes) {
  Send s{MPI_REQUEST_NULL, rank, std::move(bytes)};
  MPI_Isend(s.bytes->data(), static_cast<int>(s.bytes->size()), MPI_BYTE, rank, tag, comm_,
            &s.request);
  ring(rank);
  // A small message on one host is complete at once (copied into the target's queue, which its
  // engine reads when the bell wakes it); only one that is not is kept, to be tested until it is.
  int done = 0;
  MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
  if (done == 0) sends_.push_back(std::move(s));
}

namespace {
// The note after a signal's bytes, or null; `segment`: this rank's window (a copy's target).
std::shared_ptr<CheckNote> read_note(const std::vector<char>& bytes, std::byte* segment) {
  size_t at = sizeof(Signal);
  if (bytes.size() < at + sizeof(NoteWire)) return nullptr;
  NoteWire w;
  std::memcpy(&w, bytes.data() + at, sizeof(NoteWire));
  at += sizeof(NoteWire);
  const size_t need = at + 2 * sizeof(int64_t) * static_cast<size_t>(w.rank) +
                      sizeof(uint32_t) * static_cast<size_t>(w.clock_len) +
                      static_cast<size_t>(w.file_len) + static_cast<size_t>(w.states_len);
  if (w.rank < 0 || w.clock_len < 0 || w.file_len < 0 || w.states_len < 0 || w.origins < 0 ||
      bytes.size() < need) {
    return nullptr;
  }
  auto note = std::make_shared<CheckNote>();
  note->from_core = w.from_core;
  note->cores_per_device = w.cores_per_device;
  note->copy = w.copy != 0;
  note->barrier_seq = static_cast<uint64_t>(w.barrier_seq);
  note->bytes = w.bytes;
  std::vector<int64_t> shape(static_cast<size_t>(w.rank));
  std::vector<int64_t> strides(static_cast<size_t>(w.rank));
  std::memcpy(shape.data(), bytes.data() + at, shape.size() * sizeof(int64_t));
  at += shape.size() * sizeof(int64_t);
  std::memcpy(strides.data(), bytes.data() + at, strides.size() * sizeof(int64_t));
  at += strides.size() * sizeof(int64_t);
  note->clock.resize(static_cast<size_t>(w.clock_len));
  std::memcpy(note->clock.data(), bytes.data() + at, note->clock.size() * sizeof(uint32_t));
  at += note->clock.size() * sizeof(uint32_t);
  note->where =
      SourceLocation(intern(std::string(bytes.data() + at, static_cast<size_t>(w.file_len))),
                     static_cast<uint_least32_t>(w.line), "");
  at += static_cast<size_t>(w.file_len);
  note->states.assign(bytes.begin() + static_cast<long>(at),
                      bytes.begin() + static_cast<long>(at + static_cast<size_t>(w.states_len)));
  at += static_cast<size_t>(w.states_len);
  for (int i = 0; i < w.origins; ++i) {
    OriginWire ow;
    if (at + sizeof(ow) > bytes.size()) return nullptr;
    std::memcpy(&ow, bytes.data() + at, sizeof(ow));
    at += sizeof(ow);
    const auto f = static_cast<size_t>(ow.file_len);
    const auto s = static_cast<size_t>(ow.source_len);
    if (ow.file_len < 0 || ow.source_len < 0 || at + f + s > bytes.size()) return nullptr;
    CheckNote::Origin o;
    o.where = SourceLocation(intern(std::string(bytes.data() + at, f)),
                             static_cast<uint_least32_t>(ow.line), "");
    o.core = ow.core;
    o.source.assign(bytes.data() + at + f, s);
    at += f + s;
    note->origins.push_back(std::move(o));
  }
  if (at != bytes.size()) return nullptr;
  if (note->copy && w.offset >= 0) {
    note->dst.data = segment + w.offset;
    note->dst.dtype = static_cast<DType>(w.dtype);
    note->dst.space = MemorySpace::HBM;
    note->dst.shape = Shape(shape);
    SmallVec st;
    for (int64_t v : strides) st.push_back(v);
    note->dst.strides = st;
  }
  return note;
}
}  // namespace

void MpiRuntime::send_cancel(int kind, const std::string& message) {
  // The program it stops: a rank that has already learnt of an earlier failure of the program
  // may be in the next one when this arrives.
  const int64_t program = program_;
  post([this, kind, message, program] {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      auto buf = std::make_unique<std::vector<char>>();
      put_i64(*buf, program);
      const size_t at = buf->size();
      buf->resize(at + sizeof(int) + message.size());
      std::memcpy(buf->data() + at, &kind, sizeof(int));
      std::memcpy(buf->data() + at + sizeof(int), message.data(), message.size());
      isend(r, kTagCancel, std::move(buf));
    }
  });
}

std::shared_ptr<std::atomic<bool>> MpiRuntime::barrier() {
  auto done = std::make_shared<std::atomic<bool>>(false);
  post([this, done] {
    MPI_Request req;
    MPI_Ibarrier(comm_, &req);
    barriers_.emplace_back(req, done);
  });
  return done;
}

void MpiRuntime::handle_message(int source, const std::vector<char>& bytes, int tag) {
  if (transport_ == nullptr) return;  // between programs: nothing can take it
  if (tag == kTagSignal && bytes.size() >= sizeof(Signal)) {
    Signal s;
    std::memcpy(&s, bytes.data(), sizeof(Signal));
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the sender's copy is visible first
    // Older programs' signals are stale.
    if (s.program == program_) transport_->deliver(s, source, read_note(bytes, segment(rank_)));
  } else if (tag == kTagEnter) {
    transport_->entered_message(source, bytes);
  } else if (tag == kTagBodies) {
    transport_->bodies_message(source, bytes);
  } else if (tag == kTagData) {
    handle_data(source, bytes);
  } else if (tag >= kTagWaits && tag <= kTagWaitsAck) {
    transport_->waits_message(source, tag, bytes);
  } else if (tag == kTagCancel && bytes.size() >= sizeof(int64_t) + sizeof(int)) {
    size_t at = 0;
    if (get_i64(bytes, at) != program_) return;  // an earlier program's failure
    int kind = 0;
    std::memcpy(&kind, bytes.data() + at, sizeof(int));
    transport_->cancelled_by(
        source, kind,
        std::string(bytes.begin() + static_cast<long>(at + sizeof(int)), bytes.end()));
  }
}

void MpiRuntime::handle_data(int source, const std::vector<char>& bytes) {
  // The Signal, the DataWire, the view's shape and strides, the bytes, then a signal's note.
  size_t at = sizeof(Signal) + sizeof(DataWire);
  if (bytes.size() < at) return;
  Signal s;
  DataWire w;
  std::memcpy(&s, bytes.data(), sizeof(Signal));
  std::memcpy(&w, bytes.data() + sizeof(Signal), sizeof(DataWire));
  if (w.rank < 0 || w.rank > kMaxRank || w.bytes < 0) return;
  const size_t dims = static_cast<size_t>(w.rank) * sizeof(int64_t);
  if (bytes.size() < at + 2 * dims + static_cast<size_t>(w.bytes)) return;
  auto data = std::make_shared<DataCopy>();
  data->space = static_cast<MemorySpace>(w.space);
  data->dtype = static_cast<DType>(w.dtype);
  data->offset = w.offset;
  SmallVec shape(w.rank);
  SmallVec strides(w.rank);
  std::memcpy(shape.data(), bytes.data() + at, dims);
  std::memcpy(strides.data(), bytes.data() + at + dims, dims);
  at += 2 * dims;
  data->shape = Shape(std::move(shape));
  data->strides = std::move(strides);
  const auto* payload = reinterpret_cast<const std::byte*>(bytes.data() + at);
  data->bytes.assign(payload, payload + w.bytes);
  at += static_cast<size_t>(w.bytes);
  // What follows is a signal message's tail: rebuild one to read its note.
  std::vector<char> signal(bytes.data(), bytes.data() + sizeof(Signal));
  signal.insert(signal.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.end());
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (s.program == program_) {
    transport_->deliver(s, source, read_note(signal, segment(rank_)), std::move(data));
  }
}

bool MpiRuntime::poll_messages() {
  bool any = false;
  for (;; any = true) {
    int flag = 0;
    MPI_Status status;
    // Twice when the first finds nothing: Open MPI's MPI_Iprobe looks for a match, then runs the
    // progress engine, which may bring the message in, and answers from the first look.
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &status);
    if (flag == 0) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &status);
    if (flag == 0) return any;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::vector<char> bytes(static_cast<size_t>(count));
    MPI_Recv(bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm_,
             MPI_STATUS_IGNORE);
    handle_message(status.MPI_SOURCE, bytes, status.MPI_TAG);
  }
}

bool MpiRuntime::engine_busy() const {
  return !sends_.empty() || !barriers_.empty() ||
         (transport_ != nullptr && transport_->landings_waiting());
}

void MpiRuntime::engine_main() {
  // How long the engine sleeps (mpi_runtime.h): kShortest while something it must poll MPI for
  // is pending; on one host until its bell rings (kQuiet at most); across hosts, while a program
  // runs, kShortest and then longer each time up to kLongest, and kQuiet between programs.
  constexpr auto kShortest = std::chrono::microseconds(20);
  constexpr auto kLongest = std::chrono::microseconds(200);
  constexpr auto kQuiet = std::chrono::microseconds(5000);
  auto idle = kShortest;
  while (!stop_.load()) {
    const uint32_t seen = bell_->load();
    std::deque<std::function<void()>> jobs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs.swap(jobs_);
    }
    for (auto& job : jobs) job();
    bool received = poll_messages();
    if (shm_ && transport_ != nullptr && drain_mail(*transport_)) received = true;
    if (transport_ != nullptr) transport_->retry_landings();
    std::erase_if(sends_, [&](Send& send) {
      int done = 0;
      MPI_Test(&send.request, &done, MPI_STATUS_IGNORE);
      // Rung again: a message that was not complete when the bell first rang is now.
      if (done != 0) ring(send.target);
      return done != 0;
    });
    for (size_t i = 0; i < barriers_.size();) {
      int done = 0;
      MPI_Test(&barriers_[i].first, &done, MPI_STATUS_IGNORE);
      if (done != 0) {
        barriers_[i].second->store(true);
        barriers_.erase(barriers_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    if (!jobs.empty() || received) {
      idle = kShortest;
      continue;
    }
    std::chrono::microseconds sleep = kQuiet;
    if (engine_busy()) {
      sleep = kShortest;
    } else if (!shm_ && transport_ != nullptr) {
      if (prompt_.load() != 0) idle = kShortest;  // a launch waits for messages
      sleep = idle;
      idle = std::min(idle * 2, kLongest);
    }
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(sleep).count();
    futex_wait_for(*bell_, seen, ns, /*shared=*/shm_);
  }
}

// ---- programs
// -----------------------------------------------------------------------------------------

void MpiRuntime::run_program(const Mesh& mesh, FunctionRef<void(int)> job,
                             std::source_location where) {
  if (mesh.size() != size_) {
    raise(ErrorKind::kInvalidArgument, "jax::shard_map", where,
          fmt::format("the mesh has {} device{} but this MPI job has {} rank{} (one device per "
                      "rank): start it with mpirun -np {}, or make the mesh from "
                      "jax::device_count()",
                      mesh.size(), mesh.size() == 1 ? "" : "s", size_, size_ == 1 ? "" : "s",
                      mesh.size()));
  }
  // A new program: this rank's directory starts empty (launches are numbered from 1 again), and
  // no rank starts before every rank has cleared its own.
  Directory& dir = *directory(rank_);
  dir.entered.store(0);
  dir.left.store(0);
  dir.failed.store(0);
  if (!shm_) call([&] { MPI_Win_sync(win_); });
  MpiTransport transport(mesh_info(mesh), *this);
  call([&] {
    ++program_;
    transport_ = &transport;
  });
  const auto started = barrier();
  while (!started->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::exception_ptr error;
  run_as_device(transport, rank_, job, error);
  // Halves of remote copies this rank's checked kernels carried and no later call waited for
  // fail the program on every rank, as any rank's failure does.
  if (!error && !transport.failure()) {
    check_never_waited(transport, error);
    if (error) transport.fail(rank_, error);
  }
  // Every rank ends the program together (sleeping, not spinning), then learns whether any
  // failed: a failed rank sent its error to all before it got here.
  const auto barrier_done = barrier();
  while (!barrier_done->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  // Every letter any rank sent in the program is in the mailbox now: one that reached this rank
  // after it left the launch it was for is a failure of the program.
  if (shm_) call([&] { drain_mail(transport); });
  int failed = transport.failure() ? 1 : 0;
  call([&] { MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, comm_); });
  while (failed != 0 && !transport.failure()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // the cancel is on its way
  }
  // The error of record: the first failure (this rank's, or another's that cancelled this one).
  if (std::exception_ptr first = transport.failure()) error = first;
  call([&] { transport_ = nullptr; });
  check_barrier_semaphores(transport.mesh(), rank_, CorePool::instance(), error, where);
  if (error) std::rethrow_exception(error);
}

}  // namespace tessera::detail::mpi
