// One-row-at-a-time serving from a local .pac, and what keeps the hot set
// in memory when memory is short (issue 35 item 3b). Run it inside a memory
// cgroup (bench/hot_set_bench.py does, against the same with no limit).
//
//   hot_set_bench PAC CSV --rows N --warmup W --keep MODE [--budget BYTES]
//                 [--calibrate K] [--every R] [--out PREDICTIONS]
//
// MODE, what is done to the page cache of PAC (through a mapping of its
// own, which shares the page cache with the engine's):
//   none      nothing
//   lock-bins mlock the metadata and bin blocks (at most BYTES)
//   lock-hot  mlock the blocks the first K rows touch most often, most
//             popular first, up to BYTES (the bins come first by popularity)
//   touch-hot read one byte of each of those blocks every R rows
//   willneed-hot madvise(MADV_WILLNEED) those blocks every R rows
// --until-warm: warm up until the warm forest is built (then 50 rows more),
// so that a process with memory enough is measured in its steady state.
// The measured rows are always rows 0, 1, ... of CSV (cycling), whatever
// the warm-up. --gather-file: on a pacsetfs mount, blocks through the gather
// file (protocol version 1), which with `-o no_push_blocks` puts nothing in
// the forest file's page cache: the daemon's cache is then the only one.
// --no-warm-forest: never build the warm forest (a copy of every node, in
// anonymous memory), e.g. to measure the process's own memory.
// Prints one JSON line: rows/s, p50/p99 latency (us), engine stats, a hash
// of the predictions.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "util/csv.h"

namespace {

struct Args {
  std::string pac, csv, keep = "none", out;
  size_t rows = 1000, warmup = 200, calibrate = 200, every = 50;
  uint64_t budget = ~uint64_t{0};
  bool warm_forest = true;
  bool until_warm = false;
  bool gather_file = false;
};

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "hot_set_bench: %s\n", m.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value for " + s);
      return argv[++i];
    };
    if (s == "--rows") {
      a.rows = std::stoull(next());
    } else if (s == "--warmup") {
      a.warmup = std::stoull(next());
    } else if (s == "--calibrate") {
      a.calibrate = std::stoull(next());
    } else if (s == "--every") {
      a.every = std::max<size_t>(1, std::stoull(next()));
    } else if (s == "--budget") {
      a.budget = std::stoull(next());
    } else if (s == "--keep") {
      a.keep = next();
    } else if (s == "--until-warm") {
      a.until_warm = true;
    } else if (s == "--gather-file") {
      a.gather_file = true;
    } else if (s == "--no-warm-forest") {
      a.warm_forest = false;
    } else if (s == "--out") {
      a.out = next();
    } else {
      pos.push_back(s);
    }
  }
  if (pos.size() != 2) Die("usage: hot_set_bench PAC CSV [options]");
  a.pac = pos[0];
  a.csv = pos[1];
  return a;
}

// The process's anonymous memory (its own, apart from the file's pages).
unsigned long long RssAnonBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "RssAnon: %llu kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

// A value of this process's memory cgroup (v1) memory.stat, or 0.
unsigned long long CgroupStat(const char* key) {
  FILE* f = std::fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[512], path[512] = "";
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "%*d:memory:%511s", path) == 1) break;
  std::fclose(f);
  if (!path[0]) return 0;
  f = std::fopen((std::string("/sys/fs/cgroup/memory") + path + "/memory.stat").c_str(), "r");
  if (!f) return 0;
  char name[128];
  unsigned long long v = 0, found = 0;
  while (std::fscanf(f, "%127s %llu", name, &v) == 2)
    if (std::strcmp(name, key) == 0) found = v;
  std::fclose(f);
  return found;
}

