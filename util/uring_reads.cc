#include "util/uring_reads.h"

#include <liburing.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace pacset {
namespace {

// Linux 6.6's flag; Debian 12's liburing (2.3) predates it.
constexpr unsigned kSetupNoSqArray = 1U << 16;  // IORING_SETUP_NO_SQARRAY

// Sets up `ring` with `depth` entries, without the submission queue's index
// array where the kernel allows it (Linux 6.6). While any ring with the array
// lives, the kernel keeps a static key on (io_key_has_sqarray); the first such
// ring after none has lived for about a second turns it on by patching the
// kernel's code, which interrupts every CPU (a 2026 kernel change defers the
// switch for that reason). On the 2-core VM the benchmarks run on,
// io_uring_setup took 0.08-0.30 ms then, 0.03-0.06 ms without the array
// (2026-12-08): a cost that a `pacset predict` started now and then (cron, a
// serverless call) pays every time, and that interrupts the daemon's cores too;
// machines with more CPUs pay more. liburing 2.3 (Debian 12) predates the flag
// and its io_uring_queue_init would write into the array, so the ring is set up
// here and mapped with io_uring_queue_mmap, which writes nothing into it;
// liburing fills the SQEs in ring order, which is what the kernel reads without
// an array. A kernel that refuses the flag gets the plain set-up.
int SetUpRing(unsigned depth, io_uring* ring) {
  io_uring_params p{};
  p.flags = kSetupNoSqArray;
  const int fd = static_cast<int>(syscall(__NR_io_uring_setup, depth, &p));
  if (fd >= 0) {
    if (io_uring_queue_mmap(fd, &p, ring) == 0) {
      ring->features = p.features;
      return 0;
    }
    close(fd);
  }
  return io_uring_queue_init(depth, ring, 0);
}

}  // namespace

ReadRing::ReadRing(unsigned depth) : depth_(depth), ring_(std::make_unique<io_uring>()) {}

std::unique_ptr<ReadRing> ReadRing::Make(unsigned depth) {
  std::unique_ptr<ReadRing> r(new ReadRing(depth));
  if (SetUpRing(depth, r->ring_.get()) != 0) return nullptr;
  r->live_ = true;
  return r;
}

ReadRing::~ReadRing() {
  if (live_) io_uring_queue_exit(ring_.get());
}

void ReadRing::Queue(int fd, char* buf, uint32_t len, uint64_t offset, uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());  // never null: at most depth_ queued
  io_uring_prep_read(sqe, fd, buf, len, offset);
  io_uring_sqe_set_data64(sqe, tag);
  ++queued_;
}

void ReadRing::QueueV(int fd, const iovec* iov, unsigned n, uint64_t offset, uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());  // never null: at most depth_ queued
  io_uring_prep_readv(sqe, fd, iov, n, offset);
  io_uring_sqe_set_data64(sqe, tag);
  ++queued_;
}

int ReadRing::Submit(bool wait) {
  int r;
  do {
    r = wait && submitted_ + queued_ > 0 ? io_uring_submit_and_wait(ring_.get(), 1)
                                         : io_uring_submit(ring_.get());
  } while (r == -EINTR);
  if (r > 0) {
    submitted_ += static_cast<uint64_t>(r);
    queued_ -= std::min<uint64_t>(queued_, static_cast<uint64_t>(r));
  }
  return r;
}

size_t ReadRing::Reap(Completion* out, size_t max) {
  size_t n = 0;
  io_uring_cqe* cqe;
  while (n < max && io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
    out[n++] = {io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(ring_.get(), cqe);
    --submitted_;
  }
  return n;
}

bool ReadRing::Wait() {
  io_uring_cqe* cqe;
  int r;
  do r = io_uring_wait_cqe(ring_.get(), &cqe);
  while (r == -EINTR);
  return r == 0;
}

namespace {

constexpr unsigned kDepth = 64;

// The calling thread's ring, made at its first call; once the kernel refused
// one (or one failed), the thread reads another way from then on.
struct ThreadRing {
  std::unique_ptr<ReadRing> ring;
  bool refused = false;
  void Refuse() {
    ring.reset();
    refused = true;
  }
  ReadRing* Get() {
    if (!ring && !refused) {
      ring = ReadRing::Make(kDepth);
      refused = !ring;
    }
    return ring.get();
  }
};

thread_local ThreadRing t_ring;

}  // namespace

bool UringAvailable() { return t_ring.Get() != nullptr; }

bool UringReadAll(const int* fds, const uint64_t* offsets, const uint32_t* lens, char* const* bufs,
                  size_t n, int* res) {
  ThreadRing& tr = t_ring;
  ReadRing* ring = tr.Get();
  if (!ring) return false;
  // Up to kDepth reads in flight; each completion makes room for the next
  // read at once (a batch does not wait for its slowest read before the
  // next ones start).
  ReadRing::Completion done[kDepth];
  size_t queued = 0, finished = 0;
  while (finished < n) {
    for (; queued < n && !ring->Full(); ++queued)
      ring->Queue(fds[queued], bufs[queued], lens[queued], offsets[queued], queued);
    if (ring->Submit(/*wait=*/true) < 0) {
      // The kernel took none of the new ones (an error comes before any is
      // consumed): drop the ring, which cancels what is still in flight.
      tr.Refuse();
      return false;
    }
    const size_t seen = ring->Reap(done, kDepth);
    for (size_t i = 0; i < seen; ++i) res[done[i].tag] = done[i].res;
    finished += seen;
  }
  return true;
}

}  // namespace pacset
