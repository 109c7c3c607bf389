#include "fs/block_cache.h"

#include <vector>

namespace pacset {

StatusOr<BlockData> BlockCache::GetOrFetch(const BlockKey& key,
                                           const std::function<Status(std::string*)>& fetch,
                                           Source* source) {
  std::shared_ptr<Flight> flight;
  {
    MutexLock lock(&mu_);
    if (BlockData cached = LookupLocked(key)) {
      if (source) *source = Source::kCache;
      return cached;
    }
    auto f = flights_.find(key);
    if (f != flights_.end()) {
      flight = f->second;
      while (!flight->done) cv_.Wait(&mu_);
      if (source) *source = Source::kJoined;
      if (!flight->status.ok()) return flight->status;
      return flight->data;
    }
    flight = std::make_shared<Flight>();
    flights_[key] = flight;
  }
  auto data = std::make_shared<std::string>();
  Status s = fetch(data.get());
  {
    MutexLock lock(&mu_);
    flight->done = true;
    flight->status = s;
    if (s.ok()) {
      flight->data = data;
      InsertLocked(key, data);
    }
    flights_.erase(key);
  }
  cv_.SignalAll();
  if (source) *source = Source::kStore;
  if (!s.ok()) return s;
  return BlockData(data);
}

void BlockCache::GetOrFetchMany(const std::vector<BlockKey>& keys, const FetchMany& fetch,
                                std::vector<BlockData>* data, std::vector<Status>* status,
                                std::vector<Source>* source) {
  const size_t n = keys.size();
  data->assign(n, nullptr);
  status->assign(n, Status::Ok());
  source->assign(n, Source::kCache);
  std::vector<std::shared_ptr<Flight>> flights(n);  // mine or joined
  std::vector<size_t> mine, joined;
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < n; ++i) {
      if (BlockData cached = LookupLocked(keys[i])) {
        (*data)[i] = std::move(cached);
        continue;
      }
      auto f = flights_.find(keys[i]);
      if (f != flights_.end()) {
        flights[i] = f->second;
        (*source)[i] = Source::kJoined;
        joined.push_back(i);
        continue;
      }
      flights[i] = std::make_shared<Flight>();
      flights_[keys[i]] = flights[i];
      (*source)[i] = Source::kStore;
      mine.push_back(i);
    }
  }
  if (!mine.empty()) {
    std::vector<std::string> fetched(mine.size());
    std::vector<Status> fetched_status(mine.size(), Status::Ok());
    try {
      fetch(mine, &fetched, &fetched_status);
    } catch (...) {
      fetched_status.assign(mine.size(), Status::Internal("block fetch failed (exception)"));
    }
    {
      MutexLock lock(&mu_);
      for (size_t j = 0; j < mine.size(); ++j) {
        const size_t i = mine[j];
        Flight& f = *flights[i];
        f.done = true;
        f.status = fetched_status[j];
        if (f.status.ok()) {
          f.data = std::make_shared<const std::string>(std::move(fetched[j]));
          InsertLocked(keys[i], f.data);
        }
        (*status)[i] = f.status;
        (*data)[i] = f.data;
        flights_.erase(keys[i]);
      }
    }
    cv_.SignalAll();
  }
  if (!joined.empty()) {
    MutexLock lock(&mu_);
    for (size_t i : joined) {
      while (!flights[i]->done) cv_.Wait(&mu_);
      (*status)[i] = flights[i]->status;
      (*data)[i] = flights[i]->data;
    }
  }
}

BlockData BlockCache::LookupLocked(const BlockKey& key) {
  const BlockData* data = policy_.Touch(key);
  return data ? *data : nullptr;
}

void BlockCache::InsertLocked(const BlockKey& key, BlockData data) {
  if (data->size() > capacity_) return;  // never cache what cannot fit
  if (!reserved_) {
    // Room for the bound's worth of 4 KiB blocks: a cold read of a forest
    // would otherwise rehash the table again and again as it fills. Made at
    // the first insert, not with the cache: the daemon's fork of fusermount3
    // write-protects the pages it has then, and each of the table's would
    // cost a fault at its first write (a fresh daemon's first row).
    policy_.Reserve(std::min<size_t>(capacity_ / 4096, size_t{1} << 20));
    reserved_ = true;
  }
  const size_t size = data->size();
  evicted_.clear();  // maybe `key` itself: not admitted
  policy_.Insert(key, size, &evicted_, std::move(data));
}

template <typename Pred>
void BlockCache::DropIfLocked(Pred pred) {
  policy_.EraseIf(pred);
}

void BlockCache::Drop(uint32_t forest) {
  MutexLock lock(&mu_);
  DropIfLocked([&](const BlockKey& k) { return forest == 0 || k.forest == forest; });
}

void BlockCache::DropGeneration(uint32_t forest, uint64_t generation) {
  MutexLock lock(&mu_);
  DropIfLocked([&](const BlockKey& k) { return k.forest == forest && k.generation == generation; });
}

size_t BlockCache::bytes() const {
  MutexLock lock(&mu_);
  return policy_.bytes();
}

}  // namespace pacset
