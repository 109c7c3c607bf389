#include "trace/analysis/trace_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trace/trace_reader.h"
#include "util/size.h"
#include "util/string_util.h"

namespace pacset {

// ---- CountDistribution ----

void CountDistribution::Add(uint64_t v, uint64_t times) {
  if (!times) return;
  values_[v] += times;
  n_ += times;
  sum_ += v * times;
}

uint64_t CountDistribution::ValueAtRank(uint64_t rank) const {
  uint64_t seen = 0;
  for (const auto& [v, c] : values_) {
    seen += c;
    if (seen >= rank) return v;
  }
  return max();
}

double CountDistribution::median() const {
  if (!n_) return 0;
  if (n_ % 2) return static_cast<double>(ValueAtRank(n_ / 2 + 1));
  return (static_cast<double>(ValueAtRank(n_ / 2)) + static_cast<double>(ValueAtRank(n_ / 2 + 1))) /
         2;
}

uint64_t CountDistribution::Quantile(double q) const {
  if (!n_) return 0;
  const uint64_t rank =
      std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(q * static_cast<double>(n_))), 1, n_);
  return ValueAtRank(rank);
}

nlohmann::json CountDistribution::ToJson(bool histogram) const {
  nlohmann::json j = {{"count", n_},
                      {"mean", mean()},
                      {"median", median()},
                      {"p95", Quantile(0.95)},
                      {"max", max()}};
  if (histogram) {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [v, c] : values_) h.push_back({v, c});
    j["histogram"] = h;
  }
  return j;
}

namespace {

nlohmann::json LatencyJson(const LatencyHistogram& h) {
  return {{"count", h.count()},     {"mean", h.mean_ns()},     {"p50", h.Quantile(0.5)},
          {"p90", h.Quantile(0.9)}, {"p99", h.Quantile(0.99)}, {"max", h.max_ns()}};
}

}  // namespace

uint64_t ForestReport::accesses() const {
  uint64_t n = 0;
  for (uint64_t c : by_source) n += c;
  return n;
}

// ---- the aggregating visitor ----
namespace {

class ReportVisitor : public TraceVisitor {
 public:
  ReportVisitor(TraceReport* out, uint64_t bucket_ns) : out_(out) { out_->bucket_ns = bucket_ns; }

  void OnRecord(const TraceRecord& r, const TraceReader& reader) override {
    if (r.type == TraceRecordType::kForestName || r.type == TraceRecordType::kForestInfo) return;
    if (!origin_ && r.time_ns) origin_ = r.time_ns;
  }

  void OnAccess(const TraceRecord& r, uint32_t tgid, const ScannedRequest* req) override {
    const int src = std::min<int>(static_cast<int>(r.source), kNumTraceSources - 1);
    ForestReport& f = Forest(r.forest);
    ++f.by_source[src];
    if (r.flags & kTraceFlagError) ++f.errors;
    f.bytes_read += r.bytes;
    f.latency[src].Add(r.latency_ns);
    BlockHeat& h = f.blocks[r.block];
    if (r.source == TraceSource::kPrefetch) {
      ++h.prefetch;
      ++h.store;
    } else {
      ++h.demand;
      if (r.source == TraceSource::kStore) ++h.store;
    }
    ProcessReport& p = out_->processes[tgid];
    p.pid = tgid;
    ++p.by_source[src];
    if (!p.first_ns) p.first_ns = r.time_ns;
    p.last_ns = std::max(p.last_ns, r.time_ns);
    if (p.threads.size() < 64 &&
        std::find(p.threads.begin(), p.threads.end(), r.pid) == p.threads.end())
      p.threads.push_back(r.pid);
    if (!req && r.source != TraceSource::kPrefetch) ++out_->accesses_outside_requests;
    if (TimeBucket* b = Bucket(r.time_ns)) ++b->by_source[src];
  }

  void OnRequestEnd(const ScannedRequest& req) override {
    out_->blocks_per_request.Add(req.blocks.size());
    uint64_t from_store = 0;
    per_forest_.clear();
    for (const auto& [key, src] : req.blocks) {
      ++per_forest_[BlockKeyForest(key)];
      if (src == TraceSource::kStore) ++from_store;
    }
    out_->store_blocks_per_request.Add(from_store);
    for (const auto& [forest, n] : per_forest_) Forest(forest).blocks_per_request.Add(n);
    out_->request_duration.Add(req.end_ns >= req.begin_ns ? req.end_ns - req.begin_ns : 0);
    ProcessReport& p = out_->processes[req.tgid];
    p.pid = req.tgid;
    ++p.requests;
    if (TimeBucket* b = Bucket(req.end_ns)) ++b->requests;
  }

