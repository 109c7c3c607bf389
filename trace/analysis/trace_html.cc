#include "trace/analysis/trace_html.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "util/size.h"

namespace pacset {
namespace {

std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
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
      default:
        out += c;
    }
  }
  return out;
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::string N(uint64_t v) { return std::to_string(v); }

// Heat colour for t in [0, 1] (light yellow -> orange -> red -> dark red).
std::string Heat(double t) {
  static const double stops[][3] = {
      {255, 245, 177}, {254, 178, 76}, {240, 59, 32}, {189, 0, 38}, {74, 0, 16}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  int c[3];
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<int>(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f);
  return Fmt("#%02x%02x%02x", c[0], c[1], c[2]);
}

const char* kRegionColor[] = {"#6b7280", "#2563eb", "#16a34a", "#9333ea"};
const char* kRegionName[] = {"metadata (header, tree table)", "bins (top levels, interleaved)",
                             "residual subtrees", "leaf ids"};
const char* kSourceColor[] = {"#dc2626", "#f59e0b", "#0ea5e9", "#8b5cf6"};
const char* kSeriesColor[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#f59e0b",
                              "#0891b2", "#be185d", "#4d7c0f", "#7c2d12", "#475569"};

int RegionOf(const PacRegions& r, uint64_t b) {
  if (b < r.metadata_blocks) return 0;
  if (b < r.metadata_blocks + r.bin_blocks) return 1;
  if (b < r.metadata_blocks + r.node_blocks) return 2;
  return 3;
}

// Nice axis step for a range.
double Step(double range, int target) {
  if (range <= 0) return 1;
  const double raw = range / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return std::max(1.0, m * p);
  return std::max(1.0, 10 * p);
}

// A vertical bar chart of a count distribution (x = value, y = frequency).
std::string HistogramSvg(const CountDistribution& d, const char* color, int width, int height,
                         uint64_t x_max, const std::string& label) {
  const int left = 44, right = 10, top = 18, bottom = 30;
  const int w = width - left - right, h = height - top - bottom;
  std::string s =
      Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">",
          width, height, width, height);
  s += Fmt("<text x=\"%d\" y=\"12\" font-weight=\"bold\">%s</text>", left, Esc(label).c_str());
  if (!d.count())
    return s + Fmt("<text x=\"%d\" y=\"%d\">no requests</text></svg>", left, top + h / 2);
  x_max = std::max<uint64_t>(x_max, 1);
  // Bins of equal width in value; at most 60 bars.
  const uint64_t bin = std::max<uint64_t>(1, (x_max + 60) / 60);
  std::vector<uint64_t> bars(x_max / bin + 1, 0);
  for (const auto& [v, c] : d.values()) bars[std::min<uint64_t>(v, x_max) / bin] += c;
  const uint64_t y_max = std::max<uint64_t>(1, *std::max_element(bars.begin(), bars.end()));
  const double bw = static_cast<double>(w) / bars.size();
  s += Fmt("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, top + h,
           left + w, top + h);
  for (size_t i = 0; i < bars.size(); ++i) {
    if (!bars[i]) continue;
    const double bh = static_cast<double>(h) * bars[i] / y_max;
    const uint64_t lo = i * bin, hi = lo + bin - 1;
    s +=
        Fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
            "<title>%s blocks: %llu requests</title></rect>",
            left + i * bw + 0.5, top + h - bh, std::max(1.0, bw - 1), bh, color,
            bin == 1 ? N(lo).c_str() : (N(lo) + "-" + N(hi)).c_str(),
            static_cast<unsigned long long>(bars[i]));
  }
  const double step = Step(static_cast<double>(x_max), 6);
  for (double x = 0; x <= x_max; x += step)
    s += Fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>",
             left + (x / bin + 0.5) * bw, top + h + 13, x);
  s += Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">blocks per request</text>",
           left + w / 2, height - 3);
  s += Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%llu</text>", left - 4, top + 8,
           static_cast<unsigned long long>(y_max));
  s += Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", left - 4, top + h);
  s +=
      Fmt("<text transform=\"translate(12,%d) rotate(-90)\" text-anchor=\"middle\" "
          "fill=\"#555\">requests</text>",
          top + h / 2);
  // Mean marker.
  const double mx = left + (d.mean() / bin + 0.5) * bw;
  s +=
      Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#111\" "
          "stroke-dasharray=\"3,2\"/><text x=\"%.1f\" y=\"%d\" fill=\"#111\">mean %.1f</text>",
          mx, top, mx, top + h, mx + 3, top + 10, d.mean());
  return s + "</svg>";
}

