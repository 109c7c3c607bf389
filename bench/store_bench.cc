// store_bench: random single-block gets from each block store, side by side
// with pread on a plain file in the same run, and import speed.
//
//   store_bench [--dataset-bytes 256MiB] [--bytes 1GiB] [--ops 50000]
//               [--backends rocksdb,dir,redis] [--block-sizes 4096,65536]
//               [--dir /tmp] [--pac-4k FILE] [--pac-64k FILE] [--no-import]
//
// Gets: a dataset of --dataset-bytes is imported into every backend, then
// --ops random blocks are read per thread with 1 and 2 threads; latency
// p50/p99 and throughput, with ratios against pread of the same blocks from a
// plain file (the "pread" row; "pread+verify" adds the XXH3 check every store
// read does). Import: a .pac file of --bytes is published into each backend
// with PublishFile (read, verify, put, publish), in MB/s. The page cache is
// warm throughout: these are CPU and software-path costs, not disk costs.
// Redis is a redis-server this program starts on a free loopback port.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "bench/bench_util.h"
#include "layout/block.h"
#include "store/block_store.h"
#include "store/publish.h"
#include "testkit/raw_redis.h"
#include "testkit/redis_server.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

using namespace pacset;
using bench::Clock;

namespace {

struct Args {
  uint64_t dataset_bytes = 256ull << 20;
  uint64_t import_bytes = 1ull << 30;
  uint64_t ops = 50000;
  std::vector<std::string> backends = {"rocksdb", "dir", "redis"};
  std::vector<uint32_t> block_sizes = {4096, 65536};
  std::string dir;
  std::map<uint32_t, std::string> pac;
  bool import = true;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

bool WriteDataset(const std::string& path, uint32_t bs, uint64_t count,
                  const bench::DatasetBlocks& blocks) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  std::string buf(bs, '\0');
  for (uint64_t i = 0; i < count; ++i) {
    blocks.Fill(i, buf.data());
    if (std::fwrite(buf.data(), 1, bs, f) != bs) return false;
  }
  return std::fclose(f) == 0;
}

std::string UriFor(const std::string& backend, const std::string& dir, uint32_t bs,
                   const store_test::RedisServer* redis) {
  if (backend == "redis") return redis->uri();
  return backend + ":" + dir + "/" + backend + "-" + std::to_string(bs);
}

void ClearBackend(const std::string& backend, const std::string& dir, uint32_t bs,
                  const store_test::RedisServer* redis) {
  if (backend == "redis") {
    store_test::RawRedis(redis->port()).Command({"FLUSHALL"});
  } else {
    RemoveTree(dir + "/" + backend + "-" + std::to_string(bs));
  }
}

void PrintRow(const std::string& what, uint32_t bs, int threads, const bench::ReadResult& r,
              const bench::ReadResult& base) {
  if (!r.ok) {
    std::printf("%-14s %6u %3d  FAILED: %s\n", what.c_str(), bs, threads, r.error.c_str());
    return;
  }
  std::printf("%-14s %6u %3d %9.1f %9.1f %11.0f %9.0f %9.2fx %9.3fx\n", what.c_str(), bs, threads,
              r.p50_us, r.p99_us, r.ops_per_s, r.mb_per_s, r.p50_us / base.p50_us,
              r.ops_per_s / base.ops_per_s);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--dataset-bytes") {
      a.dataset_bytes = bench::ParseBytes(next());
    } else if (k == "--bytes") {
      a.import_bytes = bench::ParseBytes(next());
    } else if (k == "--ops") {
      a.ops = std::strtoull(next().c_str(), nullptr, 10);
    } else if (k == "--backends") {
      a.backends = Split(next());
    } else if (k == "--block-sizes") {
      a.block_sizes.clear();
      for (const auto& s : Split(next())) a.block_sizes.push_back(std::stoul(s));
    } else if (k == "--dir") {
      a.dir = next();
    } else if (k == "--pac-4k") {
      a.pac[4096] = next();
    } else if (k == "--pac-64k") {
      a.pac[65536] = next();
    } else if (k == "--no-import") {
      a.import = false;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--dataset-bytes N] [--bytes N] [--ops N] [--backends LIST] "
          "[--block-sizes LIST] [--dir DIR] [--pac-4k FILE] [--pac-64k FILE] [--no-import]\n",
          argv[0]);
      return 2;
    }
  }
  const auto tmp = TempDir::Create("pacset-store").value();
  const std::string dir = a.dir.empty() ? tmp->path() : a.dir;

  std::unique_ptr<store_test::RedisServer> redis;
  if (std::find(a.backends.begin(), a.backends.end(), "redis") != a.backends.end()) {
    redis = std::make_unique<store_test::RedisServer>();
    const std::string err = redis->Start();
    if (!err.empty()) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
  }
  StoreOptions options;  // defaults, as `pacset` and the filesystem use them

  std::printf(
      "random single-block gets, %llu MiB dataset per backend, %llu ops per thread, warm "
      "page cache\n",
      static_cast<unsigned long long>(a.dataset_bytes >> 20),
      static_cast<unsigned long long>(a.ops));
  std::printf("%-14s %6s %3s %9s %9s %11s %9s %10s %10s\n", "backend", "block", "thr", "p50 us",
              "p99 us", "ops/s", "MB/s", "p50/pread", "tput/pread");
  std::vector<std::string> import_lines;
  for (uint32_t bs : a.block_sizes) {
    const bench::DatasetBlocks blocks(bs, a.pac.count(bs) ? a.pac[bs] : "");
    const uint64_t count = a.dataset_bytes / bs;
    const std::string file = dir + "/dataset-" + std::to_string(bs) + ".pac";
    if (!WriteDataset(file, bs, count, blocks)) {
      std::fprintf(stderr, "cannot write %s\n", file.c_str());
      return 1;
    }
    std::map<int, bench::ReadResult> base;
    {
      int fd = ::open(file.c_str(), O_RDONLY);
      for (bool verify : {false, true}) {
        for (int threads : {1, 2}) {
          std::vector<std::string> bufs(threads, std::string(bs, '\0'));
          auto r = bench::TimeRandomReads(threads, a.ops, count, bs, [&](int t, uint64_t b) {
            if (::pread(fd, bufs[t].data(), bs, static_cast<off_t>(b * bs)) !=
                static_cast<ssize_t>(bs))
              return false;
            return !verify || VerifyBlock(bufs[t].data(), bs, b, /*seed=*/0, "bench").ok();
          });
          if (!verify) base[threads] = r;
          PrintRow(verify ? "pread+verify" : "pread", bs, threads, r, base[threads]);
        }
      }
      ::close(fd);
    }
    for (const std::string& backend : a.backends) {
      ClearBackend(backend, dir, bs, redis.get());
      auto store = OpenBlockStore(UriFor(backend, dir, bs, redis.get()), options);
      if (!store.ok()) {
        std::fprintf(stderr, "%s: %s\n", backend.c_str(), store.status().ToString().c_str());
        return 1;
      }
      const auto t0 = Clock::now();
      Status s = PublishFile(**store, "bench", file, bs, ForestInfo{}, nullptr);
      const double secs = bench::Seconds(t0);
      if (!s.ok()) {
        std::fprintf(stderr, "%s import: %s\n", backend.c_str(), s.ToString().c_str());
        return 1;
      }
      char line[200];
      std::snprintf(line, sizeof line, "%-8s %6u %8llu MiB %8.2f s %9.0f MB/s  (dataset)",
                    backend.c_str(), bs, static_cast<unsigned long long>(a.dataset_bytes >> 20),
                    secs, a.dataset_bytes / secs / 1e6);
      import_lines.push_back(line);
      auto info = (*store)->Lookup("bench");
      for (int threads : {1, 2}) {
        std::vector<std::string> bufs(threads);
        std::string error;
        auto r = bench::TimeRandomReads(threads, a.ops, count, bs, [&](int t, uint64_t b) {
          Status g = (*store)->Get(*info, b, &bufs[t]);
          if (!g.ok()) error = g.ToString();
          return g.ok();
        });
        r.error = error;
        PrintRow(backend, bs, threads, r, base[threads]);
      }
      store->reset();
      ClearBackend(backend, dir, bs, redis.get());
    }
    ::unlink(file.c_str());
  }

  if (a.import) {
    for (uint32_t bs : a.block_sizes) {
      const bench::DatasetBlocks blocks(bs, a.pac.count(bs) ? a.pac[bs] : "");
      const uint64_t count = a.import_bytes / bs;
      const std::string file = dir + "/import-" + std::to_string(bs) + ".pac";
      if (!WriteDataset(file, bs, count, blocks)) return 1;
      for (const std::string& backend : a.backends) {
        ClearBackend(backend, dir, bs, redis.get());
        auto store = OpenBlockStore(UriFor(backend, dir, bs, redis.get()), options);
        if (!store.ok()) return 1;
        const auto t0 = Clock::now();
        Status s = PublishFile(**store, "big", file, bs, ForestInfo{}, nullptr);
        const double secs = bench::Seconds(t0);
        if (!s.ok()) {
          std::fprintf(stderr, "%s import: %s\n", backend.c_str(), s.ToString().c_str());
          return 1;
        }
        char line[200];
        std::snprintf(line, sizeof line, "%-8s %6u %8llu MiB %8.2f s %9.0f MB/s", backend.c_str(),
                      bs, static_cast<unsigned long long>((count * bs) >> 20), secs,
                      count * bs / secs / 1e6);
        import_lines.push_back(line);
        store->reset();
        ClearBackend(backend, dir, bs, redis.get());
      }
      ::unlink(file.c_str());
    }
  }
  std::printf("\nimport (PublishFile: read .pac, verify, put, publish)\n");
  std::printf("%-8s %6s %12s %10s %14s\n", "backend", "block", "size", "time", "speed");
  for (const auto& l : import_lines) std::printf("%s\n", l.c_str());
  return 0;
}
