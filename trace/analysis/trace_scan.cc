#include "trace/analysis/trace_scan.h"

#include <algorithm>
#include <memory>

#include "trace/trace_reader.h"

namespace pacset {
namespace {

class RequestTracker {
 public:
  RequestTracker(TraceVisitor* v, ScanResult* out) : v_(v), out_(out) {}

  void Begin(const TraceRecord& r) {
    auto it = by_tid_.find(r.pid);
    if (it != by_tid_.end()) {  // a request that never ended
      ++out_->unterminated_requests;
      Forget(it->second.get());
      by_tid_.erase(it);
    }
    auto req = std::make_unique<ScannedRequest>();
    req->id = r.block;
    req->tid = r.pid;
    req->tgid = r.tgid ? r.tgid : r.pid;
    req->first_row = r.first_row;
    req->row_count = r.row_count;
    req->begin_ns = r.time_ns;
    by_process_[req->tgid].push_back(req.get());
    by_tid_[r.pid] = std::move(req);
  }

  void End(const TraceRecord& r) {
    auto it = by_tid_.find(r.pid);
    if (it == by_tid_.end() || it->second->id != r.block) {
      ++out_->unmatched_ends;
      return;
    }
    std::unique_ptr<ScannedRequest> req = std::move(it->second);
    by_tid_.erase(it);
    Forget(req.get());
    req->end_ns = r.time_ns;
    req->sequence = out_->requests++;
    if (v_) v_->OnRequestEnd(*req);
  }

  ScannedRequest* For(uint32_t tid, uint32_t tgid) {
    auto it = by_tid_.find(tid);
    if (it != by_tid_.end()) return it->second.get();
    auto p = by_process_.find(tgid);
    if (p != by_process_.end() && p->second.size() == 1) return p->second.front();
    return nullptr;
  }

  void Finish() { out_->unterminated_requests += by_tid_.size(); }

 private:
  void Forget(ScannedRequest* req) {
    auto p = by_process_.find(req->tgid);
    if (p == by_process_.end()) return;
    auto& v = p->second;
    v.erase(std::remove(v.begin(), v.end(), req), v.end());
    if (v.empty()) by_process_.erase(p);
  }

  TraceVisitor* v_;
  ScanResult* out_;
  std::unordered_map<uint32_t, std::unique_ptr<ScannedRequest>> by_tid_;
  std::unordered_map<uint32_t, std::vector<ScannedRequest*>> by_process_;
};

}  // namespace

StatusOr<ScanResult> ScanTrace(const std::string& path, TraceVisitor* visitor) {
  PACSET_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  ScanResult out;
  out.path = path;
  out.version = reader->header().version;
  out.start_monotonic_ns = reader->header().start_monotonic_ns;
  out.start_realtime_ns = reader->header().start_realtime_ns;
  RequestTracker tracker(visitor, &out);
  std::vector<char> seen;  // forest ids already in out.forests
  TraceRecord r;
  while (reader->Next(&r)) {
    if (visitor) visitor->OnRecord(r, *reader);
    const bool timed =
        r.type != TraceRecordType::kForestName && r.type != TraceRecordType::kForestInfo;
    if (timed && r.time_ns) {
      if (!out.first_ns || r.time_ns < out.first_ns) out.first_ns = r.time_ns;
      out.last_ns = std::max(out.last_ns, r.time_ns);
    }
    switch (r.type) {
      case TraceRecordType::kBlockAccess: {
        ++out.accesses;
        if (r.forest >= seen.size() || !seen[r.forest]) {
          if (r.forest < (1u << 20)) {
            if (r.forest >= seen.size()) seen.resize(r.forest + 1, 0);
            seen[r.forest] = 1;
          }
          out.forests[r.forest];
        }
        const uint32_t tgid = reader->ProcessOf(r.pid);
        ScannedRequest* req =
            r.source == TraceSource::kPrefetch ? nullptr : tracker.For(r.pid, tgid);
        if (req) {
          ++req->accesses;
          const int src = std::min<int>(static_cast<int>(r.source), kNumTraceSources - 1);
          ++req->by_source[src];
          req->blocks.emplace(BlockKey(r.forest, r.block), r.source);
        }
        if (visitor) visitor->OnAccess(r, tgid, req);
        break;
      }
      case TraceRecordType::kRequestBegin:
        tracker.Begin(r);
        break;
      case TraceRecordType::kRequestEnd:
        tracker.End(r);
        break;
      case TraceRecordType::kDropped:
        out.dropped_events += r.block;
        break;
      case TraceRecordType::kDropCache:
        ++out.drop_cache_events;
        if (visitor) visitor->OnDropCache(r.forest, r.time_ns);
        break;
      case TraceRecordType::kForestInfo:
        out.forests[r.forest].generations[r.generation] = r;
        break;
      case TraceRecordType::kForestName:
        out.forests[r.forest];
        break;
      case TraceRecordType::kThread:
        break;
    }
  }
  tracker.Finish();
  out.records = reader->records();
  out.bad_records = reader->bad_records();
  out.unknown_records = reader->unknown_records();
  out.torn_bytes = reader->torn_bytes();
  // Names: every forest id that has a name record or was used.
  for (auto& [id, meta] : out.forests) meta.name = reader->ForestName(id);
  return out;
}

StatusOr<uint32_t> FindTraceForest(const ScanResult& scan, const std::string& name) {
  std::string known;
  for (const auto& [id, meta] : scan.forests) {
    if (!name.empty() && meta.name == name) return id;
    known += (known.empty() ? "" : ", ") + meta.name;
  }
  if (name.empty()) {
    if (scan.forests.size() == 1) return scan.forests.begin()->first;
    if (scan.forests.empty())
      return Status::NotFound(scan.path + ": the trace has no block accesses of any forest");
    return Status::InvalidArgument(scan.path + " has several forests (" + known +
                                   "); choose one with --forest");
  }
  return Status::NotFound(scan.path + ": no forest named '" + name + "' in the trace" +
                          (known.empty() ? "" : " (it has: " + known + ")"));
}

}  // namespace pacset
