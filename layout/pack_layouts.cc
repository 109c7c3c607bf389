// The layout policies of the packer (layout/pack.h LayoutKind). Each walks
// the forest and asks a BlockFiller for a position per stored node; they
// differ only in the visiting order and in where they start new blocks.
#include <algorithm>
#include <deque>
#include <queue>

#include "layout/internal/placement.h"

namespace pacset {
namespace {

enum class Order { kBfs, kDfs, kWdfs, kBlockWdfs, kBlockBestFirst };

// The stored-or-traversable children of global node g (none for a leaf).
struct Kids {
  uint64_t left = kUnplaced, right = kUnplaced;
};

inline Kids ChildrenOf(const Forest& f, uint64_t g, uint64_t tree_base) {
  Kids k;
  if (f.left_child[g] >= 0) {
    k.left = tree_base + f.left_child[g];
    k.right = tree_base + f.right_child[g];
  }
  return k;
}

// Heavier first; ties go left (the first argument).
inline bool Heavier(const PackInput& in, uint64_t a, uint64_t b) {
  return in.weight[a] >= in.weight[b];
}

class ForestLayout : public LayoutPolicy {
 public:
  ForestLayout(Order order, bool bins) : order_(order), bins_(bins) {}

  Placement Place(const PackInput& in, const BinParams& bins, uint32_t block_size) const override {
    const Forest& f = *in.forest;
    Placement p;
    p.pos.assign(f.num_nodes(), kUnplaced);
    BlockFiller filler(block_size);
    // roots[t]: where the residual part of tree t starts, in visiting order.
    std::vector<std::vector<uint64_t>> roots(f.num_trees());
    if (bins_ && bins.depth > 0) {
      PlaceBins(in, bins, filler, p, roots);
      p.bin_blocks = filler.blocks_used();
    } else {
      for (size_t t = 0; t < f.num_trees(); ++t) roots[t].push_back(f.tree_offset[t]);
    }
    switch (order_) {
      case Order::kBfs:
        PlaceBfs(in, filler, p, roots);
        break;
      case Order::kDfs:
        PlaceDfs(in, filler, p, roots, /*weighted=*/false);
        break;
      case Order::kWdfs:
        PlaceDfs(in, filler, p, roots, /*weighted=*/true);
        break;
      case Order::kBlockWdfs:
        PlaceBlockAligned(in, filler, p, roots, false);
        break;
      case Order::kBlockBestFirst:
        PlaceBlockAligned(in, filler, p, roots, true);
        break;
    }
    p.node_blocks = filler.blocks_used();
    return p;
  }

 private:
  // Places g (once). A leaf record is placed right after its parent when it
  // fits in the same block, so reaching a leaf costs no extra block there.
  static void Put(const PackInput& in, BlockFiller& filler, Placement& p, uint64_t g) {
    if (in.units(g) == 0 || p.pos[g] != kUnplaced) return;
    p.pos[g] = filler.Place(in.units(g));
    const Forest& f = *in.forest;
    if (f.left_child[g] < 0) return;
    const uint64_t base = f.tree_offset[in.tree_of[g]];
    for (int32_t c : {f.left_child[g], f.right_child[g]}) {
      const uint64_t cg = base + c;
      if (f.left_child[cg] < 0 && in.units(cg) > 0 && p.pos[cg] == kUnplaced &&
          filler.Fits(in.units(cg)))
        p.pos[cg] = filler.Place(in.units(cg));
    }
  }

