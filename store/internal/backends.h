// Constructors of the backends, called by OpenBlockStore after it has
// parsed the URI; and the key layouts, for tests that damage stored bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/block_store.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

// RocksDB table and cache options. The defaults are the measured choice
// (see the comment in store/rocksdb_store.cc); benchmarks vary them.
struct RocksDbTuning {
  enum class Compression { kNone, kSnappy, kLz4, kZstd };
  Compression compression = Compression::kNone;
  int bloom_bits_per_key = 10;  // 0: no filter
  size_t table_block_size = 4096;
  int index_block_restart_interval = 16;  // RocksDB's default: 1
  bool verify_rocksdb_checksums = false;  // our own XXH3 trailer is checked on every read
  size_t block_cache_bytes = 0;           // 0: StoreOptions::rocksdb_block_cache_bytes
  // A reader learns that the writer wrote from an inotify watch of the store
  // directory where it can (file_util.h, DirectoryWatch); false: it stats
  // the writer's files, as it does on file systems inotify cannot watch.
  bool watch_writer_directory = true;
};

StatusOr<std::unique_ptr<BlockStore>> OpenRocksDbStore(const std::string& path,
                                                       const StoreOptions& options,
                                                       const RocksDbTuning& tuning = {});
// Opens the rocksdb: store at `path` as its writer, waits until no flush or
// compaction is pending or running, and closes it: the settled state a
// long-lived store reaches after an import (benchmarks measure reads there).
Status SettleRocksDbStore(const std::string& path, const StoreOptions& options,
                          const RocksDbTuning& tuning = {});

StatusOr<std::unique_ptr<BlockStore>> OpenDirStore(const std::string& path,
                                                   const StoreOptions& options);

struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;      // Redis 6 ACL user; empty: AUTH with the password alone
  std::string password;  // from the URI, else StoreOptions::password
};
StatusOr<std::unique_ptr<BlockStore>> OpenRedisStore(const RedisAddress& address,
                                                     const StoreOptions& options);
// A Redis Cluster found through `seeds` (store/internal/redis_router.h).
StatusOr<std::unique_ptr<BlockStore>> OpenRedisClusterStore(const std::vector<RedisAddress>& seeds,
                                                            const StoreOptions& options);

// rocksdb: keys. Numbers are big-endian so keys sort by (name, generation, block).
//   'B' NAME '\0' GEN INDEX   a block
//   'C' NAME                  catalog: the current generation's ForestInfo
//   'G' NAME '\0' GEN         a published generation still stored (ForestInfo)
//   'P' NAME '\0' GEN         a pending (unpublished) generation (ForestInfo)
//   'N' NAME                  the last generation number allocated (8 bytes)
std::string RocksDbBlockKey(const std::string& name, uint64_t gen, uint64_t index);

// redis: and redis-cluster: keys, all under "pacset:"; blocks have the same key on both.
std::string RedisBlockKey(const std::string& name, uint64_t gen, uint64_t index);

// dir: the file of a published generation, relative to the store directory.
std::string DirGenerationFile(const std::string& name, uint64_t gen);

}  // namespace store_internal
}  // namespace pacset
