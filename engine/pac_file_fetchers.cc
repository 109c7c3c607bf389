// The fetchers of a PacFileSource (engine/internal/pac_file_source.h): one
// per request, reading through a ring of the source's pool on the request's
// own thread, or through the source's read threads (a gather per batch on a
// pacsetfs mount, a pread per block elsewhere).
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "engine/internal/pac_file_source.h"

namespace pacset::internal {
namespace {

// Reads through the source's read threads: a pread per block, or, on a
// pacsetfs mount, a gather per batch (protocol/gather.h): Fetch collects,
// Flush (or Wait) hands what was collected to a read thread as one gather,
// so a batch's round trip runs while the caller walks what arrived before.
class ThreadsFetcher final : public BlockFetcher {
 public:
  explicit ThreadsFetcher(PacFileSource* source)
      : source_(source),
        done_(std::make_shared<Completions>(source->block_size())),
        arrived_(source->block_size(), 0, source->buffers()),
        snapshot_(source->Snapshot()) {}
  void Fetch(uint64_t b) override {
    ++outstanding_;
    if (source_->gather()) {
      pending_.push_back(b);
      if (pending_.size() >= source_->gather_batch()) Flush();
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
  std::vector<uint64_t> pending_;  // gather: fetched, not yet handed to the threads
  uint64_t outstanding_ = 0;
};

// Reads through one ring (from the source's pool) on the request's own
// thread: Fetch queues, Wait submits everything queued and reaps what
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
      // reads through the read threads instead.
      if (!ring_) threads_ = std::make_unique<ThreadsFetcher>(source_);
    }
    if (threads_) return threads_->Fetch(b);
    ++outstanding_;
    if (ring_->Full()) {
      backlog_.push_back(b);
    } else {
      ring_->Queue(source_->file().fd(), b, b * source_->block_size());
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
    const uint32_t bs = source_->block_size();
    Status first_error;
    while (arrived->size() == had && first_error.ok()) {
      const int r = ring_->Submit(/*wait=*/true);
      if (r < 0) {
        return Status::IOError(source_->file().name() + ": io_uring: " + std::strerror(-r));
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
        ring_->Queue(source_->file().fd(), backlog_.front(), backlog_.front() * bs);
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
  std::unique_ptr<BlockRing> ring_;
  std::unique_ptr<BlockFetcher> threads_;  // when no ring could be had
  std::deque<uint64_t> backlog_;
  uint64_t outstanding_ = 0;
};

}  // namespace

std::unique_ptr<BlockFetcher> PacFileSource::NewFetcher() {
  if (uring_) return std::make_unique<UringFetcher>(this);
  return std::make_unique<ThreadsFetcher>(this);
}

}  // namespace pacset::internal
