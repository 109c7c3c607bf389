// The block source over a PacFile (engine/block_source.h).
//
// Fetching, chosen by measurement (bench/cold_bench.py; the 682-tree forest
// at 4 KiB, one row's ~1,000 blocks cold on this machine's virtio disk):
// one at a time (page faults or pread) 107-127 ms; readahead(2) or
// MADV_WILLNEED with a window of 32 then waiting in order 30-40 ms; 32
// threads doing pread 24-34 ms. Again on 2026-12-01, idle, 7 interleaved
// rounds (one row, 828 blocks): 32 threads 42.6 ms, one io_uring of depth
// 32 reaped by the request's thread 25.8 ms, a cold `cat` of the whole file
// 29.3 ms. On this paravirtualised VM every thread switch exits to the
// hypervisor, and the thread pool pays two per block. On 2026-12-02, with
// the walks on the fetched copies, one residency look per window, reads
// started before the walks go on and the ring's pages touched in advance:
// 8.9 ms [6.2-12.4] against a cold `cat` of 27.3 ms (9 rounds); depths of
// 64 and 128 took 11.3 and 13.9 ms against 10.5 and 9.4 ms at 32 in the
// same runs, so 32 stays the default (BlockSource::kDefaultMaxInFlight). Both read into
// private buffers: each block's own error (EIO on a mount becomes a Status,
// not a SIGBUS), and a block is verified before the mapping is touched.
// Reads go through the page cache, so the mapping sees the block after
// them; the walks that waited for a block read the fetcher's copy of it
// instead (BlockFetcher::Arrived), and whether a block is in memory is
// asked once per 4 MiB window per request (ResidencySnapshot), not per
// block: on this VM a page fault costs 4-7 us and a system call 1-2 us,
// which for a cold row's ~1,000 blocks took longer than its reads. A file
// on a pacsetfs mount is read through the mount's gather file instead
// (protocol/gather.h): a batch of blocks is one write and one read, where a pread
// per block is a FUSE request each; a batch lands in a pooled buffer that
// the walks read in place (BufferPool), and the source starts its gather
// threads and channels when it opens (a cold row through a running daemon
// 22.6 -> 15.7 ms, fs/DESIGN.md). The thread pool stays for other files on
// FUSE (see OnFuse), for kernels that refuse io_uring (seccomp filters in
// containers) and as an option.
#include <liburing.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "engine/block_source.h"
#include "layout/pac_file.h"
#include "protocol/gather.h"
#include "util/file_io.h"
#include "util/free_list.h"

namespace pacset {
namespace {

// Buffers for the thread pool's jobs, each with room for one job's blocks
// (a gather's, or one block), kept for the next jobs with their pages
// touched. A gather's 128 KiB freshly allocated cost 32 page faults to fill
// and, once freed, an unmap with a TLB shootdown (0.6 ms seen here); a cold
// row through a mount is ~30 gathers. Thread-safe.
class BufferPool {
 public:
  using Buffer = std::unique_ptr<char[]>;
  BufferPool(uint64_t bytes, size_t keep) : bytes_(bytes), free_(keep) {}
  // A kept buffer, or a new one (zeroed: its pages exist before a read).
  Buffer Take() {
    return free_.TakeOr([this] { return std::make_unique<char[]>(bytes_); });
  }
  void Give(Buffer b) { free_.Give(std::move(b)); }
  uint64_t bytes() const { return bytes_; }

 private:
  const uint64_t bytes_;
  FreeList<Buffer> free_;
};

// The blocks that arrived at a fetcher's last Wait (BlockFetcher::Arrived):
// a walk reads a block it just fetched from here, not through the mapping,
// whose first touch of each page is a page fault. Blocks are copied in
// (Add: a ring reuses its buffers) or arrive in the buffers they were read
// into (Adopt: the thread pool's), which go back to their pool at Clear.
class ArrivedBlocks {
 public:
  // Room for `capacity` copies now, its pages touched (zeroed): filling
  // fresh pages a cold request's first wait faulted in took ~1 ms here.
  // Adopted buffers go back to `pool`.
  ArrivedBlocks(uint32_t block_size, uint32_t capacity, BufferPool* pool = nullptr)
      : bs_(block_size), pool_(pool), bytes_(uint64_t{capacity} * block_size) {
    copies_.reserve(capacity);
    index_.reserve(capacity);
  }
  ~ArrivedBlocks() { Clear(); }
  ArrivedBlocks(const ArrivedBlocks&) = delete;
  ArrivedBlocks& operator=(const ArrivedBlocks&) = delete;

