// The warm loop: every block the request can touch is in memory and
// verified (BlockSource::WarmImage), so walks follow references with no
// residency or verification checks — only the format's safety checks.
#include <algorithm>
#include <vector>

#include "layout/internal/sigbus.h"
#include "layout/internal/walk.h"
#include "layout/internal/warm_forest.h"

namespace pacset::internal {
namespace {

// One tree of the warm forest for rows [0, nrows) of `x` (row i at
// x + i * nf), kLanes walks at once: lane j takes rows j, j + kLanes, ...
// Their walks are independent dependency chains (node load -> feature load
// -> compare -> next node), so the CPU overlaps them, and a lane whose walk
// ends starts its next row at once. Every node was checked when the warm
// forest was built, so a step is a load, a compare and a select. kPlain:
// no row has NaN and no node uses LightGBM's zero/NaN rules, so `x <=
// threshold` alone routes (what GoesLeft gives then). add_leaf(row, ref,
// kind) adds the leaf; false stops the walk (a corrupt leaf).
template <typename Cmp, bool kPlain, uint32_t kLanes, typename Thr, typename In, typename AddLeafFn>
inline bool WalkWarmTree(const WarmNode<Thr>* nodes, const uint8_t* flags, const uint64_t* leaves,
                         int32_t root, const In* x, size_t nf, size_t nrows,
                         const AddLeafFn& add_leaf) {
  constexpr uint64_t kRefMask = (uint64_t{1} << kWarmLeafKindShift) - 1;
  auto leaf = [&](size_t row, int32_t at) {
    const uint64_t l = leaves[~at];
    return add_leaf(row, l & kRefMask, static_cast<uint32_t>(l >> kWarmLeafKindShift));
  };
  if (root < 0) {
    for (size_t i = 0; i < nrows; ++i)
      if (!leaf(i, root)) return false;
    return true;
  }
  int32_t at[kLanes];
  size_t row[kLanes];
  const In* xr[kLanes];
  uint32_t live = 0;
  for (uint32_t j = 0; j < kLanes; ++j) {
    row[j] = j;
    xr[j] = x + j * nf;
    at[j] = j < nrows ? root : -1;
    live += j < nrows;
  }
  while (live) {
    for (uint32_t j = 0; j < kLanes; ++j) {
      if (__builtin_expect(at[j] >= 0, 1)) {
        const WarmNode<Thr>& n = nodes[at[j]];
        const Cmp v = static_cast<Cmp>(xr[j][n.feature]);
        bool left;
        if constexpr (kPlain) {
          left = v <= static_cast<Cmp>(n.threshold);
        } else {
          left = GoesLeft<Cmp>(v, static_cast<Cmp>(n.threshold), flags[at[j]]);
        }
        // An indexed load, not a branch: the direction is data, unpredictable.
        at[j] = n.child[!left];
      } else if (row[j] < nrows) {
        if (__builtin_expect(!leaf(row[j], at[j]), 0)) return false;
        row[j] += kLanes;
        xr[j] += kLanes * nf;
        if (row[j] < nrows) {
          at[j] = root;
        } else {
          --live;
        }
      }
    }
  }
  return true;
}

template <typename T>
bool AnyNan(const T* v, size_t n) {
  bool nan = false;
  for (size_t i = 0; i < n; ++i) nan |= v[i] != v[i];
  return nan;
}

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
class WarmLoop {
 public:
  WarmLoop(const PacFile& file, const OutputRule& rule, const char* image, const WarmForest* warm)
      : file_(file), rule_(rule), base_(image), warm_(warm) {}

  // Rows are taken kBlockRows at a time (measured: 8..32 within 5%; 16 rows
  // of features stay in L1/L2). The buffers are the caller's: this runs
  // where a SIGBUS may jump out, so it creates nothing with a destructor.
  static constexpr size_t kBlockRows = 64;
  // Walks interleaved per tree (see Run).
  static constexpr uint32_t kLanes = 8;
  static constexpr uint32_t kLaneDone = 4;  // not a RefKind: the lane has no rows left

  __attribute__((noinline)) WalkFault Run(const WalkJob& job, Acc* acc, float* x32,
                                          double* margins) const;

