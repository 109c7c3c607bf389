#include "util/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace pacset {

LatencyHistogram& LatencyHistogram::operator=(const LatencyHistogram& o) {
  if (this == &o) return *this;
  for (int b = 0; b < kBuckets; ++b)
    counts_[b].store(o.counts_[b].load(std::memory_order_relaxed), std::memory_order_relaxed);
  n_.store(o.count(), std::memory_order_relaxed);
  sum_.store(o.sum_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  max_.store(o.max_ns(), std::memory_order_relaxed);
  return *this;
}

int LatencyHistogram::Bucket(uint64_t ns) {
  if (ns < 16) return static_cast<int>(ns);
  const int e = 63 - __builtin_clzll(ns);  // >= 4
  const int sub = static_cast<int>((ns >> (e - 3)) & 7);
  return std::min(kBuckets - 1, 16 + (e - 4) * 8 + sub);
}

uint64_t LatencyHistogram::BucketLow(int b) {
  if (b < 16) return static_cast<uint64_t>(b);
  const int e = (b - 16) / 8 + 4, sub = (b - 16) % 8;
  return (uint64_t{8} + sub) << (e - 3);
}

void LatencyHistogram::Add(uint64_t ns) {
  counts_[Bucket(ns)].fetch_add(1, std::memory_order_relaxed);
  n_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(ns, std::memory_order_relaxed);
  uint64_t m = max_.load(std::memory_order_relaxed);
  while (ns > m && !max_.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
  }
}

double LatencyHistogram::mean_ns() const {
  const uint64_t n = count();
  return n ? static_cast<double>(sum_.load(std::memory_order_relaxed)) / n : 0;
}

uint64_t LatencyHistogram::Quantile(double q) const {
  // Sum the buckets rather than trust n_: a concurrent Add may have bumped
  // one and not yet the other.
  std::array<uint64_t, kBuckets> c;
  uint64_t n = 0;
  for (int b = 0; b < kBuckets; ++b) n += c[b] = counts_[b].load(std::memory_order_relaxed);
  if (!n) return 0;
  const uint64_t max = max_ns();
  const uint64_t rank =
      std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(q * static_cast<double>(n))), 1, n);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += c[b];
    if (seen >= rank) {
      const uint64_t lo = BucketLow(b), hi = b + 1 < kBuckets ? BucketLow(b + 1) : lo;
      return std::min(max, lo + (hi - lo) / 2);
    }
  }
  return max;
}

}  // namespace pacset