  void Clear() {
    copies_.clear();
    index_.clear();
    for (BufferPool::Buffer& b : adopted_) pool_->Give(std::move(b));
    adopted_.clear();
  }
  void Add(uint64_t b, const char* block) {
    const uint64_t at = copies_.size() * bs_;
    if (at + bs_ > bytes_.size()) bytes_.resize(std::max<uint64_t>(at + bs_, 2 * bytes_.size()));
    std::memcpy(bytes_.data() + at, block, bs_);
    copies_.emplace_back(b, at);
  }
  // Blocks at the given addresses, all inside `buffers` (from the pool),
  // which this keeps until Clear.
  void Adopt(const std::vector<std::pair<uint64_t, const char*>>& blocks,
             std::vector<BufferPool::Buffer>* buffers) {
    index_.insert(index_.end(), blocks.begin(), blocks.end());
    for (BufferPool::Buffer& b : *buffers) adopted_.push_back(std::move(b));
    buffers->clear();
  }
  // After the last Add or Adopt of a Wait; Find is valid from then on.
  void Seal() {
    for (const auto& [b, at] : copies_) index_.emplace_back(b, bytes_.data() + at);
    std::sort(index_.begin(), index_.end());
  }
  const char* Find(uint64_t b) const {
    auto it = std::lower_bound(index_.begin(), index_.end(),
                               std::pair<uint64_t, const char*>{b, nullptr});
    return it != index_.end() && it->first == b ? it->second : nullptr;
  }

 private:
  const uint32_t bs_;
  BufferPool* const pool_;
  std::vector<std::pair<uint64_t, uint64_t>> copies_;  // (block, offset in bytes_)
  std::vector<char> bytes_;
  std::vector<BufferPool::Buffer> adopted_;
  std::vector<std::pair<uint64_t, const char*>> index_;  // sorted at Seal
};

// Which blocks of a mapped file were in the page cache when a request first
// asked about their part of the file: one mincore call per window of
// kResidencyWindowBytes instead of one per block (a system call costs ~1-2
// us on this project's VM; a cold row asks about ~1,000 blocks). A request's
// own snapshot: a block read since by anyone is at worst fetched again (a
// read from the page cache), and one evicted since is read through the
// mapping as before (a page fault, guarded against SIGBUS).
constexpr uint64_t kResidencyWindowBytes = 4 << 20;

class ResidencySnapshot {
 public:
  ResidencySnapshot(const char* base, uint64_t file_size, uint32_t block_size, uint64_t page)
      : base_(base),
        size_(file_size),
        bs_(block_size),
        page_(page),
        window_blocks_(std::max<uint64_t>(1, kResidencyWindowBytes / block_size)) {}

  // True when block b was not wholly resident at the snapshot of its window.
  bool Missing(uint64_t b) {
    const uint64_t w = b / window_blocks_, i = b % window_blocks_;
    auto it = windows_.find(w);
    if (it == windows_.end()) it = windows_.emplace(w, Take(w)).first;
    return !((it->second[i / 64] >> (i % 64)) & 1);
  }

 private:
  // Bit i: block w * window_blocks_ + i was resident (all its pages). A
  // failed mincore leaves the blocks unknown, reported as resident (Ready
  // then asks about each itself).
  std::vector<uint64_t> Take(uint64_t w) const {
    std::vector<uint64_t> bits((window_blocks_ + 63) / 64, 0);
    const uint64_t b0 = w * window_blocks_;
    const uint64_t first = b0 * bs_ / page_ * page_;
    const uint64_t end = std::min(size_, (b0 + window_blocks_) * bs_);
    if (end <= b0 * bs_) return bits;
    std::vector<unsigned char> vec((end - first + page_ - 1) / page_);
    const bool known =
        mincore(const_cast<char*>(base_) + first, vec.size() * page_, vec.data()) == 0;
    for (uint64_t i = 0; i < window_blocks_ && (b0 + i) * bs_ < end; ++i) {
      const uint64_t lo = ((b0 + i) * bs_ - first) / page_;
      const uint64_t hi = (std::min(end, (b0 + i + 1) * bs_) - 1 - first) / page_;
      bool resident = true;
      for (uint64_t q = lo; q <= hi && resident && known; ++q) resident = vec[q] & 1;
      if (resident) bits[i / 64] |= uint64_t{1} << (i % 64);
    }
    return bits;
  }

