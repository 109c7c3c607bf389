// Miss-ratio curves (trace/analysis/miss_ratio.h) against a brute-force
// simulation of the daemon's cache: a byte-bounded LRU list that inserts at
// the front and evicts from the back until it fits (fs/block_cache.cc's
// rule), replayed at every cache size.
#include <gtest/gtest.h>

#include <cmath>
#include <list>
#include <random>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "tests/trace_builder.h"
#include "trace/analysis/miss_ratio.h"
#include "trace/analysis/trace_html.h"

namespace pacset {
namespace {

// One event of a stream: an access of `key` (`bytes` > 0), or a drop of
// every key for which drop_forest matches (kDropAll: all keys).
struct Event {
  uint64_t key = 0;
  uint32_t bytes = 0;  // 0: a drop
  uint32_t drop_forest = 0;
};
constexpr uint32_t kDropAll = UINT32_MAX;
uint32_t ForestOfKey(uint64_t key) { return static_cast<uint32_t>(key >> 40); }

// The daemon's LRU, by brute force: misses at a capacity of `cap` bytes.
uint64_t SimulateLru(const std::vector<Event>& events, uint64_t cap) {
  std::list<std::pair<uint64_t, uint32_t>> lru;  // front = most recent
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, uint32_t>>::iterator> where;
  uint64_t bytes = 0, misses = 0;
  for (const Event& e : events) {
    if (e.bytes == 0) {
      for (auto it = lru.begin(); it != lru.end();) {
        if (e.drop_forest == kDropAll || ForestOfKey(it->first) == e.drop_forest) {
          bytes -= it->second;
          where.erase(it->first);
          it = lru.erase(it);
        } else {
          ++it;
        }
      }
      continue;
    }
    auto w = where.find(e.key);
    if (w != where.end()) {
      lru.splice(lru.begin(), lru, w->second);
      continue;
    }
    ++misses;
    if (e.bytes > cap) continue;  // never cached
    lru.push_front({e.key, e.bytes});
    where[e.key] = lru.begin();
    bytes += e.bytes;
    while (bytes > cap) {
      bytes -= lru.back().second;
      where.erase(lru.back().first);
      lru.pop_back();
    }
  }
  return misses;
}

MissRatioCurve Curve(const std::vector<Event>& events, double rate = 1.0, uint64_t seed = 0) {
  MissRatioBuilder b(rate, seed);
  for (const Event& e : events) {
    if (e.bytes) {
      b.Access(e.key, e.bytes);
    } else if (e.drop_forest == kDropAll) {
      b.DropAll();
    } else {
      std::vector<uint64_t> keys;
      for (uint64_t k : b.LiveKeys())
        if (ForestOfKey(k) == e.drop_forest) keys.push_back(k);
      b.DropKeys(keys);
    }
  }
  return b.Finish(1);
}

// Every size where the curve can change (each distance, one byte on either
// side) and a few others; caches smaller than the largest block (which the
// daemon never caches, without evicting anything for it) only when all
// blocks have one size.
void ExpectExactAtEverySize(const std::vector<Event>& events, const std::string& what) {
  const MissRatioCurve c = Curve(events);
  uint32_t min_bytes = UINT32_MAX, max_bytes = 0;
  for (const Event& e : events)
    if (e.bytes) {
      min_bytes = std::min(min_bytes, e.bytes);
      max_bytes = std::max(max_bytes, e.bytes);
    }
  std::vector<uint64_t> sizes = {0, 1, c.footprint_bytes(), c.footprint_bytes() + 1, 1 << 30};
  for (const auto& p : c.Points(SIZE_MAX)) {
    sizes.push_back(p.cache_bytes);
    if (p.cache_bytes) sizes.push_back(p.cache_bytes - 1);
    sizes.push_back(p.cache_bytes + 1);
  }
  int checked = 0;
  for (uint64_t cap : sizes) {
    if (min_bytes != max_bytes && cap < max_bytes) continue;
    ++checked;
    ASSERT_EQ(c.Misses(cap), static_cast<double>(SimulateLru(events, cap)))
        << what << ", cache " << cap << " bytes";
  }
  EXPECT_GT(checked, 3) << what;
}

std::vector<Event> Accesses(const std::vector<uint64_t>& keys, uint32_t bytes = 4096) {
  std::vector<Event> v;
  for (uint64_t k : keys) v.push_back({k, bytes, 0});
  return v;
}

TEST(MissRatio, ExactPassMatchesLruOnRandomTraces) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 6; ++trial) {
    const uint64_t blocks = 5 + trial * 40;
    std::uniform_int_distribution<uint64_t> pick(0, blocks - 1);
    std::vector<uint64_t> keys;
    for (int i = 0; i < 3000; ++i) keys.push_back(pick(rng));
    ExpectExactAtEverySize(Accesses(keys), "uniform trial " + std::to_string(trial));
  }
  // Skewed (most accesses on few blocks), with block sizes of two forests.
  std::vector<Event> skewed;
  std::geometric_distribution<uint64_t> hot(0.05);
  for (int i = 0; i < 5000; ++i) {
    const uint32_t forest = i % 3 == 0 ? 2 : 1;
    skewed.push_back({(uint64_t{forest} << 40) | hot(rng), forest == 2 ? 65536u : 4096u, 0});
  }
  ExpectExactAtEverySize(skewed, "skewed, two block sizes");
}

