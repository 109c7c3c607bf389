// The bundled inference engine for .pac files.
//
// It touches only the blocks a row's paths go through (plus the metadata at
// open), so on a pacsetfs mount or a cold disk a prediction reads a few
// blocks instead of the whole model. Results are bit-identical to the
// in-memory predictor (model/predict.h) for every layout, block size and bin
// depth, whichever way the blocks arrive.
//
// Two walks, one result:
//  - in flight (cold): every (row, tree) walk of a request advances until its
//    next block is not in memory; the blocks of all waiting walks are read at
//    once (up to EngineOptions::max_in_flight) and each walk continues as its
//    block arrives. A cold row thus costs a few rounds of parallel reads, not
//    one read per block (engine/block_source.h, engine/inflight_walk.cc).
//  - warm: once every block is in memory and verified, rows walk the mapping
//    several at a time with no per-node residency checks (engine/warm_walk.cc);
//    once warm requests have walked about as many nodes as the file has, the
//    request that crosses that line copies the nodes, checked once, into a
//    compact private array (engine/internal/warm_forest.h) that later warm
//    requests walk with no per-node checks at all — with AVX-512 or AVX2
//    gathers, 64 rows through a tree at once, when the CPU has them
//    (engine/internal/warm_simd.h; chosen at run time, the build needs only
//    the baseline instruction set). A cold or small first request never
//    waits for that copy.
//
// Safety: every block is verified (checksum and index in its trailer) the
// first time it is used, unless EngineOptions::verify_blocks is off; every
// reference is checked before it is followed (inside the node region, not
// across a block trailer, known kind, feature in range, no path longer than
// the header's max depth). A corrupt or hostile file gives kCorruption, never
// an out-of-bounds read or a wrong prediction from a corrupt block; a block
// that cannot be read (EIO on a mount, a file truncated under us) gives
// kIOError naming the block.
//
// Thread-safety: a PacEngine is immutable after Open except for internal
// caches; Predict may be called from many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_source.h"
#include "layout/pac_file.h"
#include "model/output.h"
#include "util/mutex.h"
#include "util/row_matrix.h"
#include "util/status.h"

namespace pacset {
namespace internal {
struct WalkJob;
struct WarmForest;
}  // namespace internal

// Instruction sets of the warm loop (engine/internal/warm_simd.h), narrowest
// first. Every one gives the same bits.
enum class WarmIsa : uint8_t { kAuto, kScalar, kAvx2, kAvx512 };
const char* WarmIsaName(WarmIsa isa);

struct EngineOptions {
  // Verify each block (checksum and index) the first time it is used, once
  // per block. Costs a hash of each block once; through a pacsetfs mount the
  // daemon has verified the block too, and checking again is as cheap.
  bool verify_blocks = true;
  // Most blocks read at once by one request waiting for blocks (and I/O
  // threads per engine); 0: the block source's default
  // (BlockSource::default_max_in_flight: for a local file 512 KiB of blocks,
  // at least 32, through io_uring, else 32; 128 through a pacsetfs mount,
  // four gathers of 32 at once; engine/DESIGN.md, "Blocks in flight").
  uint32_t max_in_flight = 0;
  // How a mapped file's missing blocks are read (engine/block_source.h):
  // io_uring where the kernel allows it, else a pool of pread threads.
  BlockIo block_io = BlockIo::kAuto;
  // A request of several rows that walks many trees (at least one per 8
  // node blocks) reads the whole node region in large sequential reads,
  // cheaper than that many random ones. Off: every request reads only the
  // blocks its walks need (what a per-request trace should see).
  bool sequential_reads = true;
  // Build the warm forest (engine/internal/warm_forest.h) once warm requests
  // have done enough work. Off: warm requests always walk the mapping with
  // per-node checks (tests compare the two walks).
  bool warm_forest = true;
  // The widest instructions the warm loop over the warm forest may use.
  // kAuto: the widest this CPU has, capped by the environment variable
  // PACSET_ISA (scalar, avx2, avx512; unset, empty or auto: no cap) — any
  // other PACSET_ISA value makes the open fail with InvalidArgument; another
  // value here is capped by the CPU (tests run every path the machine has).
  WarmIsa warm_isa = WarmIsa::kAuto;
};

// What requests did so far (for --timing and benchmarks).
struct EngineStats {
  uint64_t warm_requests = 0;      // walked the warm image
  uint64_t inflight_requests = 0;  // walked in flight
  uint64_t blocks_fetched = 0;     // blocks read because no walk found them in memory
  uint64_t fetch_waits = 0;        // rounds of arrivals waited for
  // The warm forest (a validated copy of the nodes the warm loop walks,
  // built once when warm requests have done enough work): its size and the
  // time it took; 0 until built.
  uint64_t warm_forest_bytes = 0;
  double warm_forest_build_seconds = 0;
  // What EngineOptions::warm_isa resolved to on this machine (never kAuto),
  // and the rows its SIMD kernel walked (blocks of rows without NaN through a
  // warm forest that routes by the threshold alone; for a float64-input
  // forest, blocks whose every value float32 holds).
  WarmIsa warm_isa = WarmIsa::kScalar;
  uint64_t warm_simd_rows = 0;
  // How the block source reads (BlockSource::io_name).
  const char* block_io = "";
};

class PacEngine {
 public:
  ~PacEngine();
  // Makes the source of a file's blocks (default: NewPacFileSource). Tests
  // wrap the default one to delay, reorder, fail or count reads.
  using SourceFactory =
      std::function<std::unique_ptr<BlockSource>(const PacFile&, const EngineOptions&)>;

