#include "fs/stats.h"

#include <nlohmann/json.hpp>

namespace pacset {

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
    const LatencyHistogram& lat = s->fetch_latency;
    auto us = [](double ns) { return ns / 1000; };
    forests[name] = {
        {"generation", r(s->generation)},
        {"opens", r(s->opens)},
        {"reads", r(s->reads)},
        {"read_bytes", r(s->read_bytes)},
        {"gathers", r(s->gathers)},
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
         {{"count", lat.count()},
          {"mean", us(lat.mean_ns())},
          {"p50", us(lat.Quantile(0.5))},
          {"p90", us(lat.Quantile(0.9))},
          {"p99", us(lat.Quantile(0.99))},
          {"max", us(lat.max_ns())}}},
    };
  }
  j["forests"] = forests;
  // Forest names are ASCII, but the extra members may carry any bytes.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace pacset
