#include "trace/analysis/cache_policies.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "layout/pac_file.h"
#include "trace/analysis/trace_scan.h"
#include "util/w_tinylfu.h"

namespace pacset {
namespace {

constexpr uint64_t kBlockBits = 44;
constexpr uint64_t kBlockMask = (uint64_t{1} << kBlockBits) - 1;

// An LRU list of keys with O(1) lookup, move to front and pop.
class LruList {
 public:
  bool Contains(uint64_t k) const { return pos_.count(k) != 0; }
  void PushFront(uint64_t k) {
    order_.push_front(k);
    pos_[k] = order_.begin();
  }
  void Touch(uint64_t k) { order_.splice(order_.begin(), order_, pos_.at(k)); }
  uint64_t Back() const { return order_.back(); }
  uint64_t PopBack() {
    const uint64_t k = order_.back();
    order_.pop_back();
    pos_.erase(k);
    return k;
  }
  void Erase(uint64_t k) {
    auto it = pos_.find(k);
    order_.erase(it->second);
    pos_.erase(it);
  }
  size_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  void Clear() {
    order_.clear();
    pos_.clear();
  }

 private:
  std::list<uint64_t> order_;  // front = most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> pos_;
};

class LruModel : public CacheModel {
 public:
  explicit LruModel(size_t capacity) : capacity_(capacity) {}
  bool Access(uint64_t k) override {
    if (lru_.Contains(k)) {
      lru_.Touch(k);
      return true;
    }
    lru_.PushFront(k);
    if (lru_.size() > capacity_) lru_.PopBack();
    return false;
  }
  size_t size() const override { return lru_.size(); }
  void Clear() override { lru_.Clear(); }

 private:
  const size_t capacity_;
  LruList lru_;
};

struct IdentityHash {
  size_t operator()(uint64_t k) const { return static_cast<size_t>(k); }
};

// The daemon's policy itself (util/w_tinylfu.h), one block = size 1.
class WTinyLfuModel : public CacheModel {
 public:
  explicit WTinyLfuModel(size_t capacity) : policy_(capacity, 1) {}
  bool Access(uint64_t k) override {
    if (policy_.Touch(k)) return true;
    evicted_.clear();
    policy_.Insert(k, 1, &evicted_);
    return false;
  }
  size_t size() const override { return policy_.size(); }
  void Clear() override { policy_.Clear(); }

 private:
  WTinyLfu<uint64_t, IdentityHash> policy_;
  std::vector<uint64_t> evicted_;
};

class S3FifoModel : public CacheModel {
 public:
  explicit S3FifoModel(size_t capacity)
      : capacity_(capacity),
        small_cap_(std::max<size_t>(1, capacity / 10)),
        main_cap_(capacity - std::min(capacity - 1, small_cap_)) {}

  bool Access(uint64_t k) override {
    auto it = entries_.find(k);
    if (it != entries_.end()) {
      it->second = static_cast<uint8_t>(std::min(it->second + 1, 3));
      return true;
    }
    while (entries_.size() >= capacity_) Evict();
    auto g = ghost_seq_.find(k);
    if (g != ghost_seq_.end()) {  // evicted recently from small: straight to main
      ghost_seq_.erase(g);
      main_.push_back(k);
    } else {
      small_.push_back(k);
    }
    entries_[k] = 0;
    return false;
  }
  size_t size() const override { return entries_.size(); }
  void Clear() override {
    entries_.clear();
    small_.clear();
    main_.clear();
    ghost_.clear();
    ghost_seq_.clear();
  }

 private:
  // Frees one entry.
  void Evict() {
    if (small_.size() >= small_cap_ || main_.empty()) {
      EvictSmall();
    } else {
      EvictMain();
    }
  }
  void EvictSmall() {
    while (!small_.empty()) {
      const uint64_t k = small_.front();
      small_.pop_front();
      uint8_t& freq = entries_.at(k);
      if (freq > 1) {  // used again while new: keep it, in main
        freq = 0;
        main_.push_back(k);
        if (main_.size() > main_cap_) return EvictMain();
      } else {
        entries_.erase(k);
        AddGhost(k);
        return;
      }
    }
    EvictMain();
  }
  void EvictMain() {
    while (!main_.empty()) {
      const uint64_t k = main_.front();
      main_.pop_front();
      uint8_t& freq = entries_.at(k);
      if (freq > 0) {  // used since it was last here: another round
        --freq;
        main_.push_back(k);
      } else {
        entries_.erase(k);
        return;
      }
    }
  }
  void AddGhost(uint64_t k) {
    ghost_.push_back({k, ++ghost_clock_});
    ghost_seq_[k] = ghost_clock_;
    while (ghost_.size() > main_cap_) {
      auto [old, seq] = ghost_.front();
      ghost_.pop_front();
      auto it = ghost_seq_.find(old);
      if (it != ghost_seq_.end() && it->second == seq) ghost_seq_.erase(it);
    }
  }

