// Helpers shared by the store benchmarks: dataset blocks (random, or the
// payloads of a real .pac file re-sealed at new positions), timing of random
// single-block reads, and a plain-text table.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "layout/block.h"
#include "util/file_io.h"
#include "util/size.h"

namespace pacset {
namespace bench {

using Clock = std::chrono::steady_clock;

// The blocks of a benchmark's dataset, block i sealed at position i: their
// payloads from a real .pac file of the same block size when given (so
// compression sees real packed nodes), else pseudo-random bytes. (Not the
// engine's BlockSource, which is where a walk's blocks come from.)
class DatasetBlocks {
 public:
  DatasetBlocks(uint32_t block_size, const std::string& pac_path) : bs_(block_size) {
    if (pac_path.empty()) return;
    auto bytes = ReadWholeFile(pac_path);
    if (!bytes.ok() || bytes->size() < block_size || bytes->size() % block_size != 0) {
      std::fprintf(stderr, "ignoring %s: not a whole number of %u-byte blocks\n", pac_path.c_str(),
                   block_size);
      return;
    }
    pac_ = std::move(*bytes);
  }
  bool real() const { return !pac_.empty(); }
  void Fill(uint64_t index, char* out) const {
    const uint32_t payload = bs_ - kBlockTrailerSize;
    if (real()) {
      const uint64_t n = pac_.size() / bs_;
      std::memcpy(out, pac_.data() + (index % n) * bs_, payload);
    } else {
      uint64_t x = index * 0x9E3779B97F4A7C15ull + 12345;
      for (uint32_t i = 0; i + 8 <= payload; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(out + i, &x, 8);
      }
    }
    SealBlock(out, bs_, index, /*seed=*/0);
  }

 private:
  uint32_t bs_;
  std::string pac_;
};

struct ReadResult {
  double p50_us = 0, p99_us = 0;
  double ops_per_s = 0;
  double mb_per_s = 0;
  bool ok = true;
  std::string error;
};

// Runs `threads` threads, each doing `ops` reads of random blocks in
// [0, count) through read(thread, block) (which returns false on error).
// With `hot` set, 90% of the reads go to the first 10% of the blocks (a hot
// set, as the top levels of trees are), the rest anywhere.
inline ReadResult TimeRandomReads(int threads, uint64_t ops, uint64_t count, uint32_t block_size,
                                  const std::function<bool(int, uint64_t)>& read,
                                  bool hot = false) {
  std::vector<std::vector<uint32_t>> lat(threads);
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      lat[t].reserve(ops);
      for (uint64_t i = 0; i < ops && !failed.load(std::memory_order_relaxed); ++i) {
        const uint64_t r = rng();
        const uint64_t b =
            hot && (r >> 60) < 14 ? (r % std::max<uint64_t>(1, count / 10)) : r % count;
        const auto s = Clock::now();
        if (!read(t, b)) failed = true;
        lat[t].push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s).count()));
      }
    });
  }
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ReadResult r;
  r.ok = !failed;
  std::vector<uint32_t> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  if (!all.empty()) {
    r.p50_us = all[all.size() / 2] / 1000.0;
    r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)] / 1000.0;
  }
  r.ops_per_s = all.size() / secs;
  r.mb_per_s = r.ops_per_s * block_size / 1e6;
  return r;
}

inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A size argument (util/size.h); a bad one ends the benchmark.
inline uint64_t ParseBytes(const std::string& s) {
  auto bytes = ParseByteSize(s, "size");
  if (!bytes.ok()) {
    std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str());
    std::exit(2);
  }
  return *bytes;
}

inline uint64_t DirBytes(const std::string& path) {
  uint64_t total = 0;
  auto names = ListDir(path);
  if (!names.ok()) return 0;
  for (const auto& n : *names) {
    const std::string p = path + "/" + n;
    if (IsDirectory(p)) {
      total += DirBytes(p);
    } else {
      struct stat st;
      if (::stat(p.c_str(), &st) == 0) total += st.st_size;
    }
  }
  return total;
}

}  // namespace bench
}  // namespace pacset
