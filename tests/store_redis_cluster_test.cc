// redis-cluster:// specifics: slot computation and redirection parsing
// against known values, and behaviour against a real Redis Cluster of
// Debian's redis-server (three masters, a replica each) that the tests make
// themselves: keys spread by slot, a slot migration (ASK, then MOVED), the
// failover of a master during reads, replicated writes. The whole store
// contract is checked by store_conformance_test.cc on such a cluster.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "store/block_store.h"
#include "store/internal/redis_router.h"
#include "testkit/free_port.h"
#include "testkit/raw_redis.h"
#include "testkit/redis_cluster.h"
#include "testkit/redis_server.h"
#include "testkit/stored_redis_blocks.h"
#include "testkit/test_blocks.h"

namespace pacset {
namespace {

using store_internal::ParseClusterNodes;
using store_internal::ParseRedisRedirect;
using store_internal::RedisBlockKey;
using store_internal::RedisCrc16;
using store_internal::RedisKeySlot;
using store_internal::RedisRedirect;
using store_test::MakeBlock;
using store_test::RawRedis;
using store_test::RedisCluster;
using store_test::WriteForest;
using Clock = std::chrono::steady_clock;

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::pacset::Status s_ = (expr);                     \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

// ---------------------------------------------------------------- slots ----

TEST(RedisClusterSlots, Crc16IsXmodemWithTheSpecificationCheckValue) {
  EXPECT_EQ(RedisCrc16("123456789"), 0x31C3);  // the Redis Cluster specification's check value
  EXPECT_EQ(RedisCrc16(""), 0);
}

TEST(RedisClusterSlots, SlotsEqualWhatRedisServerComputes) {
  // Values from `redis-cli CLUSTER KEYSLOT` of redis-server 7.0.15.
  EXPECT_EQ(RedisKeySlot("123456789"), 12739);
  EXPECT_EQ(RedisKeySlot("foo"), 12182);
  EXPECT_EQ(RedisKeySlot("bar"), 5061);
  EXPECT_EQ(RedisKeySlot("somekey"), 11058);
  EXPECT_EQ(RedisKeySlot("pacset:{catalog}:current"), 9113);
}

TEST(RedisClusterSlots, HashTagsFollowTheFirstBracePair) {
  EXPECT_EQ(RedisKeySlot("foo{bar}{zap}"), RedisKeySlot("bar"));   // the first tag only
  EXPECT_EQ(RedisKeySlot("foo{{bar}}zap"), RedisKeySlot("{bar"));  // up to the first '}'
  EXPECT_EQ(RedisKeySlot("foo{}{bar}"), 8363);                     // empty tag: whole key
  EXPECT_EQ(RedisKeySlot("foo{}{bar}"), RedisCrc16("foo{}{bar}") & 16383);
  EXPECT_EQ(RedisKeySlot("{user1000}.following"), RedisKeySlot("{user1000}.followers"));
  EXPECT_EQ(RedisKeySlot("no{close"), RedisCrc16("no{close") & 16383);  // unclosed: whole key
}

TEST(RedisClusterSlots, CatalogKeysShareOneSlotAndBlocksSpreadOverAll) {
  const int catalog = RedisKeySlot("pacset:{catalog}:current");
  for (const char* k : {"pacset:{catalog}:catalog", "pacset:{catalog}:pins",
                        "pacset:{catalog}:lease:pin:model:3:0123456789abcdef",
                        "pacset:{catalog}:lease:pending:model:4"})
    EXPECT_EQ(RedisKeySlot(k), catalog) << k;
  // 30,000 blocks of one generation: every third of the slot space (one
  // master each in a three-master cluster) gets close to a third of them.
  int thirds[3] = {0, 0, 0};
  for (uint64_t b = 0; b < 30000; ++b) ++thirds[RedisKeySlot(RedisBlockKey("model", 7, b)) / 5462];
  for (int t : thirds) {
    EXPECT_GT(t, 9400);
    EXPECT_LT(t, 10600);
  }
}

// ---------------------------------------------------------- redirection ----

TEST(RedisClusterRedirect, MovedAndAskAreParsed) {
  RedisRedirect m = ParseRedisRedirect("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(m.kind, RedisRedirect::Kind::kMoved);
  EXPECT_EQ(m.slot, 3999);
  EXPECT_EQ(m.host, "127.0.0.1");
  EXPECT_EQ(m.port, 6381);
  RedisRedirect a = ParseRedisRedirect("ASK 16383 10.0.0.2:7000");
  EXPECT_EQ(a.kind, RedisRedirect::Kind::kAsk);
  EXPECT_EQ(a.slot, 16383);
  EXPECT_EQ(a.host, "10.0.0.2");
  EXPECT_EQ(a.port, 7000);
  RedisRedirect v6 = ParseRedisRedirect("MOVED 1 ::1:7002");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 7002);
  RedisRedirect unknown_host = ParseRedisRedirect("MOVED 2 :7003");  // "the node you asked"
  EXPECT_EQ(unknown_host.kind, RedisRedirect::Kind::kMoved);
  EXPECT_EQ(unknown_host.host, "");
  EXPECT_EQ(unknown_host.port, 7003);
}

TEST(RedisClusterRedirect, OtherErrorsAndMalformedRedirectionsAreNotRedirections) {
  for (const char* e :
       {"ERR unknown command", "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down", "MOVED", "MOVED 16384 127.0.0.1:1",
        "MOVED -1 127.0.0.1:1", "MOVED 12 127.0.0.1", "MOVED 12 127.0.0.1:0",
        "MOVED 12 127.0.0.1:65536", "ASK x 127.0.0.1:1", "ASKING"})
    EXPECT_EQ(ParseRedisRedirect(e).kind, RedisRedirect::Kind::kNone) << e;
}

// CLUSTER NODES of a real redis-server 7.0.15 cluster, three masters with a
// replica each (made as in RedisCluster::Start), plus lines changed to
// exercise a migrating slot, a failed replica and a node without address.
constexpr char kClusterNodes[] =
    "6cd26c6eeee84238d3d33110e4c731912133c3ac 127.0.0.1:27105@27205 slave "
    "75e078248a0326c1dd4a577bee486b94246d959b 0 1796083899156 3 connected\n"
    "509e469845016fd61b08d03d074adc565de7b607 127.0.0.1:27104@27204 slave,fail "
    "991bfd823ac14a4b30270e187b6457006808803f 1796083899668 1796083899156 2 connected\n"
    "48bdae9a9842ce6a35cf47880b0b73d563582d46 127.0.0.1:27100@27200 myself,master - 0 "
    "1796083899000 1 connected 0-5460 [5460->-991bfd823ac14a4b30270e187b6457006808803f]\n"
    "75e078248a0326c1dd4a577bee486b94246d959b 127.0.0.1:27102@27202,host-c master - "
    "1796083899668 1796083899156 3 connected 10923-16382 16383\n"
    "991bfd823ac14a4b30270e187b6457006808803f :27101@27201 master - 1796083899668 "
    "1796083899156 2 connected 5461-10922\n"
    "cbec5307c42ff668019a6f998f556effb8072342 127.0.0.1:27103@27203 slave "
    "48bdae9a9842ce6a35cf47880b0b73d563582d46 1796083899668 1796083899156 1 connected\n";

TEST(RedisClusterRedirect, ClusterNodesGiveEverySlotsMasterAndLiveReplicas) {
  auto ranges = ParseClusterNodes(kClusterNodes);
  ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
  std::vector<int> owner(16384, -1);
  std::map<int, int> replicas;
  for (const auto& r : *ranges) {
    for (int s = r.first; s <= r.last; ++s) {
      EXPECT_EQ(owner[s], -1) << "slot " << s << " twice";
      owner[s] = r.port;
    }
    replicas[r.port] = r.replicas;
    if (r.port == 27101) {
      EXPECT_EQ(r.host, "");  // no address: the host that was asked
    }
    if (r.port == 27102) {
      EXPECT_EQ(r.host, "127.0.0.1");
    }
  }
  for (int s = 0; s < 16384; ++s) ASSERT_NE(owner[s], -1) << "slot " << s;
  EXPECT_EQ(owner[0], 27100);
  EXPECT_EQ(owner[5460], 27100);  // migrating, still served by its master
  EXPECT_EQ(owner[5461], 27101);
  EXPECT_EQ(owner[16383], 27102);
  EXPECT_EQ(replicas[27100], 1);
  EXPECT_EQ(replicas[27101], 0);  // its only replica is marked failed
  EXPECT_EQ(replicas[27102], 1);
}

TEST(RedisClusterRedirect, MalformedClusterNodesNameTheLine) {
  for (const char* text :
       {"abc 127.0.0.1:1@2 master - 0 0 1\n", "abc 127.0.0.1@2 master - 0 0 1 connected 0-1\n",
        "abc 127.0.0.1:1@2 master - 0 0 1 connected 5-3\n",
        "abc 127.0.0.1:1@2 master - 0 0 1 connected 0-16384\n"}) {
    auto r = ParseClusterNodes(std::string("\n") + text);
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << text;
    EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().ToString();
  }
}

// ---------------------------------------------------------- real cluster ----

StoreOptions Opts() {
  StoreOptions o;
  o.connect_timeout_ms = 500;
  o.io_timeout_ms = 2000;
  o.lease_ms = 3000;
  return o;
}

class RedisClusterStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string err = cluster_.Start(3, 1);
    ASSERT_EQ(err, "");
    auto s = OpenBlockStore(cluster_.uri(), Opts());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  // Publishes a test forest "model" of `blocks` 4 KiB blocks; its catalog entry.
  ForestInfo PublishModel(uint64_t blocks) {
    Status s = WriteForest(*store_, "model", 4096, blocks);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto info = store_->Lookup("model");
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? *info : ForestInfo{};
  }

