#include "engine/internal/store_block_source.h"

#include <algorithm>
#include <limits>

namespace pacset {
namespace store_internal {
namespace {

constexpr uint32_t kLeafShift = 9;
constexpr uint64_t kLeafBlocks = uint64_t{1} << kLeafShift;

}  // namespace

// 512 blocks' entries: the cached bytes (null when not cached), CLOCK
// reference bits, and the epoch until which a block is kept for a round.
struct StoreBlockSource::Leaf {
  std::atomic<const std::string*> data[kLeafBlocks] = {};
  std::atomic<uint64_t> referenced[kLeafBlocks / 64] = {};
  uint64_t keep_until[kLeafBlocks] = {};  // guarded by mu_
};

class StoreBlockSource::Fetcher final : public BlockFetcher {
 public:
  explicit Fetcher(StoreBlockSource* source) : source_(source), slot_(source->Register()) {}
  ~Fetcher() override { source_->Unregister(slot_); }

  void Fetch(uint64_t b) override {
    // The first Fetch after a Wait ends the life of the pointers Ready gave.
    if (pending_.empty()) source_->Announce(slot_);
    pending_.push_back(b);
  }

  Status Wait(std::vector<uint64_t>* arrived) override {
    source_->Announce(slot_);
    if (pending_.empty()) return Status::Internal("waiting for blocks with no fetch started");
    std::vector<uint64_t> missing;
    source_->Touch(pending_, &missing);  // another request may have read some meanwhile
    if (!missing.empty()) {
      std::vector<std::string> data;
      Status s = source_->Read(missing, &data);
      if (!s.ok()) {
        pending_.clear();
        return s;
      }
      source_->counters_.rounds.fetch_add(1, std::memory_order_relaxed);
      source_->Insert(missing, &data);
    }
    arrived->insert(arrived->end(), pending_.begin(), pending_.end());
    pending_.clear();
    return Status::Ok();
  }

  // The cache's table says exactly which blocks are in memory.
  bool Missing(uint64_t b) override { return !source_->Cached(b); }

