// The FUSE handlers through real libfuse, with a fake kernel: the session's
// /dev/fuse is replaced (fuse_session_custom_io) by this test, which feeds
// requests with fuse_session_process_buf and reads every reply libfuse
// writes. It can make a reply fail as an interrupted request's does
// (writev: ENOENT) and stand for any uid. The store is a real directory
// store behind FaultInjectionStore (and, where a test needs it, a wrapper
// that throws).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fs/internal/filesystem.h"
#include "protocol/gather.h"
#include "store/fault_injection_store.h"
#include "testkit/test_blocks.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using fs_internal::PacsetFs;
using store_test::WriteForest;

// Forwards to a real store; List throws while `throw_on_list` is set (a bug
// or an allocation failure anywhere below a handler).
class ThrowingStore final : public BlockStore {
 public:
  explicit ThrowingStore(std::unique_ptr<BlockStore> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> throw_on_list{false};
  StatusOr<std::unique_ptr<GenerationWriter>> BeginGeneration(const std::string& n, uint32_t bs,
                                                              uint64_t c) override {
    return inner_->BeginGeneration(n, bs, c);
  }
  StatusOr<ForestInfo> Lookup(const std::string& n) override { return inner_->Lookup(n); }
  StatusOr<std::vector<ForestInfo>> List() override {
    if (throw_on_list) throw std::runtime_error("injected failure");
    return inner_->List();
  }
  Status Delete(const std::string& n) override { return inner_->Delete(n); }
  Status Pin(const std::string& n, uint64_t g) override { return inner_->Pin(n, g); }
  Status Unpin(const std::string& n, uint64_t g) override { return inner_->Unpin(n, g); }
  StatusOr<uint64_t> CollectGarbage() override { return inner_->CollectGarbage(); }
  StatusOr<StoreStats> Stat() override { return inner_->Stat(); }

 protected:
  Status ReadBlocks(const ForestInfo& f, const std::vector<uint64_t>& blocks,
                    std::vector<std::string>* out) override {
    return inner_->MultiGet(f, blocks, out);
  }

 private:
  std::unique_ptr<BlockStore> inner_;
};

struct Reply {
  int error = 0;  // negative errno, as in fuse_out_header
  std::string payload;
};

class FakeKernel {
 public:
  explicit FakeKernel(PacsetFs* fs) {
    static const char* argv[] = {"pacsetfs-test"};
    args_ = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
    se_ = fuse_session_new(&args_, &PacsetFs::Ops(), sizeof(fuse_lowlevel_ops), fs);
    fuse_custom_io io{};
    io.writev = &FakeKernel::Writev;
    io.read = [](int, void*, size_t, void*) -> ssize_t { return 0; };
    current_ = this;
    EXPECT_EQ(fuse_session_custom_io(se_, &io, open("/dev/null", O_RDWR | O_CLOEXEC)), 0);
    fuse_init_in init{};
    init.major = FUSE_KERNEL_VERSION;
    init.minor = 31;
    init.max_readahead = 128 << 10;
    Send(FUSE_INIT, 0, &init, sizeof(init));
  }
  ~FakeKernel() {
    fuse_session_destroy(se_);
    fuse_opt_free_args(&args_);
    current_ = nullptr;
  }
  fuse_session* session() { return se_; }