  RedisCluster cluster_;
  std::unique_ptr<BlockStore> store_;
};

TEST_F(RedisClusterStore, BlocksAreSpreadOverEveryMasterAndTheCatalogIsOnOne) {
  uint64_t gen = 0;
  ASSERT_OK(WriteForest(*store_, "model", 4096, 300, &gen));
  const std::vector<int> masters = cluster_.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  for (int port : masters) {
    const uint64_t bytes = store_test::BlockBytesOn(port);
    EXPECT_GT(bytes, 60u * 4096) << "master " << port;  // about 100 blocks each
    EXPECT_LT(bytes, 140u * 4096) << "master " << port;
  }
  const int catalog = cluster_.MasterPortOf("pacset:{catalog}:current");
  EXPECT_EQ(RawRedis(catalog).Command({"HLEN", "pacset:{catalog}:catalog"}), "1");
  auto st = store_->Stat();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->backend, "redis-cluster");
  EXPECT_EQ(st->blocks, 300u);
}

TEST_F(RedisClusterStore, ReadsFollowASlotMigrationAskThenMoved) {
  uint64_t gen = 0;
  ASSERT_OK(WriteForest(*store_, "model", 4096, 40, &gen));
  auto info = store_->Lookup("model");
  ASSERT_TRUE(info.ok());
  const uint64_t block = 17;
  const std::string key = RedisBlockKey("model", gen, block);
  const std::string slot = std::to_string(RedisKeySlot(key));
  const int from = cluster_.MasterPortOf(key);
  int to = -1;
  for (int p : cluster_.MasterPorts())
    if (p != from) to = p;
  ASSERT_GT(from, 0);
  RawRedis src(from), dst(to);
  const std::string src_id = src.Command({"CLUSTER", "MYID"});
  const std::string dst_id = dst.Command({"CLUSTER", "MYID"});
  // Half-way through a migration: the key has moved, its slot has not.
  ASSERT_EQ(dst.Command({"CLUSTER", "SETSLOT", slot, "IMPORTING", src_id}), "OK");
  ASSERT_EQ(src.Command({"CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id}), "OK");
  // Every key of the slot moves (usually just this block).
  const std::string in_slot = src.Command({"CLUSTER", "GETKEYSINSLOT", slot, "100"});
  ASSERT_NE(in_slot.find(key), std::string::npos) << in_slot;
  for (size_t b = 0, e; b < in_slot.size(); b = e + 1) {
    e = std::min(in_slot.find('\n', b), in_slot.size());
    ASSERT_EQ(src.Command({"MIGRATE", "127.0.0.1", std::to_string(to), in_slot.substr(b, e - b),
                           "0", "5000"}),
              "OK");
  }
  ASSERT_EQ(src.Command({"GET", key}).rfind("ASK " + slot, 0), 0u);

  store_internal::RedisRouter router(
      std::vector<store_internal::RedisAddress>{{"127.0.0.1", from, 0, "", ""}}, Opts());
  ASSERT_TRUE(router.Start().ok());
  std::vector<store_internal::RedisCommand> get = {{key, {"GET", key}}};
  std::vector<StatusOr<store_internal::Reply>> replies;
  router.Run(get, &replies);
  ASSERT_TRUE(replies[0].ok()) << replies[0].status().ToString();
  EXPECT_EQ(store_internal::ReplyString(replies[0]->get()), MakeBlock(4096, block, gen));
  EXPECT_EQ(router.redirects(), 1u);
  EXPECT_EQ(router.MasterOf(key), "127.0.0.1:" + std::to_string(from));  // ASK: map unchanged
  std::string b;
  ASSERT_TRUE(store_->Get(*info, block, &b).ok());
  EXPECT_EQ(b, MakeBlock(4096, block, gen));

  // The migration ends: the slot is the other master's everywhere.
  for (int p : cluster_.MasterPorts())
    ASSERT_EQ(RawRedis(p).Command({"CLUSTER", "SETSLOT", slot, "NODE", dst_id}), "OK");
  router.Run(get, &replies);
  ASSERT_TRUE(replies[0].ok()) << replies[0].status().ToString();
  EXPECT_EQ(store_internal::ReplyString(replies[0]->get()), MakeBlock(4096, block, gen));
  EXPECT_EQ(router.redirects(), 2u);
  EXPECT_EQ(router.MasterOf(key), "127.0.0.1:" + std::to_string(to));  // MOVED: map updated
  router.Run(get, &replies);
  EXPECT_EQ(router.redirects(), 2u);  // no more redirections
  for (uint64_t i = 0; i < 40; ++i) {
    ASSERT_TRUE(store_->Get(*info, i, &b).ok()) << i;
    EXPECT_EQ(b, MakeBlock(4096, i, gen));
  }
}

// Reader threads verify every block they get while `disrupt` runs; returns
// how many reads succeeded and failed as unavailable. Any other error or a
// wrong block fails the test.
struct ReadTally {
  std::atomic<uint64_t> ok{0}, unavailable{0};
};

void ReadWhile(BlockStore& store, const ForestInfo& f, const std::function<void()>& disrupt,
               ReadTally* tally) {
  std::atomic<bool> stop{false};
  std::vector<std::string> errors(4);
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::string> got;
      while (!stop.load() && errors[t].empty()) {
        std::vector<uint64_t> want = {rng() % f.block_count, rng() % f.block_count};
        Status s = store.MultiGet(f, want, &got);
        if (s.code() == StatusCode::kUnavailable) {
          ++tally->unavailable;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        if (!s.ok()) {
          errors[t] = s.ToString();
        } else if (got[0] != MakeBlock(f.block_size, want[0], f.generation) ||
                   got[1] != MakeBlock(f.block_size, want[1], f.generation)) {
          errors[t] = "wrong bytes";
        }
        ++tally->ok;
      }
    });
  }
  disrupt();
  stop = true;
  for (auto& r : readers) r.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(errors[t], "") << "reader " << t;
}

// Every block of `f` readable within `timeout` (retrying kUnavailable).
void ExpectAllReadableWithin(BlockStore& store, const ForestInfo& f, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string b;
  for (uint64_t i = 0; i < f.block_count; ++i) {
    Status s;
    while ((s = store.Get(f, i, &b)).code() == StatusCode::kUnavailable && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(s.ok()) << "block " << i << ": " << s.ToString();
    ASSERT_EQ(b, MakeBlock(f.block_size, i, f.generation)) << "block " << i;
  }
}

TEST_F(RedisClusterStore, TheCatalogsMasterKilledDuringReadsIsReplacedByItsReplica) {
  const ForestInfo info = PublishModel(120);
  ASSERT_GT(info.block_count, 0u);
  const int victim = cluster_.MasterPortOf("pacset:{catalog}:current");
  ReadTally tally;
  Clock::time_point killed, recovered;
  ReadWhile(
      *store_, info,
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (size_t i = 0; i < cluster_.size(); ++i)
          if (cluster_.node(i).port() == victim) cluster_.node(i).Kill();  // SIGKILL
        killed = Clock::now();
        // The cluster notices after its node timeout (1 s) and promotes the replica.
        const uint64_t before = tally.ok.load();
        while (Clock::now() - killed < std::chrono::seconds(20)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (store_->Lookup("model").ok() && tally.ok.load() > before + 200) break;
        }
        recovered = Clock::now();
      },
      &tally);
  EXPECT_GT(tally.unavailable.load(), 0u) << "the failover went unnoticed: was a master killed?";
  EXPECT_LT(recovered - killed, std::chrono::seconds(20));
  ExpectAllReadableWithin(*store_, info, std::chrono::seconds(10));
  auto again = store_->Lookup("model");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->generation, info.generation);
  // The store writes to the promoted master (which has no replica left).
  uint64_t gen2 = 0;
  ASSERT_OK(WriteForest(*store_, "model", 4096, 30, &gen2));
  auto now = store_->Lookup("model");
  ASSERT_TRUE(now.ok());
  ExpectAllReadableWithin(*store_, *now, std::chrono::seconds(5));
  std::printf("    killed master :%d; %llu reads unavailable, %llu ok; recovered in %.1f s\n",
              victim, static_cast<unsigned long long>(tally.unavailable.load()),
              static_cast<unsigned long long>(tally.ok.load()),
              std::chrono::duration<double>(recovered - killed).count());
}

