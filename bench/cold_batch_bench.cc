// cold_batch_bench: is one batched store call better than parallel single
// gets for the blocks a cold prediction needs at once? (fs/DESIGN.md, Reads)
//
//   cold_batch_bench STORE_URI FOREST [--blocks 1024] [--batch 32] [--rounds 5]
//
// Run as root (drops the page cache before every measurement). The same
// --blocks random blocks of FOREST are read cold, in interleaved rounds:
//   parallel   --batch threads, each Get of one block at a time (the daemon
//              today: one worker per request)
//   batched    one thread, GetMany of --batch blocks at a time (all of a
//              moment's misses in one store call)
//   both       --batch threads, each GetMany of --batch blocks
// Prints the median [min - max] wall time of each.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/block_store.h"

using namespace pacset;

namespace {

void DropCaches() {
  sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: cold_batch_bench STORE_URI FOREST [--blocks N] [--batch N] "
                 "[--rounds N]\n");
    return 2;
  }
  const std::string uri = argv[1], name = argv[2];
  size_t nblocks = 1024, batch = 32, rounds = 5;
  for (int i = 3; i + 1 < argc; i += 2) {
    const size_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--blocks")) nblocks = v;
    if (!std::strcmp(argv[i], "--batch")) batch = std::max<size_t>(1, v);
    if (!std::strcmp(argv[i], "--rounds")) rounds = v;
  }
  StoreOptions so;
  so.read_only = true;
  so.rocksdb_block_cache_bytes = 0;  // as the daemon opens it
  auto store = OpenBlockStore(uri, so);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  auto info = (*store)->Lookup(name);
  if (!info.ok()) {
    std::fprintf(stderr, "%s\n", info.status().ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(1);
  std::vector<uint64_t> blocks(nblocks);
  for (auto& b : blocks) b = rng() % info->block_count;
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::atomic<int> errors{0};

  // Reads blocks[k] for k = first, first + stride, ... in groups of `group`.
  auto reader = [&](size_t first, size_t stride, size_t group) {
    std::vector<uint64_t> want;
    std::vector<std::string> out;
    std::vector<Status> st;
    for (size_t k = first; k < blocks.size(); k += stride) {
      want.push_back(blocks[k]);
      if (want.size() < group && k + stride < blocks.size()) continue;
      (*store)->GetMany(*info, want, &out, &st);
      for (auto& s : st) errors += !s.ok();
      want.clear();
    }
  };
  struct Variant {
    const char* name;
    size_t threads, group;
  };
  std::vector<Variant> variants = {
      {"parallel", batch, 1}, {"batched", 1, batch}, {"both", batch, batch}};
  std::vector<std::vector<double>> times(variants.size());
  for (size_t r = 0; r < rounds; ++r) {
    std::shuffle(variants.begin(), variants.end(), rng);
    for (auto& v : variants) {
      DropCaches();
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (size_t t = 0; t < v.threads; ++t) ts.emplace_back(reader, t, v.threads, v.group);
      for (auto& t : ts) t.join();
      const size_t idx = std::strcmp(v.name, "parallel") == 0  ? 0
                         : std::strcmp(v.name, "batched") == 0 ? 1
                                                               : 2;
      times[idx].push_back(Seconds(t0));
    }
  }
  const char* names[] = {"parallel", "batched", "both"};
  std::printf("%zu random blocks of %s (%s), cold, %zu rounds, median [min - max]:\n",
              blocks.size(), name.c_str(), uri.c_str(), rounds);
  for (size_t i = 0; i < 3; ++i) {
    auto& t = times[i];
    std::sort(t.begin(), t.end());
    std::printf("  %-9s %8.1f ms [%.1f - %.1f]\n", names[i], t[t.size() / 2] * 1e3, t.front() * 1e3,
                t.back() * 1e3);
  }
  if (errors) std::printf("  %d blocks failed\n", errors.load());
  return errors ? 1 : 0;
}
