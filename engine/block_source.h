// Where the engine's blocks come from: the seam between the in-flight
// traversal (engine/engine.h) and the I/O beneath it.
//
// The engine walks many (row, tree) paths at once. A walk that needs a block
// the source cannot give it now parks; the engine starts fetches for all the
// parked walks' blocks (at most EngineOptions::max_in_flight at a time) and
// resumes each walk as its block arrives. A source therefore answers two
// questions — "is block b here now?" (Ready) and "fetch these" (a
// BlockFetcher, one per request) — and says when its whole image may be
// walked without asking (WarmImage), which keeps the warm loop free of
// per-node checks.
//
// Implementations: a mapped or in-memory .pac file (NewPacFileSource, below);
// a block store with an in-process cache can be another (a RocksDB MultiGet
// or a Redis pipeline per Wait, blocks of any size).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "util/status.h"

namespace pacset {

class PacFile;

// Fetches for one request (one thread). Not thread-safe; destroying it with
// fetches outstanding is allowed and never waits for them (their results are
// dropped, their blocks may still become Ready).
class BlockFetcher {
 public:
  virtual ~BlockFetcher() = default;
  // Starts fetching block `b` (not Ready); returns without waiting for it.
  virtual void Fetch(uint64_t b) = 0;
  // Waits until at least one started fetch has finished and appends the
  // blocks that arrived (each Ready now) to `arrived`. A block that could not
  // be read or failed verification gives kIOError / kCorruption naming the
  // block; the request should then give up. Never waits forever on a local
  // file; a networked source bounds the wait by its timeout.
  virtual Status Wait(std::vector<uint64_t>* arrived) = 0;
  // Starts the fetches made since the last Wait now instead of at the next
  // Wait, so that they run while the caller works on what arrived.
  virtual void Flush() {}
  // The bytes of block `b` when it arrived at the last Wait and this fetcher
  // kept them (verified, as Ready's): a walk uses a block it just read without
  // touching the source's memory (on a mapped file each first touch of a
  // page is a page fault; engine/DESIGN.md, "Reading where the walks are").
  // Valid until the next Wait; nullptr otherwise, and always for a fetcher
  // that keeps nothing. Called where Ready is (no objects with destructors).
  virtual const char* Arrived(uint64_t b) {
    (void)b;
    return nullptr;
  }
  // True when this fetcher knows that block `b` is not in memory (from a
  // look it took during this request), so that the caller fetches it
  // without asking Ready; false when it does not know. Called where Ready is.
  virtual bool Missing(uint64_t b) {
    (void)b;
    return false;
  }
};

// Thread-safety: every method may be called from many threads at once.
class BlockSource {
 public:
  virtual ~BlockSource() = default;

  virtual uint32_t block_size() const = 0;
  virtual uint64_t block_count() const = 0;

  // The bytes of block `b` when they are in memory and verified (if the
  // source verifies), else nullptr; never waits for I/O. A null answer for a
  // block that is in memory but corrupt is fine: the fetch then reports it.
  // The pointer stays valid until the calling thread's next Fetch or Wait.
  // Called from code a SIGBUS may jump out of (engine/internal/sigbus.h):
  // implementations create no objects with destructors here.
  virtual const char* Ready(uint64_t b) = 0;

  virtual std::unique_ptr<BlockFetcher> NewFetcher() = 0;

  // The whole file at one address (block b at image + b * block_size), when
  // blocks [first, first + count) are all Ready and will stay so: the engine
  // then walks the image without asking Ready per block. `work` is the
  // caller's request size (rows x trees); a source may spend time in
  // proportion to it to get there (checking residency, verifying blocks).
  // With `read_missing` it may also read the blocks that are not in memory
  // (the caller expects to need most of them); without, it only promotes a
  // range that is already in memory. nullptr otherwise, e.g. for a source
  // without such an image.
  virtual const char* WarmImage(uint64_t first, uint64_t count, uint64_t work,
                                bool read_missing) = 0;

  // How fetches reach the blocks ("io_uring", "threads", "memory", a
  // store's name), for --timing and benchmarks.
  virtual const char* io_name() const { return "other"; }

  // The bound on blocks in flight per request when the caller sets none
  // (EngineOptions::max_in_flight 0): the one that suits this source.
  virtual uint32_t default_max_in_flight() const { return kDefaultMaxInFlight; }

  // For a local disk: deep enough to keep a device's queue busy, no deeper
  // than what helped a cold row (engine/DESIGN.md, "Blocks in flight").
  static constexpr uint32_t kDefaultMaxInFlight = 32;

  // A request of several rows reads the whole region its walks may touch
  // in large sequential reads (WarmImage with read_missing) when its walks
  // times this factor reach the region's blocks: where sequential reads are
  // cheap against random ones, a small factor's worth of walks pays. One
  // row always reads only what it needs.
  virtual uint64_t sequential_read_walks_factor() const { return kSequentialReadWalksFactor; }

  // For a local disk, where reading a region whole costs about what a few
  // rows' random reads do (engine/DESIGN.md, "Whole regions").
  static constexpr uint64_t kSequentialReadWalksFactor = 8;
};

// How a source over a mapped file reads the blocks it fetches.
enum class BlockIo {
  kAuto,        // io_uring when the kernel allows it, else kThreads; on a pacsetfs
                // mount its gathers (protocol/gather.h): on the forest file itself
                // (version 2) or, from an older daemon, through the gather file
  kThreads,     // a pool of threads doing pread
  kUring,       // one io_uring per request (kThreads if the kernel refuses it)
  kGatherFile,  // as kAuto, but on a pacsetfs mount always the gather file
                // (version 1: what an older engine does; for comparisons)
};

// A source over a PacFile (which must outlive it). A mapped file's fetches
// are reads into private buffers, at most `max_in_flight` at once per
// request (0: default_max_in_flight(), 32, or 128 through the gather file of
// a pacsetfs mount): by default through one io_uring per request (submitted together
// at each Wait, completions reaped in batches: no thread switch per block),
// else by a shared pool of that many threads doing pread (`io`: kThreads;
// a kernel that refuses io_uring, e.g. under a seccomp filter; or, with
// kAuto, a file on a FUSE mount such as pacsetfs). The page
// cache keeps what was read, so the mapping then sees it. A block is Ready
// once it was read or found resident (mincore) and, with `verify`, its
// trailer (checksum and index) matched — checked once per block per
// process. An in-memory file is always resident; `verify` checks each block
// once, the first time it is asked for. WarmImage reads missing blocks in
// large sequential reads.
std::unique_ptr<BlockSource> NewPacFileSource(const PacFile& file, bool verify,
                                              uint32_t max_in_flight, BlockIo io = BlockIo::kAuto);

}  // namespace pacset