  const char* const base_;
  const uint64_t size_;
  const uint32_t bs_;
  const uint64_t page_;
  const uint64_t window_blocks_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> windows_;
};

// Results of one fetcher's reads, in the buffers they were read into.
// Shared with the I/O threads, so a fetcher can go away while its reads are
// still running.
class Completions {
 public:
  explicit Completions(uint32_t block_size) : bs_(block_size) {}

  // The blocks of one job with status[i], block i read into `buf` at
  // i * block_size: under one lock and one wake-up.
  void Done(const std::vector<uint64_t>& blocks, std::vector<Status>* status,
            BufferPool::Buffer buf) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if ((*status)[i].ok()) {
        arrived_.emplace_back(blocks[i], buf.get() + i * bs_);
      } else if (error_.ok()) {
        error_ = std::move((*status)[i]);
      }
    }
    bufs_.push_back(std::move(buf));
    cv_.notify_one();
  }

  Status Wait(std::vector<uint64_t>* out, ArrivedBlocks* keep) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !arrived_.empty() || !error_.ok(); });
    if (!error_.ok()) return error_;
    for (const auto& a : arrived_) out->push_back(a.first);
    keep->Adopt(arrived_, &bufs_);
    arrived_.clear();
    return Status::Ok();
  }

 private:
  const uint32_t bs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<uint64_t, const char*>> arrived_;  // (block, its bytes in bufs_)
  std::vector<BufferPool::Buffer> bufs_;
  Status error_;
};

// One io_uring with a read buffer per entry: a request's reads in flight.
class Ring {
 public:
  // Null when the kernel refuses io_uring (too old, or a seccomp filter).
  static std::unique_ptr<Ring> Make(uint32_t depth, uint32_t block_size) {
    std::unique_ptr<Ring> r(new Ring(depth, block_size));
    if (io_uring_queue_init(depth, &r->ring_, 0) != 0) return nullptr;
    r->live_ = true;
    return r;
  }
  ~Ring() {
    if (live_) io_uring_queue_exit(&ring_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  bool Full() const { return free_.empty(); }
  // Copies of the blocks that arrived at the last Wait of the request that
  // holds this ring (pooled with it, so its pages are touched once).
  ArrivedBlocks& arrived() { return arrived_; }
  uint64_t submitted() const { return submitted_; }
  uint64_t queued() const { return queued_; }

  // Queues a read of block b (at `offset`, `len` bytes) into a free buffer;
  // sent with the next Submit. Requires !Full().
  void Queue(int fd, uint64_t b, uint64_t offset) {
    const uint32_t slot = free_.back();
    free_.pop_back();
    block_[slot] = b;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never null: one entry per buffer
    io_uring_prep_read(sqe, fd, Buffer(slot), bs_, offset);
    io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(static_cast<uintptr_t>(slot)));
    ++queued_;
  }
  // Sends the queued reads; with `wait`, also waits for one completion.
  int Submit(bool wait) {
    int r;
    do {
      r = wait && submitted_ + queued_ > 0 ? io_uring_submit_and_wait(&ring_, 1)
                                           : io_uring_submit(&ring_);
    } while (r == -EINTR);
    if (r > 0) {
      submitted_ += static_cast<uint64_t>(r);
      queued_ -= std::min<uint64_t>(queued_, static_cast<uint64_t>(r));
    }
    return r;
  }
  // Calls done(block, bytes read or -errno, buffer) for each finished read;
  // the buffer is free again after the call.
  template <typename Fn>
  void Reap(Fn done) {
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const auto slot =
          static_cast<uint32_t>(reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe)));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --submitted_;
      done(block_[slot], res, Buffer(slot));
      free_.push_back(slot);
    }
  }
  // Waits for every submitted read (their buffers are ours until then).
  void Drain() {
    while (submitted_ > 0) {
      io_uring_cqe* cqe;
      int r;
      do r = io_uring_wait_cqe(&ring_, &cqe);
      while (r == -EINTR);
      if (r != 0) return;  // the ring is broken; nothing more will arrive
      Reap([](uint64_t, int, char*) {});
    }
  }

 private:
  Ring(uint32_t depth, uint32_t block_size)
      // Zeroed now: the pages exist before the first reads. Otherwise the
      // kernel faults each in while it copies a read into it, which made a
      // cold request's first 32 reads take ~2 ms instead of ~0.6 ms here.
      : bs_(block_size),
        bufs_(new char[uint64_t{depth} * block_size]()),
        block_(depth),
        arrived_(block_size, depth) {
    for (uint32_t i = depth; i-- > 0;) free_.push_back(i);
  }
  char* Buffer(uint32_t slot) { return bufs_.get() + uint64_t{slot} * bs_; }

  const uint32_t bs_;
  io_uring ring_{};
  bool live_ = false;
  std::unique_ptr<char[]> bufs_;
  std::vector<uint64_t> block_;  // slot -> the block read into it
  std::vector<uint32_t> free_;
  uint64_t queued_ = 0, submitted_ = 0;
  ArrivedBlocks arrived_;
};