  const size_t capacity_, small_cap_, main_cap_;
  std::unordered_map<uint64_t, uint8_t> entries_;  // key -> use count (0..3)
  std::deque<uint64_t> small_, main_;
  // Keys evicted from small, oldest first, with the insertion that put them
  // there; a key is a ghost while its latest insertion is still queued.
  std::deque<std::pair<uint64_t, uint64_t>> ghost_;
  std::unordered_map<uint64_t, uint64_t> ghost_seq_;
  uint64_t ghost_clock_ = 0;
};

class BinLruModel : public CacheModel {
 public:
  BinLruModel(size_t capacity, double share, std::function<bool(uint64_t)> is_protected)
      : capacity_(capacity),
        protected_cap_(static_cast<size_t>(std::floor(share * static_cast<double>(capacity)))),
        is_protected_(std::move(is_protected)) {}

  bool Access(uint64_t k) override {
    const bool prot = protected_cap_ > 0 && is_protected_ && is_protected_(k);
    LruList& list = prot ? protected_ : other_;
    if (list.Contains(k)) {
      list.Touch(k);
      return true;
    }
    list.PushFront(k);
    if (protected_.size() > protected_cap_) protected_.PopBack();
    while (protected_.size() + other_.size() > capacity_) {
      if (!other_.empty()) {
        other_.PopBack();
      } else {
        protected_.PopBack();
      }
    }
    return false;
  }
  size_t size() const override { return protected_.size() + other_.size(); }
  void Clear() override {
    protected_.Clear();
    other_.Clear();
  }

 private:
  const size_t capacity_, protected_cap_;
  std::function<bool(uint64_t)> is_protected_;
  LruList protected_, other_;
};

// Belady's MIN over one run between drop points, with bypass: a block used
// farther in the future than every cached one is not admitted.
uint64_t OptimalHits(const std::vector<uint64_t>& keys, size_t begin, size_t end, size_t capacity) {
  const size_t n = end - begin;
  std::vector<uint64_t> next(n);
  std::unordered_map<uint64_t, uint64_t> last;
  const uint64_t never = std::numeric_limits<uint64_t>::max();
  for (size_t i = n; i-- > 0;) {
    auto it = last.find(keys[begin + i]);
    next[i] = it == last.end() ? never - i : it->second;  // distinct "never"s keep the set unique
    last[keys[begin + i]] = i;
  }
  std::set<std::pair<uint64_t, uint64_t>> by_next;  // (next use, key)
  std::unordered_map<uint64_t, uint64_t> cached;    // key -> next use
  uint64_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = keys[begin + i];
    auto it = cached.find(k);
    if (it != cached.end()) {
      ++hits;
      by_next.erase({it->second, k});
      it->second = next[i];
      by_next.insert({next[i], k});
      continue;
    }
    if (cached.size() >= capacity) {
      auto far = std::prev(by_next.end());
      if (far->first < next[i]) continue;  // bypass
      cached.erase(far->second);
      by_next.erase(far);
    }
    cached[k] = next[i];
    by_next.insert({next[i], k});
  }
  return hits;
}

class AccessCollector : public TraceVisitor {
 public:
  void OnAccess(const TraceRecord& r, uint32_t, const ScannedRequest*) override {
    if (r.flags & kTraceFlagError) return;  // a failed fetch is not cached: no lookup to model
    Stream& s = streams_[r.forest];
    auto g = s.generations.emplace(r.generation, s.generations.size()).first;
    s.keys.push_back((g->second << kBlockBits) | (r.block & kBlockMask));
  }
  void OnDropCache(uint32_t forest, uint64_t) override {
    drops_.push_back({forest, {}});
    for (auto& [id, s] : streams_) drops_.back().second[id] = s.keys.size();
  }
  struct Stream {
    std::map<uint64_t, uint64_t> generations;
    std::vector<uint64_t> keys;
  };
  std::map<uint32_t, Stream> streams_;
  std::vector<std::pair<uint32_t, std::map<uint32_t, size_t>>> drops_;
};

}  // namespace