TEST_F(RedisClusterStore, AManualFailoverDuringReadsLosesNoRead) {
  const ForestInfo info = PublishModel(120);
  ASSERT_GT(info.block_count, 0u);
  // A replica of a master that holds blocks but not the catalog.
  const int catalog = cluster_.MasterPortOf("pacset:{catalog}:current");
  int replica = -1, old_master = -1;
  for (size_t i = 0; i < cluster_.size() && replica < 0; ++i) {
    RawRedis r(cluster_.node(i).port());
    const std::string role = r.Command({"ROLE"});  // "slave\nHOST\nPORT\n..."
    if (role.rfind("slave", 0) != 0) continue;
    const int master = std::stoi(role.substr(role.find('\n', 6) + 1));
    if (master != catalog) {
      replica = cluster_.node(i).port();
      old_master = master;
    }
  }
  ASSERT_GT(replica, 0);
  ReadTally tally;
  ReadWhile(
      *store_, info,
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ASSERT_EQ(RawRedis(replica).Command({"CLUSTER", "FAILOVER"}), "OK");
        const auto deadline = Clock::now() + std::chrono::seconds(15);
        while (RawRedis(replica).Command({"ROLE"}).rfind("master", 0) != 0 &&
               Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // reads after the switch
      },
      &tally);
  EXPECT_EQ(RawRedis(replica).Command({"ROLE"}).rfind("master", 0), 0u);
  EXPECT_EQ(RawRedis(old_master).Command({"ROLE"}).rfind("slave", 0), 0u);
  EXPECT_GT(tally.ok.load(), 0u);
  ExpectAllReadableWithin(*store_, info, std::chrono::seconds(5));
  std::printf("    manual failover :%d -> :%d; %llu reads unavailable, %llu ok\n", old_master,
              replica, static_cast<unsigned long long>(tally.unavailable.load()),
              static_cast<unsigned long long>(tally.ok.load()));
}

