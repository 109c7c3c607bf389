// The warm loop: every block the request can touch is in memory and
// verified (BlockSource::WarmImage), so walks follow references with no
// residency or verification checks — only the format's safety checks.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <unistd.h>

#include "engine/internal/sigbus.h"
#include "engine/internal/walk.h"
#include "engine/internal/warm_forest.h"
#include "engine/internal/warm_simd.h"

namespace pacset::internal {
namespace {

// Rows [0, nrows) of `x` (row i at x + i * nf) through every tree of the
// warm forest, kLanes walks at once. Lane j takes rows j, j + kLanes, ...
// and goes through the trees in order, each of its rows per tree, so every
// row still adds its trees in order while the lanes never wait for each
// other: their walks are independent dependency chains (node load ->
// feature load -> compare -> next node) the CPU overlaps, and a lane whose
// walk ends starts its next one at once. Every node was checked when the
// warm forest was built, so a step is a load, a compare and a select.
// kPlain: no row has NaN and no node uses LightGBM's zero-as-missing rule,
// so `x <= threshold` alone routes (what GoesLeft gives then).
// add_leaf(row, tree, ref, kind) adds a leaf; false (a corrupt leaf) stops
// the walk and sets *bad_tree.
template <typename Cmp, bool kPlain, uint32_t kLanes, typename Thr, typename In, typename AddLeafFn>
inline bool WalkWarmBlock(const WarmForest& warm, const WarmNode<Thr>* nodes, const In* x,
                          size_t nf, size_t nrows, const AddLeafFn& add_leaf, uint64_t* bad_tree) {
  constexpr uint64_t kRefMask = (uint64_t{1} << kWarmLeafKindShift) - 1;
  const uint8_t* const flags = warm.flags.data();
  const uint64_t* const leaves = warm.leaves.data();
  const int32_t* const roots = warm.roots.data();
  const uint32_t T = static_cast<uint32_t>(warm.roots.size());
  int32_t at[kLanes];
  uint32_t tree[kLanes];
  size_t row[kLanes];
  const In* xr[kLanes];
  uint32_t live = 0;
  // A lane without rows, or done with every tree, parks on a leaf (-1) with
  // tree T: it neither walks nor adds. (Parking on node 0 read past the
  // nodes of a forest whose trees are all single leaves.)
  for (uint32_t j = 0; j < kLanes; ++j) {
    const bool used = j < nrows && T > 0;
    row[j] = j;
    xr[j] = used ? x + j * nf : x;
    at[j] = used ? roots[0] : -1;
    tree[j] = used ? 0 : T;
    live += used;
  }
  while (live) {
    for (uint32_t j = 0; j < kLanes; ++j) {
      if (__builtin_expect(at[j] >= 0, 1)) {
        const WarmNode<Thr>& n = nodes[at[j]];
        // nodes32's feature words carry the kernels' routing bits above the feature.
        const uint32_t feature =
            std::is_same_v<Thr, float> ? n.feature & kWarmFeatureMask : n.feature;
        const Cmp v = static_cast<Cmp>(xr[j][feature]);
        bool left;
        if constexpr (kPlain) {
          left = v <= static_cast<Cmp>(n.threshold);
        } else if (__builtin_expect(flags[at[j]] & kCategorical, 0)) {
          left = CategoricalGoesLeft<Cmp>(v, flags[at[j]],
                                          warm.categorical_splits[WarmSplitIndex(n.threshold)],
                                          warm.category_words.data());
        } else {
          left = GoesLeft<Cmp>(v, static_cast<Cmp>(n.threshold), flags[at[j]]);
        }
        // An indexed load, not a branch: the direction is data, unpredictable.
        at[j] = n.child[!left];
      } else if (tree[j] < T) {
        const uint64_t l = leaves[~at[j]];
        if (__builtin_expect(!add_leaf(row[j], tree[j], l & kRefMask,
                                       static_cast<uint32_t>(l >> kWarmLeafKindShift)),
                             0)) {
          *bad_tree = tree[j];
          return false;
        }
        row[j] += kLanes;
        if (row[j] < nrows) {
          xr[j] += kLanes * nf;
        } else {  // this lane's rows are done with the tree
          row[j] = j;
          xr[j] = x + j * nf;
          if (++tree[j] == T) {
            --live;
            at[j] = -1;
            continue;
          }
        }
        at[j] = roots[tree[j]];
      }
    }
  }
  return true;
}

// The same sums as WalkWarmBlock (plain or not, as `kernel` is; on
// forest.nodes32, warm_simd.h), through `kernel` over the
// block's rows `x` (row i at x + i * nf, float32): for each tree in order,
// every row's leaf (many rows at once), then the leaves added row by row —
// each row still adds its trees in order.
// When every leaf is an inline value (WarmForest::leaf_values), a leaf adds
// its value to acc[row * K + its tree's group] directly.
template <typename Acc, typename AddLeafFn>
inline bool WalkWarmBlockSimd(const WarmForest& warm, WarmTreeKernel kernel,
                              const WarmKernelForest& forest, const float* x, uint32_t nrows,
                              uint32_t nf, int32_t* leaf, const TreeRecord* trees, Acc* acc,
                              uint32_t K, const AddLeafFn& add_leaf, uint64_t* bad_tree) {
  constexpr uint64_t kRefMask = (uint64_t{1} << kWarmLeafKindShift) - 1;
  const float* const values = warm.leaf_values.data();
  const bool add_value = !warm.leaf_values.empty();
  const uint64_t* const leaves = warm.leaves.data();
  const uint32_t T = static_cast<uint32_t>(warm.roots.size());
  for (uint32_t t = 0; t < T; ++t) {
    const int32_t root = warm.roots[t];
    if (root >= 0) {
      kernel(forest, root, x, nrows, nf, leaf);
    } else {
      std::fill(leaf, leaf + nrows, root);
    }
    if (add_value) {  // AddLeaf's kInlineValue case
      const uint32_t group = trees[t].group;
      for (uint32_t r = 0; r < nrows; ++r) acc[r * K + group] += static_cast<Acc>(values[~leaf[r]]);
      continue;
    }
    for (uint32_t r = 0; r < nrows; ++r) {
      const uint64_t l = leaves[~leaf[r]];
      if (__builtin_expect(
              !add_leaf(r, t, l & kRefMask, static_cast<uint32_t>(l >> kWarmLeafKindShift)), 0)) {
        *bad_tree = t;
        return false;
      }
    }
  }
  return true;
}

// The SIMD kernels a warm loop may use (null: none).
struct WarmKernels {
  WarmTreeKernel plain = nullptr;   // blocks without NaN, WarmForest::plain_routing
  WarmTreeKernel routed = nullptr;  // any block, WarmForest::simd_routing
  WarmKernelForest forest;
};

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
class WarmLoop {
 public:
  WarmLoop(const PacFile& file, const OutputRule& rule, const char* image, const WarmForest* warm,
           const WarmKernels& kernels, size_t block_rows)
      : file_(file),
        rule_(rule),
        base_(image),
        warm_(warm),
        kernels_(kernels),
        block_rows_(block_rows) {}

