#include "trace/analysis/trace_compare.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "engine/engine.h"
#include "trace/trace_reader.h"
#include "util/csv.h"
#include "util/string_util.h"

namespace pacset {
namespace {

constexpr uint64_t kReadaheadWindow = 8;  // blocks after a needed block

class CompareVisitor : public TraceVisitor {
 public:
  CompareVisitor(const PacEngine& engine, const RowMatrix& rows, uint32_t forest,
                 const std::unordered_set<uint64_t>* generations, CompareResult* out)
      : engine_(engine), rows_(rows), forest_(forest), generations_(generations), out_(out) {
    const uint64_t n = engine.file().header().block_count;
    first_read_.assign(n, 0);
    prefetched_.assign(n, 0);
  }

  void OnAccess(const TraceRecord& r, uint32_t, const ScannedRequest* req) override {
    if (r.forest != forest_ || r.block >= first_read_.size()) return;
    if (generations_ && !generations_->count(r.generation)) return;
    if (!first_read_[r.block]) first_read_[r.block] = r.time_ns ? r.time_ns : 1;
    if (r.source == TraceSource::kPrefetch) prefetched_[r.block] = 1;
    if (!req && r.source != TraceSource::kPrefetch) {
      ++out_->outside_accesses;
      if (r.block < out_->metadata_blocks && outside_meta_.insert(r.block).second)
        ++out_->outside_metadata_blocks;
    }
    if (req) ++accesses_[req];
  }

  void OnDropCache(uint32_t forest, uint64_t) override {
    if (forest != 0 && forest != forest_) return;
    std::fill(first_read_.begin(), first_read_.end(), 0);
    std::fill(prefetched_.begin(), prefetched_.end(), 0);
    outside_meta_.clear();
  }

  void OnRequestEnd(const ScannedRequest& req) override {
    CompareRequest c;
    c.id = req.id;
    uint64_t first = req.first_row, count = req.row_count;
    if (count == 0) {  // marks without rows: request k is row k
      first = req.sequence;
      count = 1;
    }
    auto acc = accesses_.find(&req);
    if (acc != accesses_.end()) {
      c.accesses = acc->second;
      accesses_.erase(acc);
    }
    if (first + count > rows_.num_rows) {
      ++out_->requests_without_rows;
      return;
    }
    c.first_row = first;
    c.rows = count;
    expected_.clear();
    for (uint64_t r = first; r < first + count; ++r) {
      status_ = engine_.TouchedBlocks(rows_.row(r), &touched_);
      if (!status_.ok()) return;
      expected_.insert(touched_.begin(), touched_.end());
    }
    measured_.clear();
    for (const auto& [key, src] : req.blocks) {
      if (BlockKeyForest(key) != forest_) continue;
      measured_.emplace(BlockKeyBlock(key), src);
    }
    c.analytical = expected_.size();
    c.measured = measured_.size();
    for (const auto& [b, src] : measured_) {
      if (src == TraceSource::kStore)
        ++c.from_store;
      else if (src == TraceSource::kCache)
        ++c.from_cache;
      else if (src == TraceSource::kJoined)
        ++c.joined;
      if (expected_.count(b)) {
        ++c.matched;
      } else if (b < out_->metadata_blocks) {
        ++c.extra_metadata;
      } else {
        bool after_needed = false;
        for (uint64_t d = 1; d <= kReadaheadWindow && d <= b && !after_needed; ++d)
          after_needed = expected_.count(b - d) > 0;
        ++(after_needed ? c.extra_readahead : c.extra_other);
      }
    }
    for (uint64_t b : expected_) {
      if (measured_.count(b)) continue;
      if (b < prefetched_.size() && prefetched_[b])
        ++c.prefetched;
      else if (b < first_read_.size() && first_read_[b])
        ++c.resident;
      else
        ++c.unexplained_missing;
    }
    out_->analytical.Add(c.analytical);
    out_->measured.Add(c.measured);
    out_->requests.push_back(c);
  }

  const Status& status() const { return status_; }

