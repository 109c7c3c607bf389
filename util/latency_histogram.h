// Latency distributions in constant memory: the daemon's live fetch latencies
// (fs/stats.h) and the latencies of a recorded trace (trace/analysis/trace_report.h).
//
// Nanosecond values go into log-linear buckets: exact below 16 ns, then 8
// buckets per power of two (each about 6% wide), so a quantile is within a
// bucket of the truth. Count, sum and maximum are exact.
//
// Thread-safe: Add and the readers may run concurrently (relaxed atomics:
// cheap on a read path, exact once the writers are quiet).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace pacset {

class LatencyHistogram {
 public:
  LatencyHistogram() = default;
  // Copies a snapshot (not atomic as a whole while writers run).
  LatencyHistogram(const LatencyHistogram& o) { *this = o; }
  LatencyHistogram& operator=(const LatencyHistogram& o);

  void Add(uint64_t ns);
  uint64_t count() const { return n_.load(std::memory_order_relaxed); }
  double mean_ns() const;
  uint64_t max_ns() const { return max_.load(std::memory_order_relaxed); }
  // The midpoint of the bucket holding rank ceil(q * count) (q in 0..1),
  // never above the maximum; 0 when empty.
  uint64_t Quantile(double q) const;

 private:
  static constexpr int kBuckets = 16 + 60 * 8;
  static int Bucket(uint64_t ns);
  static uint64_t BucketLow(int b);
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<uint64_t> n_{0}, sum_{0}, max_{0};
};

}  // namespace pacset
