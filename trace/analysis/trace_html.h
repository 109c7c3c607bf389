// Self-contained HTML reports with inline SVG (no script, no external
// resource): what `pacset-trace report --html` and `pacset-trace layouts -o`
// write. Any browser renders them offline.
#pragma once

#include <string>
#include <vector>

#include "layout/pac_format.h"
#include "trace/analysis/miss_ratio.h"
#include "trace/analysis/trace_report.h"

namespace pacset {

// Regions of a .pac file, for the heat map (from its header).
struct PacRegions {
  uint64_t metadata_blocks = 0;  // [0, metadata)
  uint64_t bin_blocks = 0;       // then the bins
  uint64_t node_blocks = 0;      // bins + residuals
  uint64_t block_count = 0;      // the rest: leaf ids
  std::string layout;
  static PacRegions FromHeader(const PacHeader& h);
};

// `regions` (may be null) applies to forest `regions_forest` (trace id);
// `memory` (may be null) adds the miss-ratio curves.
std::string RenderReportHtml(const TraceReport& report, const PacRegions* regions,
                             uint32_t regions_forest, const MissRatioReport* memory = nullptr);

struct DistributionSeries {
  std::string label;  // "pacset", "dfs", "trace: run1.trace", ...
  std::string kind;   // "analytical" or "measured"
  CountDistribution blocks;
  uint64_t model_blocks = 0;  // 0: unknown
};
std::string RenderLayoutsHtml(const std::vector<DistributionSeries>& series,
                              const std::string& title, const std::string& subtitle);

// The SVG pieces (also used by tests to check well-formedness).
std::string HeatMapSvg(const ForestReport& forest, const PacRegions* regions);
std::string DistributionsSvg(const std::vector<DistributionSeries>& series);
// Miss ratio against cache size (log scale), one step line per curve
// (`<polyline class="mrc">`), and the sizes for 90/99/99.9% hits of the
// all-forests curve as dashed lines.
std::string MissRatioSvg(const MissRatioReport& memory);

}  // namespace pacset