 private:
  StoreBlockSource* const source_;
  Slot* const slot_;
  std::vector<uint64_t> pending_;
};

StoreBlockSource::StoreBlockSource(BlockStore* store, ForestInfo forest, uint64_t cache_bytes)
    : forest_(std::move(forest)),
      bs_(forest_.block_size),
      capacity_(cache_bytes),
      reads_(store),
      top_size_((forest_.block_count + kLeafBlocks - 1) / kLeafBlocks) {
  top_.reset(new std::atomic<Leaf*>[top_size_]);
  for (uint64_t i = 0; i < top_size_; ++i) top_[i].store(nullptr, std::memory_order_relaxed);
}

StoreBlockSource::~StoreBlockSource() {
  for (auto& leaf : leaves_)
    for (auto& d : leaf->data) delete d.load();
  for (const Retired& r : retired_) delete r.bytes;
}

StoreBlockSource::Leaf* StoreBlockSource::LeafOf(uint64_t b) const {
  return top_[b >> kLeafShift].load();
}

StoreBlockSource::Leaf* StoreBlockSource::LeafForInsert(uint64_t b) {
  Leaf* leaf = LeafOf(b);
  if (leaf != nullptr) return leaf;
  leaves_.push_back(std::make_unique<Leaf>());
  leaf = leaves_.back().get();
  top_[b >> kLeafShift].store(leaf);
  return leaf;
}

bool StoreBlockSource::Cached(uint64_t b) const {
  const Leaf* leaf = LeafOf(b);
  return leaf != nullptr && leaf->data[b & (kLeafBlocks - 1)].load() != nullptr;
}

const char* StoreBlockSource::Ready(uint64_t b) {
  // Sequentially consistent loads: ordered after this thread's last
  // Announce, which is what lets Insert's evictions free blocks safely.
  const Leaf* leaf = LeafOf(b);
  if (leaf == nullptr) return nullptr;
  const std::string* d = leaf->data[b & (kLeafBlocks - 1)].load();
  if (d == nullptr) return nullptr;
  std::atomic<uint64_t>& word = const_cast<Leaf*>(leaf)->referenced[(b & (kLeafBlocks - 1)) / 64];
  const uint64_t bit = uint64_t{1} << (b % 64);
  if (!(word.load(std::memory_order_relaxed) & bit)) word.fetch_or(bit, std::memory_order_relaxed);
  return d->data();
}

std::unique_ptr<BlockFetcher> StoreBlockSource::NewFetcher() {
  return std::make_unique<Fetcher>(this);
}

StoreBlockSource::Slot* StoreBlockSource::Register() {
  MutexLock lock(&mu_);
  Slot* slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slots_.push_back(std::make_unique<Slot>());
    slot = slots_.back().get();
  }
  Announce(slot);
  return slot;
}

void StoreBlockSource::Unregister(Slot* slot) {
  MutexLock lock(&mu_);
  slot->epoch.store(0);
  free_slots_.push_back(slot);
  // The blocks this fetcher's rounds kept beyond the bound may go now.
  EvictLocked();
  FreeRetiredLocked();
}

uint64_t StoreBlockSource::MinActiveEpochLocked() const {
  uint64_t m = std::numeric_limits<uint64_t>::max();
  for (const auto& s : slots_)
    if (const uint64_t e = s->epoch.load(); e != 0) m = std::min(m, e);
  return m;
}

void StoreBlockSource::Touch(const std::vector<uint64_t>& blocks, std::vector<uint64_t>* missing) {
  MutexLock lock(&mu_);
  const uint64_t now = epoch_.load();
  for (uint64_t b : blocks) {
    Leaf* leaf = LeafOf(b);
    const uint64_t i = b & (kLeafBlocks - 1);
    if (leaf != nullptr && leaf->data[i].load() != nullptr) {
      leaf->keep_until[i] = std::max(leaf->keep_until[i], now);
    } else {
      missing->push_back(b);
    }
  }
}

void StoreBlockSource::Insert(const std::vector<uint64_t>& blocks, std::vector<std::string>* data) {
  MutexLock lock(&mu_);
  const uint64_t now = epoch_.load();
  for (size_t k = 0; k < blocks.size(); ++k) {
    const uint64_t b = blocks[k];
    Leaf* leaf = LeafForInsert(b);
    const uint64_t i = b & (kLeafBlocks - 1);
    leaf->keep_until[i] = std::max(leaf->keep_until[i], now);
    if (leaf->data[i].load() != nullptr) continue;  // another request's read got here first
    leaf->data[i].store(new std::string(std::move((*data)[k])));
    resident_.push_back(b);
    bytes_ += bs_;
  }
  EvictLocked();
  FreeRetiredLocked();
}

void StoreBlockSource::EvictLocked() {
  if (bytes_ <= capacity_) return;
  const uint64_t active = MinActiveEpochLocked();
  // Two sweeps over the blocks resident now: the first may only clear
  // reference bits. (A bound on the shrinking ring would stop after about a
  // third of it.)
  const size_t sweeps_end = 2 * resident_.size() + 1;
  for (size_t scanned = 0; bytes_ > capacity_ && !resident_.empty() && scanned < sweeps_end;
       ++scanned) {
    if (hand_ >= resident_.size()) hand_ = 0;
    const uint64_t b = resident_[hand_];
    Leaf* leaf = LeafOf(b);
    const uint64_t i = b & (kLeafBlocks - 1);
    // Arrived for a round a request has not walked yet.
    if (leaf->keep_until[i] >= active) {
      ++hand_;
      continue;
    }
    std::atomic<uint64_t>& word = leaf->referenced[i / 64];
    const uint64_t bit = uint64_t{1} << (i % 64);
    if (word.load(std::memory_order_relaxed) & bit) {
      word.fetch_and(~bit, std::memory_order_relaxed);
      ++hand_;
      continue;
    }
    const std::string* d = leaf->data[i].exchange(nullptr);
    retired_.push_back({d, epoch_.load()});
    bytes_ -= bs_;
    resident_[hand_] = resident_.back();
    resident_.pop_back();
    counters_.evicted.fetch_add(1, std::memory_order_relaxed);
  }
}

void StoreBlockSource::FreeRetiredLocked() {
  if (retired_.empty()) return;
  const uint64_t active = MinActiveEpochLocked();
  size_t kept = 0;
  for (const Retired& r : retired_) {
    if (r.epoch < active) {
      delete r.bytes;
    } else {
      retired_[kept++] = r;
    }
  }
  retired_.resize(kept);
}

uint64_t StoreBlockSource::cached_bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

Status StoreBlockSource::Read(const std::vector<uint64_t>& blocks, std::vector<std::string>* out) {
  counters_.multigets.fetch_add(std::max<size_t>(1, reads_.Parts(blocks.size())),
                                std::memory_order_relaxed);
  counters_.blocks.fetch_add(blocks.size(), std::memory_order_relaxed);
  counters_.bytes.fetch_add(blocks.size() * uint64_t{bs_}, std::memory_order_relaxed);
  return reads_.MultiGet(forest_, blocks, out);
}

}  // namespace store_internal
}  // namespace pacset
