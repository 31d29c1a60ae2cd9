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

// The time axis and the lanes: the axis runs from the first event to the last (not from the
// session's start); each core has a compute lane and a DMA lane below it, in core order.
struct Layout {
  std::vector<int> cores;
  std::map<int, int> lane_of;  // core -> index
  int64_t t_begin = 0;
  int64_t span = 1;
  double scale = 0;   // pixels per nanosecond
  double height = 0;  // of the whole picture
  double axis_y = 0;  // of the time axis, below the lanes
};

Layout layout_of(const Collected& c) {
  Layout l;
  std::set<int> core_set;
  int64_t t_begin = c.events.empty() ? 0 : INT64_MAX;
  int64_t t_end = 0;
  for (const Event& e : c.events) {
    core_set.insert(e.core);
    t_begin = std::min(t_begin, e.t0);
    t_end = std::max(t_end, e.t1);
  }
  l.t_begin = t_begin;
  l.span = std::max<int64_t>(t_end - t_begin, 1);
  l.cores.assign(core_set.begin(), core_set.end());
  for (size_t i = 0; i < l.cores.size(); ++i) l.lane_of[l.cores[i]] = static_cast<int>(i);
  l.height = kTop + static_cast<double>(l.cores.size()) * 2 * kLaneH + 60;
  l.scale = kWidth / static_cast<double>(l.span);
  l.axis_y = kTop + static_cast<double>(l.cores.size()) * 2 * kLaneH + 8;
  return l;
}