// True for a file on a FUSE mount (a pacsetfs mount among them). There an
// io_uring read is handed to the kernel's worker threads anyway, and the
// daemon would take one request's reads, all from one thread, for a
// sequential reader and read ahead for it: kAuto uses the thread pool.
bool OnFuse(int fd) {
  struct statfs st;
  return fstatfs(fd, &st) == 0 &&
         static_cast<uint64_t>(st.f_type) == 0x65735546;  // FUSE_SUPER_MAGIC
}

// Blocks per gather (protocol/gather.h) that a request sends as soon as it has
// them, without waiting for its Wait: half the blocks allowed in flight, at
// most kMaxGatherBatch, so that at least two gathers overlap and the daemon
// reads one batch while the engine walks another's blocks; and the bound on
// blocks in flight through a gather file when the caller sets none: four
// gathers of 32. With one gather of 32 at a time the disk idled during every
// walk; gathers of 16 cost a RocksDB store more per block than they saved
// (one cold row through a running daemon, medians of 15 alternating runs:
// dir 35.3 ms with one gather of 32, 30.7 with two of 16; RocksDB 50.4 with
// one of 32, 59.0 with two of 16). Once gathers landed in place (BufferPool),
// four of 32 beat two (dir 11.5 against 13.6 ms, 11 alternating runs; RocksDB
// 16.8 against 17.6, 9 runs); six and eight were no better (fs/DESIGN.md,
// "The gather file").
constexpr size_t kMaxGatherBatch = 32;
constexpr uint32_t kGatherMaxInFlight = 4 * kMaxGatherBatch;

// Through a mount a sequential read of the whole region costs a FUSE
// request per 128 KiB..1 MiB window (~150-190 ms for the 682-tree forest's
// 78 MiB, against ~50 ms locally), while gathers fetch only the blocks the
// walks need: 10 rows 61 ms gathered against 154 ms read whole (dir; RocksDB
// 83 against 160), 100 rows 327 against 193 (RocksDB 434 against 233), 5-7
// alternating runs through a running daemon. So a request reads the region
// whole only once it has about as many walks as the region has blocks (the
// 682-tree forest: from ~30 rows).
constexpr uint64_t kGatherSequentialReadWalksFactor = 1;

// Buffers for one request's reads in flight: at most this many bytes.
constexpr uint64_t kRingBufferBytes = 64 << 20;

