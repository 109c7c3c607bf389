// Choosing the bin parameters: an analytical count of the blocks a row
// touches, from the node weights, and the search over bin depths and trees
// per bin that uses it (layout/pack.h explains the choice).
//
// Why an estimate and not rows: the packer has the training cardinalities
// (or --calibrate counts) but usually no rows, and routing rows through every
// candidate would cost rows x trees x depth per candidate. The estimate is
// O(nodes + blocks) per candidate, far below the placement it scores. How
// close it comes to `pacset layout-report` on real rows: docs/bin-choice.md.
#include <algorithm>
#include <cmath>
#include <thread>

#include "layout/internal/placement.h"
#include "model/routing.h"
#include "util/parallel.h"

namespace pacset {

uint32_t LatentClasses(const Forest& f, const std::vector<uint8_t>& reachable) {
  if (f.leaf_width < 2 || f.leaf_width > kMaxLatentClasses ||
      f.cardinality_source == CardinalitySource::kNone)
    return 0;
  for (size_t g = 0; g < f.num_nodes(); ++g) {
    if (!reachable[g] || f.left_child[g] >= 0) continue;
    double sum = 0;
    for (uint32_t k = 0; k < f.leaf_width; ++k) {
      const double v = f.leaf_value[g * f.leaf_width + k];
      if (!(v >= 0)) return 0;
      sum += v;
    }
    if (std::abs(sum - 1) > 1e-6) return 0;
  }
  return f.leaf_width;
}

namespace {

// Per node of one tree: the chance that a row of each latent class reaches it.
class TreeWeights {
 public:
  explicit TreeWeights(const PackInput& in) : in_(in), k_(std::max(1u, in.latent_classes)) {}
  uint32_t classes() const { return k_; }

  // Computes the weights of tree t; returns the rows of each class the tree
  // saw (its root's class mass), to weigh the classes with.
  const std::vector<double>& Load(size_t t) {
    const Forest& f = *in_.forest;
    base_ = f.tree_offset[t];
    root_mass_.assign(k_, 1.0);
    if (in_.latent_classes == 0) return root_mass_;
    // Class mass of a node = sum over its leaves of cardinality x class
    // share, summed children first. scikit-learn numbers children after their
    // parent, so descending ids will do and read the leaves in memory order
    // (random order reads cost more than the rest of the estimate).
    const uint64_t end = f.tree_offset[t + 1];
    order_.clear();
    bool numbered_down = true;
    for (uint64_t g = base_; g < end && numbered_down; ++g)
      numbered_down =
          f.left_child[g] < 0 || (base_ + f.left_child[g] > g && base_ + f.right_child[g] > g);
    if (!numbered_down) {
      order_.assign(1, base_);
      for (size_t i = 0; i < order_.size(); ++i) {  // breadth first: parents before children
        const uint64_t g = order_[i];
        if (f.left_child[g] >= 0) {
          order_.push_back(base_ + f.left_child[g]);
          order_.push_back(base_ + f.right_child[g]);
        }
      }
    }
    mass_.assign(f.tree_size(t) * k_, 0.0);
    const size_t n = numbered_down ? end - base_ : order_.size();
    for (size_t i = n; i-- > 0;) {
      const uint64_t g = numbered_down ? base_ + i : order_[i];
      double* m = &mass_[(g - base_) * k_];
      if (f.left_child[g] < 0) {
        const double c = std::max(0.0, f.cardinality[g]);
        for (uint32_t k = 0; k < k_; ++k) m[k] = c * f.leaf_value[g * k_ + k];
      } else {
        const double* l = &mass_[f.left_child[g] * k_];
        const double* r = &mass_[f.right_child[g] * k_];
        for (uint32_t k = 0; k < k_; ++k) m[k] = l[k] + r[k];
      }
    }
    inv_root_.resize(k_);
    for (uint32_t k = 0; k < k_; ++k) {
      root_mass_[k] = mass_[k];
      inv_root_[k] = mass_[k] > 0 ? 1.0 / mass_[k] : 0.0;
    }
    return root_mass_;
  }

  // Adds the chance per class of reaching global node g (of the loaded tree) to out[0..K).
  void Add(uint64_t g, double* out) const {
    if (in_.latent_classes == 0) {
      out[0] += in_.weight[g];
      return;
    }
    const double* m = &mass_[(g - base_) * k_];
    for (uint32_t k = 0; k < k_; ++k) out[k] += m[k] * inv_root_[k];
  }