// The SVG's opening, the stylesheet, the background and the title line.
std::string svg_head(const Collected& c, const Layout& l) {
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<style>.core{{fill:#bbb}} .step0{{fill:#9ecae1}} .step1{{fill:#6baed6}} "
      ".vpu{{fill:#31a354}} .mxu{{fill:#e6550d}} .wait{{fill:#de2d26}} "
      ".copied{{fill:#3f51b5}} .elided{{fill:#d9d9d9;stroke:#999;stroke-width:0.3}} "
      ".prefetched{{fill:#a1d99b}} .axis{{stroke:#444;stroke-width:0.5}}</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kLeft + kWidth + 20, l.height, kLeft + kWidth + 20, l.height);
  out += fmt::format(
      "<text x=\"{}\" y=\"16\" font-size=\"13\">tessera trace: {} launch{}, {} "
      "events, {}</text>\n",
      kLeft, c.launches.size(), c.launches.size() == 1 ? "" : "es", c.events.size(),
      xml_escape(fmt_time(c.duration_ns)));
  return out;
}

// The time axis with 10 ticks, the lane labels and the legend.
std::string svg_axis_and_legend(const Layout& l) {
  const double axis_y = l.axis_y;
  std::string out = fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                                kLeft, axis_y, kLeft + kWidth, axis_y);
  for (int i = 0; i <= 10; ++i) {
    const double x = kLeft + kWidth * i / 10.0;
    out += fmt::format(
        "<line class=\"axis\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x, axis_y, x, axis_y + 4, x, axis_y + 16,
        xml_escape(fmt_time(l.t_begin + l.span * i / 10)));
  }
  for (size_t i = 0; i < l.cores.size(); ++i) {
    const double y = kTop + static_cast<double>(i) * 2 * kLaneH;
    out += fmt::format(
        "<text x=\"4\" y=\"{}\">core {}</text><text x=\"4\" y=\"{}\">core {} "
        "DMA</text>\n",
        y + 16, l.cores[i], y + kLaneH + 16, l.cores[i]);
  }
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
  return out;
}

// How event `e` is drawn (its class and place in the lane) and its hover title, without its
// duration.
Style span_style(const Collected& c, const Event& e, std::string& title) {
  switch (e.kind) {
    case Kind::kCore: {
      const std::string k = e.launch >= 0 && static_cast<size_t>(e.launch) < c.launches.size()
                                ? c.launches[e.launch].kernel
                                : "kernel";
      title = fmt::format("{} (launch {}), core {}", k, e.launch, e.core);
      return Style{"core", 0, 3};
    }
    case Kind::kStep:
      title = fmt::format("grid step {}", e.step);
      return Style{e.step % 2 == 0 ? "step0" : "step1", 4, 20};
    case Kind::kVpu:
      title = fmt::format("{} ({} FLOPs, {} bytes)", e.name, e.flops, e.bytes);
      return Style{"vpu", 9, 10};
    case Kind::kMxu:
      title = fmt::format("{} ({} FLOPs, {} bytes)", e.name, e.flops, e.bytes);
      return Style{"mxu", 9, 10};
    case Kind::kWait:
      title = fmt::format("{} (stall)", e.name);
      return Style{"wait", 9, 10};
    case Kind::kDma:
      title = fmt::format("{} {}->{} {} bytes ({})", e.name, to_string(e.src), to_string(e.dst),
                          e.bytes, to_string(e.mode));
      return Style{to_string(e.mode), 4, 18};
    case Kind::kWholeArray:  // a marker, not a span: svg_spans leaves these out
      break;
  }
  return Style{"core", 0, 3};
}

// The drawn spans, per class, with a span thinner than half a pixel that touches the previous
// span of its (lane row, class) merged into that one.
class SpanLayers {
 public:
  void add(int row, const Style& st, double lane_y, double x0, double x1,
           const std::string& title) {
    const auto key = std::make_pair(row, std::string(st.cls));
    styles_[key] = {st, lane_y};
    Pending& pd = pending_[key];
    if (pd.count > 0 && x0 <= pd.x1 + 0.5 && x1 - x0 < 0.5) {
      pd.x1 = std::max(pd.x1, x1);  // merge a sub-pixel span into its neighbour
      ++pd.count;
      return;
    }
    flush(st, lane_y, pd);
    pd.x0 = x0;
    pd.x1 = x1;
    pd.count = 1;
    pd.title = title;
  }

  // Everything drawn, class by class (steps under ops), whatever the order the spans came in.
  std::string finish() {
    for (auto& [key, pd] : pending_) flush(styles_[key].first, styles_[key].second, pd);
    std::string out;
    for (const char* cls :
         {"core", "step0", "step1", "elided", "prefetched", "copied", "vpu", "mxu", "wait"}) {
      out += layer_[cls];
    }
    return out;
  }

 private:
  void flush(const Style& st, double lane_y, Pending& p) {
    if (p.count == 0) return;
    const double w = std::max(p.x1 - p.x0, 0.3);
    layer_[st.cls] += fmt::format(
        "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\"><title>{}"
        "</title></rect>\n",
        st.cls, p.x0, lane_y + st.y, w, st.h,
        p.count == 1 ? xml_escape(p.title)
                     : fmt::format("{} spans ({} ...)", p.count, xml_escape(p.title)));
    p = Pending{};
  }

  std::map<std::pair<int, std::string>, Pending> pending_;  // (lane row, class)
  std::map<std::pair<int, std::string>, std::pair<Style, double>> styles_;
  std::map<std::string, std::string> layer_;  // class -> its rectangles
};

// Every span but whole-array records, in time order (an enclosing span before what it
// encloses), drawn into its lane.
std::string svg_spans(const Collected& c, const Layout& l) {
  std::vector<const Event*> ev;
  for (const Event& e : c.events) {
    if (e.kind != Kind::kWholeArray) ev.push_back(&e);
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event* a, const Event* b) {
    if (a->t0 != b->t0) return a->t0 < b->t0;
    return a->t1 > b->t1;
  });
  SpanLayers layers;
  for (const Event* p : ev) {
    const Event& e = *p;
    const int row = 2 * l.lane_of.at(e.core) + (e.kind == Kind::kDma ? 1 : 0);
    const double lane_y = kTop + row * kLaneH;
    std::string title;
    const Style st = span_style(c, e, title);
    title += ", " + fmt_time(e.t1 - e.t0);
    const double x0 = kLeft + static_cast<double>(e.t0 - l.t_begin) * l.scale;
    const double x1 = kLeft + static_cast<double>(e.t1 - l.t_begin) * l.scale;
    layers.add(row, st, lane_y, x0, x1, title);
  }
  return layers.finish();
}

}  // namespace

std::string timeline_svg(const Collected& c) {
  const Layout l = layout_of(c);
  std::string out = svg_head(c, l);
  out += svg_axis_and_legend(l);
  out += svg_spans(c, l);
  out += "</svg>\n";
  return out;
}

}  // namespace tessera::trace::detail
