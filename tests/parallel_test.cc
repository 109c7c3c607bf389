#include "util/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pacset {
namespace {

// Sorts `chunks` and checks that they cover [0, n) once, in order, each at
// most `most` items long.
void ExpectContiguousCover(std::vector<std::pair<size_t, size_t>>& chunks, size_t n, size_t most,
                           const std::string& what) {
  std::sort(chunks.begin(), chunks.end());
  size_t at = 0;
  for (auto [b, e] : chunks) {
    EXPECT_EQ(b, at) << what;
    EXPECT_LE(e - b, most) << what;
    at = e;
  }
  EXPECT_EQ(at, n) << what;
}

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
      ExpectContiguousCover(chunks, n, n, std::to_string(n) + " " + std::to_string(threads));
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

TEST(ParallelForChunks, CoversEveryItemOnceInChunksWithWorkersBelowTheThreadCount) {
  for (size_t n : {0, 1, 99, 100, 101, 1000}) {
    for (int threads : {1, 2, 3, 8}) {
      std::mutex mu;
      std::vector<std::pair<size_t, size_t>> chunks;
      std::set<size_t> workers;
      ASSERT_TRUE(ParallelForChunks(n, threads, 100, [&](size_t w, size_t b, size_t e) {
                    std::lock_guard<std::mutex> l(mu);
                    chunks.emplace_back(b, e);
                    workers.insert(w);
                    return Status::Ok();
                  }).ok());
      ExpectContiguousCover(chunks, n, 100, std::to_string(n) + " " + std::to_string(threads));
      EXPECT_EQ(chunks.size(), (n + 99) / 100);
      for (size_t w : workers) EXPECT_LT(w, static_cast<size_t>(threads));
    }
  }
}

// A worker that is slow takes fewer chunks: the others take over its share.
TEST(ParallelForChunks, ASlowWorkerTakesFewerChunks) {
  std::vector<size_t> taken(2, 0);
  std::mutex mu;
  ASSERT_TRUE(ParallelForChunks(40, 2, 1, [&](size_t w, size_t, size_t) {
                if (w == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                std::lock_guard<std::mutex> l(mu);
                ++taken[w];
                return Status::Ok();
              }).ok());
  EXPECT_EQ(taken[0] + taken[1], 40u);
  EXPECT_GT(taken[0], 3 * taken[1]) << taken[0] << " vs " << taken[1];
}

TEST(ParallelForChunks, StopsAfterAFailureAndReturnsTheFirstErrorInChunkOrder) {
  std::atomic<size_t> ran{0};
  Status s = ParallelForChunks(1000, 1, 1, [&](size_t, size_t b, size_t) {
    ++ran;
    return b >= 5 ? Status::InvalidArgument("chunk at " + std::to_string(b)) : Status::Ok();
  });
  EXPECT_EQ(s.message(), "chunk at 5");
  EXPECT_EQ(ran.load(), 6u);
}

TEST(BalancedChunk, AboutEightChunksPerThreadWithinTheBoundsAndOneThreadTakesTheMost) {
  EXPECT_EQ(BalancedChunk(10000, 2, 256, 4096), 625u);
  EXPECT_EQ(BalancedChunk(1000, 2, 256, 4096), 256u);
  EXPECT_EQ(BalancedChunk(1000000, 2, 256, 4096), 4096u);
  EXPECT_EQ(BalancedChunk(10000, 1, 256, 100000), 10000u);
  EXPECT_EQ(BalancedChunk(10000, 1, 256, 4096), 4096u);
  EXPECT_EQ(BalancedChunk(0, 0, 0, 10), 1u);
}

}  // namespace
}  // namespace pacset