  // Rows are taken block_rows at a time (BlockRows): with the warm forest
  // (WalkWarmBlock) the lanes go through the trees in order, without it every
  // row of a block walks a tree before the next; either way a tree's nodes are
  // fetched about once per block. The buffers are the caller's: this runs
  // where a SIGBUS may jump out, so it creates nothing with a destructor.
  // Walks interleaved: enough independent chains to fill the CPU's
  // out-of-order window (engine/DESIGN.md, "The warm walk").
  static constexpr uint32_t kLanes = 16;
  static constexpr uint32_t kLaneDone = 4;  // not a RefKind: the lane has no rows left

  // leaf: block_rows entries (the SIMD kernel's leaves of one tree); x64:
  // a block of float64 rows, for float32 rows (job.rows32) through a
  // float64-input forest when the scalar lanes walk them.
  __attribute__((noinline)) WalkFault Run(const WalkJob& job, Acc* acc, float* x32, double* x64,
                                          int32_t* leaf, double* margins) const;

 private:
  const PacFile& file_;
  const OutputRule& rule_;
  const char* const base_;
  const WarmForest* const warm_;  // may be null: walk the mapping with checks
  // On WarmForest::nodes32: the plain kernel for blocks of rows without NaN
  // when the warm forest routes plainly, else the routed one (for float64
  // input: blocks of values float32 holds); without either, the scalar lanes.
  const WarmKernels kernels_;
  const size_t block_rows_;
};

// Per node: one range check (a reference outside the node region, or a path
// longer than max_depth, is corruption), one feature check, the routing rule
// and a branch-free step to the chosen child. References that land on a
// block trailer read harmless in-bounds bytes; the checks on the next step
// still hold, so no test for that is needed here.
template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
WalkFault WarmLoop<NodeT, kF32Input, Acc, kLeaves>::Run(const WalkJob& job, Acc* acc, float* x32,
                                                        double* x64, int32_t* leaf,
                                                        double* margins) const {
  constexpr uint64_t kNodeUnits = sizeof(NodeT) / kUnit;
  const float* const rows32 = job.rows32;
  const PacHeader& h = file_.header();
  const char* const base = base_;
  const uint32_t nf = h.num_features, K = h.num_outputs, w = h.leaf_width;
  const CategoricalTable cats = CategoricalTableOf(file_);
  const uint32_t record_bytes = LeafRecordBytes(w);
  const uint64_t T = h.num_trees;
  const uint32_t max_steps = h.max_depth + 1;
  const uint64_t lo = h.node_first_block * (h.block_size / kUnit);
  const uint64_t span = h.node_block_count * (h.block_size / kUnit) - (kNodeUnits - 1);
  const uint32_t cols = job.margin ? rule_.num_outputs : rule_.num_prediction_columns();
  const TreeRecord* trees = file_.trees().data();
  auto step = [&](uint64_t& ref, uint32_t& kind, const float* xf, const double* xd,
                  bool* went_left = nullptr) {
    return Step<NodeT, kF32Input>(base + ref * kUnit, nf, cats, xf, xd, ref, kind, went_left);
  };

  const size_t block_rows = block_rows_;
  for (size_t r0 = job.begin; r0 < job.end; r0 += block_rows) {
    const size_t nrows = std::min(block_rows, job.end - r0);
    // The block's rows as float32 (row i at xs + i * nf): the SIMD kernels'
    // input (whose conversion also finds NaN and, for float64 input, values
    // float32 does not hold: such a block walks the scalar lanes) and the
    // float32 scalar lanes'; as float64 (xd) for the float64 scalar lanes.
    const float* xs = nullptr;
    const double* xd = nullptr;
    bool plain = warm_ && warm_->plain_routing;
    WarmTreeKernel kernel = nullptr;
    const bool any_kernel = kernels_.plain || kernels_.routed;
    if (any_kernel) {
      uint32_t found;
      if (rows32) {
        xs = rows32 + r0 * nf;
        found = AnyNan(xs, nrows * nf) ? kFoundNan : 0;
      } else {
        found = ToFloat32(job.rows->row(r0), nrows * nf, x32);
        xs = x32;
      }
      plain = plain && !(found & kFoundNan);
      kernel = plain && kernels_.plain ? kernels_.plain : kernels_.routed;
      if (!kF32Input && (found & kFoundNotFloat32)) kernel = nullptr;
    }
    const bool simd = kernel != nullptr;
    if constexpr (kF32Input) {
      if (!xs) {
        if (rows32) {
          xs = rows32 + r0 * nf;
        } else {
          const double* rows = job.rows->row(r0);
          for (size_t i = 0; i < nrows * nf; ++i) x32[i] = static_cast<float>(rows[i]);
          xs = x32;
        }
      }
    } else if (!simd) {
      if (rows32) {
        for (size_t i = 0; i < nrows * nf; ++i) x64[i] = rows32[r0 * nf + i];
        xd = x64;
      } else {
        xd = job.rows->row(r0);
      }
    }
    if constexpr (!kLeaves)
      for (size_t i = 0; i < nrows; ++i) rule_.Init(&acc[i * K]);
    // Rows without NaN route by the threshold alone (warm forest only).
    if (plain && !any_kernel) {
      if constexpr (kF32Input) {
        plain = !AnyNan(xs, nrows * nf);
      } else {
        plain = !AnyNan(xd, nrows * nf);
      }
    }
    if constexpr (!kLeaves) {
      if (warm_) {
        using Cmp =
            std::conditional_t<kF32Input && std::is_same_v<NodeT, CompactNode>, float, double>;
        // Adds the leaf a walk ended on to the row's sums (a leaf record's
        // values are the warm forest's copy); false for a class out of range.
        const double* records = warm_->records.data();
        auto add_leaf = [&](size_t row, uint32_t t, uint64_t ref, uint32_t kind) {
          const char* record = kind == static_cast<uint32_t>(RefKind::kLeafRecord)
                                   ? reinterpret_cast<const char*>(records + ref)
                                   : nullptr;
          return AddLeaf<Acc>(&acc[row * K], trees[t].group, K, w, ref, kind, record);
        };
        auto walk = [&](const auto* nodes, const auto* x) {
          uint64_t bad = 0;
          bool ok;
          if (simd) {
            ok =
                WalkWarmBlockSimd(*warm_, kernel, kernels_.forest, xs, static_cast<uint32_t>(nrows),
                                  nf, leaf, trees, acc, K, add_leaf, &bad);
            if (job.simd_rows) *job.simd_rows += nrows;
            return ok ? WalkFault{} : WalkFault{WalkFault::kBadLeaf, bad};
          }
          ok = plain
                   ? WalkWarmBlock<Cmp, true, kLanes>(*warm_, nodes, x, nf, nrows, add_leaf, &bad)
                   : WalkWarmBlock<Cmp, false, kLanes>(*warm_, nodes, x, nf, nrows, add_leaf, &bad);
          return ok ? WalkFault{} : WalkFault{WalkFault::kBadLeaf, bad};
        };
        const auto* x = [&] {
          if constexpr (kF32Input) {
            return xs;
          } else {
            return xd;
          }
        }();
        WalkFault fault;
        if constexpr (std::is_same_v<NodeT, CompactNode>) {
          fault = walk(warm_->nodes32.data(), x);
        } else {
          fault = walk(warm_->nodes64.data(), x);
        }
        if (__builtin_expect(fault.code != WalkFault::kNone, 0)) return fault;
      }
    }
    for (uint64_t t = 0; t < T && !(warm_ && !kLeaves); ++t) {
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
              if (__builtin_expect(!step(r[j], k[j], kF32Input ? xs + x * nf : nullptr,
                                         kF32Input ? nullptr : xd + x * nf),
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
        const float* xf = kF32Input ? xs + i * nf : nullptr;
        const double* xr = kF32Input ? nullptr : xd + i * nf;
        while (kind == kNodeKind) {
          if (__builtin_expect(ref - lo >= span || ++steps > max_steps, 0))
            return {WalkFault::kBadReference, t};
          const uint64_t at = ref;
          bool left = false;
          if (__builtin_expect(!step(ref, kind, xf, xr, &left), 0))
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

// Rows per block of the warm loop. A forest larger than the L2 cache comes
// from farther away once per block, so many rows should share each fetch;
// a forest that fits stays there anyway, and fewer rows keep the block's
// features in L1/L2 instead. A block's features stay within kBlockBytes.
// The SIMD kernels walk one tree over the whole block, 64 rows at a time,
// reading the rows where they lie (row-major): fewer rows keep the block's
// features in L1/L2, more share each fetch of a forest far larger than L2.
// The sizes: engine/DESIGN.md, "The warm walk".
size_t BlockRows(const PacHeader& h, size_t node_bytes, size_t rows, bool simd) {
  constexpr size_t kLargeForestRows = 1024, kSmallForestRows = 64, kSimdRows = 128,
                   kSimdHugeForestRows = 256, kHugeForestL2s = 16;
  constexpr size_t kBlockBytes = 4 << 20;
  static const uint64_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<uint64_t>(v) : uint64_t{1} << 20;
  }();
  const uint64_t forest_bytes = h.num_nodes * node_bytes;
  size_t n = simd ? (forest_bytes >= kHugeForestL2s * l2 ? kSimdHugeForestRows : kSimdRows)
             : forest_bytes >= l2 ? kLargeForestRows
                                  : kSmallForestRows;
  n = std::min(n, kBlockBytes / (4 * std::max<size_t>(1, h.num_features)));
  return std::max<size_t>(1, std::min(n, rows));
}

template <typename NodeT, bool kF32Input, typename Acc, bool kLeaves>
Status RunWarm(const PacFile& file, const OutputRule& rule, const char* image,
               const WarmForest* warm, WarmIsa isa, const WalkJob& job) {
  using Loop = WarmLoop<NodeT, kF32Input, Acc, kLeaves>;
  const PacHeader& h = file.header();
  // The SIMD kernels: float32 nodes (WarmForest::nodes32, built when the
  // forest routes plainly or as the routed kernels do), int32 gather indices.
  WarmKernels kernels;
  if (warm && !warm->nodes32.empty() && warm->nodes32.size() < kWarmSimdMaxNodes) {
    if (warm->plain_routing) kernels.plain = WarmTreeKernelFor(isa, false, false);
    if (warm->simd_routing)
      kernels.routed = WarmTreeKernelFor(isa, true, !warm->categorical_splits.empty());
    kernels.forest = {warm->nodes32.data(), warm->direction_words.data(), warm->direction_shift};
  }
  bool kernel = kernels.plain || kernels.routed;
  // Buffers live in this frame, outside the region a SIGBUS can jump out of.
  const size_t block_rows = BlockRows(h, sizeof(NodeT), job.end - job.begin, kernel);
  if (uint64_t{block_rows} * h.num_features >= (uint64_t{1} << 31)) {
    kernels = WarmKernels{};
    kernel = false;
  }
  // Not value-initialised: a one-row request does not clear a large block.
  std::unique_ptr<Acc[]> acc(new Acc[block_rows * h.num_outputs]);
  // x32: float64 rows converted for the kernels or the float32 lanes.
  std::unique_ptr<float[]> x32(
      new float[!job.rows32 && (kF32Input || kernel) ? block_rows * h.num_features : 1]);
  std::unique_ptr<int32_t[]> leaf(new int32_t[kernel ? block_rows : 1]);
  std::unique_ptr<double[]> x64(
      new double[!kF32Input && job.rows32 ? block_rows * h.num_features : 1]);
  std::vector<double> margins(h.num_outputs);
  const Loop loop(file, rule, image, warm, kernels, block_rows);
  SigbusScope scope(image, file.size(), h.block_size);
  if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file.name());
  scope.Arm();
  const WalkFault fault =
      loop.Run(job, acc.get(), x32.get(), x64.get(), leaf.get(), margins.data());
  scope.Disarm();
  return FaultStatus(file, fault);
}

struct RunWarmLoop {
  const PacFile& file;
  const OutputRule& rule;
  const char* image;
  const WarmForest* warm;
  WarmIsa isa;
  const WalkJob& job;
  template <typename NodeT, bool kF32Input, typename Acc>
  Status Call() const {
    if (job.leaves)
      return RunWarm<NodeT, kF32Input, Acc, true>(file, rule, image, nullptr, isa, job);
    return RunWarm<NodeT, kF32Input, Acc, false>(file, rule, image, warm, isa, job);
  }
};

}  // namespace

Status WarmWalk(const PacFile& file, const OutputRule& rule, const char* image,
                const WarmForest* warm, WarmIsa isa, const WalkJob& job) {
  return DispatchByFormat(file.header(), RunWarmLoop{file, rule, image, warm, isa, job});
}

}  // namespace pacset::internal
