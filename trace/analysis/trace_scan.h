// One streaming pass over a trace that attributes block accesses to
// requests. Every analysis (report, compare, trace-driven weights) is a
// TraceVisitor on top of ScanTrace.
//
// Attribution rule (FORMAT.md section 6): an access belongs to the request
// that its own thread has open; failing that, to the only request open in
// its process (batch requests served by worker threads); otherwise to no
// request. Prefetch accesses (the daemon's own) never belong to a request.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/trace_format.h"
#include "util/status.h"

namespace pacset {

class TraceReader;

// A block of one forest, as one 64-bit key (forest id in the top 20 bits).
inline uint64_t BlockKey(uint32_t forest, uint64_t block) {
  return (static_cast<uint64_t>(forest) << 44) | (block & ((uint64_t{1} << 44) - 1));
}
inline uint32_t BlockKeyForest(uint64_t key) { return static_cast<uint32_t>(key >> 44); }
inline uint64_t BlockKeyBlock(uint64_t key) { return key & ((uint64_t{1} << 44) - 1); }

struct ScannedRequest {
  uint64_t id = 0;
  uint32_t tid = 0;
  uint32_t tgid = 0;
  uint64_t first_row = 0;
  uint32_t row_count = 0;  // 0: unknown
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
  uint64_t sequence = 0;  // 0, 1, 2, ... in order of end marks
  uint64_t accesses = 0;
  uint64_t by_source[kNumTraceSources] = {};
  // Distinct blocks the request read (BlockKey) -> source of its first access.
  std::unordered_map<uint64_t, TraceSource> blocks;
};

class TraceVisitor {
 public:
  virtual ~TraceVisitor() = default;
  // Every decoded record, before it is interpreted.
  virtual void OnRecord(const TraceRecord& r, const TraceReader& reader) {}
  // A block access; `tgid` is its process; `request` is null outside requests.
  virtual void OnAccess(const TraceRecord& r, uint32_t tgid, const ScannedRequest* request) {}
  // A request's end mark (after all its accesses).
  virtual void OnRequestEnd(const ScannedRequest& request) {}
  // Caches were dropped for forest `forest` (0: all forests).
  virtual void OnDropCache(uint32_t forest, uint64_t time_ns) {}
};

struct TraceForestMeta {
  std::string name;
  // generation -> kForestInfo record (block size in `bytes`, block count in `block`).
  std::map<uint64_t, TraceRecord> generations;
};

struct ScanResult {
  std::string path;
  uint32_t version = 0;
  uint64_t start_monotonic_ns = 0;
  uint64_t start_realtime_ns = 0;
  uint64_t first_ns = 0, last_ns = 0;  // times of the first and last timed records
  uint64_t records = 0;
  uint64_t bad_records = 0;
  uint64_t unknown_records = 0;
  uint64_t torn_bytes = 0;
  uint64_t dropped_events = 0;  // the daemon's queue overflowed (kDropped)
  uint64_t drop_cache_events = 0;
  uint64_t accesses = 0;
  uint64_t requests = 0;               // ended requests
  uint64_t unterminated_requests = 0;  // begun, never ended (or begun again)
  uint64_t unmatched_ends = 0;
  std::map<uint32_t, TraceForestMeta> forests;  // by trace forest id
};

// Reads `path` once, calling `visitor` (may be null).
StatusOr<ScanResult> ScanTrace(const std::string& path, TraceVisitor* visitor);

// The id of forest `name` in a scanned trace; when `name` is empty, the only
// forest of the trace. Errors name the forests the trace has.
StatusOr<uint32_t> FindTraceForest(const ScanResult& scan, const std::string& name);

}  // namespace pacset