std::string Table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<table><tr>";
  for (const auto& h : head) s += "<th>" + Esc(h) + "</th>";
  s += "</tr>";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + Esc(c) + "</td>";
    s += "</tr>";
  }
  return s + "</table>";
}

std::string Us(uint64_t ns) { return Fmt("%.1f us", ns / 1e3); }

const char* kStyle =
    "<style>body{font-family:sans-serif;margin:24px;color:#111;max-width:1180px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid "
    "#ddd}h3{font-size:14px;margin:16px 0 4px}p.sub{color:#555;margin:0 0 12px}"
    "table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #ddd;"
    "padding:3px "
    "8px;text-align:right}th{background:#f5f5f5}td:first-child,th:first-child{text-align:"
    "left}.warn{color:#b91c1c;font-weight:bold}.grid{display:flex;flex-wrap:wrap;gap:12px}"
    ".note{color:#555;font-size:12px}</style>";

}  // namespace

PacRegions PacRegions::FromHeader(const PacHeader& h) {
  PacRegions r;
  r.metadata_blocks = h.node_first_block;
  r.bin_blocks = h.bin_block_count;
  r.node_blocks = h.node_block_count;
  r.block_count = h.block_count;
  r.layout = LayoutKindName(static_cast<LayoutKind>(h.layout));
  return r;
}

std::string HeatMapSvg(const ForestReport& f, const PacRegions* regions) {
  uint64_t n = regions ? regions->block_count : f.block_count;
  for (const auto& [b, h] : f.blocks) n = std::max(n, b + 1);
  n = std::max<uint64_t>(n, 1);
  const uint64_t group = (n + 4095) / 4096;  // blocks per cell
  const uint64_t cells = (n + group - 1) / group;
  std::vector<uint64_t> demand(cells, 0), store(cells, 0);
  for (const auto& [b, h] : f.blocks) {
    demand[b / group] += h.demand;
    store[b / group] += h.store;
  }
  const uint64_t vmax = std::max<uint64_t>(1, *std::max_element(demand.begin(), demand.end()));
  const int cols = 64, cell = 14, band = regions ? 4 : 0, row_h = cell + band + 3;
  const int left = 56, top = 8;
  const int rows = static_cast<int>((cells + cols - 1) / cols);
  const int width = left + cols * cell + 10;
  const int legend_h = 46;
  const int height = top + rows * row_h + legend_h;
  std::string s =
      Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">",
          width, height, width, height);
  for (int r = 0; r < rows; ++r) {
    const int y = top + r * row_h;
    s +=
        Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#555\">%llu</text>", left - 4,
            y + cell - 3, static_cast<unsigned long long>(static_cast<uint64_t>(r) * cols * group));
    for (int c = 0; c < cols; ++c) {
      const uint64_t i = static_cast<uint64_t>(r) * cols + c;
      if (i >= cells) break;
      const int x = left + c * cell;
      const double t = demand[i] ? std::log1p(static_cast<double>(demand[i])) /
                                       std::log1p(static_cast<double>(vmax))
                                 : 0;
      const std::string fill = demand[i] ? Heat(t) : (store[i] ? "#d1d5db" : "#f3f4f6");
      const uint64_t b0 = i * group;
      std::string what =
          group == 1 ? "block " + N(b0) : "blocks " + N(b0) + "-" + N(std::min(n, b0 + group) - 1);
      if (regions) what += " (" + std::string(kRegionName[RegionOf(*regions, b0)]) + ")";
      s += Fmt(
          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>%s: %llu reads, "
          "%llu store fetches</title></rect>",
          x, y, cell - 1, cell - 1, fill.c_str(), Esc(what).c_str(),
          static_cast<unsigned long long>(demand[i]), static_cast<unsigned long long>(store[i]));
      if (regions)
        s += Fmt("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", x, y + cell,
                 cell - (c + 1 < cols ? 0 : 1), band - 1, kRegionColor[RegionOf(*regions, b0)]);
    }
  }
  // Legend: colour scale and regions.
  int y = top + rows * row_h + 10;
  s += "<defs><linearGradient id=\"heat\">";
  for (int k = 0; k <= 4; ++k)
    s += Fmt("<stop offset=\"%d%%\" stop-color=\"%s\"/>", k * 25, Heat(k / 4.0).c_str());
  s += "</linearGradient></defs>";
  s +=
      Fmt("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f3f4f6\" stroke=\"#ccc\"/>"
          "<text x=\"%d\" y=\"%d\">0</text>",
          left, y, 12, 12, left + 15, y + 10);
  s += Fmt(
      "<rect x=\"%d\" y=\"%d\" width=\"160\" height=\"12\" fill=\"url(#heat)\"/>"
      "<text x=\"%d\" y=\"%d\">1</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%llu reads "
      "(log scale)%s</text>",
      left + 32, y, left + 32, y + 24, left + 192, y + 24, static_cast<unsigned long long>(vmax),
      group > 1 ? Fmt(", %llu blocks per cell", static_cast<unsigned long long>(group)).c_str()
                : "");
  if (regions) {
    int x = left + 220;
    for (int k = 0; k < 4; ++k) {
      s +=
          Fmt("<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"6\" fill=\"%s\"/><text x=\"%d\" "
              "y=\"%d\">%s</text>",
              x, y + 3, kRegionColor[k], x + 16, y + 10, kRegionName[k]);
      x += 16 + static_cast<int>(std::strlen(kRegionName[k])) * 6 + 14;
      if (k == 1) {
        x = left + 220;
        y += 16;
      }
    }
  }
  return s + "</svg>";
}

