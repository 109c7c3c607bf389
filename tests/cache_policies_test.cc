// The cache-policy simulator (trace/analysis/cache_policies.h): LRU against
// a brute-force list, every online policy bounded by its capacity and by
// Belady's optimum, the scan-resistant policies keeping a hot set through a
// scan that flushes LRU, bin-lru keeping its protected blocks, and a trace
// read with its drop-cache points.
#include "trace/analysis/cache_policies.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_files.h"
#include "tests/trace_builder.h"
#include "trace/trace_format.h"

namespace pacset {
namespace {

std::unique_ptr<CacheModel> Model(CachePolicy p, size_t cap,
                                  std::function<bool(uint64_t)> prot = nullptr) {
  CacheModelOptions o;
  o.capacity_blocks = cap;
  o.is_protected = std::move(prot);
  auto m = NewCacheModel(p, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

uint64_t BruteForceLruHits(const std::vector<uint64_t>& keys, size_t cap) {
  std::vector<uint64_t> stack;  // front = most recent
  uint64_t hits = 0;
  for (uint64_t k : keys) {
    auto it = std::find(stack.begin(), stack.end(), k);
    if (it != stack.end()) {
      ++hits;
      stack.erase(it);
    } else if (stack.size() == cap) {
      stack.pop_back();
    }
    stack.insert(stack.begin(), k);
  }
  return hits;
}

// Zipf-like keys over `n` blocks, plus runs of sequential blocks.
std::vector<uint64_t> SkewedKeys(size_t count, uint64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> w(n);
  for (uint64_t i = 0; i < n; ++i) w[i] = 1.0 / static_cast<double>(i + 1);
  std::discrete_distribution<uint64_t> zipf(w.begin(), w.end());
  std::vector<uint64_t> keys;
  while (keys.size() < count) {
    if (rng() % 50 == 0) {
      const uint64_t start = rng() % n;
      for (uint64_t i = 0; i < 40 && keys.size() < count; ++i) keys.push_back((start + i) % n);
    } else {
      keys.push_back(zipf(rng));
    }
  }
  return keys;
}

BlockAccessStream StreamOf(std::vector<uint64_t> keys) {
  BlockAccessStream s;
  s.keys = std::move(keys);
  return s;
}

TEST(CachePolicies, LruMatchesABruteForceListOnRandomTraces) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const auto keys = SkewedKeys(4000, 300, seed);
    for (size_t cap : {1u, 7u, 50u, 299u, 400u}) {
      CacheModelOptions o;
      o.capacity_blocks = cap;
      auto r = SimulateCachePolicy(StreamOf(keys), CachePolicy::kLru, o);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->hits, BruteForceLruHits(keys, cap)) << "seed " << seed << " cap " << cap;
    }
  }
}

TEST(CachePolicies, NoOnlinePolicyExceedsItsCapacityOrBeatsTheOptimum) {
  const auto keys = SkewedKeys(20000, 2000, 7);
  for (size_t cap : {1u, 10u, 100u, 1000u}) {
    CacheModelOptions o;
    o.capacity_blocks = cap;
    o.is_protected = [](uint64_t k) { return k < 64; };
    auto best = SimulateCachePolicy(StreamOf(keys), CachePolicy::kOptimal, o);
    ASSERT_TRUE(best.ok());
    for (CachePolicy p : AllCachePolicies()) {
      if (p == CachePolicy::kOptimal) continue;
      auto m = Model(p, cap, o.is_protected);
      uint64_t hits = 0;
      for (uint64_t k : keys) {
        hits += m->Access(k);
        ASSERT_LE(m->size(), cap) << CachePolicyName(p);
      }
      EXPECT_LE(hits, best->hits) << CachePolicyName(p) << " cap " << cap;
      EXPECT_GT(hits, 0u) << CachePolicyName(p) << " cap " << cap;
    }
  }
}

TEST(CachePolicies, OptimalMatchesExhaustiveSearchOnTinyTraces) {
  // Belady with bypass against every choice of victim (or none), tried all.
  std::mt19937 rng(3);
  for (int t = 0; t < 30; ++t) {
    std::vector<uint64_t> keys(10);
    for (auto& k : keys) k = rng() % 5;
    const size_t cap = 1 + t % 3;
    std::function<uint64_t(size_t, std::vector<uint64_t>)> best = [&](size_t i,
                                                                      std::vector<uint64_t> held) {
      if (i == keys.size()) return uint64_t{0};
      if (std::find(held.begin(), held.end(), keys[i]) != held.end()) return 1 + best(i + 1, held);
      uint64_t b = best(i + 1, held);  // not admitted
      if (held.size() < cap) {
        auto h = held;
        h.push_back(keys[i]);
        return std::max(b, best(i + 1, h));
      }
      for (size_t v = 0; v < held.size(); ++v) {
        auto h = held;
        h[v] = keys[i];
        b = std::max(b, best(i + 1, h));
      }
      return b;
    };
    CacheModelOptions o;
    o.capacity_blocks = cap;
    auto r = SimulateCachePolicy(StreamOf(keys), CachePolicy::kOptimal, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->hits, best(0, {})) << "trace " << t;
  }
}

// A hot set used again and again, one long scan of blocks used once, then
// the hot set again: after the scan, which hot blocks are still cached.
uint64_t HotHitsAfterScan(CachePolicy p) {
  const size_t cap = 200;
  auto m = Model(p, cap);
  const uint64_t hot = 100;  // half the cache
  for (int round = 0; round < 20; ++round)
    for (uint64_t k = 0; k < hot; ++k) m->Access(k);
  for (uint64_t k = 0; k < 10 * cap; ++k) m->Access(1000000 + k);  // the scan
  uint64_t hits = 0;
  for (uint64_t k = 0; k < hot; ++k) hits += m->Access(k);
  return hits;
}

TEST(CachePolicies, AScanDoesNotEvictTheHotSetOfTheFrequencyAndScanResistantPolicies) {
  EXPECT_EQ(HotHitsAfterScan(CachePolicy::kLru), 0u);  // what the others fix
  EXPECT_EQ(HotHitsAfterScan(CachePolicy::kWTinyLfu), 100u);
  EXPECT_EQ(HotHitsAfterScan(CachePolicy::kS3Fifo), 100u);
}

TEST(CachePolicies, BinLruKeepsProtectedBlocksUpToItsShareWhateverElseComes) {
  const auto prot = [](uint64_t k) { return k < 60; };
  auto m = Model(CachePolicy::kBinLru, 100, prot);  // share 0.5: 50 protected places
  for (uint64_t k = 0; k < 30; ++k) EXPECT_FALSE(m->Access(k));
  for (uint64_t k = 1000; k < 5000; ++k) m->Access(k);
  for (uint64_t k = 0; k < 30; ++k) EXPECT_TRUE(m->Access(k)) << k;
  // More protected blocks than their share: the least recent of them go.
  for (uint64_t k = 0; k < 60; ++k) m->Access(k);
  for (uint64_t k = 1000; k < 5000; ++k) m->Access(k);
  EXPECT_EQ(m->size(), 100u);
  for (uint64_t k = 10; k < 60; ++k) EXPECT_TRUE(m->Access(k)) << k;
  for (uint64_t k = 0; k < 10; ++k) EXPECT_FALSE(m->Access(k)) << k;
  auto lru = Model(CachePolicy::kLru, 100);
  for (uint64_t k = 0; k < 30; ++k) lru->Access(k);
  for (uint64_t k = 1000; k < 5000; ++k) lru->Access(k);
  EXPECT_FALSE(lru->Access(0));
}

TEST(CachePolicies, ModelsRefuseAZeroCapacityAndOptimalOnline) {
  CacheModelOptions o;
  EXPECT_FALSE(NewCacheModel(CachePolicy::kLru, o).ok());
  o.capacity_blocks = 4;
  EXPECT_FALSE(NewCacheModel(CachePolicy::kOptimal, o).ok());
  EXPECT_FALSE(ParseCachePolicy("mru").ok());
  EXPECT_EQ(*ParseCachePolicy("s3-fifo"), CachePolicy::kS3Fifo);
}

// ---- traces ----

std::string WriteTrace(const std::vector<TraceRecord>& records) {
  TraceBuilder b;
  for (const TraceRecord& r : records) b.Add(r);
  return b.Save("cache_policies.trace");
}

TraceRecord Access(uint32_t forest, uint64_t block, uint64_t generation = 1,
                   TraceSource src = TraceSource::kStore) {
  return BlockAccessRecord(forest, block, generation, src);
}

TEST(CachePolicies, ATraceIsReadPerForestWithGenerationsApartAndDropsEmptyingTheCache) {
  std::vector<TraceRecord> recs;
  TraceRecord name;
  name.type = TraceRecordType::kForestName;
  name.forest = 1;
  name.generation = 1;
  name.name_chunk = "a";
  recs.push_back(name);
  name.forest = 2;
  name.name_chunk = "b";
  recs.push_back(name);
  recs.push_back(Access(1, 5));
  recs.push_back(Access(2, 5));
  recs.push_back(Access(1, 5, 1, TraceSource::kCache));
  recs.push_back(Access(1, 5, 2));  // another generation: another block
  TraceRecord drop;
  drop.type = TraceRecordType::kDropCache;
  drop.forest = 0;
  recs.push_back(drop);
  recs.push_back(Access(1, 5, 2, TraceSource::kPrefetch));
  recs.push_back(Access(1, 5, 2));
  const std::string path = WriteTrace(recs);

  auto s = ReadBlockAccesses(path, "a");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->keys.size(), 5u);
  EXPECT_EQ(s->keys[0], s->keys[1]);
  EXPECT_NE(s->keys[1], s->keys[2]);
  EXPECT_EQ(s->drops, std::vector<size_t>{3});
  CacheModelOptions o;
  o.capacity_blocks = 10;
  for (CachePolicy p : {CachePolicy::kLru, CachePolicy::kOptimal}) {
    auto r = SimulateCachePolicy(*s, p, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->hits, 2u) << CachePolicyName(p);  // the drop makes block 5 of gen 2 miss again
  }
  EXPECT_FALSE(ReadBlockAccesses(path, "").ok());  // two forests: say which
  EXPECT_FALSE(ReadBlockAccesses(path, "c").ok());
  std::ostringstream out;
  CachePoliciesCliOptions cli;
  cli.trace = path;
  cli.forest = "a";
  EXPECT_FALSE(RunCachePoliciesCommand(cli, out).ok());  // no block count without --model
  unlink(path.c_str());
}

}  // namespace
}  // namespace pacset