  // Sends one request; returns its unique id. `uid` is the requester.
  uint64_t Send(uint32_t opcode, uint64_t nodeid, const void* arg, size_t arg_size,
                uint32_t uid = 0, const std::string& tail = "") {
    fuse_in_header h{};
    h.len = static_cast<uint32_t>(sizeof(h) + arg_size + tail.size());
    h.opcode = opcode;
    h.unique = ++unique_;
    h.nodeid = nodeid;
    h.uid = uid;
    h.pid = 1;
    std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
    msg.append(static_cast<const char*>(arg), arg_size);
    msg += tail;
    fuse_buf buf{};
    buf.size = msg.size();
    buf.mem = msg.data();
    fuse_session_process_buf(se_, &buf);
    return h.unique;
  }
  // The reply to `unique`, or none (error 1) if there was none yet.
  Reply ReplyTo(uint64_t unique) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = replies_.find(unique);
    return it == replies_.end() ? Reply{1, ""} : it->second.back();
  }
  size_t ReplyCount(uint64_t unique) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = replies_.find(unique);
    return it == replies_.end() ? 0 : it->second.size();
  }
  // The reply to the next request fails as when the request was interrupted.
  void FailNextReply() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = true;
  }

  uint64_t Lookup(const std::string& name, uint32_t uid = 0) {
    return Send(FUSE_LOOKUP, FUSE_ROOT_ID, "", 0, uid, name + std::string(1, '\0'));
  }
  uint64_t Open(uint64_t ino, int flags, uint32_t uid = 0) {
    fuse_open_in in{};
    in.flags = static_cast<uint32_t>(flags);
    return Send(FUSE_OPEN, ino, &in, sizeof(in), uid);
  }
  uint64_t Write(uint64_t ino, const std::string& data, uint32_t uid = 0, uint64_t fh = 0) {
    fuse_write_in in{};
    in.fh = fh;
    in.size = static_cast<uint32_t>(data.size());
    return Send(FUSE_WRITE, ino, &in, sizeof(in), uid, data);
  }
  uint64_t Read(uint64_t ino, uint64_t fh, uint64_t offset, uint32_t size) {
    fuse_read_in in{};
    in.fh = fh;
    in.offset = offset;
    in.size = size;
    return Send(FUSE_READ, ino, &in, sizeof(in));
  }
  uint64_t Release(uint64_t ino, uint64_t fh) {
    fuse_release_in in{};
    in.fh = fh;
    return Send(FUSE_RELEASE, ino, &in, sizeof(in));
  }
  void Forget(uint64_t ino, uint64_t n) {
    fuse_forget_in in{};
    in.nlookup = n;
    Send(FUSE_FORGET, ino, &in, sizeof(in));
  }
  static uint64_t OpenFh(const Reply& r) {
    fuse_open_out o{};
    std::memcpy(&o, r.payload.data(), std::min(sizeof(o), r.payload.size()));
    return o.fh;
  }
  static uint64_t EntryIno(const Reply& r) {
    fuse_entry_out e{};
    std::memcpy(&e, r.payload.data(), std::min(sizeof(e), r.payload.size()));
    return e.nodeid;
  }

 private:
  static ssize_t Writev(int, struct iovec* iov, int count, void*) {
    std::string msg;
    for (int i = 0; i < count; ++i) msg.append(static_cast<char*>(iov[i].iov_base), iov[i].iov_len);
    fuse_out_header h{};
    std::memcpy(&h, msg.data(), sizeof(h));
    if (h.unique == 0) return static_cast<ssize_t>(msg.size());  // a notification
    std::lock_guard<std::mutex> lock(current_->mu_);
    if (current_->fail_next_) {
      current_->fail_next_ = false;
      errno = ENOENT;
      return -1;
    }
    current_->replies_[h.unique].push_back({h.error, msg.substr(sizeof(h))});
    return static_cast<ssize_t>(msg.size());
  }

  static inline FakeKernel* current_ = nullptr;
  fuse_args args_{};  // libfuse may add arguments: freed with the session
  fuse_session* se_ = nullptr;
  uint64_t unique_ = 0;
  std::mutex mu_;  // replies come from request and notifier threads
  bool fail_next_ = false;
  std::map<uint64_t, std::vector<Reply>> replies_;
};

using fs_internal::kControlIno;
using fs_internal::kGatherIno;
using fs_internal::kStatsIno;

struct Fixture {
  std::unique_ptr<TempDir> dir = TempDir::Create("pacset-store").value();
  FaultInjectionStore* store = nullptr;  // owned by fs
  ThrowingStore* thrower = nullptr;      // owned by fs
  std::unique_ptr<PacsetFs> fs;
  std::unique_ptr<FakeKernel> kernel;

