#include "util/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace pacset {
namespace {

TEST(ParallelFor, CoversEveryItemOnceInAtMostNOver64ContiguousChunks) {
  for (size_t n : {0, 1, 63, 64, 65, 1000}) {
    for (int threads : {1, 2, 3, 8}) {
      std::mutex mu;
      std::vector<std::pair<size_t, size_t>> chunks;
      ASSERT_TRUE(ParallelFor(n, threads, 64, [&](size_t b, size_t e) {
                    std::lock_guard<std::mutex> l(mu);
                    chunks.emplace_back(b, e);
                    return Status::Ok();
                  }).ok());
      std::sort(chunks.begin(), chunks.end());
      size_t at = 0;
      for (auto [b, e] : chunks) {
        EXPECT_EQ(b, at) << n << " " << threads;
        at = e;
      }
      EXPECT_EQ(at, n);
      EXPECT_LE(chunks.size(), static_cast<size_t>(threads));
      EXPECT_LE(chunks.size(), std::max<size_t>(1, n / 64));
    }
  }
}

TEST(ParallelFor, ReturnsTheFirstErrorInChunkOrder) {
  Status s = ParallelFor(400, 4, 1, [](size_t b, size_t) {
    return b == 0 ? Status::Ok() : Status::InvalidArgument("chunk at " + std::to_string(b));
  });
  EXPECT_EQ(s.message(), "chunk at 100");
}

TEST(ParallelForEach, RunsEveryIndexExactlyOnce) {
  for (int threads : {0, 1, 4, 100}) {
    std::vector<int> hits(257, 0);
    ParallelForEach(hits.size(), threads, [&](size_t i) { ++hits[i]; });
    for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << i << " threads " << threads;
  }
  ParallelForEach(0, 4, [](size_t) { FAIL(); });
}

}  // namespace
}  // namespace pacset