class PacFileSource final : public BlockSource {
 public:
  PacFileSource(const PacFile& file, bool verify, uint32_t io_threads, BlockIo io)
      : file_(file),
        base_(file.data()),
        bs_(file.header().block_size),
        blocks_(file.header().block_count),
        seed_(file.header().block_seed()),
        verify_(verify),
        max_threads_(io_threads > 0 ? io_threads : kDefaultMaxInFlight),
        mapped_(file.fd() >= 0),
        ready_(new std::atomic<uint64_t>[(blocks_ + 63) / 64]) {
    for (uint64_t i = 0; i < (blocks_ + 63) / 64; ++i) ready_[i].store(0);
    const long page = sysconf(_SC_PAGESIZE);
    page_ = page > 0 ? static_cast<uint64_t>(page) : 4096;
    if (mapped_ && (io == BlockIo::kUring || (io == BlockIo::kAuto && !OnFuse(file.fd())))) {
      ring_depth_ = static_cast<uint32_t>(
          std::min<uint64_t>({max_threads_, 4096, std::max<uint64_t>(1, kRingBufferBytes / bs_)}));
      // One ring made now tells whether the kernel allows io_uring at all.
      if (auto ring = Ring::Make(ring_depth_, bs_)) {
        rings_.Give(std::move(ring));
        uring_ = true;
      }
    }
    // A forest file on pacsetfs: whole batches through its gather file.
    if (mapped_ && io == BlockIo::kAuto && !uring_ && OnFuse(file.fd())) {
      if (auto channel = GatherChannel::Open(file.name(), file.fd())) {
        channels_.Give(std::move(channel));
        gather_ = true;
        if (io_threads == 0) max_threads_ = kGatherMaxInFlight;
        gather_batch_ = std::clamp<size_t>(max_threads_ / 2, 1, kMaxGatherBatch);
      }
    }
    // The thread pool's jobs: a gather's blocks, or one block each.
    const uint64_t per_job = gather_ ? gather_batch_ : 1;
    const size_t jobs = std::max<size_t>(1, max_threads_ / per_job);
    buffers_ = std::make_unique<BufferPool>(per_job * bs_, 2 * jobs + 2);
    if (gather_) {
      const size_t ready = std::min(jobs, kPooledRings);
      // Ready before the first request: a cold row's first gathers come one
      // after another (the top levels of the trees), and each waited for a
      // thread to start, a channel to open or a buffer to be faulted in.
      for (size_t i = 0; i < 2 * ready; ++i)
        buffers_->Give(std::make_unique<char[]>(buffers_->bytes()));
      for (size_t i = channels_.size(); i < ready; ++i)
        channels_.Give(GatherChannel::Open(file.name(), file.fd()));
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < ready; ++i) threads_.emplace_back([this] { IoThread(); });
    }
  }

  ~PacFileSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  uint32_t block_size() const override { return bs_; }
  uint64_t block_count() const override { return blocks_; }

  const char* Ready(uint64_t b) override {
    const char* p = base_ + b * bs_;
    if (IsReady(b)) return p;
    if (mapped_ && !Resident(b * bs_, bs_)) return nullptr;
    if (verify_ && !BlockTrailerMatches(p, bs_, b, seed_)) return nullptr;  // the fetch reports it
    MarkReady(b);
    return p;
  }

  std::unique_ptr<BlockFetcher> NewFetcher() override {
    if (uring_) return std::make_unique<UringFetcher>(this);
    return std::make_unique<Fetcher>(this);
  }

  const char* io_name() const override {
    if (!mapped_) return "memory";
    if (gather_) return "gather";
    return uring_ ? "io_uring" : "threads";
  }

  const char* WarmImage(uint64_t first, uint64_t count, uint64_t work, bool read_missing) override;

  uint32_t default_max_in_flight() const override { return max_threads_; }
  uint64_t sequential_read_walks_factor() const override {
    return gather_ ? kGatherSequentialReadWalksFactor : kSequentialReadWalksFactor;
  }

 private:
  // Reads through the shared thread pool: a pread per block, or, on a
  // pacsetfs mount, a gather per batch (protocol/gather.h): Fetch collects, Flush
  // (or Wait) hands what was collected to a pool thread as one gather, so a
  // batch's round trip runs while the caller walks what arrived before.
  class Fetcher final : public BlockFetcher {
   public:
    explicit Fetcher(PacFileSource* source)
        : source_(source),
          done_(std::make_shared<Completions>(source->bs_)),
          arrived_(source->bs_, 0, source->buffers_.get()),
          snapshot_(source->Snapshot()) {}
    void Fetch(uint64_t b) override {
      ++outstanding_;
      if (source_->gather_) {
        pending_.push_back(b);
        if (pending_.size() >= source_->gather_batch_) Flush();
      } else {
        source_->Submit({b}, done_);
      }
    }
    void Flush() override {
      if (pending_.empty()) return;
      source_->Submit(std::move(pending_), done_);
      pending_.clear();
    }
    Status Wait(std::vector<uint64_t>* arrived) override {
      arrived_.Clear();
      if (outstanding_ == 0) return Status::Internal("waiting for blocks with no fetch started");
      Flush();
      const size_t had = arrived->size();
      PACSET_RETURN_IF_ERROR(done_->Wait(arrived, &arrived_));
      arrived_.Seal();
      outstanding_ -= arrived->size() - had;
      return Status::Ok();
    }
    const char* Arrived(uint64_t b) override { return arrived_.Find(b); }
    bool Missing(uint64_t b) override { return source_->Missing(b, &snapshot_); }

   private:
    PacFileSource* source_;
    std::shared_ptr<Completions> done_;
    ArrivedBlocks arrived_;
    ResidencySnapshot snapshot_;
    std::vector<uint64_t> pending_;  // gather: fetched, not yet handed to the pool
    uint64_t outstanding_ = 0;
  };

  // Reads through one io_uring (from the source's pool) on the request's
  // own thread: Fetch queues, Wait submits everything queued and reaps what
  // finished; reads beyond the ring's depth wait in `backlog_`.
  class UringFetcher final : public BlockFetcher {
   public:
    explicit UringFetcher(PacFileSource* source) : source_(source), snapshot_(source->Snapshot()) {}
    ~UringFetcher() override {
      if (ring_) source_->GiveBackRing(std::move(ring_));
    }
    void Fetch(uint64_t b) override {
      if (!ring_ && !threads_) {
        ring_ = source_->TakeRing();
        // The kernel refused a new ring now (memory, limits): this request
        // reads through the thread pool instead.
        if (!ring_) threads_ = std::make_unique<Fetcher>(source_);
      }
      if (threads_) return threads_->Fetch(b);
      ++outstanding_;
      if (ring_->Full()) {
        backlog_.push_back(b);
      } else {
        ring_->Queue(source_->file_.fd(), b, b * source_->bs_);
      }
    }
    void Flush() override {
      if (ring_ && ring_->queued() > 0) ring_->Submit(/*wait=*/false);  // errors: at Wait
    }
    const char* Arrived(uint64_t b) override {
      if (threads_) return threads_->Arrived(b);
      return ring_ ? ring_->arrived().Find(b) : nullptr;
    }
    bool Missing(uint64_t b) override { return source_->Missing(b, &snapshot_); }
    Status Wait(std::vector<uint64_t>* arrived) override {
      if (threads_) return threads_->Wait(arrived);
      if (outstanding_ == 0) return Status::Internal("waiting for blocks with no fetch started");
      ArrivedBlocks& copies = ring_->arrived();
      copies.Clear();
      const size_t had = arrived->size();
      Status first_error;
      while (arrived->size() == had && first_error.ok()) {
        const int r = ring_->Submit(/*wait=*/true);
        if (r < 0) {
          return Status::IOError(source_->file_.name() + ": io_uring: " + std::strerror(-r));
        }
        if (ring_->submitted() == 0) return Status::Internal("io_uring: no read in flight");
        ring_->Reap([&](uint64_t b, int res, char* buf) {
          Status s = source_->Finish(b, res, buf);
          --outstanding_;
          if (s.ok()) {
            arrived->push_back(b);
            copies.Add(b, buf);
          } else if (first_error.ok()) {
            first_error = std::move(s);
          }
        });
        // Freed buffers take the reads that waited for one; they start now,
        // while the walks go on with what arrived.
        while (!backlog_.empty() && !ring_->Full()) {
          ring_->Queue(source_->file_.fd(), backlog_.front(), backlog_.front() * source_->bs_);
          backlog_.pop_front();
        }
        ring_->Submit(/*wait=*/false);
      }
      copies.Seal();
      return first_error;
    }

   private:
    PacFileSource* source_;
    ResidencySnapshot snapshot_;
    std::unique_ptr<Ring> ring_;
    std::unique_ptr<BlockFetcher> threads_;  // when no ring could be had
    std::deque<uint64_t> backlog_;
    uint64_t outstanding_ = 0;
  };

  // A gather channel for a request: a pooled one or a new one (null when the
  // gather file cannot be opened now; the blocks are then read one by one).
  std::unique_ptr<GatherChannel> TakeChannel() {
    return channels_.TakeOr([this] { return GatherChannel::Open(file_.name(), file_.fd()); });
  }
  void GiveBackChannel(std::unique_ptr<GatherChannel> c) { channels_.Give(std::move(c)); }

  // A ring for a request: a pooled one, or a new one (null if the kernel
  // refuses it now).
  std::unique_ptr<Ring> TakeRing() {
    return rings_.TakeOr([this] { return Ring::Make(ring_depth_, bs_); });
  }
  // Back to the pool once its reads are done: a fetcher may be destroyed
  // with reads in flight, whose buffers the kernel still writes into.
  void GiveBackRing(std::unique_ptr<Ring> ring) {
    ring->Submit(/*wait=*/false);  // reads queued by a request that ended before waiting
    ring->Drain();
    if (ring->submitted() > 0) {  // the kernel may still write into its buffers: never freed
      (void)ring.release();
      return;
    }
    if (ring->queued() > 0) return;  // could not be sent: not reused
    ring->arrived().Clear();         // the next request starts with no copies
    rings_.Give(std::move(ring));
  }
  // Block b after a read of `res` bytes (or -errno) into `buf`: verified and
  // marked Ready. A short, failed or not yet made read (res < 0) is read
  // with pread, whose status names the block and the cause (a file
  // truncated since it was opened, EIO on a mount).
  Status Finish(uint64_t b, int res, char* buf) {
    Status s = res == static_cast<int>(bs_) ? Status::Ok() : file_.ReadBlock(b, buf);
    if (s.ok() && verify_) s = VerifyBlock(buf, bs_, b, seed_, file_.name());
    if (s.ok()) MarkReady(b);
    return s;
  }

  ResidencySnapshot Snapshot() const { return ResidencySnapshot(base_, file_.size(), bs_, page_); }
  // For a fetcher: block b is neither Ready nor was it resident at the
  // fetcher's snapshot of its part of the mapped file.
  bool Missing(uint64_t b, ResidencySnapshot* snapshot) const {
    return mapped_ && !IsReady(b) && snapshot->Missing(b);
  }

  bool IsReady(uint64_t b) const {
    return (ready_[b / 64].load(std::memory_order_acquire) >> (b % 64)) & 1;
  }
  void MarkReady(uint64_t b) {
    ready_[b / 64].fetch_or(uint64_t{1} << (b % 64), std::memory_order_release);
  }

  // True when every page of [offset, offset + len) of the mapping is in the
  // page cache. One mincore call; allocates nothing.
  bool Resident(uint64_t offset, uint64_t len) const {
    const uint64_t first = offset / page_ * page_;
    const uint64_t end = std::min(offset + len, file_.size());
    unsigned char vec[1024];
    for (uint64_t at = first; at < end;) {
      const uint64_t pages = std::min<uint64_t>(sizeof(vec), (end - at + page_ - 1) / page_);
      if (mincore(const_cast<char*>(base_) + at, pages * page_, vec) != 0) return false;
      for (uint64_t i = 0; i < pages; ++i)
        if (!(vec[i] & 1)) return false;
      at += pages * page_;
    }
    return true;
  }

  // Makes blocks [first, end) ready: reads them in large sequential reads
  // (from the page cache or the disk) and verifies them (if verify_); blocks
  // already resident need no read when nothing is verified. False on a read
  // error or a corrupt block (which a walk that needs it then reports).
  bool ReadRange(uint64_t first, uint64_t end);

  // Reads `blocks` for `done`: one job of the pool (a gather of all of them
  // on a pacsetfs mount, else a pread each), at once for an in-memory file.
  void Submit(std::vector<uint64_t> blocks, const std::shared_ptr<Completions>& done) {
    if (!mapped_) return RunJob(blocks, done.get());  // in memory: nothing to wait for
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(blocks), done});
    if (queue_.size() > idle_ && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { IoThread(); });
    } else {
      cv_.notify_one();
    }
  }

  // Reads `blocks` (at most a buffer's worth) into a buffer of the pool,
  // verifies each and hands them to `done`: through a gather channel of the
  // pool on a pacsetfs mount, where a failed gather is read again block by
  // block (each error names its block), else with a pread each.
  void RunJob(const std::vector<uint64_t>& blocks, Completions* done) {
    BufferPool::Buffer buf = buffers_->Take();
    bool gathered = false;
    if (gather_) {
      std::unique_ptr<GatherChannel> channel = TakeChannel();
      gathered = channel && channel->Gather(blocks.data(), blocks.size(), bs_, buf.get()).ok();
      if (channel) GiveBackChannel(std::move(channel));
    }
    std::vector<Status> status(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i)
      status[i] = Finish(blocks[i], gathered ? static_cast<int>(bs_) : -1, buf.get() + i * bs_);
    done->Done(blocks, &status, std::move(buf));
  }

  void IoThread() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (stop_) return;
      IoJob job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      RunJob(job.blocks, job.done.get());
      job.done.reset();
      lock.lock();
    }
  }

  const PacFile& file_;
  const char* const base_;
  const uint32_t bs_;
  const uint64_t blocks_;
  const uint64_t seed_;  // the file's block seed (PacHeader::block_seed)
  const bool verify_;
  uint32_t max_threads_;  // the bound on blocks in flight per request (set in the constructor)
  const bool mapped_;
  uint64_t page_ = 4096;
  std::unique_ptr<std::atomic<uint64_t>[]> ready_;  // bit b: block b verified and resident

  // The largest promoted range: all its blocks are ready. Ranges are
  // immutable once published and live as long as the source.
  struct Range {
    uint64_t first, end;
  };
  std::atomic<const Range*> warm_{nullptr};
  std::atomic<uint64_t> pending_work_{0};
  std::atomic<bool> corrupt_seen_{false};
  std::mutex warm_mu_;
  std::vector<std::unique_ptr<Range>> ranges_;  // guarded by warm_mu_

  // io_uring: the depth of each request's ring and the rings kept for the
  // next requests; uring_: rings are used (the kernel gave us the first).
  static constexpr size_t kPooledRings = 8;
  uint32_t ring_depth_ = 0;
  bool uring_ = false;
  FreeList<std::unique_ptr<Ring>> rings_{kPooledRings};
  // The gather file (a pacsetfs mount): gather_ when fetchers use it, and
  // the channels kept for the next requests.
  bool gather_ = false;
  size_t gather_batch_ = kMaxGatherBatch;
  FreeList<std::unique_ptr<GatherChannel>> channels_{kPooledRings};

  std::unique_ptr<BufferPool> buffers_;  // for the thread pool's jobs
  std::mutex mu_;                        // guards the I/O queue and threads
  std::condition_variable cv_;
  struct IoJob {
    std::vector<uint64_t> blocks;
    std::shared_ptr<Completions> done;
  };
  std::deque<IoJob> queue_;
  std::vector<std::thread> threads_;
  uint32_t idle_ = 0;
  bool stop_ = false;
};