  explicit Fixture(MountOptions opts = {}) {
    auto real = OpenBlockStore("dir:" + dir->path() + "/store").value();
    EXPECT_TRUE(WriteForest(*real, "f", 4096, 4).ok());
    auto faults = std::make_unique<FaultInjectionStore>(std::move(real));
    store = faults.get();
    auto throwing = std::make_unique<ThrowingStore>(std::move(faults));
    thrower = throwing.get();
    opts.mountpoint = "/fake";
    opts.store_uri = "dir:" + dir->path() + "/store";
    fs = std::make_unique<PacsetFs>(opts);
    EXPECT_TRUE(fs->Start(std::move(throwing), nullptr).ok());
    kernel = std::make_unique<FakeKernel>(fs.get());
    fs->StartThreads(kernel->session());
  }
  ~Fixture() {
    fs->StopThreads();
    kernel.reset();
  }
};

TEST(FsHandlers, AnOpenWhoseReplyFailsGivesItsPinBack) {
  Fixture t;
  const Reply entry = t.kernel->ReplyTo(t.kernel->Lookup("f.pac"));
  ASSERT_EQ(entry.error, 0);
  const uint64_t ino = FakeKernel::EntryIno(entry);
  // The kernel gave up on this open (interrupted): it will send no release.
  t.kernel->FailNextReply();
  t.kernel->Open(ino, O_RDONLY);
  EXPECT_EQ(t.store->pin_calls(), 1u);
  t.kernel->Forget(ino, 1);  // the kernel forgets the inode: nothing may hold its pin
  EXPECT_EQ(t.store->pins_held(), 0) << "a failed open reply leaked its pin";
  // A normal open still pins.
  const uint64_t ino2 = FakeKernel::EntryIno(t.kernel->ReplyTo(t.kernel->Lookup("f.pac")));
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(ino2, O_RDONLY)).error, 0);
  EXPECT_EQ(t.store->pins_held(), 1);
}

// The page cache works in pages: a forest of 256-byte blocks (for `pacset
// predict --store`) is listed but cannot be opened through a mount.
TEST(FsHandlers, AForestWithBlocksSmallerThanAPageIsRefusedAtOpen) {
  Fixture t;
  ASSERT_TRUE(WriteForest(*t.store, "tiny", 256, 4).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the refresh throttle
  const Reply entry = t.kernel->ReplyTo(t.kernel->Lookup("tiny.pac"));
  ASSERT_EQ(entry.error, 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(FakeKernel::EntryIno(entry), O_RDONLY)).error,
            -ENOTSUP);
  EXPECT_EQ(t.store->pins_held(), 0) << "a refused open holds no pin";
  // Forests with page-sized blocks still open.
  const uint64_t ino = FakeKernel::EntryIno(t.kernel->ReplyTo(t.kernel->Lookup("f.pac")));
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(ino, O_RDONLY)).error, 0);
}

TEST(FsHandlers, AnExceptionBelowAHandlerBecomesOneEioReply) {
  Fixture t;
  t.thrower->throw_on_list = true;  // a lookup refreshes the catalog first,
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // unless it is younger than 100 ms
  const uint64_t u = t.kernel->Lookup("f.pac");
  EXPECT_EQ(t.kernel->ReplyCount(u), 1u);
  EXPECT_EQ(t.kernel->ReplyTo(u).error, -EIO);
  t.thrower->throw_on_list = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the refresh throttle
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Lookup("f.pac")).error, 0);
}

TEST(FsHandlers, OnlyTheMountingUserAndRootMayUseTheControlFile) {
  Fixture t;
  const uint32_t me = getuid();
  const uint32_t other = 12345;  // neither root nor the mounting user
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(kControlIno, O_WRONLY, other)).error, -EACCES);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Write(kControlIno, "drop *\n", other)).error, -EACCES);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(kControlIno, O_WRONLY, me)).error, 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(kControlIno, O_WRONLY, 0)).error, 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Write(kControlIno, "dropX\n", me)).error, -EINVAL);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Write(kControlIno, "drop nosuch\n", me)).error, -ENOENT);
  // A drop is replied by the notifier thread once done.
  const uint64_t u = t.kernel->Write(kControlIno, "drop *\n", me);
  for (int i = 0; i < 500 && t.kernel->ReplyCount(u) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(t.kernel->ReplyCount(u), 1u);
  EXPECT_EQ(t.kernel->ReplyTo(u).error, 0);
}