  static StatusOr<std::unique_ptr<PacEngine>> Open(const std::string& path,
                                                   const EngineOptions& options = {});
  static StatusOr<std::unique_ptr<PacEngine>> FromFile(std::unique_ptr<PacFile> file,
                                                       const EngineOptions& options = {},
                                                       const SourceFactory& source = nullptr);

  const PacFile& file() const { return *file_; }
  const OutputRule& output_rule() const { return rule_; }
  uint32_t num_features() const { return file_->header().num_features; }
  uint64_t num_trees() const { return file_->header().num_trees; }
  // True for XGBoost forests: outputs are float32 values.
  bool float32_outputs() const { return rule_.accumulate_precision == Precision::kFloat32; }
  uint32_t num_columns(bool margin) const {
    return margin ? rule_.num_outputs : rule_.num_prediction_columns();
  }

  // Predictions (or margins) for rows [begin, end) of `rows`, written to
  // out[(r - begin) * num_columns(margin) ...].
  Status Predict(const RowMatrix& rows, size_t begin, size_t end, bool margin, double* out) const;
  // The same for `n` rows of float32 values, row i at rows + i * num_features()
  // (a caller's float32 matrix: no float64 copy when the blocks are resident).
  Status Predict(const float* rows, size_t n, bool margin, double* out) const;
  // The whole matrix with `threads` threads; out is resized.
  Status PredictAll(const RowMatrix& rows, bool margin, int threads,
                    std::vector<double>* out) const;

  // Library leaf ids per tree (needs the file's leaf-id section).
  Status PredictLeaves(const RowMatrix& rows, int threads, std::vector<int32_t>* out) const;

  // The node-region blocks one row touches (sorted, unique); metadata blocks
  // read at open are blocks [0, header().node_first_block).
  Status TouchedBlocks(const double* row, std::vector<uint64_t>* blocks) const;

  EngineStats stats() const;

 private:
  struct Counters {
    std::atomic<uint64_t> warm{0}, inflight{0}, fetched{0}, waits{0}, simd_rows{0};
  };
  PacEngine() = default;
  // The warm forest once built (nullptr before, and for files that do not
  // qualify); `walks` is the request's size, counted towards building it.
  const internal::WarmForest* WarmForestFor(const char* image, uint64_t walks,
                                            Status* status) const;
  // Checks the job's width, then walks it warm or in flight.
  Status Run(internal::WalkJob& job) const;

  std::unique_ptr<PacFile> file_;
  std::unique_ptr<BlockSource> source_;
  OutputRule rule_;
  EngineOptions options_;
  WarmIsa warm_isa_ = WarmIsa::kScalar;  // options_.warm_isa resolved
  mutable Counters counters_;
  // The warm forest: built once by one thread (holding warm_forest_mu_),
  // published through warm_forest_ (release/acquire), never changed after.
  mutable std::atomic<uint64_t> warm_walks_{0};  // warm work so far
  mutable std::atomic<const internal::WarmForest*> warm_forest_{nullptr};
  mutable std::atomic<bool> warm_forest_tried_{false};
  // The build found the structure broken (FORMAT.md §5): warm requests fail
  // with warm_forest_error_ instead of building again.
  mutable std::atomic<bool> warm_forest_corrupt_{false};
  mutable Mutex warm_forest_mu_;
  mutable std::unique_ptr<internal::WarmForest> warm_forest_owned_ GUARDED_BY(warm_forest_mu_);
  mutable Status warm_forest_error_ GUARDED_BY(warm_forest_mu_);
};

}  // namespace pacset
