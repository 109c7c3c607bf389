// Many reads at once through an io_uring, from one thread: one system call
// submits them all (the block layer sends them to the device together) and
// their completions need no thread switch. On this project's
// paravirtualised VM a blocking pread per thread pays a wake-up, a device
// kick and an interrupt per read (fs/DESIGN.md, "Many reads at once").
//
// The one home of the project's io_uring code: ReadRing is a ring of reads
// that its owner keeps queueing into and reaping from (the engine's
// fetchers, engine/internal/block_ring.h); UringReadAll reads a whole batch
// and returns when every read has finished (the dir and RocksDB stores).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

struct io_uring;  // liburing's

namespace pacset {

// One io_uring for reads, with at most depth() of them queued or in flight.
// Not thread-safe: one thread at a time (it may be handed between threads).
class ReadRing {
 public:
  // Null when the kernel refuses io_uring (too old, a seccomp filter, memory
  // or limits now).
  static std::unique_ptr<ReadRing> Make(unsigned depth);
  // Destroying a ring with reads in flight asks the kernel to cancel them;
  // until they are reaped their buffers may still be written (wait for them
  // first when the buffers go away with the ring).
  ~ReadRing();
  ReadRing(const ReadRing&) = delete;
  ReadRing& operator=(const ReadRing&) = delete;

  unsigned depth() const { return depth_; }
  uint64_t queued() const { return queued_; }        // queued, not yet submitted
  uint64_t submitted() const { return submitted_; }  // submitted, not yet reaped
  bool Full() const { return queued_ + submitted_ >= depth_; }

  // Queues a read of `len` bytes at `offset` of `fd` into `buf`, sent with
  // the next Submit; `tag` comes back with its completion. Requires !Full().
  void Queue(int fd, char* buf, uint32_t len, uint64_t offset, uint64_t tag);
  // Queues one read of the bytes at `offset` of `fd` into iov[0..n) in turn
  // (a readv): adjacent blocks in one read, not one each. Its completion's
  // res is the bytes read into all of them. `iov` must stay valid until the
  // next Submit returns. Requires !Full().
  void QueueV(int fd, const iovec* iov, unsigned n, uint64_t offset, uint64_t tag);
  // Sends the queued reads; with `wait`, and anything queued or in flight,
  // also waits for one completion. Returns what io_uring_submit returns (the
  // reads it took, or -errno; an interrupted call is retried).
  int Submit(bool wait);

  struct Completion {
    uint64_t tag;
    int res;  // bytes read (short at the end of the file) or -errno
  };
  // Moves up to `max` finished reads to out[0..] without waiting; returns
  // how many.
  size_t Reap(Completion* out, size_t max);
  // Waits until a finished read is there to Reap. False when the ring is
  // broken: nothing more will arrive.
  bool Wait();

 private:
  explicit ReadRing(unsigned depth);

  const unsigned depth_;
  std::unique_ptr<io_uring> ring_;
  bool live_ = false;
  uint64_t queued_ = 0, submitted_ = 0;
};

// Whether the calling thread can have its ring (the kernel allows io_uring).
bool UringAvailable();

// Reads lens[i] bytes at offsets[i] of fds[i] into bufs[i] for every i < n: up to the
// ring's depth (64) in flight, each completion making room for the next read
// at once; res[i] is the bytes read (short at the end of the file) or
// -errno. False when the kernel refuses io_uring (too old, a seccomp
// filter) or the ring fails: then res means nothing and the caller reads
// another way. Each calling thread keeps one ring for its later calls.
bool UringReadAll(const int* fds, const uint64_t* offsets, const uint32_t* lens, char* const* bufs,
                  size_t n, int* res);

}  // namespace pacset