// Each open of the stats file reads the text it saw at open; the filesystem,
// not the kernel's release, owns it: at unmount the kernel may not have sent
// every release (LeakSanitizer, in the ASan build, checks that the handle
// left open below is freed with the filesystem).
TEST(FsHandlers, AStatsHandleIsReadUntilItsReleaseAndFreedWithTheFilesystem) {
  Fixture t;
  const Reply first = t.kernel->ReplyTo(t.kernel->Open(kStatsIno, O_RDONLY));
  ASSERT_EQ(first.error, 0);
  const Reply second = t.kernel->ReplyTo(t.kernel->Open(kStatsIno, O_RDONLY));
  ASSERT_EQ(second.error, 0);
  const uint64_t fh1 = FakeKernel::OpenFh(first), fh2 = FakeKernel::OpenFh(second);
  EXPECT_NE(fh1, fh2);
  const Reply text = t.kernel->ReplyTo(t.kernel->Read(kStatsIno, fh1, 0, 1 << 20));
  ASSERT_EQ(text.error, 0);
  EXPECT_EQ(text.payload.substr(0, 1), "{") << text.payload;
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Release(kStatsIno, fh1)).error, 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kStatsIno, fh1, 0, 4096)).error, -EBADF)
      << "a released handle is gone";
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kStatsIno, fh2, 0, 1 << 20)).payload.substr(0, 1),
            "{");
  // fh2 is never released: the Fixture ends the session with it open.
}

// The gather file (protocol/gather.h): a write names blocks of an open forest, a
// read returns them in request order, byte-identical to the store's blocks.
TEST(FsHandlers, TheGatherFileReturnsTheBlocksOfARequestInItsOrder) {
  Fixture t;
  const uint32_t other = 12345;  // any user may gather: mode 0666, like reading the forests
  const uint64_t ino = FakeKernel::EntryIno(t.kernel->ReplyTo(t.kernel->Lookup("f.pac")));
  const uint64_t gathered = 3;
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(kGatherIno, O_RDONLY, other)).error, -EACCES);
  const Reply open = t.kernel->ReplyTo(t.kernel->Open(kGatherIno, O_RDWR, other));
  ASSERT_EQ(open.error, 0);
  const uint64_t fh = FakeKernel::OpenFh(open);
  auto write = [&](const std::string& req) {
    return t.kernel->ReplyTo(t.kernel->Write(kGatherIno, req, other, fh)).error;
  };
  auto request = [](uint64_t inode, std::vector<uint64_t> blocks) {
    return EncodeGatherRequest(inode, blocks.data(), blocks.size());
  };
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 4096)).error, -EINVAL)
      << "a read before any request";
  EXPECT_EQ(write(request(ino, {0, 1})), -ESTALE) << "the forest is not open";
  ASSERT_EQ(t.kernel->ReplyTo(t.kernel->Open(ino, O_RDONLY)).error, 0);
  std::string bad = request(ino, {0, 1});
  EXPECT_EQ(write(bad.substr(0, bad.size() - 1)), -EINVAL) << "a size that is not the count's";
  bad[0] ^= 1;
  EXPECT_EQ(write(bad), -EINVAL) << "a bad magic";
  EXPECT_EQ(write(request(ino, {0, 4})), -EINVAL) << "block 4 of a 4-block forest";
  EXPECT_EQ(write(request(ino + 100, {0})), -ESTALE) << "not a forest inode";
  EXPECT_EQ(write(std::string(kGatherHeaderBytes, '\0')), -EINVAL);
  ASSERT_EQ(write(request(ino, {gathered, 0, gathered, 1})), 0);

  // The oracle: the blocks as the store itself returns them.
  const ForestInfo info = t.store->Lookup("f").value();
  std::string want;
  for (uint64_t b : {gathered, uint64_t{0}, gathered, uint64_t{1}}) {
    std::string block;
    ASSERT_TRUE(t.store->Get(info, b, &block).ok());
    want += block;
  }
  const Reply all = t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 1 << 20));
  ASSERT_EQ(all.error, 0);
  EXPECT_TRUE(all.payload == want) << "the four blocks in request order";
  const Reply part = t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 4096 + 100, 5000));
  ASSERT_EQ(part.error, 0);
  EXPECT_TRUE(part.payload == want.substr(4096 + 100, 5000)) << "a read inside the answer";
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 4 * 4096, 4096)).payload, "");

  // A block the store cannot give fails the read, never returns other bytes.
  t.store->CorruptBlock(2);
  ASSERT_EQ(write(request(ino, {0, 2})), 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 8192)).error, -EIO);
  t.store->ClearFaults();

  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Release(kGatherIno, fh)).error, 0);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 4096)).error, -EBADF);
}

