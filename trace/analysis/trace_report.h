// `pacset-trace report`: what a trace says, aggregated in one streaming
// pass. Memory is constant in the number of records, except for one
// counter per distinct block, per process and per time bucket.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/analysis/trace_scan.h"
#include "util/latency_histogram.h"
#include "util/status.h"

namespace pacset {

// A distribution of small integers (blocks per request), kept exactly.
class CountDistribution {
 public:
  void Add(uint64_t v, uint64_t times = 1);
  uint64_t count() const { return n_; }
  double mean() const { return n_ ? static_cast<double>(sum_) / n_ : 0; }
  // Median as layout-report computes it (mean of the two middle values for
  // an even count); p95 = the value at rank ceil(0.95 n).
  double median() const;
  uint64_t Quantile(double q) const;  // value at rank ceil(q n) (1-based)
  uint64_t max() const { return n_ ? values_.rbegin()->first : 0; }
  const std::map<uint64_t, uint64_t>& values() const { return values_; }
  nlohmann::json ToJson(bool histogram) const;

 private:
  uint64_t ValueAtRank(uint64_t rank) const;  // 1-based
  std::map<uint64_t, uint64_t> values_;
  uint64_t n_ = 0;
  uint64_t sum_ = 0;
};

struct BlockHeat {
  uint64_t demand = 0;  // accesses by readers (store + cache + joined)
  uint64_t store = 0;   // fetches from the store (prefetch included)
  uint64_t prefetch = 0;
};

struct ForestReport {
  uint32_t id = 0;
  std::string name;
  uint64_t by_source[kNumTraceSources] = {};
  uint64_t errors = 0;
  uint64_t bytes_read = 0;  // bytes the reads returned (version 2 traces)
  LatencyHistogram latency[kNumTraceSources];
  std::unordered_map<uint64_t, BlockHeat> blocks;  // block index -> heat
  CountDistribution blocks_per_request;            // requests that read this forest
  uint32_t block_size = 0;                         // from the forest info, 0 if unknown
  uint64_t block_count = 0;
  uint64_t accesses() const;
  uint64_t store_fetches() const {
    return by_source[static_cast<int>(TraceSource::kStore)] +
           by_source[static_cast<int>(TraceSource::kPrefetch)];
  }
};

struct ProcessReport {
  uint32_t pid = 0;
  uint64_t by_source[kNumTraceSources] = {};
  uint64_t requests = 0;
  uint64_t first_ns = 0, last_ns = 0;
  std::vector<uint32_t> threads;  // up to 64 distinct
};

struct TimeBucket {
  uint64_t by_source[kNumTraceSources] = {};
  uint64_t requests = 0;  // requests that ended in the bucket
};

struct TraceReport {
  ScanResult scan;
  std::map<uint32_t, ForestReport> forests;
  std::map<uint32_t, ProcessReport> processes;
  CountDistribution blocks_per_request;        // all forests together
  CountDistribution store_blocks_per_request;  // blocks that came from the store
  LatencyHistogram request_duration;
  uint64_t accesses_outside_requests = 0;  // prefetch excluded
  uint64_t bucket_ns = 1000000000;
  std::vector<TimeBucket> timeline;  // from scan.first_ns

  nlohmann::json ToJson() const;
  std::string ToText() const;
};

struct ReportOptions {
  double bucket_seconds = 1.0;  // timeline resolution (coarsened past 100000 buckets)
};

StatusOr<TraceReport> BuildTraceReport(const std::string& path, const ReportOptions& options = {});

}  // namespace pacset
