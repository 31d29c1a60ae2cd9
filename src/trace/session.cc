// trace::Session: starts a recording, and on stop collects the events and writes the outputs.
// Also the session TESSERA_TRACE starts for the whole process.
#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>

#include "tessera/error.h"
#include "tessera/trace.h"
#include "trace/analysis.h"

namespace tessera::trace {

namespace {

thread_local const char* t_owner = "trace::Session";

[[noreturn]] void fail(const std::string& msg,
                       std::source_location where = std::source_location::current()) {
  throw UsageError(ErrorKind::kInvalidArgument, msg, where);
}

// Checks that `path` can be written without leaving a file behind that was not there.
void check_writable(const std::string& path, const char* what, std::source_location where) {
  if (path.empty()) return;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (existed && std::filesystem::is_directory(path, ec)) {
    fail(fmt::format("tessera: trace::Session: the {} path '{}' is a directory; give a file name",
                     what, path),
         where);
  }
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    fail(fmt::format("tessera: trace::Session: cannot write the {} '{}': {}; check that its "
                     "folder exists and is writable",
                     what, path, std::strerror(errno)),
         where);
  }
  std::fclose(f);
  if (!existed) std::filesystem::remove(path, ec);
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (f) f.close();
  if (!f) {
    fail(
        fmt::format("tessera: trace::Session: writing the {} '{}' failed: {}; check the path and "
                    "the free space",
                    what, path, std::strerror(errno)));
  }
}

}  // namespace

struct Session::Data {
  Options options;
  bool stopped = false;
  detail::Collected collected;
  std::vector<KernelSummary> summary;
  std::string calibration_note;
};

bool compiled_in() noexcept { return TESSERA_TRACE_COMPILED != 0; }

Session::Session(Options options, std::source_location where) : data_(std::make_unique<Data>()) {
  data_->options = std::move(options);
  check_writable(data_->options.trace_path, "trace file", where);
  check_writable(data_->options.timeline_path, "timeline file", where);
  detail::begin_session(t_owner, where);
}

Session::~Session() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
  }
}

void Session::stop() {
  if (data_->stopped) return;
  data_->stopped = true;
  data_->collected = detail::end_session();
  std::optional<Calibration> cal;
  try {
    cal = load_calibration();
    data_->calibration_note =
        cal ? fmt::format("calibrated {:.1f} GB/s, {:.1f} GFLOP/s FMA per core ({})",
                          cal->peak_gbps(), cal->fma_gflops_per_core, calibration_path())
            : "no calibration of this machine yet; run `tessera info --calibrate` for % of peak";
  } catch (const Error& e) {
    data_->calibration_note = e.detail().empty() ? e.what() : e.detail();
  }
  data_->summary = detail::summarize(data_->collected, cal);
  const Options& o = data_->options;
  if (!o.trace_path.empty()) {
    write_file(o.trace_path, detail::chrome_json(data_->collected), "trace file");
  }
  if (!o.timeline_path.empty()) {
    write_file(o.timeline_path, detail::timeline_svg(data_->collected), "timeline file");
  }
  if (o.print_summary) {
    std::ostream& os = o.summary_stream != nullptr ? *o.summary_stream : std::cerr;
    os << summary_text();
    if (!o.trace_path.empty()) os << "  trace: " << o.trace_path << " (open in ui.perfetto.dev)\n";
    if (!o.timeline_path.empty()) os << "  timeline: " << o.timeline_path << "\n";
    os.flush();
  }
}

const std::vector<KernelSummary>& Session::summary() const { return data_->summary; }
std::string Session::summary_text() const {
  return detail::summary_text(data_->summary, data_->collected, data_->calibration_note);
}
std::string Session::chrome_json() const { return detail::chrome_json(data_->collected); }
std::string Session::timeline_svg() const { return detail::timeline_svg(data_->collected); }
size_t Session::num_events() const { return data_->collected.events.size(); }

namespace detail {
void start_from_env() {
  // Every launch comes here: after the first, one load instead of std::call_once (which sets two
  // thread-local pointers and calls pthread_once on every call).
  static std::atomic<bool> looked{false};
  if (looked.load(std::memory_order_acquire)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("TESSERA_TRACE");
    if (env == nullptr || *env == '\0') return;
    touch_registry();  // the registry outlives the session below (statics die in reverse order)
    static std::unique_ptr<Session> session;
    t_owner = "TESSERA_TRACE";
    struct Reset {
      ~Reset() { t_owner = "trace::Session"; }
    } reset;
    try {
      Options options;
      options.trace_path = env;
      session = std::make_unique<Session>(std::move(options));
    } catch (const Error& e) {
      throw UsageError(
          e.kind(),
          fmt::format("{} (from TESSERA_TRACE='{}'; unset it to run untraced)", e.what(), env),
          std::source_location{});
    }
  });
  looked.store(true, std::memory_order_release);
}
}  // namespace detail

}  // namespace tessera::trace
