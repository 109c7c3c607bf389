// W-TinyLFU (Einziger, Friedman, Manes: "TinyLFU: A Highly Efficient Cache
// Admission Policy", 2017): which keys a size-bounded cache keeps. One home
// for the policy: the daemon's block cache (fs/block_cache.h) runs it, and
// the trace simulator (trace/analysis/cache_policies.h) replays traces
// through the very same code, so its store-fetch prediction is the
// daemon's policy, not a model of it.
//
// Entries enter a small LRU window (1% of the capacity); one that leaves
// the window enters the main cache, a segmented LRU (probation, and
// protected: 80% of main, for entries used again there), only when room is
// free or when a frequency sketch says it is used more often than the entry
// it would evict. The sketch is a count-min of 4-bit counters (kept in
// bytes; 4 rows of 4 counters per entry of `entry_size` the capacity holds,
// so 16 bytes per such entry), every counter halved after 10 accesses per
// such entry: frequency with aging. Why for pacsetfs: blocks of the top
// levels and popular paths are used by most rows, a row's deep blocks by
// few; under LRU a burst of cold rows flushes the former, here they stay
// (measured on recorded traffic: docs/scale.md).
//
// A cache keeps its entries' values in the policy's own table (`Value`):
// one lookup per access, not one in the policy and another in a map of
// values beside it. The trace simulator keeps none (NoValue).
//
// Not thread-safe: the owner locks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "util/populated_memory.h"

namespace pacset {

struct NoValue {};

template <typename Key, typename Hash, typename Value = NoValue>
class WTinyLfu {
 public:
  // `capacity`: the bound on the sizes held (bytes, or entries with size
  // 1); `entry_size`: a typical entry's size, which sizes the sketch and
  // the window's minimum (one entry).
  WTinyLfu(uint64_t capacity, uint64_t entry_size)
      : capacity_(capacity),
        window_cap_(std::min(capacity, std::max(entry_size, capacity / 100))),
        main_cap_(capacity - window_cap_),
        protected_cap_(main_cap_ / 10 * 8 + main_cap_ % 10 * 8 / 10) {
    const uint64_t entries = std::max<uint64_t>(1, capacity / std::max<uint64_t>(1, entry_size));
    uint64_t width = 16;
    while (width < 4 * entries && width < (uint64_t{1} << 26)) width <<= 1;
    mask_ = width - 1;
    width_ = width;  // the sketch is made at the first count (CountUse)
    sample_ = std::max<uint64_t>(16, 10 * entries);
  }

  // Room for `n` entries without rehashing.
  void Reserve(size_t n) { nodes_.reserve(n); }

  // One lookup of `k`, hit or miss: counts it in the sketch; when `k` is
  // held, marks it used and returns its value (valid until the next
  // Insert, EraseIf or Clear), else null.
  Value* Touch(const Key& k) {
    CountUse(k);
    auto it = nodes_.find(k);
    if (it == nodes_.end()) return nullptr;
    Node& n = it->second;
    switch (n.segment) {
      case kWindow:
        window_.splice(window_.begin(), window_, n.pos);
        break;
      case kProtected:
        protected_.splice(protected_.begin(), protected_, n.pos);
        break;
      case kProbation:  // used again in main: protect it
        protected_.splice(protected_.begin(), probation_, n.pos);
        n.segment = kProtected;
        probation_bytes_ -= n.size;
        protected_bytes_ += n.size;
        while (protected_bytes_ > protected_cap_) {
          Node& d = nodes_.at(protected_.back());
          probation_.splice(probation_.begin(), protected_, d.pos);
          d.segment = kProbation;
          protected_bytes_ -= d.size;
          probation_bytes_ += d.size;
        }
        break;
    }
    return &n.value;
  }

  // Adds `k` (not held; Touch it first so that its use is counted) of
  // `size` with `value`; appends to `evicted` every key that leaves (its
  // value destroyed), possibly `k` itself (not admitted, or larger than the
  // capacity).
  void Insert(const Key& k, uint64_t size, std::vector<Key>* evicted, Value value = Value()) {
    if (size > capacity_) {
      if (!Contains(k)) evicted->push_back(k);
      return;
    }
    auto [it, fresh] = nodes_.try_emplace(k);  // one probe: held already, or its new node
    if (!fresh) return;
    window_.push_front(k);
    it->second = Node{kWindow, window_.begin(), size, std::move(value)};
    window_bytes_ += size;
    while (window_bytes_ > window_cap_) {
      const Key c = window_.back();
      Node& n = nodes_.at(c);
      window_.pop_back();
      window_bytes_ -= n.size;
      Admit(c, &n, evicted);
    }
  }

