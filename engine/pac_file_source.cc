// The block source over a PacFile: how it reads (chosen when it opens),
// Ready, the pools its fetchers draw on, and a fetched block's check. Map of
// the source's files: engine/internal/pac_file_source.h; why it reads this
// way: engine/DESIGN.md, "Reading a mapped file".
#include "engine/internal/pac_file_source.h"

#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "util/file_io.h"

namespace pacset {
namespace internal {
namespace {

// True for a file on a FUSE mount (a pacsetfs mount among them). There an
// io_uring read is handed to the kernel's worker threads anyway, and the
// daemon would take one request's reads, all from one thread, for a
// sequential reader and read ahead for it: kAuto uses the read threads.
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
// gathers of 32, which beat one, two, six and eight (engine/DESIGN.md,
// "Through a pacsetfs mount").
constexpr size_t kMaxGatherBatch = 32;
constexpr uint32_t kGatherMaxInFlight = 4 * kMaxGatherBatch;

// Through a mount a sequential read of the whole region costs a FUSE request
// per window, while gathers fetch only the blocks the walks need: a request
// reads the region whole only once it has about as many walks as the region
// has blocks (engine/DESIGN.md, "Whole regions").
constexpr uint64_t kGatherSequentialReadWalksFactor = 1;

// A local file read through io_uring: one ring keeps this many bytes of
// blocks in flight per request, at least kDefaultMaxInFlight blocks (128 at
// 4 KiB, 32 from 16 KiB; engine/DESIGN.md, "Blocks in flight").
constexpr uint64_t kUringBytesInFlight = 512 << 10;

// Buffers for one request's reads in flight: at most this many bytes.
constexpr uint64_t kRingBufferBytes = 64 << 20;

}  // namespace

PacFileSource::PacFileSource(const PacFile& file, bool verify, uint32_t max_in_flight, BlockIo io)
    : file_(file),
      base_(file.data()),
      bs_(file.header().block_size),
      blocks_(file.header().block_count),
      seed_(file.header().block_seed()),
      verify_(verify),
      max_threads_(max_in_flight > 0 ? max_in_flight : kDefaultMaxInFlight),
      mapped_(file.fd() >= 0),
      ready_(new std::atomic<uint64_t>[(blocks_ + 63) / 64]) {
  for (uint64_t i = 0; i < (blocks_ + 63) / 64; ++i) ready_[i].store(0);
  const long page = sysconf(_SC_PAGESIZE);
  page_ = page > 0 ? static_cast<uint64_t>(page) : 4096;
  const bool gathers = io == BlockIo::kGatherFile || io == BlockIo::kAuto;  // kGatherFile: as kAuto
  if (mapped_ && (io == BlockIo::kUring || (gathers && !OnFuse(file.fd())))) {
    if (max_in_flight == 0)
      max_threads_ =
          static_cast<uint32_t>(std::max<uint64_t>(kDefaultMaxInFlight, kUringBytesInFlight / bs_));
    ring_depth_ = static_cast<uint32_t>(
        std::min<uint64_t>({max_threads_, 4096, std::max<uint64_t>(1, kRingBufferBytes / bs_)}));
    // One ring made now tells whether the kernel allows io_uring at all.
    if (auto ring = BlockRing::Make(ring_depth_, bs_)) {
      rings_.Give(std::move(ring));
      uring_ = true;
    } else if (max_in_flight == 0) {
      max_threads_ = kDefaultMaxInFlight;  // threads of preads instead
    }
  }
  // A forest file on pacsetfs: whole batches, each one ioctl of the file
  // itself (protocol/gather.h, version 2) or, from an older daemon, a write
  // and a read of its gather file.
  if (mapped_ && gathers && !uring_ && OnFuse(file.fd())) {
    if (io == BlockIo::kAuto) forest_gather_ = ForestGather::Open(file.fd(), file.name());
    std::unique_ptr<GatherChannel> channel;
    if (!forest_gather_) channel = GatherChannel::Open(file.name(), file.fd());
    if (forest_gather_ || channel) {
      if (channel) channels_.Give(std::move(channel));
      gather_ = true;
      if (max_in_flight == 0) max_threads_ = kGatherMaxInFlight;
      gather_batch_ = std::clamp<size_t>(max_threads_ / 2, 1, kMaxGatherBatch);
    }
  }
  // The read threads' jobs: a gather's blocks, or one block each.
  const uint64_t per_job = gather_ ? gather_batch_ : 1;
  const size_t jobs = std::max<size_t>(1, max_threads_ / per_job);
  buffers_ = std::make_unique<BufferPool>(per_job * bs_, 2 * jobs + 2);
  threads_ = std::make_unique<ReadThreads>(
      max_threads_,
      [this](const std::vector<uint64_t>& blocks, Completions* done) { RunJob(blocks, done); });
  if (gather_) {
    const size_t ready = std::min(jobs, kPooledRings);
    // Ready before the first request: a cold row's first gathers come one
    // after another (the top levels of the trees), and each waited for a
    // thread to start, a channel to open or a buffer to be faulted in.
    for (size_t i = 0; i < 2 * ready; ++i) buffers_->Give(AllocatePopulated(buffers_->bytes()));
    for (size_t i = channels_.size(); !forest_gather_ && i < ready; ++i)
      channels_.Give(GatherChannel::Open(file.name(), file.fd()));
    threads_->Start(ready);
  }
}

PacFileSource::~PacFileSource() { threads_.reset(); }

const char* PacFileSource::Ready(uint64_t b) {
  const char* p = base_ + b * bs_;
  if (IsReady(b)) return p;
  if (mapped_ && !Resident(b * bs_, bs_)) return nullptr;
  if (verify_ && !BlockTrailerMatches(p, bs_, b, seed_)) return nullptr;  // the fetch reports it
  MarkReady(b);
  return p;
}

const char* PacFileSource::io_name() const {
  if (!mapped_) return "memory";
  if (forest_gather_) return "gather";
  if (gather_) return "gather-file";
  return uring_ ? "io_uring" : "threads";
}

uint64_t PacFileSource::sequential_read_walks_factor() const {
  return gather_ ? kGatherSequentialReadWalksFactor : kSequentialReadWalksFactor;
}

std::unique_ptr<GatherChannel> PacFileSource::TakeChannel() {
  return channels_.TakeOr([this] { return GatherChannel::Open(file_.name(), file_.fd()); });
}

void PacFileSource::GiveBackChannel(std::unique_ptr<GatherChannel> c) {
  channels_.Give(std::move(c));
}

std::unique_ptr<BlockRing> PacFileSource::TakeRing() {
  return rings_.TakeOr([this] { return BlockRing::Make(ring_depth_, bs_); });
}

void PacFileSource::GiveBackRing(std::unique_ptr<BlockRing> ring) {
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

Status PacFileSource::Finish(uint64_t b, int res, char* buf) {
  Status s = res == static_cast<int>(bs_) ? Status::Ok() : file_.ReadBlock(b, buf);
  if (s.ok() && verify_) s = VerifyBlock(buf, bs_, b, seed_, file_.name());
  if (s.ok()) MarkReady(b);
  return s;
}

void PacFileSource::Submit(std::vector<uint64_t> blocks, const std::shared_ptr<Completions>& done) {
  if (!mapped_) return RunJob(blocks, done.get());  // in memory: nothing to wait for
  threads_->Submit(std::move(blocks), done);
}

void PacFileSource::RunJob(const std::vector<uint64_t>& blocks, Completions* done) {
  BufferPool::Buffer buf = buffers_->Take();
  bool gathered = false;
  if (forest_gather_) {
    gathered = forest_gather_->Gather(blocks.data(), blocks.size(), bs_, buf.get()).ok();
  } else if (gather_) {
    std::unique_ptr<GatherChannel> channel = TakeChannel();
    gathered = channel && channel->Gather(blocks.data(), blocks.size(), bs_, buf.get()).ok();
    if (channel) GiveBackChannel(std::move(channel));
  }
  std::vector<Status> status(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    status[i] = Finish(blocks[i], gathered ? static_cast<int>(bs_) : -1, buf.get() + i * bs_);
  done->Done(blocks, &status, std::move(buf));
}

}  // namespace internal

std::unique_ptr<BlockSource> NewPacFileSource(const PacFile& file, bool verify,
                                              uint32_t max_in_flight, BlockIo io) {
  return std::make_unique<internal::PacFileSource>(file, verify, max_in_flight, io);
}

}  // namespace pacset