TEST(MissRatio, CyclicScanJustAboveTheCacheMissesEveryTime) {
  // k + 1 blocks in a loop: an LRU of k blocks misses every access, k + 1 only the first round.
  for (uint64_t k : {1, 7, 64}) {
    std::vector<uint64_t> keys;
    for (int round = 0; round < 20; ++round)
      for (uint64_t b = 0; b <= k; ++b) keys.push_back(b);
    const auto events = Accesses(keys);
    const MissRatioCurve c = Curve(events);
    EXPECT_EQ(c.Misses(k * 4096), static_cast<double>(keys.size())) << k;
    EXPECT_EQ(c.Misses((k + 1) * 4096), static_cast<double>(k + 1)) << k;
    EXPECT_EQ(c.footprint_bytes(), (k + 1) * 4096);
    ExpectExactAtEverySize(events, "cycle of " + std::to_string(k + 1));
  }
}

TEST(MissRatio, AllDistinctMissesAtEverySizeAndOneBlockOnlyOnce) {
  std::vector<uint64_t> distinct(1000);
  for (size_t i = 0; i < distinct.size(); ++i) distinct[i] = i;
  const MissRatioCurve d = Curve(Accesses(distinct));
  EXPECT_EQ(d.Misses(uint64_t{1} << 40), 1000.0);
  EXPECT_EQ(d.cold_misses(), 1000.0);
  EXPECT_FALSE(d.BytesForHitRatio(0.9).has_value());  // no cache helps
  EXPECT_EQ(d.footprint_bytes(), 0u);
  ExpectExactAtEverySize(Accesses(distinct), "all distinct");

  const MissRatioCurve one = Curve(Accesses(std::vector<uint64_t>(500, 42)));
  EXPECT_EQ(one.Misses(0), 500.0);
  EXPECT_EQ(one.Misses(4095), 500.0);  // a block larger than the cache is never cached
  EXPECT_EQ(one.Misses(4096), 1.0);
  EXPECT_EQ(*one.BytesForHitRatio(0.99), 4096u);
  EXPECT_FALSE(one.BytesForHitRatio(0.999).has_value());  // 1 cold miss in 500
}

std::vector<Event> ThreeForestsWithDrops(bool of_one_forest) {
  std::mt19937_64 rng(11);
  std::vector<Event> events;
  for (int i = 0; i < 4000; ++i) {
    if (i % 700 == 350) events.push_back({0, 0, of_one_forest && i % 1400 == 350 ? 1u : kDropAll});
    const uint32_t forest = 1 + static_cast<uint32_t>(rng() % 3);
    events.push_back({(uint64_t{forest} << 40) | (rng() % 60), 4096u * forest, 0});
  }
  return events;
}

TEST(MissRatio, DropsOfAllMakeTheNextAccessesCold) {
  ExpectExactAtEverySize(ThreeForestsWithDrops(false), "drops");
}