 private:
  ForestReport& Forest(uint32_t id) {
    ForestReport& f = out_->forests[id];
    f.id = id;
    return f;
  }

  TimeBucket* Bucket(uint64_t t) {
    if (!origin_) origin_ = t;
    if (t < origin_) t = origin_;
    uint64_t i = (t - origin_) / out_->bucket_ns;
    // Bounded memory: past 100000 buckets, halve the resolution.
    while (i >= 100000) {
      auto& tl = out_->timeline;
      for (size_t k = 0; k < tl.size(); ++k) {
        TimeBucket& dst = tl[k / 2];
        if (k % 2 == 0) {
          dst = tl[k];
        } else {
          for (int s = 0; s < kNumTraceSources; ++s) dst.by_source[s] += tl[k].by_source[s];
          dst.requests += tl[k].requests;
        }
      }
      tl.resize((tl.size() + 1) / 2);
      out_->bucket_ns *= 2;
      i = (t - origin_) / out_->bucket_ns;
    }
    if (i >= out_->timeline.size()) out_->timeline.resize(i + 1);
    return &out_->timeline[i];
  }

  TraceReport* out_;
  uint64_t origin_ = 0;
  std::unordered_map<uint32_t, uint64_t> per_forest_;
};

std::string Micros(uint64_t ns) {
  char buf[32];
  if (ns >= 10000000)
    std::snprintf(buf, sizeof(buf), "%.0f ms", ns / 1e6);
  else if (ns >= 1000)
    std::snprintf(buf, sizeof(buf), "%.0f us", ns / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%llu ns", static_cast<unsigned long long>(ns));
  return buf;
}

}  // namespace

StatusOr<TraceReport> BuildTraceReport(const std::string& path, const ReportOptions& options) {
  if (!(options.bucket_seconds > 0))
    return Status::InvalidArgument("the time bucket must be a positive number of seconds");
  TraceReport report;
  ReportVisitor v(&report, static_cast<uint64_t>(std::max(1e-6, options.bucket_seconds) * 1e9));
  PACSET_ASSIGN_OR_RETURN(report.scan, ScanTrace(path, &v));
  for (auto& [id, meta] : report.scan.forests) {
    ForestReport& f = report.forests[id];
    f.id = id;
    f.name = meta.name;
    if (!meta.generations.empty()) {
      const TraceRecord& info = meta.generations.rbegin()->second;
      f.block_size = info.bytes;
      f.block_count = info.block;
    }
  }
  return report;
}

nlohmann::json TraceReport::ToJson() const {
  const ScanResult& s = scan;
  nlohmann::json j;
  j["trace"] = {{"path", s.path},
                {"format_version", s.version},
                {"start_unix_ns", s.start_realtime_ns},
                {"duration_s", s.last_ns > s.first_ns ? (s.last_ns - s.first_ns) / 1e9 : 0.0},
                {"records", s.records},
                {"bad_records", s.bad_records},
                {"unknown_records", s.unknown_records},
                {"torn_tail_bytes", s.torn_bytes},
                {"dropped_events", s.dropped_events},
                {"drop_cache_events", s.drop_cache_events},
                {"accesses", s.accesses}};
  nlohmann::json forests_j = nlohmann::json::array();
  for (const auto& [id, f] : forests) {
    nlohmann::json src = nlohmann::json::object(), lat = nlohmann::json::object();
    for (int i = 0; i < kNumTraceSources; ++i) {
      src[TraceSourceName(static_cast<TraceSource>(i))] = f.by_source[i];
      if (f.latency[i].count())
        lat[TraceSourceName(static_cast<TraceSource>(i))] = LatencyJson(f.latency[i]);
    }
    uint64_t fetched_unique = 0;
    for (const auto& [b, h] : f.blocks) fetched_unique += h.store ? 1 : 0;
    nlohmann::json fj = {{"id", id},
                         {"name", f.name},
                         {"accesses", f.accesses()},
                         {"by_source", src},
                         {"errors", f.errors},
                         {"blocks_fetched_from_store", f.store_fetches()},
                         {"unique_blocks", f.blocks.size()},
                         {"unique_blocks_fetched", fetched_unique},
                         {"bytes_read", f.bytes_read},
                         {"latency_ns", lat},
                         {"blocks_per_request", f.blocks_per_request.ToJson(true)}};
    if (f.block_size) {
      fj["block_size"] = f.block_size;
      fj["block_count"] = f.block_count;
      fj["bytes_fetched_from_store"] = f.store_fetches() * f.block_size;
    }
    auto mit = s.forests.find(id);
    if (mit != s.forests.end()) {
      nlohmann::json gens = nlohmann::json::array();
      for (const auto& [g, info] : mit->second.generations)
        gens.push_back({{"generation", g},
                        {"block_size", info.bytes},
                        {"block_count", info.block},
                        {"header_checksum", info.header_checksum}});
      fj["generations"] = gens;
    }
    forests_j.push_back(fj);
  }
  j["forests"] = forests_j;
  j["requests"] = {{"count", s.requests},
                   {"unterminated", s.unterminated_requests},
                   {"unmatched_ends", s.unmatched_ends},
                   {"accesses_outside_requests", accesses_outside_requests},
                   {"blocks_per_request", blocks_per_request.ToJson(true)},
                   {"store_blocks_per_request", store_blocks_per_request.ToJson(false)},
                   {"duration_ns", LatencyJson(request_duration)}};
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& [pid, p] : processes) {
    nlohmann::json src = nlohmann::json::object();
    uint64_t total = 0;
    for (int i = 0; i < kNumTraceSources; ++i) {
      src[TraceSourceName(static_cast<TraceSource>(i))] = p.by_source[i];
      total += p.by_source[i];
    }
    procs.push_back({{"pid", pid},
                     {"threads", p.threads.size()},
                     {"accesses", total},
                     {"by_source", src},
                     {"requests", p.requests},
                     {"first_s", p.first_ns > s.first_ns ? (p.first_ns - s.first_ns) / 1e9 : 0.0},
                     {"last_s", p.last_ns > s.first_ns ? (p.last_ns - s.first_ns) / 1e9 : 0.0}});
  }
  j["processes"] = procs;
  nlohmann::json buckets = nlohmann::json::array();
  for (size_t i = 0; i < timeline.size(); ++i) {
    const TimeBucket& b = timeline[i];
    buckets.push_back({{"t_s", i * bucket_ns / 1e9},
                       {"store", b.by_source[0]},
                       {"cache", b.by_source[1]},
                       {"joined", b.by_source[2]},
                       {"prefetch", b.by_source[3]},
                       {"requests", b.requests}});
  }
  j["timeline"] = {{"bucket_s", bucket_ns / 1e9}, {"buckets", buckets}};
  return j;
}