const char* CachePolicyName(CachePolicy p) {
  switch (p) {
    case CachePolicy::kLru:
      return "lru";
    case CachePolicy::kWTinyLfu:
      return "w-tinylfu";
    case CachePolicy::kS3Fifo:
      return "s3-fifo";
    case CachePolicy::kBinLru:
      return "bin-lru";
    case CachePolicy::kOptimal:
      return "optimal";
  }
  return "?";
}

std::vector<CachePolicy> AllCachePolicies() {
  return {CachePolicy::kLru, CachePolicy::kWTinyLfu, CachePolicy::kS3Fifo, CachePolicy::kBinLru,
          CachePolicy::kOptimal};
}

StatusOr<CachePolicy> ParseCachePolicy(const std::string& name) {
  for (CachePolicy p : AllCachePolicies())
    if (name == CachePolicyName(p)) return p;
  return Status::InvalidArgument("unknown cache policy '" + name +
                                 "' (lru, w-tinylfu, s3-fifo, bin-lru, optimal)");
}

StatusOr<std::unique_ptr<CacheModel>> NewCacheModel(CachePolicy policy,
                                                    const CacheModelOptions& o) {
  if (o.capacity_blocks == 0) return Status::InvalidArgument("a cache of 0 blocks");
  switch (policy) {
    case CachePolicy::kLru:
      return std::unique_ptr<CacheModel>(new LruModel(o.capacity_blocks));
    case CachePolicy::kWTinyLfu:
      return std::unique_ptr<CacheModel>(new WTinyLfuModel(o.capacity_blocks));
    case CachePolicy::kS3Fifo:
      return std::unique_ptr<CacheModel>(new S3FifoModel(o.capacity_blocks));
    case CachePolicy::kBinLru:
      if (!(o.protected_share >= 0 && o.protected_share <= 1))
        return Status::InvalidArgument("protected share must lie in [0, 1]");
      return std::unique_ptr<CacheModel>(
          new BinLruModel(o.capacity_blocks, o.protected_share, o.is_protected));
    case CachePolicy::kOptimal:
      break;
  }
  return Status::InvalidArgument(std::string(CachePolicyName(policy)) +
                                 " is an offline policy: simulate it over a whole stream");
}

StatusOr<BlockAccessStream> ReadBlockAccesses(const std::string& trace_path,
                                              const std::string& forest) {
  AccessCollector collector;
  PACSET_ASSIGN_OR_RETURN(ScanResult scan, ScanTrace(trace_path, &collector));
  PACSET_ASSIGN_OR_RETURN(uint32_t id, FindTraceForest(scan, forest));
  BlockAccessStream out;
  const TraceForestMeta& meta = scan.forests.at(id);
  out.forest = meta.name;
  if (!meta.generations.empty()) {
    out.block_size = meta.generations.rbegin()->second.bytes;
    out.block_count = meta.generations.rbegin()->second.block;
  }
  auto s = collector.streams_.find(id);
  if (s != collector.streams_.end()) out.keys = std::move(s->second.keys);
  for (const auto& [which, at] : collector.drops_) {
    if (which != 0 && which != id) continue;
    auto pos = at.find(id);
    const size_t p = pos == at.end() ? 0 : pos->second;
    if (out.drops.empty() || out.drops.back() != p) out.drops.push_back(p);
  }
  return out;
}

StatusOr<PolicyOutcome> SimulateCachePolicy(const BlockAccessStream& stream, CachePolicy policy,
                                            const CacheModelOptions& options) {
  PolicyOutcome out;
  out.policy = policy;
  out.capacity_blocks = options.capacity_blocks;
  out.accesses = stream.keys.size();
  if (options.capacity_blocks == 0) return Status::InvalidArgument("a cache of 0 blocks");
  std::vector<size_t> cuts = stream.drops;
  cuts.push_back(stream.keys.size());
  if (policy == CachePolicy::kOptimal) {
    size_t begin = 0;
    for (size_t cut : cuts) {
      cut = std::min(cut, stream.keys.size());
      if (cut <= begin) continue;
      out.hits += OptimalHits(stream.keys, begin, cut, options.capacity_blocks);
      begin = cut;
    }
    return out;
  }
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<CacheModel> model, NewCacheModel(policy, options));
  size_t next_cut = 0;
  for (size_t i = 0; i < stream.keys.size(); ++i) {
    while (next_cut < cuts.size() && cuts[next_cut] <= i) {
      if (cuts[next_cut] == i) model->Clear();
      ++next_cut;
    }
    if (model->Access(stream.keys[i])) ++out.hits;
  }
  return out;
}