std::string DistributionsSvg(const std::vector<DistributionSeries>& series) {
  uint64_t x_max = 1;
  for (const auto& d : series) x_max = std::max(x_max, d.blocks.max());
  const int left = 200, right = 30, row = 34, top = 10;
  const int width = 1000, w = width - left - right;
  const int height = top + static_cast<int>(series.size()) * row + 40;
  std::string s =
      Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">",
          width, height, width, height);
  auto X = [&](double v) { return left + w * v / static_cast<double>(x_max); };
  const double step = Step(static_cast<double>(x_max), 10);
  const int axis_y = top + static_cast<int>(series.size()) * row;
  for (double x = 0; x <= x_max; x += step)
    s +=
        Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/><text x=\"%.1f\" "
            "y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%.0f</text>",
            X(x), top, X(x), axis_y, X(x), axis_y + 14, x);
  s +=
      Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">blocks per request "
          "(box: 25th-75th percentile, bar: median, diamond: mean, tick: p95, whiskers: min-max)"
          "</text>",
          left + w / 2, axis_y + 32);
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& d = series[i].blocks;
    const int cy = top + static_cast<int>(i) * row + row / 2;
    const char* color = kSeriesColor[i % 10];
    s += Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", left - 8, cy + 4,
             Esc(series[i].label + (series[i].kind == "measured" ? " (measured)" : "")).c_str());
    if (!d.count()) continue;
    const double lo = static_cast<double>(d.Quantile(0)), hi = static_cast<double>(d.max());
    const double q1 = static_cast<double>(d.Quantile(0.25)),
                 q3 = static_cast<double>(d.Quantile(0.75));
    s += Fmt("<g><title>%s: mean %.2f, median %.1f, p95 %llu, max %llu (%llu requests)</title>",
             Esc(series[i].label).c_str(), d.mean(), d.median(),
             static_cast<unsigned long long>(d.Quantile(0.95)),
             static_cast<unsigned long long>(d.max()), static_cast<unsigned long long>(d.count()));
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>", X(lo), cy, X(hi),
             cy, color);
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>", X(lo), cy - 6,
             X(lo), cy + 6, color);
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>", X(hi), cy - 6,
             X(hi), cy + 6, color);
    s += Fmt(
        "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"%s\" fill-opacity=\"0.25\" "
        "stroke=\"%s\"/>",
        X(q1), cy - 9, std::max(1.0, X(q3) - X(q1)), color, color);
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>",
             X(d.median()), cy - 9, X(d.median()), cy + 9, color);
    const double p95 = X(static_cast<double>(d.Quantile(0.95)));
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#111\"/>", p95, cy - 11,
             p95, cy + 11);
    const double mx = X(d.mean());
    s += Fmt("<path d=\"M%.1f %d l5 5 l-5 5 l-5 -5 z\" fill=\"#111\"/>", mx, cy - 5);
    s += Fmt("<text x=\"%.1f\" y=\"%d\" fill=\"#333\" font-size=\"10\">%.1f</text>", X(hi) + 6,
             cy + 4, d.mean());
    s += "</g>";
  }
  return s + "</svg>";
}

