#include "fs/stats.h"

#include <nlohmann/json.hpp>

namespace pacset {

void LatencyHistogram::Add(uint64_t ns) {
  uint64_t us = ns / 1000;
  int b = 0;
  while (us > 0 && b < kBuckets - 1) {
    us >>= 1;
    ++b;
  }
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
}

std::array<uint64_t, LatencyHistogram::kBuckets> LatencyHistogram::Snapshot() const {
  std::array<uint64_t, kBuckets> s{};
  for (int i = 0; i < kBuckets; ++i) s[i] = buckets_[i].load(std::memory_order_relaxed);
  return s;
}

uint64_t LatencyHistogram::count() const {
  uint64_t n = 0;
  for (auto& b : buckets_) n += b.load(std::memory_order_relaxed);
  return n;
}

uint64_t LatencyHistogram::QuantileUpperUs(double q) const {
  auto s = Snapshot();
  uint64_t total = 0;
  for (uint64_t c : s) total += c;
  if (total == 0) return 0;
  const double target = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += s[i];
    if (static_cast<double>(seen) >= target) return uint64_t{1} << i;
  }
  return uint64_t{1} << (kBuckets - 1);
}

std::shared_ptr<ForestStats> MountStats::For(const std::string& forest) {
  MutexLock lock(&mu_);
  auto& s = forests_[forest];
  if (!s) s = std::make_shared<ForestStats>();
  return s;
}

std::string MountStats::ToJson(const std::string& extra_members_json) const {
  nlohmann::json j = nlohmann::json::parse(extra_members_json, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  nlohmann::json forests = nlohmann::json::object();
  MutexLock lock(&mu_);
  for (const auto& [name, s] : forests_) {
    auto r = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    nlohmann::json hist = nlohmann::json::object();
    auto snap = s->fetch_latency.Snapshot();
    for (int i = 0; i < LatencyHistogram::kBuckets; ++i)
      if (snap[i]) hist["<" + std::to_string(uint64_t{1} << i) + "us"] = snap[i];
    forests[name] = {
        {"generation", r(s->generation)},
        {"opens", r(s->opens)},
        {"reads", r(s->reads)},
        {"read_bytes", r(s->read_bytes)},
        {"blocks_fetched", r(s->blocks_fetched)},
        {"fetched_bytes", r(s->fetched_bytes)},
        {"cache_hits", r(s->cache_hits)},
        {"joined_fetches", r(s->joined)},
        {"prefetched_blocks", r(s->prefetched)},
        {"pushed_blocks", r(s->pushed)},
        {"errors", r(s->errors)},
        {"corrupt_blocks", r(s->corrupt_blocks)},
        {"store_retries", r(s->store_retries)},
        {"fetch_latency_us",
         {{"count", s->fetch_latency.count()},
          {"p50_upper", s->fetch_latency.QuantileUpperUs(0.5)},
          {"p99_upper", s->fetch_latency.QuantileUpperUs(0.99)},
          {"histogram", hist}}},
    };
  }
  j["forests"] = forests;
  // Forest names are ASCII, but the extra members may carry any bytes.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace pacset