 private:
  const PacFile& file_;
  const OutputRule& rule_;
  const char* const base_;
  const WarmForest* const warm_;  // may be null: walk the mapping with checks
};

// Per node: one range check (a reference outside the node region, or a path
// longer than max_depth, is corruption), one feature check, the routing rule
// and a branch-free step to the chosen child. References that land on a
// block trailer read harmless in-bounds bytes; the checks on the next step
// still hold, so no test for that is needed here.
template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
WalkFault WarmLoop<NodeT, kF32Input, Acc, kLeaves>::Run(const WalkJob& job, Acc* acc, float* x32,
                                                        double* margins) const {
  constexpr uint64_t kNodeUnits = sizeof(NodeT) / kUnit;
  const RowMatrix& rows = *job.rows;
  const PacHeader& h = file_.header();
  const char* const base = base_;
  const uint32_t nf = h.num_features, K = h.num_outputs, w = h.leaf_width;
  const uint32_t record_bytes = LeafRecordBytes(w);
  const uint64_t T = h.num_trees;
  const uint32_t max_steps = h.max_depth + 1;
  const uint64_t lo = h.node_first_block * (h.block_size / kUnit);
  const uint64_t span = h.node_block_count * (h.block_size / kUnit) - (kNodeUnits - 1);
  const uint32_t cols = job.margin ? rule_.num_outputs : rule_.num_prediction_columns();
  const TreeRecord* trees = file_.trees().data();
  auto step = [&](uint64_t& ref, uint32_t& kind, const float* xf, const double* xd,
                  bool* went_left = nullptr) {
    return Step<NodeT, kF32Input>(base + ref * kUnit, nf, xf, xd, ref, kind, went_left);
  };

  for (size_t r0 = job.begin; r0 < job.end; r0 += kBlockRows) {
    const size_t nrows = std::min(kBlockRows, job.end - r0);
    if constexpr (kF32Input) {
      for (size_t i = 0; i < nrows; ++i) {
        const double* row = rows.row(r0 + i);
        for (uint32_t f = 0; f < nf; ++f) x32[i * nf + f] = static_cast<float>(row[f]);
      }
    }
    if constexpr (!kLeaves)
      for (size_t i = 0; i < nrows; ++i) rule_.Init(&acc[i * K]);
    // Rows without NaN route by the threshold alone (warm forest only).
    bool plain = warm_ && warm_->plain_routing;
    if (plain) {
      if constexpr (kF32Input) {
        plain = !AnyNan(x32, nrows * nf);
      } else {
        plain = !AnyNan(rows.row(r0), nrows * nf);
      }
    }
    for (uint64_t t = 0; t < T; ++t) {
      const TreeRecord& tr = trees[t];
      // Adds the leaf a walk ended on to the row's sums; false for a corrupt leaf.
      auto add_leaf = [&](size_t row, uint64_t ref, uint32_t kind) {
        const char* record = nullptr;
        if (kind == static_cast<uint32_t>(RefKind::kLeafRecord)) {
          if (!file_.RefInNodeRegion(ref, record_bytes)) return false;
          record = base + ref * kUnit;
        }
        return AddLeaf<Acc>(&acc[row * K], tr.group, K, w, ref, kind, record);
      };
      size_t i = 0;
      if constexpr (!kLeaves) {
        if (warm_) {
          using Cmp =
              std::conditional_t<kF32Input && std::is_same_v<NodeT, CompactNode>, float, double>;
          const uint8_t* flags = warm_->flags.data();
          const uint64_t* leaves = warm_->leaves.data();
          const int32_t root = warm_->roots[t];
          bool ok;
          auto walk = [&](const auto* nodes, const auto* x) {
            return plain ? WalkWarmTree<Cmp, true, kLanes>(nodes, flags, leaves, root, x, nf, nrows,
                                                           add_leaf)
                         : WalkWarmTree<Cmp, false, kLanes>(nodes, flags, leaves, root, x, nf,
                                                            nrows, add_leaf);
          };
          const auto* x = [&] {
            if constexpr (kF32Input) {
              return static_cast<const float*>(x32);
            } else {
              return rows.row(r0);
            }
          }();
          if constexpr (std::is_same_v<NodeT, CompactNode>) {
            ok = walk(warm_->nodes32.data(), x);
          } else {
            ok = walk(warm_->nodes64.data(), x);
          }
          if (__builtin_expect(!ok, 0)) return {WalkFault::kBadLeaf, t};
          continue;
        }
        // kLanes walks at once, each over its own rows (lane j: rows j,
        // j + kLanes, ...): their walks are independent dependency chains
        // (node load -> feature load -> compare -> next node), so the CPU
        // overlaps them, and a lane whose walk ends starts its next row at
        // once instead of waiting for the others. Same routing and checks as
        // the one-row loop below; each row still adds its trees in order.
        uint64_t r[kLanes];
        uint32_t k[kLanes], steps[kLanes];
        size_t row[kLanes];
        uint32_t live = 0;
        for (uint32_t j = 0; j < kLanes; ++j) {
          row[j] = j;
          r[j] = tr.root;
          k[j] = j < nrows ? tr.root_kind : kLaneDone;
          steps[j] = 0;
          live += j < nrows;
        }
        while (live) {
          for (uint32_t j = 0; j < kLanes; ++j) {
            if (__builtin_expect(k[j] == kNodeKind, 1)) {
              if (__builtin_expect(r[j] - lo >= span || ++steps[j] > max_steps, 0))
                return {WalkFault::kLockstep, t};
              const size_t x = row[j];
              if (__builtin_expect(!step(r[j], k[j], kF32Input ? x32 + x * nf : nullptr,
                                         kF32Input ? nullptr : rows.row(r0 + x)),
                                   0))
                return {WalkFault::kLockstep, t};
            } else if (k[j] != kLaneDone) {
              if (__builtin_expect(!add_leaf(row[j], r[j], k[j]), 0))
                return {WalkFault::kLockstep, t};
              row[j] += kLanes;
              r[j] = tr.root;
              steps[j] = 0;
              if (row[j] < nrows) {
                k[j] = tr.root_kind;
              } else {
                k[j] = kLaneDone;
                --live;
              }
            }
          }
        }
        i = nrows;
      }
      for (; i < nrows; ++i) {
        uint64_t ref = tr.root;
        uint32_t kind = tr.root_kind;
        uint32_t leaf_id = 0, steps = 0;
        const float* xf = kF32Input ? x32 + i * nf : nullptr;
        const double* xd = kF32Input ? nullptr : rows.row(r0 + i);
        while (kind == kNodeKind) {
          if (__builtin_expect(ref - lo >= span || ++steps > max_steps, 0))
            return {WalkFault::kBadReference, t};
          const uint64_t at = ref;
          bool left = false;
          if (__builtin_expect(!step(ref, kind, xf, xd, &left), 0))
            return {WalkFault::kBadFeature, t};
          if constexpr (kLeaves) {
            if (kind != kNodeKind) {
              uint32_t ids[2];
              std::memcpy(ids, base + file_.LeafIdsOffset(at), 8);
              leaf_id = ids[left ? 0 : 1];
            }
          }
        }
        if constexpr (kLeaves) {
          job.leaves[(r0 + i - job.begin) * T + t] = static_cast<int32_t>(leaf_id);
        } else if (__builtin_expect(!add_leaf(i, ref, kind), 0)) {
          return {WalkFault::kBadLeaf, t};
        }
      }
    }
    if constexpr (!kLeaves) {
      for (size_t i = 0; i < nrows; ++i) {
        double* dst = job.out + (r0 + i - job.begin) * cols;
        rule_.Finish(&acc[i * K], job.margin ? dst : margins);
        if (!job.margin) rule_.Transform(margins, dst);
      }
    }
  }
  return {};
}

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
Status RunWarm(const PacFile& file, const OutputRule& rule, const char* image,
               const WarmForest* warm, const WalkJob& job) {
  using Loop = WarmLoop<NodeT, kF32Input, Acc, kLeaves>;
  const PacHeader& h = file.header();
  // Buffers live in this frame, outside the region a SIGBUS can jump out of.
  std::vector<Acc> acc(Loop::kBlockRows * h.num_outputs);
  std::vector<float> x32(kF32Input ? Loop::kBlockRows * h.num_features : 0);
  std::vector<double> margins(h.num_outputs);
  const Loop loop(file, rule, image, warm);
  SigbusScope scope(image, file.size(), h.block_size);
  if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file.name());
  scope.Arm();
  const WalkFault fault = loop.Run(job, acc.data(), x32.data(), margins.data());
  scope.Disarm();
  return FaultStatus(file, fault);
}

struct RunWarmLoop {
  const PacFile& file;
  const OutputRule& rule;
  const char* image;
  const WarmForest* warm;
  const WalkJob& job;
  template <typename NodeT, bool kF32Input, typename Acc>
  Status Call() const {
    if (job.leaves) return RunWarm<NodeT, kF32Input, Acc, true>(file, rule, image, nullptr, job);
    return RunWarm<NodeT, kF32Input, Acc, false>(file, rule, image, warm, job);
  }
};

}  // namespace

Status WarmWalk(const PacFile& file, const OutputRule& rule, const char* image,
                const WarmForest* warm, const WalkJob& job) {
  return DispatchByFormat(file.header(), RunWarmLoop{file, rule, image, warm, job});
}

}  // namespace pacset::internal