std::string MissRatioSvg(const MissRatioReport& m) {
  const int left = 64, top = 24, w = 720, hh = 260;
  std::vector<std::pair<std::string, const MissRatioCurve*>> curves;
  for (const auto& f : m.forests) curves.push_back({f.name, &f.curve});
  if (m.forests.size() != 1) curves.push_back({"all forests", &m.all});
  const MissRatioCurve& main = m.forests.size() == 1 ? m.forests[0].curve : m.all;
  const bool bytes = main.unit_bytes() != 0;
  auto size_text = [&](uint64_t v) { return bytes ? FormatByteSize(v) : N(v) + " blocks"; };
  std::string s =
      Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"11\">",
          left + w + 170, top + hh + 44);
  s +=
      Fmt("<text x=\"%d\" y=\"14\" font-weight=\"bold\">miss ratio of a %s cache of each "
          "size%s%s</text>",
          left, Esc(main.policy()).c_str(), main.simulated() ? " (simulated)" : "",
          main.exact() ? "" : " (sampled)");
  // x: log2 of the cache size, from the smallest distance / 2 to the footprint.
  uint64_t lo = UINT64_MAX, hi = 1;
  for (const auto& [name, c] : curves)
    for (const auto& p : c->Points(400))
      if (p.cache_bytes) {
        lo = std::min(lo, p.cache_bytes);
        hi = std::max(hi, p.cache_bytes);
      }
  if (lo == UINT64_MAX)
    return s + Fmt("<text x=\"%d\" y=\"%d\">no accesses</text></svg>", left, top + hh / 2);
  const double lx = std::log2(std::max(1.0, lo / 2.0)),
               hx = std::max(lx + 1, std::log2(static_cast<double>(hi)));
  auto X = [&](uint64_t v) {
    const double l = v ? std::log2(static_cast<double>(v)) : lx;
    return left + w * (std::clamp(l, lx, hx) - lx) / (hx - lx);
  };
  auto Y = [&](double ratio) { return top + hh * (1 - std::clamp(ratio, 0.0, 1.0)); };
  // Grid: every 10% and every power of 2 (labelled at most 10 times).
  for (int k = 0; k <= 10; ++k) {
    s += Fmt("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", left,
             Y(k / 10.0), left + w, Y(k / 10.0));
    s += Fmt("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>", left - 4, Y(k / 10.0) + 4,
             k * 10);
  }
  const int first = static_cast<int>(std::ceil(lx)), last = static_cast<int>(std::floor(hx));
  const int every = std::max(1, (last - first + 1 + 9) / 10);
  for (int e = first; e <= last; e += every) {
    const double x = X(uint64_t{1} << std::min(e, 62));
    s += Fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>", x, top, x,
             top + hh);
    s += Fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>", x, top + hh + 14,
             Esc(size_text(uint64_t{1} << std::min(e, 62))).c_str());
  }
  s += Fmt("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, top + hh,
           left + w, top + hh);
  s += Fmt("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, top, left,
           top + hh);
  s += Fmt(
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">cache size (log scale)</text>",
      left + w / 2, top + hh + 32);
  s +=
      Fmt("<text transform=\"translate(14,%d) rotate(-90)\" text-anchor=\"middle\" fill=\"#555\">"
          "miss ratio (accesses that go to the store)</text>",
          top + hh / 2);
  // Sizes for 90/99/99.9% hits.
  const double targets[3] = {0.9, 0.99, 0.999};
  const char* names[3] = {"90%", "99%", "99.9%"};
  for (int i = 0; i < 3; ++i) {
    auto b = main.BytesForHitRatio(targets[i]);
    if (!b || !*b) continue;
    const double x = X(*b);
    // Labels left of the line in the right half: clear of the legend.
    const bool right = x > left + w * 0.6;
    s += Fmt(
        "<line class=\"target\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#111\" "
        "stroke-dasharray=\"4,3\"/><text x=\"%.1f\" y=\"%d\" fill=\"#111\" text-anchor=\"%s\">%s "
        "hits: %s</text>",
        x, top, x, top + hh, right ? x - 3 : x + 3, top + 12 + 13 * i, right ? "end" : "start",
        names[i], Esc(size_text(*b)).c_str());
  }
  // One step line per curve: the ratio holds from a size up to the next.
  for (size_t i = 0; i < curves.size(); ++i) {
    const char* color = kSeriesColor[i % 10];
    std::string pts;
    double prev_y = -1;
    for (const auto& p : curves[i].second->Points(400)) {
      const double x = X(p.cache_bytes), y = Y(p.miss_ratio);
      if (prev_y >= 0) pts += Fmt("%.1f,%.1f ", x, prev_y);
      pts += Fmt("%.1f,%.1f ", x, y);
      prev_y = y;
    }
    pts += Fmt("%.1f,%.1f", static_cast<double>(left + w), prev_y);
    s += "<polyline class=\"mrc\" fill=\"none\" stroke=\"" + std::string(color) +
         "\" stroke-width=\"2\" points=\"" + pts + "\"/>";
    s +=
        Fmt("<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
            "y=\"%d\">%s</text>",
            left + w + 14, top + 4 + static_cast<int>(i) * 18, color, left + w + 30,
            top + 14 + static_cast<int>(i) * 18, Esc(curves[i].first).c_str());
  }
  return s + "</svg>";
}