TEST(MissRatio, AfterADropOfOneForestTheSharedCurveUnderestimatesSlightly) {
  // LRU with deletions is no stack algorithm: blocks of the other forests
  // that were evicted before the drop count as cached after it, up to the
  // freed bytes (miss_ratio.h). The forests' own curves stay exact.
  const auto events = ThreeForestsWithDrops(true);
  const MissRatioCurve c = Curve(events);
  for (uint64_t cap = 12288; cap <= c.footprint_bytes() + 4096; cap += 4096) {
    const double sim = static_cast<double>(SimulateLru(events, cap));
    EXPECT_LE(c.Misses(cap), sim) << cap;
    EXPECT_GE(c.Misses(cap), 0.98 * sim) << cap;
  }
}

TEST(MissRatio, CompactionKeepsDistancesExactOverLongTraces) {
  // Few live blocks and many accesses: positions are renumbered many times.
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 200000; ++i) keys.push_back(rng() % 13);
  ExpectExactAtEverySize(Accesses(keys), "compaction");
}

TEST(MissRatio, HitRatioTargetsAreTheSmallestSizesThatReachThem) {
  std::mt19937_64 rng(5);
  std::geometric_distribution<uint64_t> hot(0.01);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 100000; ++i) keys.push_back(hot(rng));
  const MissRatioCurve c = Curve(Accesses(keys));
  for (double h : {0.5, 0.9, 0.99}) {
    const auto b = c.BytesForHitRatio(h);
    ASSERT_TRUE(b.has_value()) << h;
    EXPECT_LE(c.Misses(*b), (1 - h) * 100000 + 1e-6) << h;
    EXPECT_GT(c.Misses(*b - 1), (1 - h) * 100000) << h;
  }
}

