#include "testkit/store_env.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/internal/backends.h"
#include "testkit/stored_redis_blocks.h"
#include "util/file_io.h"

namespace pacset {
namespace store_test {

StoreOptions StoreEnv::Options() const {
  StoreOptions o;
  o.lease_ms = 600;
  o.busy_timeout_ms = 500;
  o.connect_timeout_ms = 1000;
  o.io_timeout_ms = 2000;
  o.rocksdb_block_cache_bytes = 8u << 20;
  return o;
}

uint64_t RocksDbEnv::RawBlockBytes() {
  rocksdb::DB* db = nullptr;
  rocksdb::Options o;
  if (!rocksdb::DB::OpenForReadOnly(o, path(), &db).ok()) return UINT64_MAX;
  std::unique_ptr<rocksdb::DB> holder(db);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  uint64_t bytes = 0;
  for (it->Seek("B"); it->Valid() && it->key()[0] == 'B'; it->Next()) bytes += it->value().size();
  return bytes;
}

std::string RocksDbEnv::Modify(const ForestInfo& f, uint64_t index, bool corrupt) {
  rocksdb::DB* db = nullptr;
  rocksdb::Options o;
  rocksdb::Status s = rocksdb::DB::Open(o, path(), &db);
  if (!s.ok()) return s.ToString();
  std::unique_ptr<rocksdb::DB> holder(db);
  const std::string key = store_internal::RocksDbBlockKey(f.name, f.generation, index);
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), key, &value);
  if (!s.ok()) return s.ToString();
  rocksdb::WriteOptions wo;
  wo.sync = true;
  if (corrupt) {
    value[value.size() / 2] ^= 0x01;
    s = db->Put(wo, key, value);
  } else {
    s = db->Delete(wo, key);
  }
  return s.ok() ? "" : s.ToString();
}

std::string DirEnv::CorruptStoredBlock(const ForestInfo& f, uint64_t index) {
  const std::string file = path() + "/" + store_internal::DirGenerationFile(f.name, f.generation);
  int fd = ::open(file.c_str(), O_RDWR);
  if (fd < 0) return "open " + file + " failed";
  const off_t off = static_cast<off_t>(index * f.block_size + f.block_size / 2);
  char c;
  bool ok = ::pread(fd, &c, 1, off) == 1;
  c ^= 0x01;
  ok = ok && ::pwrite(fd, &c, 1, off) == 1;
  ::close(fd);
  return ok ? "" : "rewrite " + file + " failed";
}

std::string DirEnv::DeleteStoredBlock(const ForestInfo& f, uint64_t index) {
  const std::string file = path() + "/" + store_internal::DirGenerationFile(f.name, f.generation);
  return ::truncate(file.c_str(), static_cast<off_t>(index * f.block_size)) == 0
             ? ""
             : "truncate " + file + " failed";
}

uint64_t DirEnv::RawBlockBytes() {
  uint64_t bytes = 0;
  auto names = ListDir(path() + "/forests");
  if (!names.ok()) return UINT64_MAX;
  for (const auto& n : *names) {
    auto files = ListDir(path() + "/forests/" + n);
    if (!files.ok()) continue;
    for (const auto& f : *files) {
      struct stat st;
      if (::stat((path() + "/forests/" + n + "/" + f).c_str(), &st) == 0) bytes += st.st_size;
    }
  }
  return bytes;
}

std::string RedisEnv::CorruptStoredBlock(const ForestInfo& f, uint64_t index) {
  return CorruptRedisBlock(server_.port(), f, index);
}

std::string RedisEnv::DeleteStoredBlock(const ForestInfo& f, uint64_t index) {
  return DeleteRedisBlock(server_.port(), f, index);
}

uint64_t RedisEnv::RawBlockBytes() { return BlockBytesOn(server_.port()); }

std::string RedisClusterEnv::CorruptStoredBlock(const ForestInfo& f, uint64_t index) {
  return CorruptRedisBlock(MasterPort(f, index), f, index);
}

std::string RedisClusterEnv::DeleteStoredBlock(const ForestInfo& f, uint64_t index) {
  return DeleteRedisBlock(MasterPort(f, index), f, index);
}

uint64_t RedisClusterEnv::RawBlockBytes() {
  uint64_t bytes = 0;
  for (int port : cluster_.MasterPorts()) bytes += BlockBytesOn(port);
  return bytes;
}

int RedisClusterEnv::MasterPort(const ForestInfo& f, uint64_t index) {
  return cluster_.MasterPortOf(store_internal::RedisBlockKey(f.name, f.generation, index));
}

std::unique_ptr<StoreEnv> MakeEnv(const std::string& backend, std::string* error) {
  error->clear();
  if (backend == "rocksdb") return std::make_unique<RocksDbEnv>();
  if (backend == "dir") return std::make_unique<DirEnv>();
  if (backend == "redis-cluster") {
    auto env = std::make_unique<RedisClusterEnv>();
    *error = env->Start();
    return env;
  }
  auto env = std::make_unique<RedisEnv>();
  *error = env->Start();
  return env;
}

}  // namespace store_test
}  // namespace pacset
