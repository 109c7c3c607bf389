// The mount's block-access log: started at mount time (-o trace=FILE) or at
// run time through the control file, and switched off the same way.
//
// Thread-safety: every method may be called from any thread. Readers of the
// current writer (a page fault recording an access) take no lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fs/block_cache.h"
#include "fs/internal/inodes.h"
#include "trace/trace_writer.h"
#include "util/mutex.h"
#include "util/status.h"

namespace pacset {
namespace fs_internal {

class Tracing {
 public:
  explicit Tracing(size_t queue_records) : queue_records_(queue_records) {}

  // Starts writing a new trace to `path` (which the writer creates); a trace
  // under way is closed first.
  Status Start(const std::string& path) EXCLUDES(mu_);
  // Adopts an open writer (the one opened at mount time).
  void Adopt(std::unique_ptr<TraceWriter> writer, const std::string& path) EXCLUDES(mu_);
  // Stops and closes the current trace, if any; returns its close status.
  Status Stop() EXCLUDES(mu_);

  // The current writer, or null.
  std::shared_ptr<TraceWriter> Current() const { return std::atomic_load(&writer_); }
  std::string path() const EXCLUDES(mu_);

  // One block served to a reader (or prefetched).
  void RecordAccess(const ForestInode& f, uint64_t block, BlockCache::Source src, uint32_t bytes,
                    uint32_t pid, uint64_t latency_ns, bool ok, bool prefetch = false) const;
  // The caches of forest `name` ("*": of all) were dropped.
  void RecordDrop(const std::string& name) const;

 private:
  const size_t queue_records_;
  std::shared_ptr<TraceWriter> writer_;  // std::atomic_load / std::atomic_exchange only
  mutable Mutex mu_;
  std::string path_ GUARDED_BY(mu_);
};

}  // namespace fs_internal
}  // namespace pacset