std::string TraceReport::ToText() const {
  const ScanResult& s = scan;
  std::string out;
  StringAppendF(&out, "trace %s (format v%u): %llu records, %.3f s, %llu block accesses\n",
                s.path.c_str(), s.version, static_cast<unsigned long long>(s.records),
                s.last_ns > s.first_ns ? (s.last_ns - s.first_ns) / 1e9 : 0.0,
                static_cast<unsigned long long>(s.accesses));
  if (s.dropped_events)
    StringAppendF(
        &out,
        "  WARNING: the daemon dropped %llu events (trace queue full): counts are lower bounds\n",
        static_cast<unsigned long long>(s.dropped_events));
  if (s.bad_records || s.torn_bytes || s.unknown_records)
    StringAppendF(
        &out,
        "  skipped: %llu damaged records, %llu records of unknown types, torn tail of %llu bytes\n",
        static_cast<unsigned long long>(s.bad_records),
        static_cast<unsigned long long>(s.unknown_records),
        static_cast<unsigned long long>(s.torn_bytes));
  if (s.drop_cache_events)
    StringAppendF(&out, "  caches dropped %llu times\n",
                  static_cast<unsigned long long>(s.drop_cache_events));
  out += "\nper forest\n";
  StringAppendF(&out, "  %-20s %9s %9s %9s %9s %9s %8s %10s %10s %10s %10s\n", "forest", "accesses",
                "store", "cache", "joined", "prefetch", "unique", "fetched", "store p50",
                "store p99", "store max");
  for (const auto& [id, f] : forests) {
    const LatencyHistogram& l = f.latency[0];
    StringAppendF(&out, "  %-20s %9llu %9llu %9llu %9llu %9llu %8zu %10s %10s %10s %10s\n",
                  f.name.c_str(), static_cast<unsigned long long>(f.accesses()),
                  static_cast<unsigned long long>(f.by_source[0]),
                  static_cast<unsigned long long>(f.by_source[1]),
                  static_cast<unsigned long long>(f.by_source[2]),
                  static_cast<unsigned long long>(f.by_source[3]), f.blocks.size(),
                  f.block_size ? FormatByteSize(f.store_fetches() * f.block_size).c_str() : "?",
                  Micros(l.Quantile(0.5)).c_str(), Micros(l.Quantile(0.99)).c_str(),
                  Micros(l.max_ns()).c_str());
    if (f.errors)
      StringAppendF(&out, "    %llu accesses failed (EIO)\n",
                    static_cast<unsigned long long>(f.errors));
  }
  out += "\nper request (distinct blocks a request read through the mount)\n";
  if (!s.requests) {
    out +=
        "  no requests marked (run the workload under `pacset-trace record`, or see FORMAT.md"
        " section 5)\n";
  } else {
    StringAppendF(&out, "  %-20s %9s %9s %9s %9s %9s\n", "forest", "requests", "mean", "median",
                  "p95", "max");
    auto row = [&](const std::string& name, const CountDistribution& d) {
      StringAppendF(&out, "  %-20s %9llu %9.2f %9.1f %9llu %9llu\n", name.c_str(),
                    static_cast<unsigned long long>(d.count()), d.mean(), d.median(),
                    static_cast<unsigned long long>(d.Quantile(0.95)),
                    static_cast<unsigned long long>(d.max()));
    };
    row("(all forests)", blocks_per_request);
    for (const auto& [id, f] : forests)
      if (f.blocks_per_request.count()) row(f.name, f.blocks_per_request);
    StringAppendF(
        &out,
        "  from the store: mean %.2f, p95 %llu per request; request duration p50 %s, p99 %s\n",
        store_blocks_per_request.mean(),
        static_cast<unsigned long long>(store_blocks_per_request.Quantile(0.95)),
        Micros(request_duration.Quantile(0.5)).c_str(),
        Micros(request_duration.Quantile(0.99)).c_str());
    StringAppendF(
        &out,
        "  %llu requests; %llu unterminated; %llu accesses outside any request (e.g. reading the"
        " header at open)\n",
        static_cast<unsigned long long>(s.requests),
        static_cast<unsigned long long>(s.unterminated_requests),
        static_cast<unsigned long long>(accesses_outside_requests));
  }
  out += "\nper process\n";
  StringAppendF(&out, "  %8s %8s %9s %9s %9s %9s %9s %9s\n", "pid", "threads", "requests",
                "accesses", "store", "cache", "joined", "prefetch");
  for (const auto& [pid, p] : processes) {
    uint64_t total = 0;
    for (uint64_t c : p.by_source) total += c;
    StringAppendF(&out, "  %8u %8zu %9llu %9llu %9llu %9llu %9llu %9llu\n", pid, p.threads.size(),
                  static_cast<unsigned long long>(p.requests),
                  static_cast<unsigned long long>(total),
                  static_cast<unsigned long long>(p.by_source[0]),
                  static_cast<unsigned long long>(p.by_source[1]),
                  static_cast<unsigned long long>(p.by_source[2]),
                  static_cast<unsigned long long>(p.by_source[3]));
  }
  StringAppendF(&out, "\nover time (%.3g s buckets)\n", bucket_ns / 1e9);
  StringAppendF(&out, "  %8s %9s %9s %9s %9s %9s\n", "t (s)", "store", "cache", "joined",
                "prefetch", "requests");
  const size_t shown = std::min<size_t>(timeline.size(), 60);
  for (size_t i = 0; i < shown; ++i) {
    const TimeBucket& b = timeline[i];
    StringAppendF(&out, "  %8.3g %9llu %9llu %9llu %9llu %9llu\n", i * bucket_ns / 1e9,
                  static_cast<unsigned long long>(b.by_source[0]),
                  static_cast<unsigned long long>(b.by_source[1]),
                  static_cast<unsigned long long>(b.by_source[2]),
                  static_cast<unsigned long long>(b.by_source[3]),
                  static_cast<unsigned long long>(b.requests));
  }
  if (shown < timeline.size())
    StringAppendF(&out, "  ... %zu more buckets (see --json)\n", timeline.size() - shown);
  return out;
}

}  // namespace pacset
