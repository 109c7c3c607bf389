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

bool UringReadAll(int fd, const uint64_t* offsets, uint32_t len, char* const* bufs, size_t n,
                  int* res) {
  ThreadRing& tr = t_ring;
  io_uring* ring = tr.Get();
  if (!ring) return false;
  for (size_t start = 0; start < n; start += kDepth) {
    const size_t end = n - start < kDepth ? n : start + kDepth;
    for (size_t i = start; i < end; ++i) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: at most kDepth queued
      io_uring_prep_read(sqe, fd, bufs[i], len, offsets[i]);
      io_uring_sqe_set_data64(sqe, i);
    }
    size_t left = end - start;
    int r;
    do r = io_uring_submit_and_wait(ring, 1);
    while (r == -EINTR);
    if (r < 0) {
      // The kernel took none of them (an error comes before any is
      // consumed): drop the ring and its queued entries, nothing in flight.
      tr.Refuse();
      return false;
    }
    while (left > 0) {
      io_uring_cqe* cqe;
      do r = io_uring_wait_cqe(ring, &cqe);
      while (r == -EINTR);
      if (r < 0) {
        tr.Refuse();  // closing the ring cancels what is still in flight
        return false;
      }
      res[io_uring_cqe_get_data64(cqe)] = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      --left;
    }
  }
  return true;
}

}  // namespace pacset