 private:
  const PackInput& in_;
  const uint32_t k_;
  uint64_t base_ = 0;
  std::vector<double> mass_, root_mass_, inv_root_;
  std::vector<uint64_t> order_;
};

}  // namespace

double EstimateBlocksPerRow(const PackInput& in, const Placement& p, uint32_t block_size) {
  const Forest& f = *in.forest;
  const uint64_t block_units = block_size / kUnit;
  const size_t num_blocks = p.node_blocks;
  TreeWeights weights(in);
  const uint32_t K = weights.classes();
  // miss[b * K + k]: chance that no tree seen so far touches block b, for a
  // row of class k; hit[b * K + k]: chance that the current tree's path
  // enters b. Every layout places a node after its parent, so a path never
  // comes back to a block it left: it enters b at most once, through a node
  // of b whose parent is elsewhere (or the root), and those are disjoint events.
  std::vector<double> miss(num_blocks * K, 1.0), hit(num_blocks * K, 0.0);
  std::vector<double> class_rows(K, 0.0);
  std::vector<uint8_t> listed(num_blocks, 0);
  std::vector<uint64_t> touched;
  auto enter = [&](uint64_t g) {
    const uint64_t b = p.pos[g] / block_units;
    if (!listed[b]) touched.push_back(b);
    listed[b] = 1;
    weights.Add(g, &hit[b * K]);
  };
  for (size_t t = 0; t < f.num_trees(); ++t) {
    const std::vector<double>& rows = weights.Load(t);
    for (uint32_t k = 0; k < K; ++k) class_rows[k] += rows[k];
    const uint64_t base = f.tree_offset[t], end = f.tree_offset[t + 1];
    if (in.units(base) > 0) enter(base);
    for (uint64_t g = base; g < end; ++g) {
      if (!in.reachable[g] || f.left_child[g] < 0) continue;
      const uint64_t b = p.pos[g] / block_units;
      for (const int32_t c : {f.left_child[g], f.right_child[g]})
        if (in.units(base + c) > 0 && p.pos[base + c] / block_units != b) enter(base + c);
    }
    for (uint64_t b : touched) {
      for (uint32_t k = 0; k < K; ++k) {
        // Weights from counts can add up to a little over 1. A chance below
        // 1e-100 is 0: products of hundreds of trees would otherwise sink
        // into subnormals, which multiply 100x slower.
        double& m = miss[b * K + k];
        m *= 1.0 - std::min(1.0, hit[b * K + k]);
        if (m < 1e-100) m = 0;
        hit[b * K + k] = 0;
      }
      listed[b] = 0;
    }
    touched.clear();
  }
  double all_rows = 0;
  for (double r : class_rows) all_rows += r;
  double expected = 0;
  for (size_t b = 0; b < num_blocks; ++b)
    for (uint32_t k = 0; k < K; ++k)
      expected += (all_rows > 0 ? class_rows[k] / all_rows : 1.0 / K) * (1.0 - miss[b * K + k]);
  return expected;
}

double CountPlacedBlocksPerRow(const PackInput& in, const Placement& p, uint32_t block_size,
                               const RowMatrix& rows) {
  const Forest& f = *in.forest;
  const uint64_t block_units = block_size / kUnit;
  std::vector<uint64_t> seen(p.node_blocks, 0);  // the last row (+1) that touched the block
  uint64_t touched = 0;
  for (size_t r = 0; r < rows.num_rows; ++r) {
    const double* row = rows.row(r);
    for (size_t t = 0; t < f.num_trees(); ++t) {
      const uint64_t base = f.tree_offset[t];
      for (uint64_t g = base;; g = base + ForestChild(f, g, row)) {
        if (in.units(g) > 0) {
          const uint64_t b = p.pos[g] / block_units;
          touched += seen[b] != r + 1;
          seen[b] = r + 1;
        }
        if (f.left_child[g] < 0) break;
      }
    }
  }
  return rows.num_rows ? static_cast<double>(touched) / rows.num_rows : 0.0;
}

namespace {

// Counting on more rows than this costs more than it tells.
constexpr size_t kMaxScoreRows = 2000;

// Up to kMaxScoreRows of `rows`, evenly spaced.
RowMatrix SampleRows(const RowMatrix& rows) {
  if (rows.num_rows <= kMaxScoreRows) return rows;
  RowMatrix s;
  s.num_cols = rows.num_cols;
  s.num_rows = kMaxScoreRows;
  s.values.reserve(kMaxScoreRows * rows.num_cols);
  for (size_t i = 0; i < kMaxScoreRows; ++i) {
    const double* row = rows.row(i * rows.num_rows / kMaxScoreRows);
    s.values.insert(s.values.end(), row, row + rows.num_cols);
  }
  return s;
}

struct Evaluated {
  LayoutCandidate candidate;
  BinParams params;
  Placement placement;
};

// Places candidates and scores them (counted on rows when there are some).
class Scorer {
 public:
  // `rows`: count on them (up to kMaxScoreRows); null: the expected count.
  Scorer(const LayoutPolicy& policy, const PackInput& in, uint32_t block_size,
         const RowMatrix* rows)
      : policy_(policy), in_(in), block_size_(block_size) {
    if (rows && rows->num_rows > 0) rows_ = SampleRows(*rows);
  }
  uint64_t rows() const { return rows_.num_rows; }