// Requests may promote a range to the warm image when they add up to one
// walk per 1 KiB of the range: checking residency costs mincore (~20 ns a
// page) and verifying a hash (several GB/s) of the range, against ~300 ns
// per warm walk (682-tree forest), so the requests pay for it many times over.
constexpr uint64_t kPromoteBytesPerWalk = 1024;
constexpr uint64_t kBulkReadChunk = 4 << 20;

bool PacFileSource::ReadRange(uint64_t first, uint64_t end) {
  const uint64_t per_chunk = std::max<uint64_t>(1, kBulkReadChunk / bs_);
  std::string buf;
  for (uint64_t b = first; b < end; b += per_chunk) {
    const uint64_t n = std::min(per_chunk, end - b);
    bool all_ready = true;
    for (uint64_t i = 0; i < n && all_ready; ++i) all_ready = IsReady(b + i);
    if (all_ready) continue;
    const char* bytes = base_ + b * bs_;  // in memory: verify in place
    if (mapped_) {
      if (!verify_ && Resident(b * bs_, n * bs_)) {
        for (uint64_t i = 0; i < n; ++i) MarkReady(b + i);
        continue;
      }
      // From the page cache or the disk, into a buffer: a read error is a
      // status here, never a SIGBUS, and no page of the mapping is touched.
      buf.resize(n * bs_);
      if (!PreadFull(file_.fd(), buf.data(), buf.size(), b * bs_, file_.name()).ok()) return false;
      bytes = buf.data();
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (IsReady(b + i)) continue;
      if (verify_ && !BlockTrailerMatches(bytes + i * bs_, bs_, b + i, seed_)) {
        corrupt_seen_.store(true);  // a walk that needs the block reports it
        return false;
      }
      MarkReady(b + i);
    }
  }
  return true;
}

