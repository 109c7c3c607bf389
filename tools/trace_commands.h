// The `pacset-trace` subcommands as library functions:
// tools/pacset_trace_main.cc parses the command line and calls these, so
// tests can call them too. Each returns a Status; the caller prints it and
// picks the exit code (0 ok, 1 failure, 2 usage).
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

struct RecordOptions {
  std::string mount;   // "": the only pacsetfs mount in /proc/self/mounts
  bool cold = false;   // drop every forest's caches first ("drop *")
  std::string unit;    // request unit for pacset predict: "" (batch), "row", "batch"
  std::string output;  // the trace file
  std::vector<std::string> command;
};
// Traces `command` on the mount and merges its request marks into the
// trace. `command_status` gets the command's exit status (128 + signal).
Status RunRecord(const RecordOptions& options, int* command_status);

Status RunMerge(const std::string& trace, const std::string& marks, const std::string& output);

struct ReportCliOptions {
  std::string trace;
  bool json = false;
  std::string html;   // write a self-contained HTML report here
  std::string model;  // the traced .pac: marks metadata, bins and residuals on the heat map
  double bucket_seconds = 1.0;
  double sample_rate = 1.0;          // of the memory section's curves (1: exact)
  std::string policy = "w-tinylfu";  // of the memory section's curves
};
Status RunReport(const ReportCliOptions& options);

struct MrcCliOptions {
  std::string trace;
  double sample_rate = 1.0;  // 1: the exact pass; below: SHARDS sampling of blocks
  uint64_t seed = 0;
  std::string policy = "w-tinylfu";  // the daemon's (simulated), or lru (exact)
  bool csv = false, json = false;
  size_t points = 200;             // per curve in CSV and JSON
  std::vector<std::string> sizes;  // also print the curve at these cache sizes
};
// `pacset-trace mrc`: the miss-ratio curves of a trace (trace/analysis/miss_ratio.h).
Status RunMrc(const MrcCliOptions& options);

struct CompareCliOptions {
  std::string trace, model, input, forest;
  bool json = false;
  size_t requests = 20;  // per-request lines shown
};
Status RunCompare(const CompareCliOptions& options);

struct LayoutsCliOptions {
  std::string model;                // pack this model in every layout (in memory)
  std::vector<std::string> pacs;    // and/or these packed files
  std::vector<std::string> traces;  // and/or the measured distribution of these traces
  std::string input;                // rows for the analytical counts
  std::string layouts;              // comma separated; default: all
  std::string block_size = "4KiB";
  uint32_t bin_depth = 2;
  std::string calibrate;
  std::string output;  // HTML file; "" = text only
  bool json = false;
};
Status RunLayouts(const LayoutsCliOptions& options);

// Appends one request mark on behalf of process `pid` (whose reads belong
// to the request), for engines that cannot write marks themselves.
Status RunMark(const std::string& marks, bool begin, uint64_t id, uint64_t first_row, uint32_t rows,
               uint32_t pid);

}  // namespace pacset