  // Forgets every held key for which pred(key) is true (dropped by the
  // owner), and its value.
  template <typename Pred>
  void EraseIf(Pred pred) {
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (!pred(it->first)) {
        ++it;
        continue;
      }
      ListOf(it->second.segment).erase(it->second.pos);
      BytesOf(it->second.segment) -= it->second.size;
      it = nodes_.erase(it);
    }
  }

  bool Contains(const Key& k) const { return nodes_.count(k) != 0; }
  size_t size() const { return nodes_.size(); }
  uint64_t bytes() const { return window_bytes_ + probation_bytes_ + protected_bytes_; }
  void Clear() {
    nodes_.clear();
    window_.clear();
    probation_.clear();
    protected_.clear();
    window_bytes_ = probation_bytes_ = protected_bytes_ = 0;
    if (sketch_) std::fill(sketch_.get(), sketch_.get() + kRows * width_, 0);
    added_ = 0;
  }
  // The sketch's estimate of how often `k` was used lately (0..15).
  uint32_t Frequency(const Key& k) const {
    const uint64_t h = Hash()(k);
    if (!sketch_) return 0;
    uint32_t m = 15;
    for (int i = 0; i < kRows; ++i) m = std::min<uint32_t>(m, sketch_[i * width_ + Slot(h, i)]);
    return m;
  }

 private:
  enum Segment : uint8_t { kWindow, kProbation, kProtected };
  struct Node {
    Segment segment;
    typename std::list<Key>::iterator pos;
    uint64_t size;
    Value value;
  };
  static constexpr int kRows = 4;

  std::list<Key>& ListOf(Segment s) {
    return s == kWindow ? window_ : s == kProbation ? probation_ : protected_;
  }
  uint64_t& BytesOf(Segment s) {
    return s == kWindow ? window_bytes_ : s == kProbation ? probation_bytes_ : protected_bytes_;
  }

  // `c` left the window (`n` its node, in no list now).
  void Admit(const Key& c, Node* n, std::vector<Key>* evicted) {
    if (probation_bytes_ + protected_bytes_ + n->size > main_cap_) {
      std::list<Key>& victims = probation_.empty() ? protected_ : probation_;
      if (victims.empty() || Frequency(c) <= Frequency(victims.back())) {
        evicted->push_back(c);
        nodes_.erase(c);
        return;
      }
      while (probation_bytes_ + protected_bytes_ + n->size > main_cap_) {
        std::list<Key>& from = probation_.empty() ? protected_ : probation_;
        const Key v = from.back();
        auto vn = nodes_.find(v);
        BytesOf(vn->second.segment) -= vn->second.size;
        from.pop_back();
        nodes_.erase(vn);
        evicted->push_back(v);
      }
    }
    probation_.push_front(c);
    n->segment = kProbation;
    n->pos = probation_.begin();
    probation_bytes_ += n->size;
  }

  void CountUse(const Key& k) {
    // Made at the first count, not with the policy: populated in one call
    // rather than faulted in a page at a time (util/populated_memory.h), and
    // after the daemon's start, whose fork of fusermount3 write-protects
    // every page there was then, each write to one of them after a fault.
    if (!sketch_) sketch_ = AllocatePopulated(kRows * width_);
    const uint64_t h = Hash()(k);
    for (int i = 0; i < kRows; ++i) {
      auto& c = sketch_[i * width_ + Slot(h, i)];
      if (c < 15) ++c;
    }
    if (++added_ >= sample_) {
      for (uint64_t j = 0; j < kRows * width_; ++j) sketch_[j] = static_cast<char>(sketch_[j] >> 1);
      added_ /= 2;
    }
  }
  size_t Slot(uint64_t h, int i) const {
    static constexpr uint64_t kSeeds[kRows] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full,
                                               0x165667B19E3779F9ull, 0xD6E8FEB86659FD93ull};
    uint64_t x = (h + 1) * kSeeds[i];
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return static_cast<size_t>(x & mask_);
  }

  const uint64_t capacity_, window_cap_, main_cap_, protected_cap_;
  std::unordered_map<Key, Node, Hash> nodes_;
  std::list<Key> window_, probation_, protected_;  // front = most recent
  uint64_t window_bytes_ = 0, probation_bytes_ = 0, protected_bytes_ = 0;
  PopulatedBuffer sketch_;  // kRows rows of width_ counters (0..15); null until used
  uint64_t width_ = 0;
  uint64_t mask_ = 0;
  uint64_t sample_ = 0;
  uint64_t added_ = 0;
};

}  // namespace pacset
