// The SVG timeline: per core two lanes over one time axis. The compute lane shows the launch
// (a thin bar), grid steps (alternating shades), VPU/MXU ops and waits; the DMA lane shows
// copies, elided blocks and prefetched blocks. Spans thinner than half a pixel that touch the
// previous span of the same lane and class are merged, so a run of 100k steps stays a drawable
// file; each drawn rectangle has a <title> (a browser shows it on hover).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "trace/analysis.h"

namespace tessera::trace::detail {

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += ' ';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

namespace {

constexpr double kLeft = 110;    // room for lane labels
constexpr double kWidth = 1100;  // the time axis
constexpr double kTop = 40;
constexpr double kLaneH = 26;

struct Style {
  const char* cls;
  double y;  // offset within the lane
  double h;
};

struct Pending {
  double x0 = 0, x1 = -1;
  int count = 0;
  std::string title;
};

std::string fmt_time(int64_t ns) {
  if (ns >= 1000000000) return fmt::format("{:.3f} s", static_cast<double>(ns) * 1e-9);
  if (ns >= 1000000) return fmt::format("{:.3f} ms", static_cast<double>(ns) * 1e-6);
  if (ns >= 1000) return fmt::format("{:.2f} us", static_cast<double>(ns) * 1e-3);
  return fmt::format("{} ns", ns);
}

}  // namespace

std::string timeline_svg(const Collected& c) {
  std::set<int> core_set;
  // The axis runs from the first event to the last (not from the session's start).
  int64_t t_begin = c.events.empty() ? 0 : INT64_MAX;
  int64_t t_end = 0;
  for (const Event& e : c.events) {
    core_set.insert(e.core);
    t_begin = std::min(t_begin, e.t0);
    t_end = std::max(t_end, e.t1);
  }
  const int64_t span = std::max<int64_t>(t_end - t_begin, 1);
  const std::vector<int> cores(core_set.begin(), core_set.end());
  std::map<int, int> lane_of;  // core -> index
  for (size_t i = 0; i < cores.size(); ++i) lane_of[cores[i]] = static_cast<int>(i);
  const double height = kTop + static_cast<double>(cores.size()) * 2 * kLaneH + 60;
  const double scale = kWidth / static_cast<double>(span);

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<style>.core{{fill:#bbb}} .step0{{fill:#9ecae1}} .step1{{fill:#6baed6}} "
      ".vpu{{fill:#31a354}} .mxu{{fill:#e6550d}} .wait{{fill:#de2d26}} "
      ".copied{{fill:#3f51b5}} .elided{{fill:#d9d9d9;stroke:#999;stroke-width:0.3}} "
      ".prefetched{{fill:#a1d99b}} .axis{{stroke:#444;stroke-width:0.5}}</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kLeft + kWidth + 20, height, kLeft + kWidth + 20, height);
  out += fmt::format(
      "<text x=\"{}\" y=\"16\" font-size=\"13\">tessera trace: {} launch{}, {} "
      "events, {}</text>\n",
      kLeft, c.launches.size(), c.launches.size() == 1 ? "" : "es", c.events.size(),
      xml_escape(fmt_time(c.duration_ns)));
  // Time axis with 10 ticks.
  const double axis_y = kTop + static_cast<double>(cores.size()) * 2 * kLaneH + 8;
  out += fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", kLeft,
                     axis_y, kLeft + kWidth, axis_y);
  for (int i = 0; i <= 10; ++i) {
    const double x = kLeft + kWidth * i / 10.0;
    out += fmt::format(
        "<line class=\"axis\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x, axis_y, x, axis_y + 4, x, axis_y + 16, xml_escape(fmt_time(t_begin + span * i / 10)));
  }
  for (size_t i = 0; i < cores.size(); ++i) {
    const double y = kTop + static_cast<double>(i) * 2 * kLaneH;
    out += fmt::format(
        "<text x=\"4\" y=\"{}\">core {}</text><text x=\"4\" y=\"{}\">core {} "
        "DMA</text>\n",
        y + 16, cores[i], y + kLaneH + 16, cores[i]);
  }
  // Legend.
  const double ly = axis_y + 34;
  const std::pair<const char*, const char*> legend[] = {{"step0", "grid step"},
                                                        {"vpu", "VPU op"},
                                                        {"mxu", "MXU op"},
                                                        {"wait", "wait"},
                                                        {"copied", "DMA copied"},
                                                        {"elided", "DMA elided"},
                                                        {"prefetched", "DMA prefetched"}};
  double lx = kLeft;
  for (const auto& [cls, label] : legend) {
    out += fmt::format(
        "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"10\" height=\"10\"/><text "
        "x=\"{}\" y=\"{}\">{}</text>\n",
        cls, lx, ly - 9, lx + 14, ly, label);
    lx += 130;
  }

  // Spans, drawn per (lane, class) with merging of sub-pixel neighbours.
  std::vector<const Event*> ev;
  for (const Event& e : c.events) {
    if (e.kind != Kind::kWholeArray) ev.push_back(&e);
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event* a, const Event* b) {
    if (a->t0 != b->t0) return a->t0 < b->t0;
    return a->t1 > b->t1;
  });
  std::map<std::pair<int, std::string>, Pending> pending;  // (lane row, class)
  // Drawn class by class (steps under ops), whatever the order the spans come in.
  std::map<std::string, std::string> layer;
  auto flush = [&](const Style& st, double lane_y, Pending& p) {
    if (p.count == 0) return;
    const double w = std::max(p.x1 - p.x0, 0.3);
    layer[st.cls] += fmt::format(
        "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\"><title>{}"
        "</title></rect>\n",
        st.cls, p.x0, lane_y + st.y, w, st.h,
        p.count == 1 ? xml_escape(p.title)
                     : fmt::format("{} spans ({} ...)", p.count, xml_escape(p.title)));
    p = Pending{};
  };
  std::map<std::pair<int, std::string>, std::pair<Style, double>> styles;
  for (const Event* p : ev) {
    const Event& e = *p;
    const int lane = lane_of[e.core];
    const bool dma = e.kind == Kind::kDma;
    const double lane_y = kTop + (2 * lane + (dma ? 1 : 0)) * kLaneH;
    Style st{"core", 0, 3};
    std::string title;
    switch (e.kind) {
      case Kind::kCore: {
        const std::string k = e.launch >= 0 && static_cast<size_t>(e.launch) < c.launches.size()
                                  ? c.launches[e.launch].kernel
                                  : "kernel";
        st = Style{"core", 0, 3};
        title = fmt::format("{} (launch {}), core {}", k, e.launch, e.core);
        break;
      }
      case Kind::kStep:
        st = Style{e.step % 2 == 0 ? "step0" : "step1", 4, 20};
        title = fmt::format("grid step {}", e.step);
        break;
      case Kind::kVpu:
        st = Style{"vpu", 9, 10};
        title = fmt::format("{} ({} FLOPs, {} bytes)", e.name, e.flops, e.bytes);
        break;
      case Kind::kMxu:
        st = Style{"mxu", 9, 10};
        title = fmt::format("{} ({} FLOPs, {} bytes)", e.name, e.flops, e.bytes);
        break;
      case Kind::kWait:
        st = Style{"wait", 9, 10};
        title = fmt::format("{} (stall)", e.name);
        break;
      case Kind::kDma:
        st = Style{to_string(e.mode), 4, 18};
        title = fmt::format("{} {}->{} {} bytes ({})", e.name, to_string(e.src), to_string(e.dst),
                            e.bytes, to_string(e.mode));
        break;
      case Kind::kWholeArray:
        continue;
    }
    title += ", " + fmt_time(e.t1 - e.t0);
    const double x0 = kLeft + static_cast<double>(e.t0 - t_begin) * scale;
    const double x1 = kLeft + static_cast<double>(e.t1 - t_begin) * scale;
    const auto key = std::make_pair(2 * lane + (dma ? 1 : 0), std::string(st.cls));
    styles[key] = {st, lane_y};
    Pending& pd = pending[key];
    if (pd.count > 0 && x0 <= pd.x1 + 0.5 && x1 - x0 < 0.5) {
      pd.x1 = std::max(pd.x1, x1);  // merge a sub-pixel span into its neighbour
      ++pd.count;
      continue;
    }
    flush(st, lane_y, pd);
    pd.x0 = x0;
    pd.x1 = x1;
    pd.count = 1;
    pd.title = title;
  }
  for (auto& [key, pd] : pending) flush(styles[key].first, styles[key].second, pd);
  for (const char* cls :
       {"core", "step0", "step1", "elided", "prefetched", "copied", "vpu", "mxu", "wait"}) {
    out += layer[cls];
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tessera::trace::detail
