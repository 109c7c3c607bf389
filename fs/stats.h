// Live counters of a mount, served as JSON at MOUNTPOINT/.pacsetfs/stats.
// Counters are relaxed atomics: cheap on the read path, exact once quiet.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "util/latency_histogram.h"
#include "util/mutex.h"

namespace pacset {

struct ForestStats {
  std::atomic<uint64_t> generation{0};
  std::atomic<uint64_t> opens{0};
  std::atomic<uint64_t> reads{0};  // read requests from the kernel
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> gathers{
      0};  // gathers: reads of the gather file, forest-file ioctls (protocol/gather.h)
  std::atomic<uint64_t> blocks_fetched{0};  // from the store
  std::atomic<uint64_t> fetched_bytes{0};
  std::atomic<uint64_t> cache_hits{0};  // served from the daemon cache
  std::atomic<uint64_t> joined{0};      // waited for a fetch under way
  std::atomic<uint64_t> prefetched{0};
  std::atomic<uint64_t> pushed{0};  // blocks pushed into the page cache
  std::atomic<uint64_t> errors{0};  // reads answered with an error
  std::atomic<uint64_t> corrupt_blocks{0};
  std::atomic<uint64_t> store_retries{0};
  LatencyHistogram fetch_latency;
};

class MountStats {
 public:
  std::shared_ptr<ForestStats> For(const std::string& forest) EXCLUDES(mu_);
  // One JSON object: {"forests": {name: {...}}, plus the extra members given}.
  // Strings that are not UTF-8 come out with U+FFFD in place of bad bytes.
  std::string ToJson(const std::string& extra_members_json) const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ForestStats>> forests_ GUARDED_BY(mu_);
};

}  // namespace pacset