  // Interleaved bins: trees are grouped into bins; each bin starts a block
  // and holds levels 0..bin_depth-1 of its trees, level by level (all roots,
  // then all level-1 nodes, ...). Nodes at depth bin_depth become residual
  // roots; the residuals start in whatever room the last bin block has left.
  void PlaceBins(const PackInput& in, const BinParams& bins, BlockFiller& filler, Placement& p,
                 std::vector<std::vector<uint64_t>>& roots) const {
    const uint32_t depth = bins.depth;
    const Forest& f = *in.forest;
    const size_t T = f.num_trees();
    // levels[t][d]: nodes of tree t at depth d < bin_depth, left to right.
    std::vector<std::vector<std::vector<uint64_t>>> levels(T);
    std::vector<uint64_t> bin_units(T, 0);
    for (size_t t = 0; t < T; ++t) {
      const uint64_t base = f.tree_offset[t];
      levels[t].resize(depth);
      std::vector<uint64_t> cur{base}, next;
      for (uint32_t d = 0; d <= depth && !cur.empty(); ++d) {
        next.clear();
        for (uint64_t g : cur) {
          if (d == depth) {
            roots[t].push_back(g);
            continue;
          }
          levels[t][d].push_back(g);
          bin_units[t] += in.units(g);
          Kids k = ChildrenOf(f, g, base);
          if (k.left != kUnplaced) {
            next.push_back(k.left);
            next.push_back(k.right);
          }
        }
        if (d < depth) cur.swap(next);
      }
      if (order_ == Order::kWdfs) OrderRootsByWdfs(in, depth, t, roots[t]);
    }
    size_t t = 0;
    while (t < T) {
      const size_t first = t;
      uint64_t units = 0;
      if (bins.trees_per_bin > 0) {
        t = std::min<size_t>(T, t + bins.trees_per_bin);
      } else {
        while (t < T && (t == first || units + bin_units[t] <= filler.payload_units())) {
          units += bin_units[t];
          ++t;
        }
      }
      filler.NewBlock();  // every bin starts a block
      for (uint32_t d = 0; d < depth; ++d)
        for (size_t u = first; u < t; ++u)
          for (uint64_t g : levels[u][d]) Put(in, filler, p, g);
      ++p.num_bins;
      p.max_trees_per_bin =
          std::max<uint32_t>(p.max_trees_per_bin, static_cast<uint32_t>(t - first));
    }
  }

  // For bin-wdfs: residual roots in the order a weighted DFS from the tree
  // root reaches them (the paper's WDFS starts at the root, skipping bin nodes).
  static void OrderRootsByWdfs(const PackInput& in, uint32_t depth, size_t t,
                               std::vector<uint64_t>& roots) {
    const Forest& f = *in.forest;
    const uint64_t base = f.tree_offset[t];
    std::vector<uint64_t> ordered, stack{base};
    while (!stack.empty()) {
      uint64_t g = stack.back();
      stack.pop_back();
      if (in.depth[g] == depth) {
        ordered.push_back(g);
        continue;
      }
      Kids k = ChildrenOf(f, g, base);
      if (k.left == kUnplaced) continue;
      if (Heavier(in, k.left, k.right)) {
        stack.push_back(k.right);
        stack.push_back(k.left);
      } else {
        stack.push_back(k.left);
        stack.push_back(k.right);
      }
    }
    roots.swap(ordered);
  }

  static void PlaceBfs(const PackInput& in, BlockFiller& filler, Placement& p,
                       const std::vector<std::vector<uint64_t>>& roots) {
    const Forest& f = *in.forest;
    std::deque<uint64_t> q;
    for (size_t t = 0; t < roots.size(); ++t) {
      const uint64_t base = f.tree_offset[t];
      q.assign(roots[t].begin(), roots[t].end());
      while (!q.empty()) {
        uint64_t g = q.front();
        q.pop_front();
        Put(in, filler, p, g);
        Kids k = ChildrenOf(f, g, base);
        if (k.left != kUnplaced) {
          q.push_back(k.left);
          q.push_back(k.right);
        }
      }
    }
  }

  static void PlaceDfs(const PackInput& in, BlockFiller& filler, Placement& p,
                       const std::vector<std::vector<uint64_t>>& roots, bool weighted) {
    const Forest& f = *in.forest;
    std::vector<uint64_t> stack;
    for (size_t t = 0; t < roots.size(); ++t) {
      const uint64_t base = f.tree_offset[t];
      for (uint64_t root : roots[t]) {
        stack.assign(1, root);
        while (!stack.empty()) {
          uint64_t g = stack.back();
          stack.pop_back();
          Put(in, filler, p, g);
          Kids k = ChildrenOf(f, g, base);
          if (k.left == kUnplaced) continue;
          if (!weighted || Heavier(in, k.left, k.right)) {
            stack.push_back(k.right);
            stack.push_back(k.left);
          } else {
            stack.push_back(k.left);
            stack.push_back(k.right);
          }
        }
      }
    }
  }