  Evaluated Evaluate(uint32_t depth, uint32_t trees_per_bin) const {
    Evaluated e;
    e.params.depth = depth;
    e.params.trees_per_bin = trees_per_bin == kTreesPerBinFit ? 0 : trees_per_bin;
    e.placement = policy_.Place(in_, e.params, block_size_);
    e.candidate.bin_depth = depth;
    e.candidate.trees_per_bin = trees_per_bin;
    e.candidate.largest_bin = e.placement.max_trees_per_bin;
    e.candidate.num_bins = e.placement.num_bins;
    e.candidate.node_blocks = e.placement.node_blocks;
    e.candidate.blocks_per_row = rows_.num_rows > 0
                                     ? CountPlacedBlocksPerRow(in_, e.placement, block_size_, rows_)
                                     : EstimateBlocksPerRow(in_, e.placement, block_size_);
    return e;
  }

  // The candidates `wanted` (depth, trees per bin as asked), up to `threads`
  // at a time, in order.
  std::vector<Evaluated> EvaluateAll(const std::vector<std::pair<uint32_t, uint32_t>>& wanted,
                                     unsigned threads) const {
    std::vector<Evaluated> out(wanted.size());
    ParallelForEach(wanted.size(), static_cast<int>(threads),
                    [&](size_t i) { out[i] = Evaluate(wanted[i].first, wanted[i].second); });
    return out;
  }

 private:
  const LayoutPolicy& policy_;
  const PackInput& in_;
  const uint32_t block_size_;
  RowMatrix rows_;
};

}  // namespace

BinDecision DecideBins(const LayoutPolicy& policy, const PackInput& in, const PackOptions& o) {
  const Forest& f = *in.forest;
  const bool binned = LayoutHasBins(o.layout);
  const bool choose_depth = binned && o.bin_depth == kChooseBins;
  const bool choose_trees = binned && o.trees_per_bin == kChooseBins;
  const Scorer scorer(policy, in, o.block_size,
                      choose_depth || choose_trees ? o.score_rows : nullptr);
  // Each candidate in flight holds a placement (8 bytes a node); the results
  // are taken in order, so the choice never depends on the thread count.
  const unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  BinDecision d;
  std::vector<LayoutCandidate> tried;
  Evaluated best;
  auto consider = [&](Evaluated e) {
    tried.push_back(e.candidate);
    if (tried.size() > 1 && !(e.candidate.blocks_per_row < best.candidate.blocks_per_row))
      return false;
    best = std::move(e);
    d.chosen = tried.size() - 1;
    return true;
  };
  const uint32_t first_trees = o.trees_per_bin == kChooseBins ? kTreesPerBinFit : o.trees_per_bin;
  if (!binned) {
    consider(scorer.Evaluate(0, 0));
  } else if (!choose_depth) {
    consider(scorer.Evaluate(o.bin_depth, first_trees));
  } else {
    // Depths 1, 2, ... until three in a row do not beat the best (the counts
    // are not unimodal: on a 1,030-tree XGBoost forest at 4 KiB depth 1
    // beats 2 and 3, and 5 beats them all). Deeper than
    // the deepest leaf changes nothing; past 8 levels a tree's bin alone
    // (255 nodes) fills a 4 KiB block.
    uint32_t deepest = 1;
    for (size_t g = 0; g < f.num_nodes(); ++g)
      if (in.reachable[g]) deepest = std::max(deepest, in.depth[g]);
    const uint32_t max_depth = std::min<uint32_t>(8, deepest);
    int worse = 0;
    for (uint32_t depth = 1; depth <= max_depth && worse < 3;) {
      std::vector<std::pair<uint32_t, uint32_t>> batch;
      for (; depth <= max_depth && batch.size() < threads; ++depth)
        batch.push_back({depth, first_trees});
      for (Evaluated& e : scorer.EvaluateAll(batch, threads)) {
        if (worse >= 3) break;  // placed only because it ran alongside
        worse = consider(std::move(e)) ? 0 : worse + 1;
      }
    }
  }
  // One bin of all trees, striped over as many blocks as it takes, so that
  // its deeper levels share blocks across more trees. With 64 trees or more
  // per bin every bin block is touched by nearly every row anyway (measured:
  // the same count), so it is not worth a placement.
  if (choose_trees && best.placement.num_bins > 1 && best.placement.max_trees_per_bin < 64)
    consider(scorer.Evaluate(best.params.depth, static_cast<uint32_t>(f.num_trees())));
  d.params = best.params;
  d.placement = std::move(best.placement);
  d.scored_rows = scorer.rows();
  d.expected_blocks_per_row = d.scored_rows ? EstimateBlocksPerRow(in, d.placement, o.block_size)
                                            : best.candidate.blocks_per_row;
  if (choose_depth || choose_trees) d.candidates = std::move(tried);
  return d;
}

}  // namespace pacset