Status RunCachePoliciesCommand(const CachePoliciesCliOptions& o, std::ostream& out) {
  std::vector<CachePolicy> policies;
  if (o.policies.empty()) {
    policies = AllCachePolicies();
  } else {
    for (const std::string& name : o.policies) {
      PACSET_ASSIGN_OR_RETURN(CachePolicy p, ParseCachePolicy(name));
      policies.push_back(p);
    }
  }
  PACSET_ASSIGN_OR_RETURN(BlockAccessStream stream, ReadBlockAccesses(o.trace, o.forest));
  uint64_t blocks = stream.block_count;
  uint64_t protected_end = 0;  // blocks [0, protected_end): metadata and bins
  if (!o.model.empty()) {
    PACSET_ASSIGN_OR_RETURN(auto pac, PacFile::Open(o.model));
    blocks = pac->header().block_count;
    protected_end = pac->header().node_first_block + pac->header().bin_block_count;
  }
  if (blocks == 0)
    return Status::InvalidArgument(o.trace +
                                   ": the trace does not give the forest's block count; "
                                   "pass the traced .pac with --model");
  CacheModelOptions base;
  base.protected_share = o.protected_share;
  // Only the last generation's bins are known; a key's generation index is
  // in its top bits, so older generations' blocks are never protected.
  const uint64_t last_gen =
      stream.keys.empty() ? 0
                          : *std::max_element(stream.keys.begin(), stream.keys.end()) >> kBlockBits;
  base.is_protected = [protected_end, last_gen](uint64_t k) {
    return (k >> kBlockBits) == last_gen && (k & kBlockMask) < protected_end;
  };
  nlohmann::json j;
  j["trace"] = o.trace;
  j["forest"] = stream.forest;
  j["accesses"] = stream.keys.size();
  j["forest_blocks"] = blocks;
  j["protected_blocks"] = protected_end;
  j["block_size"] = stream.block_size;
  char line[256];
  if (!o.json) {
    out << "forest " << stream.forest << ": " << stream.keys.size() << " block lookups, " << blocks
        << " blocks";
    if (!o.model.empty()) out << " (" << protected_end << " metadata and bin blocks)";
    out << "\nhit ratio by cache size (fraction of the forest, blocks):\n";
    std::snprintf(line, sizeof line, "%-10s %8s", "fraction", "blocks");
    out << line;
    for (CachePolicy p : policies) {
      std::snprintf(line, sizeof line, " %10s", CachePolicyName(p));
      out << line;
    }
    out << "\n";
  }
  for (double f : o.fractions) {
    if (!(f > 0 && f <= 16)) return Status::InvalidArgument("cache fractions must lie in (0, 16]");
    const size_t cap =
        std::max<size_t>(1, static_cast<size_t>(std::llround(f * static_cast<double>(blocks))));
    CacheModelOptions opts = base;
    opts.capacity_blocks = cap;
    nlohmann::json row;
    row["fraction"] = f;
    row["capacity_blocks"] = cap;
    if (!o.json) {
      std::snprintf(line, sizeof line, "%-10.4g %8zu", f, cap);
      out << line;
    }
    for (CachePolicy p : policies) {
      PACSET_ASSIGN_OR_RETURN(PolicyOutcome r, SimulateCachePolicy(stream, p, opts));
      row["policies"][CachePolicyName(p)] = {
          {"hits", r.hits}, {"misses", r.misses()}, {"hit_ratio", r.hit_ratio()}};
      if (!o.json) {
        std::snprintf(line, sizeof line, " %10.4f", r.hit_ratio());
        out << line;
      }
    }
    if (!o.json) out << "\n";
    j["sizes"].push_back(row);
  }
  if (o.json) out << j.dump(1) << "\n";
  return Status::Ok();
}

}  // namespace pacset