  // Block-aligned weighted placement. Each block is filled starting from
  // the hottest unplaced subtree root of the whole forest (the pool); when
  // the next node does not fit, the block's unfinished frontier goes back to
  // the pool and the next block restarts from the hottest root there. Cold
  // nodes therefore end up together at the end.
  //  - kBlockWdfs (the paper's block-aligned WDFS): inside a block, depth
  //    first, heavier child first.
  //  - kBlockBestFirst (pacset's default): inside a block, always expand the
  //    hottest frontier node. Only which nodes share a block matters for I/O,
  //    and best-first keeps a heavy sibling near the chunk root in the block
  //    instead of the deep, rarely used end of the heavy path.
  static void PlaceBlockAligned(const PackInput& in, BlockFiller& filler, Placement& p,
                                const std::vector<std::vector<uint64_t>>& roots, bool best_first) {
    const Forest& f = *in.forest;
    // Heap entries carry their weight: comparing through in.weight[] would
    // miss the cache on every step of a heap of millions.
    struct Hot {
      double weight;
      uint64_t g;
    };
    auto colder = [](const Hot& a, const Hot& b) {  // priority_queue wants "less"
      if (a.weight != b.weight) return a.weight < b.weight;
      return a.g > b.g;  // ties: lower id first, for deterministic files
    };
    using Heap = std::priority_queue<Hot, std::vector<Hot>, decltype(colder)>;
    Heap pool(colder), frontier(colder);
    std::vector<Hot> stack;
    for (const auto& r : roots)
      for (uint64_t g : r) pool.push({in.weight[g], g});
    auto local_empty = [&] { return best_first ? frontier.empty() : stack.empty(); };
    while (true) {
      if (local_empty()) {
        if (pool.empty()) break;
        (best_first ? frontier.push(pool.top()) : stack.push_back(pool.top()));
        pool.pop();
      }
      const uint64_t g = best_first ? frontier.top().g : stack.back().g;
      if (in.units(g) > 0 && p.pos[g] == kUnplaced && !filler.Fits(in.units(g))) {
        // Block boundary: defer this block's frontier, restart from the hottest.
        for (; !frontier.empty(); frontier.pop()) pool.push(frontier.top());
        for (const Hot& s : stack) pool.push(s);
        stack.clear();
        filler.NewBlock();
        continue;
      }
      (best_first ? frontier.pop() : stack.pop_back());
      Put(in, filler, p, g);
      Kids k = ChildrenOf(f, g, f.tree_offset[in.tree_of[g]]);
      if (k.left == kUnplaced) continue;
      // Push the lighter child first so the heavier one is on top of the stack.
      const bool left_heavier = Heavier(in, k.left, k.right);
      for (uint64_t c : {left_heavier ? k.right : k.left, left_heavier ? k.left : k.right}) {
        if (in.units(c) == 0) continue;
        (best_first ? frontier.push({in.weight[c], c}) : stack.push_back({in.weight[c], c}));
      }
    }
  }

  Order order_;
  bool bins_;
};

}  // namespace

std::unique_ptr<LayoutPolicy> MakeLayoutPolicy(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::kBfs:
      return std::make_unique<ForestLayout>(Order::kBfs, false);
    case LayoutKind::kDfs:
      return std::make_unique<ForestLayout>(Order::kDfs, false);
    case LayoutKind::kWdfs:
      return std::make_unique<ForestLayout>(Order::kWdfs, false);
    case LayoutKind::kBlockWdfs:
      return std::make_unique<ForestLayout>(Order::kBlockWdfs, false);
    case LayoutKind::kBinBfs:
      return std::make_unique<ForestLayout>(Order::kBfs, true);
    case LayoutKind::kBinDfs:
      return std::make_unique<ForestLayout>(Order::kDfs, true);
    case LayoutKind::kBinWdfs:
      return std::make_unique<ForestLayout>(Order::kWdfs, true);
    case LayoutKind::kBinBlockWdfs:
      return std::make_unique<ForestLayout>(Order::kBlockWdfs, true);
    case LayoutKind::kPacset:
      return std::make_unique<ForestLayout>(Order::kBlockBestFirst, true);
  }
  return nullptr;
}

}  // namespace pacset