std::string RenderReportHtml(const TraceReport& report, const PacRegions* regions,
                             uint32_t regions_forest, const MissRatioReport* memory) {
  const ScanResult& sc = report.scan;
  std::string h =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>pacset-trace report</title>";
  h += kStyle;
  h += "</head><body>";
  h += "<h1>Block accesses: " + Esc(sc.path) + "</h1>";
  char when[64] = "";
  const time_t t = static_cast<time_t>(sc.start_realtime_ns / 1000000000);
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
  h +=
      Fmt("<p class=\"sub\">trace format v%u, started %s, %.3f s, %llu records, %llu block "
          "accesses, %llu requests</p>",
          sc.version, when, sc.last_ns > sc.first_ns ? (sc.last_ns - sc.first_ns) / 1e9 : 0.0,
          static_cast<unsigned long long>(sc.records), static_cast<unsigned long long>(sc.accesses),
          static_cast<unsigned long long>(sc.requests));
  if (sc.dropped_events)
    h +=
        Fmt("<p class=\"warn\">The daemon dropped %llu events (trace queue full): counts are lower "
            "bounds.</p>",
            static_cast<unsigned long long>(sc.dropped_events));
  if (sc.torn_bytes || sc.bad_records)
    h += Fmt("<p class=\"note\">Skipped %llu damaged records and a torn tail of %llu bytes.</p>",
             static_cast<unsigned long long>(sc.bad_records),
             static_cast<unsigned long long>(sc.torn_bytes));
  // Per forest.
  std::vector<std::vector<std::string>> rows;
  for (const auto& [id, f] : report.forests) {
    rows.push_back({f.name, N(f.accesses()), N(f.by_source[0]), N(f.by_source[1]),
                    N(f.by_source[2]), N(f.by_source[3]), N(f.blocks.size()),
                    f.block_size ? FormatByteSize(f.store_fetches() * f.block_size) : "?",
                    Us(f.latency[0].Quantile(0.5)), Us(f.latency[0].Quantile(0.99)),
                    Us(f.latency[1].Quantile(0.5))});
  }
  h += "<h2>Forests</h2>";
  h += Table({"forest", "reads", "from store", "daemon cache", "joined", "prefetch",
              "unique blocks", "fetched", "store p50", "store p99", "cache p50"},
             rows);
  for (const auto& [id, f] : report.forests) {
    h += "<h3>" + Esc(f.name) + ": popularity of each block along the file</h3>";
    const bool mine = regions && id == regions_forest;
    h += "<p class=\"note\">One cell per block, in file order, 64 per line (the number on the left "
         "is the first block of the line); colour = reads by readers. " +
         std::string(
             mine ? "The band under each cell shows the region of the " + Esc(regions->layout) +
                        " .pac it lies in: the bins sit right after the metadata, at the front."
                  : "Pass --model forest.pac to mark metadata, bins and residuals.") +
         "</p>";
    h += HeatMapSvg(f, mine ? regions : nullptr);
    if (f.blocks_per_request.count()) {
      h += "<div>" +
           HistogramSvg(f.blocks_per_request, "#2563eb", 560, 200, f.blocks_per_request.max(),
                        f.name + ": blocks per request") +
           "</div>";
    }
  }
  if (memory) {
    h += "<h2>Memory: miss ratio by cache size</h2>";
    h +=
        "<p class=\"note\">For every size of pacsetfs's block cache (<code>-o cache_size=</code>), "
        "the share of the traced block accesses it would miss under " +
        Esc(memory->all.policy()) +
        (memory->all.simulated() ? " (the daemon's policy, simulated at the plotted sizes)"
                                 : " (exact; an upper bound on the daemon's W-TinyLFU misses)") +
        ", computed from the trace by <code>pacset-trace mrc</code>. Dashed: the memory for "
        "90/99/99.9% hits.</p>";
    std::vector<std::vector<std::string>> mrows;
    auto add_row = [&](const std::string& name, const MissRatioCurve& c) {
      std::vector<std::string> row = {
          name, N(c.accesses()),
          Fmt("%.2f%%", c.accesses() ? 100 * c.cold_misses() / c.accesses() : 0.0)};
      for (double t : {0.9, 0.99, 0.999}) {
        auto b = c.BytesForHitRatio(t);
        row.push_back(!b ? "unreachable" : c.unit_bytes() ? FormatByteSize(*b) : N(*b) + " blocks");
      }
      row.push_back(c.footprint_bytes() == 0 && c.accesses() > 0 ? "no reuse"
                    : c.unit_bytes() ? FormatByteSize(c.footprint_bytes())
                                     : N(c.footprint_bytes()) + " blocks");
      mrows.push_back(row);
    };
    for (const auto& f : memory->forests) add_row(f.name, f.curve);
    if (memory->forests.size() > 1) add_row("(all forests)", memory->all);
    h += Table({"forest", "accesses", "cold", "90% hits", "99% hits", "99.9% hits", "footprint"},
               mrows);
    h += MissRatioSvg(*memory);
  }
  // Requests.
  h += "<h2>Requests</h2>";
  if (!sc.requests) {
    h += "<p class=\"note\">No request marks in this trace. Record the workload with "
         "<code>pacset-trace record</code> so requests are marked.</p>";
  } else {
    const auto& d = report.blocks_per_request;
    h += Table(
        {"requests", "mean", "median", "p95", "max", "from store (mean)", "duration p50",
         "duration p99", "unterminated", "reads outside requests"},
        {{N(sc.requests), Fmt("%.2f", d.mean()), Fmt("%.1f", d.median()), N(d.Quantile(0.95)),
          N(d.max()), Fmt("%.2f", report.store_blocks_per_request.mean()),
          Us(report.request_duration.Quantile(0.5)), Us(report.request_duration.Quantile(0.99)),
          N(sc.unterminated_requests), N(report.accesses_outside_requests)}});
    h += HistogramSvg(d, "#16a34a", 720, 220, d.max(), "all forests: distinct blocks per request");
  }
  // Processes.
  rows.clear();
  for (const auto& [pid, p] : report.processes) {
    uint64_t total = 0;
    for (uint64_t c : p.by_source) total += c;
    rows.push_back({N(pid), N(p.threads.size()), N(p.requests), N(total), N(p.by_source[0]),
                    N(p.by_source[1]), N(p.by_source[2]), N(p.by_source[3])});
  }
  h += "<h2>Processes</h2>";
  h += Table({"pid", "threads", "requests", "reads", "store", "daemon cache", "joined", "prefetch"},
             rows);
  // Timeline: stacked bars per bucket (at most 240 bars).
  h += "<h2>Over time</h2>";
  const auto& tl = report.timeline;
  if (!tl.empty()) {
    const size_t per = (tl.size() + 239) / 240;
    std::vector<std::array<uint64_t, kNumTraceSources>> bars((tl.size() + per - 1) / per);
    uint64_t ymax = 1;
    for (size_t i = 0; i < tl.size(); ++i)
      for (int k = 0; k < kNumTraceSources; ++k) bars[i / per][k] += tl[i].by_source[k];
    for (const auto& b : bars) ymax = std::max<uint64_t>(ymax, b[0] + b[1] + b[2] + b[3]);
    const int left = 50, top = 10, w = 900, hh = 160;
    std::string s =
        Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"11\">",
            left + w + 150, top + hh + 36);
    const double bw = static_cast<double>(w) / bars.size();
    for (size_t i = 0; i < bars.size(); ++i) {
      double y = top + hh;
      for (int k = 0; k < kNumTraceSources; ++k) {
        if (!bars[i][k]) continue;
        const double bh = static_cast<double>(hh) * bars[i][k] / ymax;
        y -= bh;
        s += Fmt(
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%.3g s: "
            "%llu %s</title></rect>",
            left + i * bw, y, std::max(0.8, bw - 0.5), bh, kSourceColor[k],
            i * per * report.bucket_ns / 1e9, static_cast<unsigned long long>(bars[i][k]),
            TraceSourceName(static_cast<TraceSource>(k)));
      }
    }
    s += Fmt("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, top + hh,
             left + w, top + hh);
    s +=
        Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%llu</text><text x=\"%d\" y=\"%d\" "
            "text-anchor=\"end\">0</text>",
            left - 4, top + 9, static_cast<unsigned long long>(ymax), left - 4, top + hh);
    s +=
        Fmt("<text x=\"%d\" y=\"%d\">0 s</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g "
            "s</text>",
            left, top + hh + 14, left + w, top + hh + 14, tl.size() * report.bucket_ns / 1e9);
    s +=
        Fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">block reads per %.3g "
            "s</text>",
            left + w / 2, top + hh + 30, per * report.bucket_ns / 1e9);
    for (int k = 0; k < kNumTraceSources; ++k)
      s +=
          Fmt("<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
              "y=\"%d\">%s</text>",
              left + w + 14, top + 4 + k * 18, kSourceColor[k], left + w + 30, top + 14 + k * 18,
              k == 1 ? "daemon cache" : TraceSourceName(static_cast<TraceSource>(k)));
    h += s + "</svg>";
  }
  h += "<p class=\"note\">Written by pacset-trace report. Sources: <b>store</b> = fetched from the "
       "block store, <b>daemon cache</b> = served from pacsetfs's block cache, <b>joined</b> = "
       "waited "
       "for another reader's fetch, <b>prefetch</b> = fetched ahead by pacsetfs.</p>";
  return h + "</body></html>\n";
}

