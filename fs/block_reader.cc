#include "fs/internal/block_reader.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "fs/internal/log.h"
#include "trace/trace_format.h"

namespace pacset {
namespace fs_internal {

Status BlockReader::Fetch(const ForestInode& f, uint64_t block, std::string* out) {
  const auto start = std::chrono::steady_clock::now();
  // While the store is known to be down, fail at once: the kernel retries a
  // failed page read, and every worker thread would otherwise wait out the
  // deadline again.
  if (start.time_since_epoch().count() < store_down_until_.load(std::memory_order_relaxed))
    return Status::Unavailable("store " + store_name_ + " is unreachable (retrying shortly)");
  const auto deadline = start + std::chrono::milliseconds(store_timeout_ms_);
  auto backoff = std::chrono::milliseconds(10);
  bool retried_corruption = false;
  while (true) {
    Status s = store_->Get(f.info, block, out);
    if (s.ok()) return s;
    if (s.IsCorruption()) {
      f.stats->corrupt_blocks.fetch_add(1, std::memory_order_relaxed);
      if (retried_corruption) {
        Log(LOG_ERR, "%s", s.ToString().c_str());
        return s;
      }
      retried_corruption = true;
      continue;
    }
    if (s.code() == StatusCode::kNotFound) return Status::Corruption(s.message());
    if (std::chrono::steady_clock::now() + backoff >= deadline) {
      Log(LOG_ERR, "forest '%s' block %llu: giving up after %d ms: %s", f.name.c_str(),
          static_cast<unsigned long long>(block), store_timeout_ms_, s.ToString().c_str());
      const auto quiet = std::chrono::milliseconds(std::min(store_timeout_ms_, 1000));
      store_down_until_.store((std::chrono::steady_clock::now() + quiet).time_since_epoch().count(),
                              std::memory_order_relaxed);
      return Status::DeadlineExceeded(s.ToString());
    }
    f.stats->store_retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

void BlockReader::Count(const ForestInode& f, BlockCache::Source src, const std::string* data,
                        uint64_t fetch_ns) {
  switch (src) {
    case BlockCache::Source::kStore:
      if (data != nullptr) {
        f.stats->blocks_fetched.fetch_add(1, std::memory_order_relaxed);
        f.stats->fetched_bytes.fetch_add(data->size(), std::memory_order_relaxed);
        f.stats->fetch_latency.Add(fetch_ns);
      }
      break;
    case BlockCache::Source::kCache:
      f.stats->cache_hits.fetch_add(1, std::memory_order_relaxed);
      break;
    case BlockCache::Source::kJoined:
      f.stats->joined.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

StatusOr<BlockData> BlockReader::Get(const ForestInode& f, uint64_t block,
                                     BlockCache::Source* src) {
  const BlockKey key{f.forest_id, f.info.generation, block};
  uint64_t fetch_ns = 0;
  auto r = cache_->GetOrFetch(
      key,
      [&](std::string* out) {
        const uint64_t t0 = MonotonicNowNs();
        Status s = Fetch(f, block, out);
        fetch_ns = MonotonicNowNs() - t0;
        return s;
      },
      src);
  Count(f, *src, r.ok() ? r->get() : nullptr, fetch_ns);
  return r;
}

void BlockReader::GetMany(const ForestInode& f, const std::vector<uint64_t>& blocks, size_t needed,
                          std::vector<BlockData>* data, std::vector<Status>* status,
                          std::vector<BlockCache::Source>* src) {
  std::vector<BlockKey> keys;
  keys.reserve(blocks.size());
  for (uint64_t b : blocks) keys.push_back({f.forest_id, f.info.generation, b});
  uint64_t fetch_ns = 0;
  cache_->GetOrFetchMany(
      keys,
      [&](const std::vector<size_t>& which, std::vector<std::string>* out,
          std::vector<Status>* st) {
        const uint64_t t0 = MonotonicNowNs();
        std::vector<uint64_t> want;
        want.reserve(which.size());
        for (size_t i : which) want.push_back(blocks[i]);
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        if (now >= store_down_until_.load(std::memory_order_relaxed)) {
          reads_.GetMany(f.info, want, out, st);
        } else {
          st->assign(want.size(), Status::Unavailable("store down"));  // Fetch says so below
        }
        for (size_t j = 0; j < want.size(); ++j)
          if (!(*st)[j].ok() && which[j] < needed) (*st)[j] = Fetch(f, want[j], &(*out)[j]);
        fetch_ns = MonotonicNowNs() - t0;
      },
      data, status, src);
  for (size_t i = 0; i < blocks.size(); ++i) Count(f, (*src)[i], (*data)[i].get(), fetch_ns);
}

StatusOr<BlockData> BlockReader::GetUncounted(const ForestInode& f, uint64_t block) {
  return cache_->GetOrFetch({f.forest_id, f.info.generation, block},
                            [&](std::string* out) { return Fetch(f, block, out); });
}

}  // namespace fs_internal
}  // namespace pacset
