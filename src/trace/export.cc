// Chrome Trace Event JSON (the format Perfetto and chrome://tracing open). Layout: pid 0 is the
// device (this process's mesh); core c has two threads, "core c" (tid 2c: the launch, grid
// steps, VPU/MXU ops and waits, which nest) and "core c DMA" (tid 2c + 1: copies, elided and
// prefetched blocks), so that DMA shows as its own lane beside compute.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "trace/analysis.h"

namespace tessera::trace::detail {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += ch;
    }
  }
  return out;
}

namespace {

const char* category(Kind k) {
  switch (k) {
    case Kind::kCore:
      return "launch";
    case Kind::kStep:
      return "grid_step";
    case Kind::kVpu:
      return "vpu";
    case Kind::kMxu:
      return "mxu";
    case Kind::kWait:
      return "wait";
    case Kind::kDma:
      return "dma";
    case Kind::kWholeArray:
      return "note";
  }
  return "?";
}

// ns as microseconds with three decimals: exact, so that nesting survives the round trip.
std::string us(int64_t ns) {
  return fmt::format("{}.{:03d}", ns / 1000, static_cast<int>(ns % 1000));
}

}  // namespace

std::string chrome_json(const Collected& c) {
  std::vector<const Event*> ev;
  ev.reserve(c.events.size());
  std::set<int> cores;
  for (const Event& e : c.events) {
    cores.insert(e.core);
    if (e.kind != Kind::kWholeArray) ev.push_back(&e);
  }
  auto tid = [](const Event& e) { return 2 * e.core + (e.kind == Kind::kDma ? 1 : 0); };
  // Per thread by start; an enclosing span (longer) before what it encloses.
  std::stable_sort(ev.begin(), ev.end(), [&](const Event* a, const Event* b) {
    if (tid(*a) != tid(*b)) return tid(*a) < tid(*b);
    if (a->t0 != b->t0) return a->t0 < b->t0;
    if (a->t1 != b->t1) return a->t1 > b->t1;
    return a->kind < b->kind;
  });
  std::string out;
  out.reserve(256 + ev.size() * 160);
  out += "{\"displayTimeUnit\": \"ns\",\n\"otherData\": {\"producer\": \"tessera\", ";
  out += fmt::format("\"launches\": {}, \"duration_us\": {}}},\n\"traceEvents\": [\n",
                     c.launches.size(), us(c.duration_ns));
  out +=
      "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": "
      "{\"name\": \"device 0 (this CPU)\"}}";
  for (const int core : cores) {
    out += fmt::format(
        ",\n{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": {}, \"args\": "
        "{{\"name\": \"core {}\"}}}}",
        2 * core, core);
    out += fmt::format(
        ",\n{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": {}, \"args\": "
        "{{\"name\": \"core {} DMA\"}}}}",
        2 * core + 1, core);
    for (int lane = 0; lane < 2; ++lane) {
      out += fmt::format(
          ",\n{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": 0, \"tid\": {}, "
          "\"args\": {{\"sort_index\": {}}}}}",
          2 * core + lane, 2 * core + lane);
    }
  }
  for (const Event* p : ev) {
    const Event& e = *p;
    const LaunchRecord* l = e.launch >= 0 && static_cast<size_t>(e.launch) < c.launches.size()
                                ? &c.launches[e.launch]
                                : nullptr;
    std::string name;
    std::string args = fmt::format("\"launch\": {}", e.launch);
    switch (e.kind) {
      case Kind::kCore:
        name = l != nullptr ? l->kernel : std::string("kernel");
        args += fmt::format(", \"kernel\": \"{}\", \"num_cores\": {}", json_escape(name),
                            l != nullptr ? l->num_cores : 0);
        break;
      case Kind::kStep:
        name = fmt::format("step {}", e.step);
        args += fmt::format(", \"step\": {}, \"op\": \"{}\"", e.step, json_escape(e.name));
        break;
      case Kind::kVpu:
      case Kind::kMxu:
        name = e.name;
        args += fmt::format(", \"flops\": {}, \"bytes\": {}", e.flops, e.bytes);
        break;
      case Kind::kWait:
        name = e.name;
        args += fmt::format(", \"stall_ns\": {}, \"dma\": {}", e.t1 - e.t0,
                            e.dma_wait ? "true" : "false");
        break;
      case Kind::kDma:
        name = fmt::format("{} {}->{} ({})", e.name, to_string(e.src), to_string(e.dst),
                           to_string(e.mode));
        args += fmt::format(", \"bytes\": {}, \"src\": \"{}\", \"dst\": \"{}\", \"mode\": \"{}\"",
                            e.bytes, to_string(e.src), to_string(e.dst), to_string(e.mode));
        break;
      case Kind::kWholeArray:
        break;
    }
    out += fmt::format(
        ",\n{{\"ph\": \"X\", \"name\": \"{}\", \"cat\": \"{}\", \"pid\": 0, \"tid\": {}, "
        "\"ts\": {}, \"dur\": {}, \"args\": {{{}}}}}",
        json_escape(name), category(e.kind), tid(e), us(e.t0), us(e.t1 - e.t0), args);
  }
  out += "\n]}\n";
  return out;
}

}  // namespace tessera::trace::detail
