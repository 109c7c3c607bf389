// The block source over a PacFile (layout/block_source.h).
//
// Fetching: a pool of threads doing pread, one block per read, up to
// `io_threads` at once. Chosen by measurement (bench/cold_bench.py; the
// 682-tree forest at 4 KiB, one row's 1,044 blocks replayed cold on this
// machine's virtio disk): one at a time (page faults or pread) 107-127 ms;
// readahead(2) or MADV_WILLNEED with a window of 32 then waiting in order
// 30-40 ms; 32 threads doing pread 24-34 ms. Threads also keep their speed
// where readahead does nothing (a pacsetfs mount, whose readahead is
// limited, caps readahead(2) and MADV_WILLNEED at the mount's window), give
// each block's own error (EIO on a mount becomes a Status, not a SIGBUS)
// and verify a block in the read buffer before the mapping is touched.
// Reads go through the page cache, so the mapping sees the block after it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "layout/block_source.h"
#include "layout/pac_file.h"
#include "util/file_io.h"

namespace pacset {
namespace {

// Results of one fetcher's reads. Shared with the I/O threads, so a fetcher
// can go away while its reads are still running.
class Completions {
 public:
  void Done(uint64_t block, Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      arrived_.push_back(block);
    } else if (error_.ok()) {
      error_ = std::move(s);
    }
    cv_.notify_one();
  }

  Status Wait(std::vector<uint64_t>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !arrived_.empty() || !error_.ok(); });
    if (!error_.ok()) return error_;
    out->insert(out->end(), arrived_.begin(), arrived_.end());
    arrived_.clear();
    return Status::Ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> arrived_;
  Status error_;
};

class PacFileSource final : public BlockSource {
 public:
  PacFileSource(const PacFile& file, bool verify, uint32_t io_threads)
      : file_(file),
        base_(file.data()),
        bs_(file.header().block_size),
        blocks_(file.header().block_count),
        verify_(verify),
        max_threads_(std::max<uint32_t>(1, io_threads)),
        mapped_(file.fd() >= 0),
        ready_(new std::atomic<uint64_t>[(blocks_ + 63) / 64]) {
    for (uint64_t i = 0; i < (blocks_ + 63) / 64; ++i) ready_[i].store(0);
    const long page = sysconf(_SC_PAGESIZE);
    page_ = page > 0 ? static_cast<uint64_t>(page) : 4096;
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
    if (verify_ && !BlockTrailerMatches(p, bs_, b)) return nullptr;  // the fetch reports it
    MarkReady(b);
    return p;
  }

  std::unique_ptr<BlockFetcher> NewFetcher() override { return std::make_unique<Fetcher>(this); }

  const char* WarmImage(uint64_t first, uint64_t count, uint64_t work, bool read_missing) override;

 private:
  class Fetcher final : public BlockFetcher {
   public:
    explicit Fetcher(PacFileSource* source)
        : source_(source), done_(std::make_shared<Completions>()) {}
    void Fetch(uint64_t b) override {
      ++outstanding_;
      source_->Submit(b, done_);
    }
    Status Wait(std::vector<uint64_t>* arrived) override {
      if (outstanding_ == 0) return Status::Internal("waiting for blocks with no fetch started");
      const size_t had = arrived->size();
      PACSET_RETURN_IF_ERROR(done_->Wait(arrived));
      outstanding_ -= arrived->size() - had;
      return Status::Ok();
    }

   private:
    PacFileSource* source_;
    std::shared_ptr<Completions> done_;
    uint64_t outstanding_ = 0;
  };

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

  // Reads and verifies one block; the result goes to `done`.
  void ReadOne(uint64_t b, char* buf, Completions* done) {
    Status s = file_.ReadBlock(b, buf);
    if (s.ok() && verify_) s = VerifyBlock(buf, bs_, b, file_.name());
    if (s.ok()) MarkReady(b);
    done->Done(b, std::move(s));
  }

  void Submit(uint64_t b, const std::shared_ptr<Completions>& done) {
    if (!mapped_) {  // in memory: nothing to wait for
      std::string buf(bs_, '\0');
      ReadOne(b, buf.data(), done.get());
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(b, done);
    if (queue_.size() > idle_ && threads_.size() < max_threads_) {
      threads_.emplace_back([this] { IoThread(); });
    } else {
      cv_.notify_one();
    }
  }

  void IoThread() {
    std::string buf(bs_, '\0');
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (stop_) return;
      auto [b, done] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      ReadOne(b, buf.data(), done.get());
      done.reset();
      lock.lock();
    }
  }

  const PacFile& file_;
  const char* const base_;
  const uint32_t bs_;
  const uint64_t blocks_;
  const bool verify_;
  const uint32_t max_threads_;
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

  std::mutex mu_;  // guards the I/O queue and threads
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::shared_ptr<Completions>>> queue_;
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
      if (verify_ && !BlockTrailerMatches(bytes + i * bs_, bs_, b + i)) {
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
                                              uint32_t io_threads) {
  return std::make_unique<PacFileSource>(file, verify, io_threads);
}

}  // namespace pacset
