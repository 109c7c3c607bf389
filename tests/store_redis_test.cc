// redis:// specifics, against a real redis-server the tests start themselves:
// timeouts, an unreachable or restarted server, AUTH, SELECT, leases.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/block_store.h"
#include "testkit/free_port.h"
#include "testkit/raw_redis.h"
#include "testkit/redis_server.h"
#include "testkit/test_blocks.h"

namespace pacset {
namespace {

using store_test::MakeBlock;
using store_test::RawRedis;
using store_test::RedisServer;
using store_test::WriteForest;
using Clock = std::chrono::steady_clock;

StoreOptions Opts() {
  StoreOptions o;
  o.connect_timeout_ms = 500;
  o.io_timeout_ms = 700;
  o.lease_ms = 600;
  return o;
}

TEST(RedisStore, NothingListeningOnThePortIsUnavailableQuickly) {
  const int port = store_test::FreePort();
  const auto t0 = Clock::now();
  Status s = OpenBlockStore("redis://127.0.0.1:" + std::to_string(port), Opts()).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("cannot connect to redis 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << s.ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(RedisStore, AnUnroutableHostIsUnavailableWithinTheConnectTimeout) {
  // 10.255.255.1 either drops the SYN (the connect timeout ends the wait) or
  // has no route (immediate failure): bounded either way.
  const auto t0 = Clock::now();
  Status s = OpenBlockStore("redis://10.255.255.1:6379", Opts()).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2500));
}

TEST(RedisStore, RecoversWhenTheServerIsStoppedAndRestarted) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri(), Opts());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  uint64_t g1 = 0;
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 6, &g1).ok());
  auto info = (*store)->Lookup("model");
  ASSERT_TRUE(info.ok());

  server.ShutdownSave();  // stopped; its data is saved in its directory
  auto t0 = Clock::now();
  EXPECT_EQ((*store)->Lookup("model").status().code(), StatusCode::kUnavailable);
  std::string b;
  Status s = (*store)->Get(*info, 0, &b);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();  // not "corrupt"
  EXPECT_EQ((*store)->BeginGeneration("x", 4096, 1).status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));

  ASSERT_EQ(server.Restart(), "");
  // The next calls reconnect.
  auto again = (*store)->Lookup("model");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->generation, g1);
  for (uint64_t i = 0; i < 6; ++i) {
    ASSERT_TRUE((*store)->Get(*again, i, &b).ok()) << i;
    EXPECT_EQ(b, MakeBlock(4096, i, g1));
  }
  uint64_t g2 = 0;
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 2, &g2).ok());
  EXPECT_GT(g2, g1);
}

TEST(RedisStore, AHungServerFailsEachCallWithinTheCommandTimeout) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri(), Opts());
  ASSERT_TRUE(store.ok());
  uint64_t g1 = 0;
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 2, &g1).ok());
  auto info = (*store)->Lookup("model");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(::kill(server.pid(), SIGSTOP), 0);
  const auto t0 = Clock::now();
  std::string b;
  Status s = (*store)->Get(*info, 1, &b);
  const auto took = Clock::now() - t0;
  ::kill(server.pid(), SIGCONT);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_GE(took, std::chrono::milliseconds(600));
  // One retry on a fresh connection at most: two command timeouts plus a connect.
  EXPECT_LT(took, std::chrono::milliseconds(2500));
  ASSERT_TRUE((*store)->Get(*info, 1, &b).ok());
  EXPECT_EQ(b, MakeBlock(4096, 1, g1));
}

TEST(RedisStore, PasswordComesFromTheUriOrTheOption) {
  RedisServer server;
  ASSERT_EQ(server.Start("s3cret"), "");
  const std::string hostport = "127.0.0.1:" + std::to_string(server.port());
  auto with_uri = OpenBlockStore("redis://:s3cret@" + hostport, Opts());
  ASSERT_TRUE(with_uri.ok()) << with_uri.status().ToString();
  ASSERT_TRUE(WriteForest(**with_uri, "model", 4096, 1).ok());

  StoreOptions o = Opts();
  o.password = "s3cret";
  auto with_option = OpenBlockStore("redis://" + hostport, o);
  ASSERT_TRUE(with_option.ok()) << with_option.status().ToString();
  EXPECT_TRUE((*with_option)->Lookup("model").ok());

  Status wrong = OpenBlockStore("redis://:nope@" + hostport, Opts()).status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument) << wrong.ToString();
  EXPECT_NE(wrong.message().find("rejected the password"), std::string::npos) << wrong.ToString();
  Status none = OpenBlockStore("redis://" + hostport, Opts()).status();
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument) << none.ToString();
  EXPECT_NE(none.message().find("needs a password"), std::string::npos) << none.ToString();
}

TEST(RedisStore, TheDatabaseNumberInTheUriIsSelected) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri() + "/5", Opts());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 1).ok());
  EXPECT_EQ(RawRedis(server.port(), "", 5).Command({"HLEN", "pacset:catalog"}), "1");
  EXPECT_EQ(RawRedis(server.port()).Command({"HLEN", "pacset:catalog"}), "0");
  Status s = OpenBlockStore(server.uri() + "/99", Opts()).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("cannot select database 99"), std::string::npos) << s.ToString();
}