// The sampled pass within its stated bound: at every size c, between the
// exact curve at c (1 + eta) minus eps and at c (1 - eta) plus eps.
void ExpectSampledWithinBound(const std::vector<Event>& events, double rate, uint64_t seed,
                              const std::string& what) {
  const MissRatioCurve exact = Curve(events);
  const MissRatioCurve sampled = Curve(events, rate, seed);
  EXPECT_EQ(sampled.accesses(), exact.accesses());
  ASSERT_FALSE(sampled.exact());
  int checked = 0;
  for (uint64_t c = 4096 * 64; c <= exact.footprint_bytes(); c += exact.footprint_bytes() / 40) {
    const MissRatioPoint p = sampled.At(c);
    ASSERT_GE(p.error, 0);
    const double hi = exact.MissRatio(static_cast<uint64_t>(c * std::max(0.0, 1 - p.size_error)));
    const double lo = exact.MissRatio(static_cast<uint64_t>(c * (1 + p.size_error)));
    EXPECT_GE(p.miss_ratio, lo - p.error) << what << " at " << c;
    EXPECT_LE(p.miss_ratio, hi + p.error) << what << " at " << c;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(MissRatio, SampledPassStaysWithinItsErrorBound) {
  std::mt19937_64 rng(9);
  // Zipf-like popularity over 40,000 blocks, 400,000 accesses.
  std::vector<double> weight(40000);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 1.0 / std::pow(i + 1, 0.8);
  std::discrete_distribution<uint64_t> zipf(weight.begin(), weight.end());
  std::vector<uint64_t> keys;
  for (int i = 0; i < 400000; ++i) keys.push_back(zipf(rng) * 2654435761u % 1000003);
  for (uint64_t seed : {1, 2, 3}) ExpectSampledWithinBound(Accesses(keys), 0.05, seed, "zipf");
  // A loop of 30,000 blocks: the whole curve is one cliff.
  std::vector<uint64_t> loop;
  for (int round = 0; round < 8; ++round)
    for (uint64_t b = 0; b < 30000; ++b) loop.push_back(b);
  ExpectSampledWithinBound(Accesses(loop), 0.05, 4, "loop");
}

TEST(MissRatio, SampledErrorBoundIsSmallOnABigTrace) {
  // The bound has to be useful, not only true: a million accesses to ~20,000
  // blocks sampled at 10% (2,000 blocks) give a few percentage points.
  std::mt19937_64 rng(13);
  std::geometric_distribution<uint64_t> g(0.00005);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 1000000; ++i) keys.push_back(g(rng));
  const MissRatioCurve s = Curve(Accesses(keys), 0.1, 1);
  for (int k : {8, 4, 2}) {
    const MissRatioPoint p = s.At(s.footprint_bytes() / k);
    EXPECT_LT(p.error, 0.03) << k;
    EXPECT_LT(p.size_error, 0.15) << k;
  }
}

// ---- through a trace file ----

TraceRecord AccessRecord(uint32_t forest, uint64_t generation, uint64_t block, bool failed = false,
                         TraceSource src = TraceSource::kStore) {
  return BlockAccessRecord(forest, block, generation, src, failed);
}

TEST(MissRatio, FromATracePerForestAndForTheDaemonsOneCache) {
  // Two forests (4 KiB and 16 KiB blocks), two generations of the first, a
  // failed access (not cached), prefetch records (looked up like any), a drop
  // of one forest and of all.
  TraceBuilder t;
  t.Name(1, "small")
      .Name(2, "big")
      .Info(1, 1, 4096, 100)
      .Info(2, 5, 16384, 100)
      .Info(1, 2, 4096, 100);
  std::vector<Event> all, small, big;
  std::mt19937_64 rng(17);
  for (int i = 0; i < 3000; ++i) {
    if (i == 1000) {
      t.Drop(2, 1);
      all.push_back({0, 0, 2});
      big.push_back({0, 0, kDropAll});
    }
    if (i == 2000) {
      t.Drop(0, 1);
      for (auto* v : {&all, &small, &big}) v->push_back({0, 0, kDropAll});
    }
    const uint32_t forest = 1 + static_cast<uint32_t>(rng() % 2);
    const uint64_t generation = forest == 2 ? 5 : 1 + rng() % 2;
    const uint64_t block = rng() % 40;
    if (i % 97 == 0) {  // a failed fetch: neither a hit nor cached
      t.Add(AccessRecord(forest, generation, block, /*failed=*/true));
      continue;
    }
    t.Add(AccessRecord(forest, generation, block, false,
                       i % 5 == 0 ? TraceSource::kPrefetch : TraceSource::kCache));
    const uint64_t key = (uint64_t{forest} << 40) | (generation << 20) | block;
    const Event e{key, forest == 2 ? 16384u : 4096u, 0};
    all.push_back(e);
    (forest == 1 ? small : big).push_back(e);
  }
  auto m = ComputeMissRatio(t.Save("mrc_two_forests")).value();
  EXPECT_EQ(m.failed_accesses, 31u);
  EXPECT_EQ(m.drops, 2u);
  ASSERT_EQ(m.forests.size(), 2u);
  EXPECT_EQ(m.forests[0].name, "small");
  EXPECT_EQ(m.forests[1].block_size, 16384u);
  for (uint64_t cap = 16384; cap <= 1200 * 1024; cap += 2048) {
    // After the drop of one forest, the shared curve may undercount a little
    // (AfterADropOfOneForestTheSharedCurveUnderestimatesSlightly).
    const double sim = static_cast<double>(SimulateLru(all, cap));
    ASSERT_LE(m.all.Misses(cap), sim) << cap;
    ASSERT_GE(m.all.Misses(cap), 0.98 * sim) << cap;
    ASSERT_EQ(m.forests[0].curve.Misses(cap), static_cast<double>(SimulateLru(small, cap))) << cap;
    ASSERT_EQ(m.forests[1].curve.Misses(cap), static_cast<double>(SimulateLru(big, cap))) << cap;
  }
  const std::string text = m.ToText();
  EXPECT_NE(text.find("99.9% hits"), std::string::npos) << text;
  EXPECT_NE(text.find("small"), std::string::npos);
  EXPECT_NE(m.ToCsv(50).find("\n*,"), std::string::npos);
}

TEST(MissRatio, ATraceThatReadsNoBlockTwiceSaysSoInsteadOfAZeroFootprint) {
  TraceBuilder t;
  t.Name(1, "once").Info(1, 1, 4096, 100);
  for (uint64_t b = 0; b < 50; ++b) t.Add(AccessRecord(1, 1, b));
  auto m = ComputeMissRatio(t.Save("mrc_once")).value();
  EXPECT_EQ(m.all.footprint_bytes(), 0u);
  EXPECT_EQ(m.all.Misses(1u << 30), 50.0);
  const std::string text = m.ToText();
  EXPECT_NE(text.find("no reuse"), std::string::npos) << text;
  EXPECT_NE(text.find("no block was read twice"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 0 B"), std::string::npos) << text;
}

TEST(MissRatio, VersionOneTracesCountInBlocks) {
  TraceBuilder t(1);
  t.Name(1, "old");
  for (int i = 0; i < 10; ++i) t.Access(1, i % 3, 10 + i, 1);
  auto m = ComputeMissRatio(t.Save("mrc_v1")).value();
  EXPECT_EQ(m.all.unit_bytes(), 0u);
  EXPECT_EQ(m.all.footprint_bytes(), 3u);  // blocks
  EXPECT_EQ(m.all.Misses(3), 3.0);
  EXPECT_NE(m.ToText().find("3 blocks"), std::string::npos);
}

TEST(MissRatio, HostileCountFieldsAllocateNothing) {
  // Block counts and sizes at their maxima, forest ids and block indexes
  // beyond any forest, accesses of a generation without geometry: the pass
  // finishes at once and counts what it could not place.
  TraceBuilder t;
  t.Info(7, 1, UINT32_MAX, UINT64_MAX).Info(UINT32_MAX, UINT64_MAX, 4096, UINT64_MAX);
  for (int i = 0; i < 1000; ++i) {
    t.Add(AccessRecord(7, 1, UINT64_MAX - i % 5));       // beyond 2^44 blocks
    t.Add(AccessRecord(UINT32_MAX, UINT64_MAX, i % 7));  // fine
    t.Add(AccessRecord(9, 3, i));                        // no forest info
    t.Add(AccessRecord(7, 1, i % 2));                    // 4 GiB blocks
    t.Drop(9, 1).Drop(7, 1);
  }
  auto m = ComputeMissRatio(t.Save("mrc_hostile")).value();
  EXPECT_EQ(m.accesses, 4000u);
  EXPECT_EQ(m.unsized_accesses, 2000u);
  EXPECT_EQ(m.all.accesses(), 2000u);
  EXPECT_EQ(m.all.Misses(uint64_t{8} << 30), 1000.0 + 7.0);  // forest 7 dropped each round
}

TEST(MissRatio, RefusesARateOutsideZeroToOne) {
  const std::string path = TraceBuilder().Save("mrc_rate");
  for (double r : {0.0, -1.0, 1.5}) {
    MissRatioOptions o;
    o.sample_rate = r;
    EXPECT_EQ(ComputeMissRatio(path, o).status().code(), StatusCode::kInvalidArgument) << r;
  }
}

// ---- the plot ----

TEST(MissRatioHtml, PlotHasLabelledAxesAndMonotoneStepLines) {
  TraceBuilder t;
  t.Name(1, "a").Name(2, "b").Info(1, 1, 4096, 100).Info(2, 1, 4096, 100);
  std::mt19937_64 rng(19);
  std::geometric_distribution<uint64_t> hot(0.02);
  for (int i = 0; i < 5000; ++i) t.Add(AccessRecord(1 + i % 2, 1, hot(rng)));
  auto m = ComputeMissRatio(t.Save("mrc_plot")).value();
  const std::string svg = MissRatioSvg(m);
  EXPECT_NE(svg.find("cache size (log scale)"), std::string::npos);
  EXPECT_NE(svg.find("miss ratio"), std::string::npos);
  EXPECT_NE(svg.find("90% hits"), std::string::npos);
  EXPECT_NE(svg.find(">a<"), std::string::npos);
  EXPECT_NE(svg.find(">all forests<"), std::string::npos);
  std::regex line("<polyline class=\"mrc\"[^>]*points=\"([^\"]*)\"");
  int lines = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator();
       ++it, ++lines) {
    std::istringstream pts((*it)[1].str());
    std::string xy;
    double px = -1, py = -1;
    int n = 0;
    while (pts >> xy) {
      const double x = std::stod(xy.substr(0, xy.find(','))),
                   y = std::stod(xy.substr(xy.find(',') + 1));
      EXPECT_GE(x, px);  // sizes ascend
      EXPECT_GE(y, py);  // the miss ratio never rises (y grows downwards)
      EXPECT_GE(x, 64);  // inside the axes
      EXPECT_LE(x, 64 + 720);
      px = x;
      py = y;
      ++n;
    }
    EXPECT_GT(n, 10);
  }
  EXPECT_EQ(lines, 3);
}

}  // namespace
}  // namespace pacset