TEST_F(RedisClusterStore, ABlockWriteFailsWhenNoReplicaAcknowledgesIt) {
  // Stop every replica: masters still count them as connected, but nothing
  // acknowledges a write, so the import must not be told its blocks are safe.
  std::vector<pid_t> stopped;
  for (size_t i = 0; i < cluster_.size(); ++i) {
    if (RawRedis(cluster_.node(i).port()).Command({"ROLE"}).rfind("slave", 0) == 0) {
      ::kill(cluster_.node(i).pid(), SIGSTOP);
      stopped.push_back(cluster_.node(i).pid());
    }
  }
  ASSERT_EQ(stopped.size(), 3u);
  Status s = WriteForest(*store_, "model", 4096, 10);
  for (pid_t p : stopped) ::kill(p, SIGCONT);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("no replica acknowledged"), std::string::npos) << s.ToString();
  EXPECT_EQ(store_->Lookup("model").status().code(), StatusCode::kNotFound);
  ASSERT_OK(WriteForest(*store_, "model", 4096, 10));  // replicas back
}

TEST(RedisClusterUri, SeedsDatabasesAndNonClusterServers) {
  StoreOptions o = Opts();
  Status s = OpenBlockStore("redis-cluster://127.0.0.1:1/0", o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("only database 0"), std::string::npos) << s.ToString();
  s = OpenBlockStore("redis-cluster://127.0.0.1:1,127.0.0.1:x", o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("'x' is not a port"), std::string::npos) << s.ToString();
  s = OpenBlockStore("redis-cluster://127.0.0.1:" + std::to_string(store_test::FreePort()), o)
          .status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();

  store_test::RedisServer plain;
  ASSERT_EQ(plain.Start(), "");
  s = OpenBlockStore("redis-cluster://127.0.0.1:" + std::to_string(plain.port()), o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("not a Redis Cluster node"), std::string::npos) << s.ToString();
}

TEST(RedisClusterUri, ADeadSeedIsSkippedAndBothSpellingsWork) {
  RedisCluster cluster;
  ASSERT_EQ(cluster.Start(3, 0), "");
  const std::string live = "127.0.0.1:" + std::to_string(cluster.node(1).port());
  const std::string dead = "127.0.0.1:" + std::to_string(store_test::FreePort());
  for (const std::string scheme : {"redis-cluster://", "redis+cluster://"}) {
    auto store = OpenBlockStore(scheme + dead + "," + live, Opts());
    ASSERT_TRUE(store.ok()) << scheme << ": " << store.status().ToString();
    ASSERT_OK(WriteForest(**store, "model", 4096, 20));
    auto st = (*store)->Stat();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->location, "cluster " + dead + "," + live);
    ASSERT_OK((*store)->Delete("model"));
  }
}

}  // namespace
}  // namespace pacset