// The kernel answers a pread of a long gather with several reads, one after
// another: the first one fetches the whole request, so its blocks are all in
// flight together and the later reads come from the cache. What it fetched
// ahead is best effort: a bad block there fails only the read that needs it.
TEST(FsHandlers, TheFirstReadOfAGatherFetchesTheWholeRequestAtOnce) {
  auto gather = [](Fixture& t, std::vector<uint64_t> blocks) {
    const uint64_t ino = FakeKernel::EntryIno(t.kernel->ReplyTo(t.kernel->Lookup("f.pac")));
    EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(ino, O_RDONLY)).error, 0);
    const uint64_t fh = FakeKernel::OpenFh(t.kernel->ReplyTo(t.kernel->Open(kGatherIno, O_RDWR)));
    const std::string req = EncodeGatherRequest(ino, blocks.data(), blocks.size());
    EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Write(kGatherIno, req, 0, fh)).error, 0);
    return fh;
  };
  auto block = [](Fixture& t, uint64_t b) {
    std::string out;
    EXPECT_TRUE(t.store->Get(t.store->Lookup("f").value(), b, &out).ok());
    return out;
  };
  {
    Fixture t;
    const std::string b3 = block(t, 3), rest_want = block(t, 1) + block(t, 2) + block(t, 0);
    const uint64_t fh = gather(t, {3, 1, 2, 0});
    const uint64_t before = t.store->blocks_read();
    const Reply first = t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 4096));
    ASSERT_EQ(first.error, 0);
    EXPECT_TRUE(first.payload == b3);
    EXPECT_EQ(t.store->blocks_read() - before, 4u) << "the first read fetches the whole request";
    const Reply rest = t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 4096, 3 * 4096));
    ASSERT_EQ(rest.error, 0);
    EXPECT_TRUE(rest.payload == rest_want);
    EXPECT_EQ(t.store->blocks_read() - before, 4u) << "the later read comes from the cache";
  }
  {
    Fixture t;
    const std::string b0 = block(t, 0);
    t.store->CorruptBlock(2);
    const uint64_t fh = gather(t, {0, 2});
    const Reply first = t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 0, 4096));
    ASSERT_EQ(first.error, 0) << "a bad block read ahead fails no read that does not need it";
    EXPECT_TRUE(first.payload == b0);
    EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Read(kGatherIno, fh, 4096, 4096)).error, -EIO);
  }
}

TEST(FsHandlers, AReadOnlyMountRefusesTheControlFile) {
  MountOptions o;
  o.read_only = true;
  Fixture t(o);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Open(kControlIno, O_WRONLY)).error, -EROFS);
  EXPECT_EQ(t.kernel->ReplyTo(t.kernel->Write(kControlIno, "drop *\n")).error, -EROFS);
}

}  // namespace
}  // namespace pacset
