#include "engine/engine.h"

#include <algorithm>

#include "engine/internal/walk.h"
#include "engine/internal/warm_forest.h"
#include "engine/internal/warm_simd.h"
#include "util/parallel.h"

namespace pacset {
namespace {

// Notes every block a walk asks for (TouchedBlocks), of the source or of its
// fetchers' copies; the blocks come from the engine's own source. Ready
// stays plain: one bit per block.
class RecordingSource final : public BlockSource {
 public:
  explicit RecordingSource(BlockSource& inner)
      : inner_(inner), seen_((inner.block_count() + 63) / 64, 0) {}
  uint32_t block_size() const override { return inner_.block_size(); }
  uint64_t block_count() const override { return inner_.block_count(); }
  const char* Ready(uint64_t b) override {
    seen_[b / 64] |= uint64_t{1} << (b % 64);
    return inner_.Ready(b);
  }
  std::unique_ptr<BlockFetcher> NewFetcher() override {
    return std::make_unique<Fetcher>(this, inner_.NewFetcher());
  }
  const char* WarmImage(uint64_t, uint64_t, uint64_t, bool) override { return nullptr; }

  void Blocks(std::vector<uint64_t>* out) const {
    out->clear();
    for (uint64_t i = 0; i < seen_.size(); ++i)
      for (uint64_t bits = seen_[i]; bits; bits &= bits - 1)
        out->push_back(i * 64 + static_cast<uint64_t>(__builtin_ctzll(bits)));
  }

 private:
  // Notes the blocks walks read from the fetcher's copies too.
  class Fetcher final : public BlockFetcher {
   public:
    Fetcher(RecordingSource* source, std::unique_ptr<BlockFetcher> inner)
        : source_(source), inner_(std::move(inner)) {}
    void Fetch(uint64_t b) override { inner_->Fetch(b); }
    Status Wait(std::vector<uint64_t>* arrived) override { return inner_->Wait(arrived); }
    void Flush() override { inner_->Flush(); }
    bool Missing(uint64_t b) override { return inner_->Missing(b); }
    const char* Arrived(uint64_t b) override {
      const char* p = inner_->Arrived(b);
      if (p) source_->seen_[b / 64] |= uint64_t{1} << (b % 64);
      return p;
    }

   private:
    RecordingSource* source_;
    std::unique_ptr<BlockFetcher> inner_;
  };