std::string RenderLayoutsHtml(const std::vector<DistributionSeries>& series,
                              const std::string& title, const std::string& subtitle) {
  std::string h =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" + Esc(title) + "</title>";
  h += kStyle;
  h += "</head><body><h1>" + Esc(title) + "</h1><p class=\"sub\">" + Esc(subtitle) + "</p>";
  h += DistributionsSvg(series);
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : series)
    rows.push_back({d.label, d.kind, N(d.blocks.count()), Fmt("%.2f", d.blocks.mean()),
                    Fmt("%.1f", d.blocks.median()), N(d.blocks.Quantile(0.95)), N(d.blocks.max()),
                    d.model_blocks ? N(d.model_blocks) : "-"});
  h +=
      Table({"series", "kind", "requests", "mean", "median", "p95", "max", "blocks in file"}, rows);
  uint64_t x_max = 1;
  for (const auto& d : series) x_max = std::max(x_max, d.blocks.max());
  h += "<h2>Distributions</h2><div class=\"grid\">";
  for (size_t i = 0; i < series.size(); ++i)
    h += HistogramSvg(series[i].blocks, kSeriesColor[i % 10], 370, 170, x_max, series[i].label);
  h += "</div><p class=\"note\">Analytical series count the distinct blocks the bundled engine's "
       "paths touch for each row (what a cold request reads); measured series are the distinct "
       "blocks each marked request read through a pacsetfs mount.</p>";
  return h + "</body></html>\n";
}

}  // namespace pacset
