// rocksdb_options_bench: the measurement behind the RocksDB options of the
// rocksdb: backend (store/rocksdb_store.cc). One option at a time is varied
// from the chosen configuration; for each, a dataset is imported and random
// single-block gets are timed.
//
//   rocksdb_options_bench [--dataset-bytes 512MiB] [--ops 20000]
//                         [--block-sizes 4096,65536] [--pac-4k F] [--pac-64k F]
//                         [--rounds 3]
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "bench/bench_util.h"
#include "store/block_store.h"
#include "store/internal/backends.h"
#include "store/publish.h"
#include "util/atomic_file.h"
#include "util/file_io.h"

using namespace pacset;
using store_internal::RocksDbTuning;

namespace {

struct Config {
  std::string name;
  RocksDbTuning tuning;
  size_t cache_bytes;
};

const char* CompressionName(RocksDbTuning::Compression c) {
  switch (c) {
    case RocksDbTuning::Compression::kNone:
      return "none";
    case RocksDbTuning::Compression::kSnappy:
      return "snappy";
    case RocksDbTuning::Compression::kLz4:
      return "lz4";
    case RocksDbTuning::Compression::kZstd:
      return "zstd";
  }
  return "?";
}

uint64_t SstBytes(const std::string& dir) {
  uint64_t total = 0;
  auto names = ListDir(dir);
  if (!names.ok()) return 0;
  for (const auto& n : *names) {
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".sst") == 0) {
      struct stat st;
      if (::stat((dir + "/" + n).c_str(), &st) == 0) total += st.st_size;
    }
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t dataset = 512ull << 20, ops = 30000;
  int rounds = 3;
  std::vector<uint32_t> block_sizes = {4096, 65536};
  std::map<uint32_t, std::string> pac;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dataset-bytes") {
      dataset = bench::ParseBytes(v);
    } else if (k == "--rounds") {
      rounds = std::max(1, std::atoi(v.c_str()));
    } else if (k == "--ops") {
      ops = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--block-sizes") {
      block_sizes.clear();
      std::stringstream in(v);
      std::string item;
      while (std::getline(in, item, ',')) block_sizes.push_back(std::stoul(item));
    } else if (k == "--pac-4k") {
      pac[4096] = v;
    } else if (k == "--pac-64k") {
      pac[65536] = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const auto tmp = TempDir::Create("pacset-store").value();
  const RocksDbTuning chosen;  // the defaults in store/internal/backends.h
  const size_t chosen_cache = StoreOptions().rocksdb_block_cache_bytes;
  std::vector<Config> configs = {{"chosen", chosen, chosen_cache}};
  auto vary = [&](const std::string& name, auto change) {
    RocksDbTuning t = chosen;
    change(t);
    configs.push_back({name, t, chosen_cache});
  };
  auto cache = [&](const std::string& name, size_t bytes) {
    configs.push_back({name, chosen, bytes});
  };
  vary("snappy", [](RocksDbTuning& t) { t.compression = RocksDbTuning::Compression::kSnappy; });
  vary("lz4", [](RocksDbTuning& t) { t.compression = RocksDbTuning::Compression::kLz4; });
  vary("zstd", [](RocksDbTuning& t) { t.compression = RocksDbTuning::Compression::kZstd; });
  vary("no-bloom", [](RocksDbTuning& t) { t.bloom_bits_per_key = 0; });
  vary("table-16k", [](RocksDbTuning& t) { t.table_block_size = 16384; });
  vary("table-64k", [](RocksDbTuning& t) { t.table_block_size = 65536; });
  cache("cache-8m", 8u << 20);
  cache("cache-256m", 256u << 20);
  cache("no-cache", 0);
  vary("rocks-crc", [](RocksDbTuning& t) { t.verify_rocksdb_checksums = true; });

  std::printf("RocksDB options, %llu MiB dataset, %llu random gets per thread, warm page cache\n",
              static_cast<unsigned long long>(dataset >> 20), static_cast<unsigned long long>(ops));
  std::printf("%-11s %6s %-7s %5s %6s %6s %5s %9s %9s %8s %8s %11s %8s %8s\n", "config", "block",
              "compr", "bloom", "table", "cache", "crc", "import", "sst MiB", "p50 us", "p99 us",
              "2thr ops/s", "hot p50", "mix p50");
  std::printf("(medians of %d rounds, round-robin over the configurations)\n", rounds);
  for (uint32_t bs : block_sizes) {
    const bench::DatasetBlocks blocks(bs, pac.count(bs) ? pac[bs] : "");
    const uint64_t count = dataset / bs;
    const std::string file = tmp->path() + "/dataset.pac";
    const std::string other = tmp->path() + "/other.pac";
    {
      FILE* f = std::fopen(other.c_str(), "wb");
      std::string buf(bs, '\0');
      for (uint64_t i = 0; i < (32u << 20) / bs; ++i) {
        blocks.Fill(i, buf.data());
        std::fwrite(buf.data(), 1, bs, f);
      }
      std::fclose(f);
    }
    {
      FILE* f = std::fopen(file.c_str(), "wb");
      std::string buf(bs, '\0');
      for (uint64_t i = 0; i < count; ++i) {
        blocks.Fill(i, buf.data());
        std::fwrite(buf.data(), 1, bs, f);
      }
      std::fclose(f);
    }
    auto options_for = [&](size_t i) {
      StoreOptions o;
      o.rocksdb_block_cache_bytes = configs[i].cache_bytes;
      return o;
    };
    // Import into one database per configuration, then let it settle.
    std::vector<double> import_mbs(configs.size());
    std::vector<uint64_t> sst(configs.size());
    auto db_path = [&](size_t i) { return tmp->path() + "/db-" + std::to_string(i); };
    for (size_t i = 0; i < configs.size(); ++i) {
      auto store = store_internal::OpenRocksDbStore(db_path(i), options_for(i), configs[i].tuning);
      if (!store.ok()) {
        std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
        return 1;
      }
      const auto t0 = bench::Clock::now();
      Status s = PublishFile(**store, "bench", file, bs, ForestInfo{}, nullptr);
      import_mbs[i] = dataset / bench::Seconds(t0) / 1e6;
      store->reset();
      if (s.ok())
        s = store_internal::SettleRocksDbStore(db_path(i), options_for(i), configs[i].tuning);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      sst[i] = SstBytes(db_path(i));
    }
    // Reads, round-robin over the configurations so that noise from other
    // load on the machine spreads over all of them; medians of the rounds.
    std::vector<std::vector<bench::ReadResult>> one(configs.size()), two(configs.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < configs.size(); ++i) {
        auto store =
            store_internal::OpenRocksDbStore(db_path(i), options_for(i), configs[i].tuning);
        if (!store.ok()) return 1;
        auto info = (*store)->Lookup("bench");
        std::vector<std::string> bufs(2);
        auto read = [&](int t, uint64_t b) { return (*store)->Get(*info, b, &bufs[t]).ok(); };
        bench::TimeRandomReads(1, ops / 4, count, bs, read);  // warm the block cache
        one[i].push_back(bench::TimeRandomReads(1, ops, count, bs, read));
        two[i].push_back(bench::TimeRandomReads(2, ops, count, bs, read));
      }
    }
    // Two more situations, once per configuration: a skewed workload (hot
    // set), and reads right after another forest was imported (its table
    // files sit unsettled in L0, their key ranges spanning this forest's keys).
    std::vector<bench::ReadResult> hot(configs.size()), mixed(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
      auto store = store_internal::OpenRocksDbStore(db_path(i), options_for(i), configs[i].tuning);
      if (!store.ok()) return 1;
      auto info = (*store)->Lookup("bench");
      std::string buf;
      auto read = [&](int, uint64_t b) { return (*store)->Get(*info, b, &buf).ok(); };
      bench::TimeRandomReads(1, ops / 4, count, bs, read, true);
      hot[i] = bench::TimeRandomReads(1, ops, count, bs, read, true);
      Status s = PublishFile(**store, "aaa-other", other, bs, ForestInfo{}, nullptr);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      bench::TimeRandomReads(1, ops / 4, count, bs, read);
      mixed[i] = bench::TimeRandomReads(1, ops, count, bs, read);
    }
    auto median = [](std::vector<bench::ReadResult> v, double bench::ReadResult::*field) {
      std::sort(v.begin(), v.end(), [&](const bench::ReadResult& a, const bench::ReadResult& b) {
        return a.*field < b.*field;
      });
      return v[v.size() / 2].*field;
    };
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      const size_t cache = c.cache_bytes;
      bool ok = true;
      for (const auto& r : one[i]) ok = ok && r.ok;
      for (const auto& r : two[i]) ok = ok && r.ok;
      std::printf(
          "%-11s %6u %-7s %5d %5zuk %5zum %5s %6.0fMB/s %9.1f %8.1f %8.1f %11.0f %8.1f %8.1f%s\n",
          c.name.c_str(), bs, CompressionName(c.tuning.compression), c.tuning.bloom_bits_per_key,
          c.tuning.table_block_size >> 10, cache >> 20,
          c.tuning.verify_rocksdb_checksums ? "yes" : "no", import_mbs[i], sst[i] / 1048576.0,
          median(one[i], &bench::ReadResult::p50_us), median(one[i], &bench::ReadResult::p99_us),
          median(two[i], &bench::ReadResult::ops_per_s), hot[i].p50_us, mixed[i].p50_us,
          ok && hot[i].ok && mixed[i].ok ? "" : "  READ FAILED");
      std::fflush(stdout);
      RemoveTree(db_path(i));
    }
  }
  std::printf("payloads: %s\n", pac.empty() ? "pseudo-random" : "blocks of real .pac files");
  return 0;
}
