#include "util/latency_histogram.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace pacset {
namespace {

TEST(LatencyHistogram, QuantilesFallInTheRightBucket) {
  LatencyHistogram h;
  for (int i = 0; i < 90; ++i) h.Add(1000);
  for (int i = 0; i < 10; ++i) h.Add(1000000);
  EXPECT_NEAR(static_cast<double>(h.Quantile(0.5)), 1000, 1000 * 0.07);
  EXPECT_NEAR(static_cast<double>(h.Quantile(0.99)), 1e6, 1e6 * 0.07);
  EXPECT_EQ(h.max_ns(), 1000000u);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_DOUBLE_EQ(h.mean_ns(), (90 * 1000.0 + 10 * 1e6) / 100);
}

TEST(LatencyHistogram, SmallValuesAreExactAndEmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.Quantile(0.5), 0u);
  EXPECT_EQ(h.mean_ns(), 0);
  for (uint64_t v = 0; v < 16; ++v) h.Add(v);
  EXPECT_EQ(h.Quantile(0), 0u);
  EXPECT_EQ(h.Quantile(1), 15u);
  EXPECT_EQ(h.Quantile(0.5), 7u);  // rank 8 of 0..15
}

TEST(LatencyHistogram, QuantileIsTheBucketMidpointCappedAtTheMaximum) {
  LatencyHistogram h;
  h.Add(1000);  // bucket [960, 1024)
  EXPECT_EQ(h.Quantile(0.5), 992u);
  LatencyHistogram g;
  g.Add(965);  // same bucket; the midpoint would exceed what was seen
  EXPECT_EQ(g.Quantile(0.5), 965u);
  LatencyHistogram top;
  top.Add(UINT64_MAX);  // the last bucket has no upper neighbour: its low end
  EXPECT_EQ(top.Quantile(0.5), uint64_t{15} << 60);
  EXPECT_EQ(top.max_ns(), UINT64_MAX);
}

TEST(LatencyHistogram, ConcurrentAddsLoseNothingAndCopiesSnapshot) {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&h, t] {
      for (uint64_t i = 0; i < 50000; ++i) h.Add(i * (t + 1));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.count(), 200000u);
  EXPECT_EQ(h.max_ns(), 49999u * 4);
  EXPECT_DOUBLE_EQ(h.mean_ns(), 49999.0 / 2 * (1 + 2 + 3 + 4) / 4);
  LatencyHistogram copy = h;
  h.Add(1);
  EXPECT_EQ(copy.count(), 200000u);
  EXPECT_EQ(copy.Quantile(0.5), h.Quantile(0.5));
}

}  // namespace
}  // namespace pacset
