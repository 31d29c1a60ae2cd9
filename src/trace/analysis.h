// Internal: what a stopped session makes of its events (export.cc, timeline.cc, summary.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/trace.h"
#include "trace/recorder.h"

namespace tessera::trace::detail {

/// Chrome Trace Event JSON: one process per device, per core a compute thread (tid 2c) and a
/// DMA thread (tid 2c + 1); complete ("X") events with ts/dur in microseconds.
std::string chrome_json(const Collected& c);
/// A self-contained SVG: per core a compute lane and a DMA lane over a common time axis.
std::string timeline_svg(const Collected& c);
/// Per kernel (launches grouped by name, in order of first launch), with lints.
std::vector<KernelSummary> summarize(const Collected& c, const std::optional<Calibration>& cal);
/// The summary as text; `calibration_note` says where the peaks came from (or why none).
std::string summary_text(const std::vector<KernelSummary>& s, const Collected& c,
                         const std::string& calibration_note);

/// `s` escaped for a JSON string / for XML text and attributes.
std::string json_escape(const std::string& s);
std::string xml_escape(const std::string& s);

}  // namespace tessera::trace::detail