const char* PacFileSource::WarmImage(uint64_t first, uint64_t count, uint64_t work,
                                     bool read_missing) {
  const uint64_t end = first + count;
  auto promoted = [&] {
    const Range* warm = warm_.load(std::memory_order_acquire);
    return warm && warm->first <= first && warm->end >= end;
  };
  if (promoted()) return base_;
  if (corrupt_seen_.load(std::memory_order_relaxed)) return nullptr;
  // Requests add up: many one-row requests to a resident file promote too.
  const uint64_t pending = pending_work_.fetch_add(work) + work;
  if (!read_missing && pending * kPromoteBytesPerWalk < count * bs_) return nullptr;
  std::lock_guard<std::mutex> lock(warm_mu_);
  if (promoted()) return base_;
  pending_work_.store(0);
  if (mapped_ && !read_missing && !Resident(first * bs_, count * bs_)) return nullptr;
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * page_;
  if (mapped_ && count * bs_ > ram / 4) return nullptr;
  if (!ReadRange(first, end)) return nullptr;
  const Range* old = warm_.load();
  if (!old || end - first > old->end - old->first) {
    ranges_.push_back(std::make_unique<Range>(Range{first, end}));
    warm_.store(ranges_.back().get(), std::memory_order_release);
  }
  return base_;
}

}  // namespace

std::unique_ptr<BlockSource> NewPacFileSource(const PacFile& file, bool verify,
                                              uint32_t max_in_flight, BlockIo io) {
  return std::make_unique<PacFileSource>(file, verify, max_in_flight, io);
}

}  // namespace pacset
