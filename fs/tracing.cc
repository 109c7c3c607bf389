#include "fs/internal/tracing.h"

#include <algorithm>

#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

Status Tracing::Start(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return Status::InvalidArgument("trace start needs an absolute path");
  PACSET_ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(path, queue_records_));
  std::shared_ptr<TraceWriter> next(std::move(writer));
  auto prev = std::atomic_exchange(&writer_, next);
  {
    MutexLock lock(&mu_);
    path_ = path;
  }
  if (prev) (void)prev->Close();
  Log(LOG_INFO, "tracing block accesses to %s", path.c_str());
  return Status::Ok();
}

void Tracing::Adopt(std::unique_ptr<TraceWriter> writer, const std::string& path) {
  std::atomic_store(&writer_, std::shared_ptr<TraceWriter>(std::move(writer)));
  MutexLock lock(&mu_);
  path_ = path;
}

Status Tracing::Stop() {
  auto prev = std::atomic_exchange(&writer_, std::shared_ptr<TraceWriter>());
  if (!prev) return Status::Ok();
  Status s = prev->Close();
  Log(LOG_INFO, "tracing stopped");
  return s;
}

std::string Tracing::path() const {
  MutexLock lock(&mu_);
  return path_;
}

void Tracing::RecordAccess(const ForestInode& f, uint64_t block, BlockCache::Source src,
                           uint32_t bytes, uint32_t pid, uint64_t latency_ns, bool ok,
                           bool prefetch) const {
  auto trace = Current();
  if (!trace) return;
  TraceRecord r;
  r.type = TraceRecordType::kBlockAccess;
  r.source = prefetch                            ? TraceSource::kPrefetch
             : src == BlockCache::Source::kStore ? TraceSource::kStore
             : src == BlockCache::Source::kCache ? TraceSource::kCache
                                                 : TraceSource::kJoined;
  r.flags = ok ? 0 : kTraceFlagError;
  r.forest = trace->Forest(
      {f.name, f.info.generation, f.info.block_size, f.info.block_count, f.info.header_checksum});
  trace->NoteThread(pid);
  r.time_ns = MonotonicNowNs();
  r.generation = f.info.generation;
  r.block = block;
  r.bytes = bytes;
  r.pid = pid;
  r.latency_ns = static_cast<uint32_t>(std::min<uint64_t>(latency_ns, UINT32_MAX));
  trace->Record(r);
}

void Tracing::RecordDrop(const std::string& name) const {
  auto trace = Current();
  if (!trace) return;
  TraceRecord r;
  r.type = TraceRecordType::kDropCache;
  r.forest = name == "*" ? 0 : trace->ForestId(name);
  r.time_ns = MonotonicNowNs();
  trace->Record(r);
}

}  // namespace fs_internal
}  // namespace pacset
