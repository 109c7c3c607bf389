// `pacset-trace compare`: blocks each request read through the mount next
// to the analytical count (the blocks the bundled engine's paths touch, from
// PacEngine::TouchedBlocks), with the difference explained block by block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/analysis/trace_report.h"
#include "util/status.h"

namespace pacset {

struct CompareOptions {
  std::string trace;
  std::string model;   // the .pac that was traced (a local copy is fine)
  std::string input;   // the rows the workload predicted
  std::string forest;  // trace forest name; "" = the only one
};

// Per request, every analytically needed block is either measured (read
// during the request) or explained: resident (read earlier since the last
// cache drop, so the page cache had it), prefetched (pacsetfs prefetch_bins)
// or unexplained; every measured block outside the analytical set is
// metadata, readahead-like (just after a needed block) or other.
struct CompareRequest {
  uint64_t id = 0;
  uint64_t first_row = 0;
  uint64_t rows = 0;
  uint64_t analytical = 0;
  uint64_t measured = 0;
  uint64_t matched = 0;
  uint64_t resident = 0;
  uint64_t prefetched = 0;
  uint64_t unexplained_missing = 0;
  uint64_t extra_metadata = 0;
  uint64_t extra_readahead = 0;
  uint64_t extra_other = 0;
  uint64_t from_store = 0, from_cache = 0, joined = 0;  // sources of the measured blocks
  uint64_t accesses = 0;  // page reads (more than `measured` when a block faulted several times)
};

struct CompareResult {
  std::string forest;
  uint64_t metadata_blocks = 0;  // read at open by any reader
  uint64_t block_count = 0;
  uint64_t requests_without_rows = 0;  // rows unknown or beyond the input: not compared
  uint64_t outside_accesses = 0;       // accesses of the forest outside requests
  uint64_t outside_metadata_blocks = 0;
  uint64_t dropped_events = 0;
  bool checksum_verified = false;
  std::vector<CompareRequest> requests;
  CountDistribution analytical, measured;
  CompareRequest totals;

  nlohmann::json ToJson(size_t max_requests) const;
  std::string ToText(size_t max_requests) const;
};

StatusOr<CompareResult> CompareTrace(const CompareOptions& options);

}  // namespace pacset