  BlockSource& inner_;
  std::vector<uint64_t> seen_;
};

// The warm forest is built once warm requests have walked (rows x trees)
// this fraction of the file's nodes: building costs a few passes over every
// node, a walk touches depth-many nodes, so by then the copy has been paid
// about once over, and a few rows never wait for it.
constexpr uint64_t kWarmForestNodesPerWalk = 4;

// Rows per request of PredictAll/PredictLeaves with several threads: about
// eight requests per thread (BalancedChunk), each taken by the next free
// thread, so a slower core takes fewer (cores of a VM need not be equally
// fast: engine/DESIGN.md, "Threads"), and at least this many rows, so that
// a cold batch keeps many walks in flight per request.
constexpr size_t kMinChunkRows = 256;

}  // namespace

namespace internal {

Status FaultStatus(const PacFile& file, const WalkFault& fault) {
  const std::string tree = file.name() + ": tree " + std::to_string(fault.tree) + " ";
  switch (fault.code) {
    case WalkFault::kNone:
      return Status::Ok();
    case WalkFault::kBadReference:
      return Status::Corruption(tree +
                                "has a node reference outside the node region or across a block "
                                "trailer, or a cycle");
    case WalkFault::kBadFeature:
      return Status::Corruption(
          tree + "splits on a feature the model does not have (it has " +
          std::to_string(file.header().num_features) +
          "), or has a categorical node naming a split the file does not have (it has " +
          std::to_string(file.categorical_splits().size()) + ") or a reserved outside direction");
    case WalkFault::kBadLeaf:
      return Status::Corruption(tree +
                                "has a leaf outside the node region or a class out of range");
    case WalkFault::kLockstep:
      break;
  }
  return Status::Corruption(tree +
                            "has a reference outside the node region, a cycle, a feature or "
                            "class out of range");
}

}  // namespace internal

StatusOr<std::unique_ptr<PacEngine>> PacEngine::Open(const std::string& path,
                                                     const EngineOptions& options) {
  PACSET_ASSIGN_OR_RETURN(auto file, PacFile::Open(path));
  return FromFile(std::move(file), options);
}

StatusOr<std::unique_ptr<PacEngine>> PacEngine::FromFile(std::unique_ptr<PacFile> file,
                                                         const EngineOptions& options,
                                                         const SourceFactory& source) {
  std::unique_ptr<PacEngine> e(new PacEngine());
  const PacHeader& h = file->header();
  e->rule_.num_outputs = h.num_outputs;
  e->rule_.postprocess = static_cast<Postprocess>(h.postprocess);
  e->rule_.sigmoid_alpha = h.sigmoid_alpha;
  if (file->postprocess_params().size() == 2) {  // isolation score
    e->rule_.isolation_denominator = file->postprocess_params()[0];
    e->rule_.isolation_offset = file->postprocess_params()[1];
  }
  e->rule_.aggregation = static_cast<Aggregation>(h.aggregation);
  e->rule_.accumulate_precision = static_cast<Precision>(h.accumulate_precision);
  e->rule_.base_score = file->base_score();
  e->rule_.trees_per_output.assign(h.num_outputs, 0.0);
  for (const TreeRecord& t : file->trees()) {
    if (h.leaf_width > 1) {
      for (auto& c : e->rule_.trees_per_output) c += 1;
    } else {
      e->rule_.trees_per_output[t.group] += 1;
    }
  }
  for (auto& c : e->rule_.trees_per_output) c = std::max(c, 1.0);
  e->options_ = options;
  if (Status s = internal::ResolveWarmIsa(options.warm_isa, &e->warm_isa_); !s.ok()) return s;
  e->source_ = source ? source(*file, options)
                      : NewPacFileSource(*file, options.verify_blocks, options.max_in_flight,
                                         options.block_io);
  if (e->options_.max_in_flight == 0)
    e->options_.max_in_flight = e->source_->default_max_in_flight();
  e->file_ = std::move(file);
  return e;
}

Status PacEngine::Run(internal::WalkJob& job) const {
  const PacHeader& h = file_->header();
  if (!job.rows32 && job.rows->num_cols != h.num_features)
    return Status::InvalidArgument("rows have " + std::to_string(job.rows->num_cols) +
                                   " columns, the model expects " + std::to_string(h.num_features));
  const size_t begin = job.begin, end = job.end;
  const int32_t* leaves = job.leaves;
  // Predictions touch node blocks; leaf ids also the leaf-id blocks after them.
  const uint64_t first = h.node_first_block;
  const uint64_t count = leaves ? h.block_count - first : h.node_block_count;
  const uint64_t walks = (end - begin) * h.num_trees;
  const bool read_missing = options_.sequential_reads && end - begin > 1 &&
                            walks * source_->sequential_read_walks_factor() >= count;
  if (const char* image = source_->WarmImage(first, count, walks, read_missing)) {
    counters_.warm.fetch_add(1, std::memory_order_relaxed);
    Status s;
    const internal::WarmForest* warm =
        leaves || !options_.warm_forest ? nullptr : WarmForestFor(image, walks, &s);
    PACSET_RETURN_IF_ERROR(s);
    uint64_t simd_rows = 0;
    job.simd_rows = &simd_rows;
    s = internal::WarmWalk(*file_, rule_, image, warm, warm_isa_, job);
    if (simd_rows) counters_.simd_rows.fetch_add(simd_rows, std::memory_order_relaxed);
    return s;
  }
  counters_.inflight.fetch_add(1, std::memory_order_relaxed);
  RowMatrix converted;  // float32 rows: the in-flight walk takes float64 ones
  if (job.rows32) {
    converted.num_rows = end - begin;
    converted.num_cols = h.num_features;
    converted.values.assign(job.rows32 + begin * h.num_features, job.rows32 + end * h.num_features);
    job.rows = &converted;
    job.rows32 = nullptr;
    job.begin = 0;
    job.end = end - begin;
  }
  internal::InFlightStats stats;
  Status s = internal::InFlightWalk(*file_, rule_, *source_, options_.max_in_flight, job, &stats);
  counters_.fetched.fetch_add(stats.blocks_fetched, std::memory_order_relaxed);
  counters_.waits.fetch_add(stats.waits, std::memory_order_relaxed);
  return s;
}

PacEngine::~PacEngine() = default;

const internal::WarmForest* PacEngine::WarmForestFor(const char* image, uint64_t walks,
                                                     Status* status) const {
  if (const internal::WarmForest* w = warm_forest_.load(std::memory_order_acquire)) return w;
  if (warm_forest_tried_.load(std::memory_order_acquire)) {
    // The build found the file's structure broken: every warm request says so.
    if (warm_forest_corrupt_.load(std::memory_order_acquire)) {
      MutexLock lock(&warm_forest_mu_);
      *status = warm_forest_error_;
    }
    return nullptr;
  }
  const uint64_t done = warm_walks_.fetch_add(walks, std::memory_order_relaxed) + walks;
  if (done * kWarmForestNodesPerWalk < file_->header().num_nodes) return nullptr;
  // One thread builds; the others walk the mapping meanwhile.
  if (!warm_forest_mu_.TryLock()) return nullptr;
  const internal::WarmForest* w = nullptr;
  if (!warm_forest_tried_.load(std::memory_order_relaxed)) {
    auto built = internal::BuildWarmForest(*file_, image);
    if (built.ok()) {
      warm_forest_owned_ = std::move(*built);
      w = warm_forest_owned_.get();
      warm_forest_tried_.store(true, std::memory_order_relaxed);
      warm_forest_.store(w, std::memory_order_release);
    } else if (built.status().IsCorruption()) {
      *status = built.status();
      warm_forest_error_ = built.status();
      warm_forest_corrupt_.store(true, std::memory_order_release);
      warm_forest_tried_.store(true, std::memory_order_release);
    } else {
      *status = built.status();  // a block unreadable now; try again next time
    }
  }
  warm_forest_mu_.Unlock();
  return w;
}

Status PacEngine::Predict(const RowMatrix& rows, size_t begin, size_t end, bool margin,
                          double* out) const {
  internal::WalkJob job;
  job.rows = &rows;
  job.begin = begin;
  job.end = end;
  job.margin = margin;
  job.out = out;
  return Run(job);
}

Status PacEngine::Predict(const float* rows, size_t n, bool margin, double* out) const {
  internal::WalkJob job;
  job.rows32 = rows;
  job.end = n;
  job.margin = margin;
  job.out = out;
  return Run(job);
}

Status PacEngine::PredictAll(const RowMatrix& rows, bool margin, int threads,
                             std::vector<double>* out) const {
  const uint32_t cols = num_columns(margin);
  out->assign(rows.num_rows * cols, 0.0);
  const size_t n = rows.num_rows;
  return ParallelForChunks(n, threads, BalancedChunk(n, threads, kMinChunkRows, n),
                           [&](size_t, size_t b, size_t e) {
                             return Predict(rows, b, e, margin, out->data() + b * cols);
                           });
}

Status PacEngine::PredictLeaves(const RowMatrix& rows, int threads,
                                std::vector<int32_t>* out) const {
  if (!file_->has_leaf_ids())
    return Status::NotSupported(
        file_->name() + ": packed without leaf ids; repack without --no-leaf-ids to use --leaf");
  const uint64_t T = num_trees();
  out->assign(rows.num_rows * T, 0);
  const size_t n = rows.num_rows;
  return ParallelForChunks(n, threads, BalancedChunk(n, threads, kMinChunkRows, n),
                           [&](size_t, size_t b, size_t e) {
                             internal::WalkJob job;
                             job.rows = &rows;
                             job.begin = b;
                             job.end = e;
                             job.leaves = out->data() + b * T;
                             return Run(job);
                           });
}

Status PacEngine::TouchedBlocks(const double* row, std::vector<uint64_t>* blocks) const {
  const PacHeader& h = file_->header();
  RowMatrix one;
  one.num_rows = 1;
  one.num_cols = h.num_features;
  one.values.assign(row, row + one.num_cols);
  internal::WalkJob job;
  job.rows = &one;
  job.begin = 0;
  job.end = 1;
  std::vector<double> out(num_columns(false));
  job.out = out.data();
  RecordingSource recorder(*source_);
  PACSET_RETURN_IF_ERROR(
      internal::InFlightWalk(*file_, rule_, recorder, options_.max_in_flight, job, nullptr));
  recorder.Blocks(blocks);
  return Status::Ok();
}

EngineStats PacEngine::stats() const {
  EngineStats s;
  s.warm_requests = counters_.warm.load(std::memory_order_relaxed);
  s.inflight_requests = counters_.inflight.load(std::memory_order_relaxed);
  s.blocks_fetched = counters_.fetched.load(std::memory_order_relaxed);
  s.fetch_waits = counters_.waits.load(std::memory_order_relaxed);
  if (const internal::WarmForest* w = warm_forest_.load(std::memory_order_acquire)) {
    s.warm_forest_bytes = w->bytes();
    s.warm_forest_build_seconds = w->build_seconds;
  }
  s.warm_isa = warm_isa_;
  s.warm_simd_rows = counters_.simd_rows.load(std::memory_order_relaxed);
  s.block_io = source_->io_name();
  return s;
}

}  // namespace pacset
