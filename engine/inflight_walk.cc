// The in-flight scheduler: many (row, tree) walks advance together; a walk
// whose next block is not Ready parks on it, the blocks of all parked walks
// are fetched at once (bounded), and each walk resumes as its block arrives.
//
// Per chunk of rows:
//   1. advance every active walk until it ends or parks (a plain loop over
//      block bytes, guarded against SIGBUS: engine/internal/sigbus.h);
//   2. start fetches for newly needed blocks, oldest first, up to the bound;
//   3. wait for arrivals; start fetches in the places they freed (before
//      walking on, so the reads overlap the walks); the walks parked on
//      them become active, reading the fetcher's copies of the blocks
//      (BlockFetcher::Arrived) where it keeps them; repeat.
// Leaf values are summed per row in tree order once every walk has ended,
// so the sums are bit-identical to the warm loop's whatever order blocks
// arrive in. Leaf records are copied while their block is Ready (a source
// may drop a block after the next Fetch or Wait).
#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "engine/block_source.h"
#include "engine/internal/sigbus.h"
#include "engine/internal/walk.h"

namespace pacset::internal {
namespace {

// At most this many walks (rows x trees) per chunk: bounds the walk state
// (40 bytes each) while keeping plenty of blocks to fetch at once.
constexpr size_t kChunkWalks = 1 << 16;
// At most this many leaf-record values per chunk.
constexpr size_t kChunkValues = 1 << 20;
// A request's first round asks for the bins' missing blocks, up to this many
// bytes of them, before any walk needs them (RunChunk).
constexpr uint64_t kEagerBinBytes = 16 << 20;

struct Walk {
  uint64_t ref;     // the next node; the leaf once done
  uint64_t parent;  // leaf ids: the node the walk left last
  uint64_t need;    // the block the walk is parked on
  uint32_t kind;
  uint32_t steps;
  uint32_t value;  // leaf ids: the id; leaf records: index of the values
  uint8_t left;    // leaf ids: the walk left `parent` to the left
  uint8_t done;
};

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
class Scheduler {
 public:
  Scheduler(const PacFile& file, const OutputRule& rule, BlockSource& source,
            uint32_t max_in_flight, InFlightStats* stats)
      : file_(file),
        h_(file.header()),
        rule_(rule),
        source_(source),
        max_in_flight_(std::max<uint32_t>(1, max_in_flight)),
        stats_(stats),
        cats_(CategoricalTableOf(file)) {}

  Status Run(const WalkJob& job) {
    const uint64_t T = h_.num_trees;
    size_t chunk = std::max<size_t>(1, kChunkWalks / std::max<uint64_t>(1, T));
    if (!kLeaves && h_.num_leaf_records > 0)
      chunk = std::min(chunk, std::max<size_t>(1, kChunkValues / (T * h_.leaf_width)));
    fetcher_ = source_.NewFetcher();
    pending_.assign((source_.block_count() + 63) / 64, 0);
    for (size_t r0 = job.begin; r0 < job.end; r0 += chunk)
      PACSET_RETURN_IF_ERROR(RunChunk(job, r0, std::min(job.end, r0 + chunk)));
    return Status::Ok();
  }

 private:
  Status RunChunk(const WalkJob& job, size_t r0, size_t r1);
  // Step 1: Advance in a SIGBUS-guarded region (kIOError after a SIGBUS).
  Status AdvanceGuarded(const RowMatrix& rows, size_t r0, const std::vector<uint32_t>& active,
                        uint32_t* parked, size_t* nparked, WalkFault* fault) {
    SigbusScope scope(file_.data(), file_.size(), h_.block_size);
    if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file_.name());
    scope.Arm();
    *fault = Advance(rows, r0, active.data(), active.size(), parked, nparked);
    scope.Disarm();
    return Status::Ok();
  }
  // Creates nothing with a destructor: a SIGBUS may jump out of it.
  WalkFault Advance(const RowMatrix& rows, size_t r0, const uint32_t* ids, size_t n,
                    uint32_t* parked, size_t* nparked);