double NowUs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  pacset::EngineOptions options;
  options.warm_forest = a.warm_forest;
  if (a.gather_file) options.block_io = pacset::BlockIo::kGatherFile;
  auto engine_or = pacset::PacEngine::Open(a.pac, options);
  if (!engine_or.ok()) Die(engine_or.status().ToString());
  auto& engine = **engine_or;
  auto rows_or = pacset::ReadCsvRows(a.csv, engine.num_features());
  if (!rows_or.ok()) Die(rows_or.status().ToString());
  const pacset::RowMatrix& rows = *rows_or;
  const auto& h = engine.file().header();
  const uint64_t bs = h.block_size;

  // The blocks to keep, most important first.
  std::vector<uint64_t> keep;
  if (a.keep == "lock-bins") {
    for (uint64_t b = 0; b < h.node_first_block + h.bin_block_count; ++b) keep.push_back(b);
  } else if (a.keep != "none") {
    std::unordered_map<uint64_t, uint64_t> uses;
    std::vector<uint64_t> touched;
    for (size_t r = 0; r < std::min(a.calibrate, rows.num_rows); ++r) {
      if (!engine.TouchedBlocks(rows.row(r), &touched).ok()) Die("TouchedBlocks failed");
      for (uint64_t b : touched) ++uses[b];
    }
    std::vector<std::pair<uint64_t, uint64_t>> by_use(uses.begin(), uses.end());
    std::sort(by_use.begin(), by_use.end(), [](auto& x, auto& y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    for (uint64_t b = 0; b < h.node_first_block; ++b) keep.push_back(b);
    for (auto& [b, n] : by_use) keep.push_back(b);
  }
  if (keep.size() * bs > a.budget) keep.resize(a.budget / bs);

  void* map = mmap(nullptr, engine.file().size(), PROT_READ, MAP_SHARED, engine.file().fd(), 0);
  if (map == MAP_FAILED) Die("mmap failed");
  const char* base = static_cast<const char*>(map);
  uint64_t locked = 0;
  if (a.keep == "lock-bins" || a.keep == "lock-hot") {
    std::vector<uint64_t> sorted = keep;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {  // runs of adjacent blocks, one mlock each
      size_t j = i + 1;
      while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
      if (mlock(base + sorted[i] * bs, (j - i) * bs) != 0)
        Die(std::string("mlock: ") + strerror(errno));
      locked += (j - i) * bs;
      i = j;
    }
  }
  volatile char sink = 0;
  auto keep_hot = [&]() {
    if (a.keep == "touch-hot") {
      for (uint64_t b : keep) sink = sink + base[b * bs];
    } else if (a.keep == "willneed-hot") {
      for (uint64_t b : keep) (void)madvise(const_cast<char*>(base) + b * bs, bs, MADV_WILLNEED);
    }
  };

  const size_t cols = engine.num_columns(false);
  std::vector<double> out(cols);
  std::vector<double> lat;
  uint64_t hash = 1469598103934665603ull;
  std::vector<double> all_out;
  const size_t n = rows.num_rows;
  size_t done = 0;
  keep_hot();
  double t0 = 0;
  size_t warmup = a.warmup;
  for (size_t i = 0; i < warmup; ++i) {
    if (i % a.every == 0) keep_hot();
    const pacset::Status st = engine.Predict(rows, i % n, i % n + 1, false, out.data());
    if (!st.ok()) Die("predict failed: " + st.ToString());
    if (a.until_warm && i + 1 == warmup && engine.stats().warm_forest_bytes == 0 && warmup < 100000)
      warmup += 50;
  }
  if (a.until_warm) {
    for (size_t i = 0; i < 50; ++i) {
      const pacset::Status st = engine.Predict(rows, i % n, i % n + 1, false, out.data());
      if (!st.ok()) Die("predict failed: " + st.ToString());
    }
  }
  t0 = NowUs();
  for (size_t i = 0; i < a.rows; ++i) {
    const size_t r = i % n;
    if (i % a.every == 0) keep_hot();
    const double s = NowUs();
    pacset::Status st = engine.Predict(rows, r, r + 1, false, out.data());
    const double e = NowUs();
    if (!st.ok()) Die(st.ToString());
    {
      lat.push_back(e - s);
      ++done;
      for (double v : out) {
        uint64_t bits;
        std::memcpy(&bits, &v, 8);
        hash = (hash ^ bits ^ r) * 1099511628211ull;
      }
      if (!a.out.empty() && i < n) all_out.insert(all_out.end(), out.begin(), out.end());
    }
  }
  const double secs = (NowUs() - t0) / 1e6;
  std::sort(lat.begin(), lat.end());
  auto q = [&](double p) {
    return lat[std::min(lat.size() - 1, static_cast<size_t>(p * lat.size()))];
  };
  const auto stats = engine.stats();
  if (!a.out.empty()) {
    FILE* f = std::fopen(a.out.c_str(), "w");
    for (double v : all_out) std::fprintf(f, "%.17g\n", v);
    std::fclose(f);
  }
  std::printf(
      "{\"keep\": \"%s\", \"rows\": %zu, \"rows_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, "
      "\"kept_blocks\": %zu, \"locked_bytes\": %llu, \"bins_blocks\": %llu, \"blocks\": %llu, "
      "\"warm_requests\": %llu, \"inflight_requests\": %llu, \"blocks_fetched\": %llu, "
      "\"warm_forest_bytes\": %llu, \"rss_anon\": %llu, \"cg_rss\": %llu, \"cg_cache\": %llu, "
      "\"hash\": \"%016llx\"}\n",
      a.keep.c_str(), done, done / secs, q(0.5), q(0.99), keep.size(),
      static_cast<unsigned long long>(locked),
      static_cast<unsigned long long>(h.node_first_block + h.bin_block_count),
      static_cast<unsigned long long>(h.block_count),
      static_cast<unsigned long long>(stats.warm_requests),
      static_cast<unsigned long long>(stats.inflight_requests),
      static_cast<unsigned long long>(stats.blocks_fetched),
      static_cast<unsigned long long>(stats.warm_forest_bytes), RssAnonBytes(), CgroupStat("rss"),
      CgroupStat("cache"), static_cast<unsigned long long>(hash));
  return 0;
}
