// The daemon-policy curve (trace/analysis/policy_curve.h): at the sizes it
// reports, the simulator's figures; a miniature (sampled) simulation's
// error, measured against the full one.
#include "trace/analysis/policy_curve.h"

#include <unistd.h>

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/trace_builder.h"

namespace pacset {
namespace {

// Zipf-like block numbers over `n` blocks, with sequential runs (scans).
std::vector<uint64_t> Skewed(size_t count, uint64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> w(n);
  for (uint64_t i = 0; i < n; ++i) w[i] = 1.0 / std::pow(static_cast<double>(i + 1), 0.9);
  std::discrete_distribution<uint64_t> zipf(w.begin(), w.end());
  std::vector<uint64_t> out;
  while (out.size() < count) {
    if (rng() % 100 == 0) {
      const uint64_t start = rng() % n;
      for (uint64_t i = 0; i < 30 && out.size() < count; ++i) out.push_back((start + i) % n);
    } else {
      out.push_back(zipf(rng));
    }
  }
  return out;
}

TEST(PolicyCurve, TheDaemonPolicyCurveIsTheSimulatorsMissesAtTheSizesAsked) {
  TraceBuilder t;
  t.Name(1, "f").Info(1, 1, 4096, 3000);
  const std::vector<uint64_t> blocks = Skewed(80000, 2000, 7);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i == 50000) t.Drop(0, i);  // the caches empty here
    t.Access(1, blocks[i], i, 1);
    if (i % 1000 == 0) {  // a failed fetch: not cached, not counted
      TraceRecord failed;
      failed.type = TraceRecordType::kBlockAccess;
      failed.forest = 1;
      failed.generation = 1;
      failed.block = 1999 - i / 1000;
      failed.bytes = 4096;
      failed.flags = kTraceFlagError;
      t.Add(failed);
    }
  }
  const std::string path = t.Save("policy_curve_exact");
  auto report = ComputeMissRatio(path);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const MissRatioReport lru = *report;
  // Sizes in bytes: whole blocks and one not (the cache holds 250 blocks).
  const std::vector<uint64_t> sizes = {37 * 4096, 250 * 4096 + 100, 900 * 4096};
  PolicyCurveOptions o;  // W-TinyLFU, every block
  ASSERT_TRUE(ApplyPolicyCurves(path, o, sizes, &*report).ok());
  const MissRatioCurve& curve = report->forests.at(0).curve;
  EXPECT_EQ(curve.policy(), "w-tinylfu");
  EXPECT_EQ(report->all.policy(), "w-tinylfu");  // one forest: all forests too
  auto stream = ReadBlockAccesses(path, "f");
  ASSERT_TRUE(stream.ok());
  ASSERT_EQ(stream->drops, std::vector<size_t>{50000});
  for (uint64_t c : sizes) {
    CacheModelOptions mo;
    mo.capacity_blocks = c / 4096;
    const double tiny = static_cast<double>(
        SimulateCachePolicy(*stream, CachePolicy::kWTinyLfu, mo).value().misses());
    const double lru_sim =
        static_cast<double>(SimulateCachePolicy(*stream, CachePolicy::kLru, mo).value().misses());
    EXPECT_NEAR(curve.At(c).misses, tiny, 1e-6) << c;
    // The LRU curve (stack distances) agrees with LRU simulated, and lies
    // above W-TinyLFU on skewed traffic with scans.
    EXPECT_NEAR(lru.forests[0].curve.At(c).misses, lru_sim, 1e-6) << c;
    EXPECT_GT(lru_sim, tiny) << c;
  }
  // Accesses, cold misses and footprint are the trace's, whatever the policy.
  EXPECT_EQ(curve.accesses(), 80000u);
  EXPECT_EQ(stream->keys.size(), 80000u);
  EXPECT_EQ(curve.footprint_bytes(), lru.forests[0].curve.footprint_bytes());
  EXPECT_DOUBLE_EQ(curve.MissRatio(curve.footprint_bytes()),
                   lru.forests[0].curve.MissRatio(curve.footprint_bytes()));
  // "Memory for 90% hits" is a simulated size that reaches 90%, and one 2%
  // smaller does not (refined to 1% between the log-spaced sizes).
  const auto b = curve.BytesForHitRatio(0.9);
  ASSERT_TRUE(b.has_value());
  CacheModelOptions mo;
  mo.capacity_blocks = *b / 4096;
  EXPECT_GE(SimulateCachePolicy(*stream, CachePolicy::kWTinyLfu, mo).value().hit_ratio(),
            0.9 - 1e-12);
  mo.capacity_blocks = mo.capacity_blocks * 98 / 100;
  EXPECT_LT(SimulateCachePolicy(*stream, CachePolicy::kWTinyLfu, mo).value().hit_ratio(), 0.9);
  // LRU leaves the exact curve as it is.
  MissRatioReport same = lru;
  o.policy = CachePolicy::kLru;
  ASSERT_TRUE(ApplyPolicyCurves(path, o, sizes, &same).ok());
  EXPECT_FALSE(same.forests[0].curve.simulated());
  unlink(path.c_str());
}

TEST(PolicyCurve, AMiniatureSimulationStaysNearTheFullOne) {
  // W-TinyLFU, 400,000 Zipf(0.9) accesses of 40,000 blocks with scans; 1/10
  // of the blocks through a cache a tenth the size. Measured (seeds 1-6,
  // sizes 1/64..1/2 of the blocks): worst absolute miss-ratio error 0.039
  // (by sampled accesses instead of rate x all accesses: 0.14, a hot block
  // in or out of the sample); the test allows 0.05.
  BlockAccessStream s;
  for (uint64_t b : Skewed(400000, 40000, 3)) s.keys.push_back(b);
  s.drops = {250000};
  const std::vector<uint64_t> caps = {625, 1250, 2500, 5000, 10000, 20000};
  PolicyCurveOptions full;
  const std::vector<double> want = SimulateMissRatios(s, caps, full).value();
  double worst = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    PolicyCurveOptions mini = full;
    mini.sample_rate = 0.1;
    mini.seed = seed;
    const std::vector<double> got = SimulateMissRatios(s, caps, mini).value();
    for (size_t i = 0; i < caps.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  RecordProperty("worst_error", std::to_string(worst));
  std::printf("worst miniature-simulation error: %.4f\n", worst);
  EXPECT_LE(worst, 0.05);
  EXPECT_GT(want.front(), want.back() + 0.1);  // the sizes matter on this traffic
}

TEST(PolicyCurve, BadOptionsAreRefused) {
  BlockAccessStream s;
  s.keys = {1, 2, 3};
  PolicyCurveOptions o;
  o.sample_rate = 0;
  EXPECT_FALSE(SimulateMissRatios(s, {1}, o).ok());
  o.sample_rate = 1;
  EXPECT_EQ(SimulateMissRatios(s, {0}, o).value(), std::vector<double>{1.0});
  MissRatioReport r;
  o.policy = CachePolicy::kOptimal;
  EXPECT_FALSE(ApplyPolicyCurves("/nonexistent", o, {}, &r).ok());
}

}  // namespace
}  // namespace pacset