  const PacFile& file_;
  const PacHeader& h_;
  const OutputRule& rule_;
  BlockSource& source_;
  const uint32_t max_in_flight_;
  InFlightStats* stats_;
  const CategoricalTable cats_;
  std::unique_ptr<BlockFetcher> fetcher_;
  std::vector<Walk> walks_;
  std::vector<float> x32_;
  std::vector<uint64_t> pending_;  // bit b: block b is waited for (queued or in flight)
  std::vector<double> values_;     // leaf records' values, copied when reached
  size_t values_used_ = 0;
};

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
WalkFault Scheduler<NodeT, kF32Input, Acc, kLeaves>::Advance(const RowMatrix& rows, size_t r0,
                                                             const uint32_t* ids, size_t n,
                                                             uint32_t* parked, size_t* nparked) {
  const uint64_t T = h_.num_trees;
  const uint32_t nf = h_.num_features, w = h_.leaf_width;
  const uint32_t record_bytes = LeafRecordBytes(w);
  const uint32_t max_steps = h_.max_depth + 1;
  const uint32_t shift = static_cast<uint32_t>(__builtin_ctz(h_.block_size));
  const uint64_t in_block = h_.block_size - 1;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t id = ids[k];
    Walk& wk = walks_[id];
    const uint64_t t = id % T;
    const size_t i = id / T;
    const float* xf = kF32Input ? x32_.data() + i * nf : nullptr;
    const double* xd = kF32Input ? nullptr : rows.row(r0 + i);
    const char* blk = nullptr;
    uint64_t cur = UINT64_MAX;
    // The block holding byte `offset`, if Ready; else park the walk on it.
    auto reach = [&](uint64_t offset) {
      const uint64_t b = offset >> shift;
      if (b != cur) {
        // A block this request already waits for: no need to ask the source.
        if ((b >> 6) < pending_.size() && (pending_[b >> 6] >> (b & 63)) & 1) {
          wk.need = b;
          parked[(*nparked)++] = id;
          return false;
        }
        blk = fetcher_->Arrived(b);
        if (!blk && !fetcher_->Missing(b)) blk = source_.Ready(b);
        if (!blk) {
          // Marked now, so the other walks that need it park without asking
          // the source again (a mincore call each, on a mapped file).
          if ((b >> 6) < pending_.size()) pending_[b >> 6] |= uint64_t{1} << (b & 63);
          wk.need = b;
          parked[(*nparked)++] = id;
          return false;
        }
        cur = b;
      }
      return true;
    };
    for (;;) {
      if (wk.kind == kNodeKind) {
        // Inside one payload, not just the region: `blk` may be a copy of
        // this block alone (BlockFetcher::Arrived, a store's cache), so a
        // node across the trailer would be read past its end.
        if (__builtin_expect(!file_.RefInNodeRegion(wk.ref, sizeof(NodeT)), 0))
          return {WalkFault::kBadReference, t};
        const uint64_t at = wk.ref;
        if (!reach(at * kUnit)) break;
        if (__builtin_expect(++wk.steps > max_steps, 0)) return {WalkFault::kBadReference, t};
        bool left = false;
        if (__builtin_expect(!Step<NodeT, kF32Input>(blk + ((at * kUnit) & in_block), nf, cats_, xf,
                                                     xd, wk.ref, wk.kind, &left),
                             0))
          return {WalkFault::kBadFeature, t};
        if constexpr (kLeaves) {
          wk.parent = at;
          wk.left = left;
        }
        continue;
      }
      if constexpr (kLeaves) {
        if (wk.steps > 0) {
          const uint64_t off = file_.LeafIdsOffset(wk.parent);
          if (!reach(off)) break;
          uint32_t leaf_ids[2];
          std::memcpy(leaf_ids, blk + (off & in_block), 8);
          wk.value = leaf_ids[wk.left ? 0 : 1];
        } else {
          wk.value = 0;  // a single-leaf tree
        }
      } else if (wk.kind == static_cast<uint32_t>(RefKind::kLeafRecord)) {
        if (__builtin_expect(!file_.RefInNodeRegion(wk.ref, record_bytes), 0))
          return {WalkFault::kBadLeaf, t};
        if (!reach(wk.ref * kUnit)) break;
        if (__builtin_expect(values_used_ + w > values_.size(), 0))
          return {WalkFault::kBadLeaf, t};  // more leaf records than the header says
        std::memcpy(values_.data() + values_used_, blk + ((wk.ref * kUnit) & in_block), 8ull * w);
        wk.value = static_cast<uint32_t>(values_used_);
        values_used_ += w;
      }
      wk.done = 1;
      break;
    }
  }
  return {};
}

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
Status Scheduler<NodeT, kF32Input, Acc, kLeaves>::RunChunk(const WalkJob& job, size_t r0,
                                                           size_t r1) {
  const RowMatrix& rows = *job.rows;
  const uint64_t T = h_.num_trees;
  const uint32_t nf = h_.num_features, K = h_.num_outputs, w = h_.leaf_width;
  const size_t nrows = r1 - r0, nwalks = nrows * T;
  const TreeRecord* trees = file_.trees().data();
  walks_.resize(nwalks);
  for (size_t id = 0; id < nwalks; ++id) {
    const TreeRecord& tr = trees[id % T];
    walks_[id] = Walk{tr.root, 0, 0, tr.root_kind, 0, 0, 0, 0};
  }
  if constexpr (kF32Input) {
    x32_.resize(nrows * nf);
    for (size_t i = 0; i < nrows; ++i)
      for (uint32_t f = 0; f < nf; ++f) x32_[i * nf + f] = static_cast<float>(rows.row(r0 + i)[f]);
  }
  values_used_ = 0;
  // Each walk copies at most one record; a file without records needs none.
  if (!kLeaves) values_.resize(h_.num_leaf_records > 0 ? nwalks * w : 0);

  std::vector<uint32_t> active(nwalks), parked(nwalks);
  std::iota(active.begin(), active.end(), 0u);
  std::unordered_map<uint64_t, std::vector<uint32_t>> waiting;  // block -> walks parked on it
  std::vector<uint64_t> queue;  // needed, not yet fetched (oldest first)
  size_t queue_head = 0, in_flight = 0;
  std::vector<uint64_t> arrived;
  // A request's first chunk asks for every missing block of the bins at once
  // (up to kEagerBinBytes): the bins hold the top levels of the trees striped
  // level by level (layout/FORMAT.md), so each row passes through nearly
  // every bin block, and walked level by level they would arrive over
  // several rounds of waiting instead of one (engine/DESIGN.md, "The bins
  // first").
  if (r0 == job.begin) {
    const uint64_t bins = std::min<uint64_t>(h_.bin_block_count, kEagerBinBytes / h_.block_size);
    for (uint64_t b = h_.node_first_block; b < h_.node_first_block + bins; ++b) {
      if (b >= source_.block_count() || !fetcher_->Missing(b)) continue;  // pending_'s bound
      waiting.try_emplace(b);
      queue.push_back(b);
      pending_[b >> 6] |= uint64_t{1} << (b & 63);
    }
  }
  auto top_up = [&] {
    for (; in_flight < max_in_flight_ && queue_head < queue.size(); ++queue_head, ++in_flight) {
      fetcher_->Fetch(queue[queue_head]);
      if (stats_) ++stats_->blocks_fetched;
    }
  };
  for (;;) {
    size_t nparked = 0;
    WalkFault fault;
    PACSET_RETURN_IF_ERROR(AdvanceGuarded(rows, r0, active, parked.data(), &nparked, &fault));
    PACSET_RETURN_IF_ERROR(FaultStatus(file_, fault));
    for (size_t k = 0; k < nparked; ++k) {
      const uint64_t b = walks_[parked[k]].need;
      if (std::find(arrived.begin(), arrived.end(), b) != arrived.end())
        return Status::Internal(file_.name() + ": block " + std::to_string(b) +
                                " arrived but its source does not have it");
      auto [it, fresh] = waiting.try_emplace(b);
      if (fresh) {
        queue.push_back(b);
        pending_[b >> 6] |= uint64_t{1} << (b & 63);
      }
      it->second.push_back(parked[k]);
    }
    top_up();
    if (in_flight == 0) break;
    arrived.clear();
    PACSET_RETURN_IF_ERROR(fetcher_->Wait(&arrived));
    if (stats_) ++stats_->waits;
    in_flight -= std::min(in_flight, arrived.size());
    // The freed places take blocks already needed, and their reads start
    // before the walks go on: the disk works while the walks do.
    top_up();
    fetcher_->Flush();
    active.clear();
    for (uint64_t b : arrived) {
      pending_[b >> 6] &= ~(uint64_t{1} << (b & 63));
      auto it = waiting.find(b);
      if (it == waiting.end()) continue;
      active.insert(active.end(), it->second.begin(), it->second.end());
      waiting.erase(it);
    }
  }
  if (!waiting.empty()) return Status::Internal(file_.name() + ": walks left waiting for blocks");

  if constexpr (kLeaves) {
    for (size_t id = 0; id < nwalks; ++id)
      job.leaves[(r0 - job.begin) * T + id] = static_cast<int32_t>(walks_[id].value);
  } else {
    const uint32_t cols = job.margin ? rule_.num_outputs : rule_.num_prediction_columns();
    std::vector<Acc> acc(K);
    std::vector<double> margins(K);
    for (size_t i = 0; i < nrows; ++i) {
      rule_.Init(acc.data());
      for (uint64_t t = 0; t < T; ++t) {
        const Walk& wk = walks_[i * T + t];
        const char* record = nullptr;
        if (wk.kind == static_cast<uint32_t>(RefKind::kLeafRecord))
          record = reinterpret_cast<const char*>(values_.data() + wk.value);
        if (!AddLeaf<Acc>(acc.data(), trees[t].group, K, w, wk.ref, wk.kind, record))
          return FaultStatus(file_, {WalkFault::kBadLeaf, t});
      }
      double* dst = job.out + (r0 + i - job.begin) * cols;
      rule_.Finish(acc.data(), job.margin ? dst : margins.data());
      if (!job.margin) rule_.Transform(margins.data(), dst);
    }
  }
  return Status::Ok();
}

struct RunScheduler {
  const PacFile& file;
  const OutputRule& rule;
  BlockSource& source;
  uint32_t max_in_flight;
  const WalkJob& job;
  InFlightStats* stats;
  template <typename NodeT, bool kF32Input, typename Acc>
  Status Call() const {
    if (job.leaves)
      return Scheduler<NodeT, kF32Input, Acc, true>(file, rule, source, max_in_flight, stats)
          .Run(job);
    return Scheduler<NodeT, kF32Input, Acc, false>(file, rule, source, max_in_flight, stats)
        .Run(job);
  }
};

}  // namespace

Status InFlightWalk(const PacFile& file, const OutputRule& rule, BlockSource& source,
                    uint32_t max_in_flight, const WalkJob& job, InFlightStats* stats) {
  return DispatchByFormat(file.header(),
                          RunScheduler{file, rule, source, max_in_flight, job, stats});
}

}  // namespace pacset::internal
