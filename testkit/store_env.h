// One store backend under test, with storage of its own: the URI and
// options to open it with, and ways to damage or count the bytes the
// backend really stored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "store/block_store.h"
#include "testkit/redis_cluster.h"
#include "testkit/redis_server.h"
#include "util/atomic_file.h"

namespace pacset {
namespace store_test {

// One backend under test, with its own storage; can reach behind the store.
class StoreEnv {
 public:
  virtual ~StoreEnv() = default;
  virtual std::string Uri() const = 0;
  // Short leases and timeouts, a small cache: what the tests wait for is quick.
  virtual StoreOptions Options() const;
  // Whether imports of other processes can run while this process writes.
  virtual bool ConcurrentWriterProcesses() const = 0;
  // The following reach the stored bytes directly; for rocksdb the store
  // must be closed. Empty string on success, else what failed.
  virtual std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) = 0;
  virtual std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) = 0;
  // Bytes of blocks physically stored (all forests, generations, leftovers).
  virtual uint64_t RawBlockBytes() = 0;
};

class RocksDbEnv final : public StoreEnv {
 public:
  std::string Uri() const override { return "rocksdb:" + path(); }
  bool ConcurrentWriterProcesses() const override { return false; }
  std::string path() const { return dir_->path() + "/store"; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override {
    return Modify(f, index, true);
  }
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override {
    return Modify(f, index, false);
  }
  uint64_t RawBlockBytes() override;

 private:
  std::string Modify(const ForestInfo& f, uint64_t index, bool corrupt);
  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
};

class DirEnv final : public StoreEnv {
 public:
  std::string Uri() const override { return "dir:" + path(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  std::string path() const { return dir_->path() + "/store"; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override;
  // A file cut short: the block and everything after it is gone.
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override;
  uint64_t RawBlockBytes() override;

 private:
  std::unique_ptr<TempDir> dir_ = TempDir::Create("pacset-store").value();
};

class RedisEnv final : public StoreEnv {
 public:
  // Empty on success.
  std::string Start() { return server_.Start(); }
  std::string Uri() const override { return server_.uri(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  RedisServer& server() { return server_; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override;
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override;
  uint64_t RawBlockBytes() override;

 private:
  RedisServer server_;
};

// A Redis Cluster of three masters with a replica each.
class RedisClusterEnv final : public StoreEnv {
 public:
  // Empty on success.
  std::string Start() { return cluster_.Start(3, 1); }
  std::string Uri() const override { return cluster_.uri(); }
  bool ConcurrentWriterProcesses() const override { return true; }
  RedisCluster& cluster() { return cluster_; }

  std::string CorruptStoredBlock(const ForestInfo& f, uint64_t index) override;
  std::string DeleteStoredBlock(const ForestInfo& f, uint64_t index) override;
  uint64_t RawBlockBytes() override;

 private:
  int MasterPort(const ForestInfo& f, uint64_t index);
  RedisCluster cluster_;
};

// "rocksdb", "dir", "redis" or "redis-cluster"; for the last two, *error says
// why the servers did not start.
std::unique_ptr<StoreEnv> MakeEnv(const std::string& backend, std::string* error);

}  // namespace store_test
}  // namespace pacset
