#include "util/uring_reads.h"

#include <liburing.h>

#include <cerrno>

namespace pacset {
namespace {

constexpr unsigned kDepth = 64;

// The calling thread's ring, made at its first call.
struct ThreadRing {
  io_uring ring{};
  bool live = false;
  bool refused = false;
  ~ThreadRing() {
    if (live) io_uring_queue_exit(&ring);
  }
  void Refuse() {
    if (live) io_uring_queue_exit(&ring);
    live = false;
    refused = true;
  }
  io_uring* Get() {
    if (!live && !refused) {
      live = io_uring_queue_init(kDepth, &ring, 0) == 0;
      refused = !live;
    }
    return live ? &ring : nullptr;
  }
};

thread_local ThreadRing t_ring;

}  // namespace

bool UringAvailable() { return t_ring.Get() != nullptr; }

bool UringReadAll(const int* fds, const uint64_t* offsets, const uint32_t* lens, char* const* bufs,
                  size_t n, int* res) {
  ThreadRing& tr = t_ring;
  io_uring* ring = tr.Get();
  if (!ring) return false;
  // Up to kDepth reads in flight; each completion makes room for the next
  // read at once (a batch does not wait for its slowest read before the
  // next ones start).
  size_t queued = 0, in_flight = 0, done = 0;
  while (done < n) {
    for (; queued < n && in_flight < kDepth; ++queued, ++in_flight) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: at most kDepth in flight
      io_uring_prep_read(sqe, fds[queued], bufs[queued], lens[queued], offsets[queued]);
      io_uring_sqe_set_data64(sqe, queued);
    }
    int r;
    do r = io_uring_submit_and_wait(ring, 1);
    while (r == -EINTR);
    if (r < 0) {
      // The kernel took none of the new ones (an error comes before any is
      // consumed): drop the ring, which cancels what is still in flight.
      tr.Refuse();
      return false;
    }
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      res[io_uring_cqe_get_data64(cqe)] = cqe->res;
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    in_flight -= seen;
    done += seen;
  }
  return true;
}

}  // namespace pacset