TEST(RedisStore, AllKeysAreUnderThePacsetNamespace) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri(), Opts());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 3).ok());
  ASSERT_TRUE((*store)->Pin("model", 1).ok());
  RawRedis raw(server.port());
  raw.Command({"SET", "someone-else", "x"});
  const std::string keys = raw.Command({"KEYS", "*"});
  size_t begin = 0;
  int n = 0;
  while (begin <= keys.size()) {
    const size_t end = keys.find('\n', begin);
    const std::string k = keys.substr(begin, end == std::string::npos ? end : end - begin);
    if (k != "someone-else") {
      EXPECT_EQ(k.rfind("pacset:", 0), 0u) << k;
      ++n;
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  EXPECT_GT(n, 5);
}

TEST(RedisStore, AnImportWhoseLeaseExpiredIsCollectedAndCannotPublish) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri(), Opts());
  ASSERT_TRUE(store.ok());
  auto w = (*store)->BeginGeneration("model", 4096, 2);
  ASSERT_TRUE(w.ok());
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE((*w)->Put(i, MakeBlock(4096, i, 1).data()).ok());
  // As if this process had been cut off for longer than the lease.
  RawRedis(server.port()).Command({"DEL", "pacset:lease:pending:model:1"});
  auto n = (*store)->CollectGarbage();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  Status s = (*w)->Publish(ForestInfo{});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ((*store)->Lookup("model").status().code(), StatusCode::kNotFound);
}

TEST(RedisStore, PinLeasesAreRefreshedWhileHeld) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  auto store = OpenBlockStore(server.uri(), Opts());
  ASSERT_TRUE(store.ok());
  uint64_t g1 = 0;
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 2, &g1).ok());
  ASSERT_TRUE((*store)->Pin("model", g1).ok());
  ASSERT_TRUE(WriteForest(**store, "model", 4096, 2).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 2.5 leases
  auto n = (*store)->CollectGarbage();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  ASSERT_TRUE((*store)->Unpin("model", g1).ok());
  n = (*store)->CollectGarbage();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
}

// Pipelined reads whose server hangs mid-reply (its replies then arrive on
// connections that gave up on them) or restarts: a connection that failed is
// never reused, so every read that succeeds returns its own blocks. Two
// forests have blocks of the same indices: a reply meant for another
// request would pass the trailer check (index and checksum) and only the
// payload tells it apart; a reply of another index would be kCorruption.
TEST(RedisStore, ReadsAcrossHangsAndRestartsReturnOnlyTheirOwnBlocks) {
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  StoreOptions o = Opts();
  o.io_timeout_ms = 150;
  o.connect_timeout_ms = 150;
  auto store = OpenBlockStore(server.uri(), o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr uint64_t kBlocks = 16;
  // Payload seeds 0 and 1: block i of "a" and block i of "b" differ.
  ASSERT_TRUE(WriteForest(**store, "a", 4096, kBlocks, nullptr, 0).ok());
  ASSERT_TRUE(WriteForest(**store, "b", 4096, kBlocks, nullptr, 1).ok());
  std::vector<ForestInfo> forests = {(*store)->Lookup("a").value(), (*store)->Lookup("b").value()};

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ok_reads{0}, failed_reads{0};
  std::mutex mu;
  std::vector<std::string> wrong;
  auto reader = [&](unsigned seed) {
    std::mt19937 rnd(seed);
    while (!stop.load()) {
      const uint64_t seed = rnd() % 2;
      const ForestInfo& f = forests[seed];
      std::vector<uint64_t> blocks;
      for (int i = 0, n = 1 + static_cast<int>(rnd() % 8); i < n; ++i)
        blocks.push_back(rnd() % kBlocks);
      std::vector<std::string> out;
      Status s = (*store)->MultiGet(f, blocks, &out);
      std::lock_guard<std::mutex> lock(mu);
      if (s.IsCorruption()) wrong.push_back(s.ToString());
      if (!s.ok()) {
        ++failed_reads;
        continue;
      }
      ++ok_reads;
      for (size_t i = 0; i < blocks.size(); ++i)
        if (out[i] != MakeBlock(4096, blocks[i], seed))
          wrong.push_back("forest " + f.name + " block " + std::to_string(blocks[i]) +
                          ": another request's block");
    }
  };
  // Stops and joins the readers however the test body ends (a failed ASSERT
  // returns early; joinable threads would abort the whole binary).
  struct Readers {
    std::atomic<bool>& stop;
    std::vector<std::thread> threads;
    ~Readers() { Join(); }
    void Join() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } readers{stop, {}};
  for (unsigned i = 0; i < 4; ++i) readers.threads.emplace_back(reader, i + 1);
  auto wait_for_reads = [&] {
    const uint64_t before = ok_reads.load();
    while (ok_reads.load() < before + 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  for (int round = 0; round < 6; ++round) {
    wait_for_reads();
    ASSERT_EQ(::kill(server.pid(), SIGSTOP), 0);  // replies stop mid-pipeline
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ASSERT_EQ(::kill(server.pid(), SIGCONT), 0);  // and arrive late
    wait_for_reads();
    if (round % 2 == 1) {
      server.ShutdownSave();
      ASSERT_EQ(server.Restart(), "");
    }
  }
  wait_for_reads();
  readers.Join();
  EXPECT_GT(failed_reads.load(), 0u) << "no read failed: the test shows nothing";
  for (size_t i = 0; i < std::min<size_t>(wrong.size(), 5); ++i) ADD_FAILURE() << wrong[i];
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " reads returned what another request asked for";
}

}  // namespace
}  // namespace pacset