 private:
  const PacEngine& engine_;
  const RowMatrix& rows_;
  uint32_t forest_;
  const std::unordered_set<uint64_t>* generations_;
  CompareResult* out_;
  std::vector<uint64_t> first_read_;  // time of the first read since the last drop, 0 = none
  std::vector<char> prefetched_;
  std::unordered_set<uint64_t> outside_meta_;
  std::unordered_map<const ScannedRequest*, uint64_t> accesses_;
  std::unordered_set<uint64_t> expected_;
  std::unordered_map<uint64_t, TraceSource> measured_;
  std::vector<uint64_t> touched_;
  Status status_;
};

std::string Pct(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", whole ? 100.0 * part / whole : 0.0);
  return buf;
}

}  // namespace

StatusOr<CompareResult> CompareTrace(const CompareOptions& o) {
  PACSET_ASSIGN_OR_RETURN(auto engine, PacEngine::Open(o.model));
  PACSET_ASSIGN_OR_RETURN(RowMatrix rows, ReadCsvRows(o.input, engine->num_features()));
  if (rows.num_rows == 0) return Status::InvalidArgument(o.input + ": no rows");
  // Pass 1: which forest, and which of its generations is this .pac.
  PACSET_ASSIGN_OR_RETURN(ScanResult scan, ScanTrace(o.trace, nullptr));
  PACSET_ASSIGN_OR_RETURN(uint32_t forest, FindTraceForest(scan, o.forest));
  CompareResult out;
  out.forest = scan.forests[forest].name;
  out.metadata_blocks = engine->file().header().node_first_block;
  out.block_count = engine->file().header().block_count;
  out.dropped_events = scan.dropped_events;
  std::unordered_set<uint64_t> gens;
  const auto& meta = scan.forests[forest];
  for (const auto& [g, info] : meta.generations)
    if (info.header_checksum == engine->file().header().checksum) gens.insert(g);
  if (!meta.generations.empty() && gens.empty()) {
    char want[32];
    std::snprintf(want, sizeof(want), "%016llx",
                  static_cast<unsigned long long>(engine->file().header().checksum));
    return Status::InvalidArgument(o.model + " (header checksum " + want +
                                   ") is not the file traced as forest '" + out.forest +
                                   "': compare with the .pac that was mounted (pacset export)");
  }
  out.checksum_verified = !gens.empty();
  CompareVisitor v(*engine, rows, forest, gens.empty() ? nullptr : &gens, &out);
  PACSET_RETURN_IF_ERROR(ScanTrace(o.trace, &v).status());
  PACSET_RETURN_IF_ERROR(v.status());
  if (scan.requests == 0)
    return Status::InvalidArgument(o.trace +
                                   " has no request marks: record the workload with "
                                   "`pacset-trace record` (or merge marks, FORMAT.md section 5)");
  CompareRequest& t = out.totals;
  for (const auto& c : out.requests) {
    t.analytical += c.analytical;
    t.measured += c.measured;
    t.matched += c.matched;
    t.resident += c.resident;
    t.prefetched += c.prefetched;
    t.unexplained_missing += c.unexplained_missing;
    t.extra_metadata += c.extra_metadata;
    t.extra_readahead += c.extra_readahead;
    t.extra_other += c.extra_other;
    t.from_store += c.from_store;
    t.from_cache += c.from_cache;
    t.joined += c.joined;
    t.accesses += c.accesses;
    t.rows += c.rows;
  }
  return out;
}

namespace {
nlohmann::json RequestJson(const CompareRequest& c) {
  return {{"id", c.id},
          {"first_row", c.first_row},
          {"rows", c.rows},
          {"analytical", c.analytical},
          {"measured", c.measured},
          {"matched", c.matched},
          {"resident_in_page_cache", c.resident},
          {"prefetched", c.prefetched},
          {"unexplained_missing", c.unexplained_missing},
          {"extra_metadata", c.extra_metadata},
          {"extra_readahead", c.extra_readahead},
          {"extra_other", c.extra_other},
          {"from_store", c.from_store},
          {"from_daemon_cache", c.from_cache},
          {"joined", c.joined},
          {"page_reads", c.accesses}};
}
}  // namespace

nlohmann::json CompareResult::ToJson(size_t max_requests) const {
  nlohmann::json reqs = nlohmann::json::array();
  for (size_t i = 0; i < requests.size() && i < max_requests; ++i)
    reqs.push_back(RequestJson(requests[i]));
  return {{"forest", forest},
          {"checksum_verified", checksum_verified},
          {"metadata_blocks", metadata_blocks},
          {"block_count", block_count},
          {"requests_compared", requests.size()},
          {"requests_without_rows", requests_without_rows},
          {"accesses_outside_requests", outside_accesses},
          {"metadata_blocks_read_outside_requests", outside_metadata_blocks},
          {"dropped_events", dropped_events},
          {"analytical_blocks_per_request", analytical.ToJson(false)},
          {"measured_blocks_per_request", measured.ToJson(false)},
          {"totals", RequestJson(totals)},
          {"requests", reqs}};
}

std::string CompareResult::ToText(size_t max_requests) const {
  std::string out;
  StringAppendF(&out, "forest %s: %zu requests compared (%s)\n", forest.c_str(), requests.size(),
                checksum_verified ? "the traced generation is this .pac"
                                  : "version 1 trace: file not verified");
  StringAppendF(&out, "  %-28s %9s %9s %9s %9s\n", "blocks per request", "mean", "median", "p95",
                "max");
  StringAppendF(&out, "  %-28s %9.2f %9.1f %9llu %9llu\n", "analytical (engine paths)",
                analytical.mean(), analytical.median(),
                static_cast<unsigned long long>(analytical.Quantile(0.95)),
                static_cast<unsigned long long>(analytical.max()));
  StringAppendF(&out, "  %-28s %9.2f %9.1f %9llu %9llu\n", "measured (read via mount)",
                measured.mean(), measured.median(),
                static_cast<unsigned long long>(measured.Quantile(0.95)),
                static_cast<unsigned long long>(measured.max()));
  const CompareRequest& t = totals;
  out += "\nwhy they differ (summed over requests)\n";
  StringAppendF(&out, "  analytically needed:   %llu block reads\n",
                static_cast<unsigned long long>(t.analytical));
  StringAppendF(&out, "    read during the request:        %9llu (%s)\n",
                static_cast<unsigned long long>(t.matched), Pct(t.matched, t.analytical).c_str());
  StringAppendF(
      &out,
      "    page cache hit (read earlier):  %9llu (%s)  blocks read by earlier requests since the"
      " last cache drop stay in the page cache\n",
      static_cast<unsigned long long>(t.resident), Pct(t.resident, t.analytical).c_str());
  StringAppendF(
      &out, "    prefetched by pacsetfs:         %9llu (%s)  mount option prefetch_bins\n",
      static_cast<unsigned long long>(t.prefetched), Pct(t.prefetched, t.analytical).c_str());
  StringAppendF(&out, "    unexplained:                    %9llu (%s)%s\n",
                static_cast<unsigned long long>(t.unexplained_missing),
                Pct(t.unexplained_missing, t.analytical).c_str(),
                t.unexplained_missing
                    ? "  (pages cached before tracing started, lost trace events, or "
                      "requests not matching input rows)"
                    : "");
  StringAppendF(
      &out, "  measured but not needed: %llu\n",
      static_cast<unsigned long long>(t.extra_metadata + t.extra_readahead + t.extra_other));
  StringAppendF(&out,
                "    metadata blocks:                %9llu  header and tree table, read at open\n",
                static_cast<unsigned long long>(t.extra_metadata));
  StringAppendF(
      &out,
      "    readahead-like:                 %9llu  just after a needed block (mount -o readahead)\n",
      static_cast<unsigned long long>(t.extra_readahead));
  StringAppendF(
      &out,
      "    other:                          %9llu  e.g. other threads of the process during a "
      "request\n",
      static_cast<unsigned long long>(t.extra_other));
  StringAppendF(
      &out,
      "  where measured blocks came from: store %llu, daemon cache %llu, joined in-flight fetch "
      "%llu\n",
      static_cast<unsigned long long>(t.from_store), static_cast<unsigned long long>(t.from_cache),
      static_cast<unsigned long long>(t.joined));
  if (t.measured)
    StringAppendF(
        &out,
        "  page reads per measured block: %.2f (1.00: each block faulted once, because pacsetfs "
        "pushes a fetched block whole into the page cache; more: pages of a block served from the "
        "daemon cache fault one by one)\n",
        static_cast<double>(t.accesses) / t.measured);
  StringAppendF(
      &out, "  outside requests: %llu reads, %llu of the %llu metadata blocks (opening the file)\n",
      static_cast<unsigned long long>(outside_accesses),
      static_cast<unsigned long long>(outside_metadata_blocks),
      static_cast<unsigned long long>(metadata_blocks));
  if (requests_without_rows)
    StringAppendF(&out, "  %llu requests not compared: their rows are not in the input\n",
                  static_cast<unsigned long long>(requests_without_rows));
  if (dropped_events)
    StringAppendF(&out, "  WARNING: %llu trace events were dropped by the daemon\n",
                  static_cast<unsigned long long>(dropped_events));
  if (!requests.empty() && max_requests) {
    StringAppendF(&out, "\n  %8s %8s %10s %8s %8s %8s %8s %8s\n", "request", "row", "analytical",
                  "measured", "matched", "cached", "extra", "missing");
    for (size_t i = 0; i < requests.size() && i < max_requests; ++i) {
      const CompareRequest& c = requests[i];
      StringAppendF(
          &out, "  %8llu %8llu %10llu %8llu %8llu %8llu %8llu %8llu\n",
          static_cast<unsigned long long>(c.id), static_cast<unsigned long long>(c.first_row),
          static_cast<unsigned long long>(c.analytical),
          static_cast<unsigned long long>(c.measured), static_cast<unsigned long long>(c.matched),
          static_cast<unsigned long long>(c.resident + c.prefetched),
          static_cast<unsigned long long>(c.extra_metadata + c.extra_readahead + c.extra_other),
          static_cast<unsigned long long>(c.unexplained_missing));
    }
    if (requests.size() > max_requests)
      StringAppendF(&out, "  ... %zu more (--requests N, or --json)\n",
                    requests.size() - max_requests);
  }
  return out;
}

}  // namespace pacset
