#include "engine/internal/warm_forest.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/internal/sigbus.h"
#include "engine/internal/walk.h"
#include "engine/internal/warm_simd.h"
#include "model/forest.h"
#include "model/routing.h"

namespace pacset::internal {
namespace {

// Buffers of the build, all allocated before the pass that reads the
// mapping: it runs where a SIGBUS may jump out, so it allocates nothing.
// That pass copies every node it checks into `copies`; everything after it
// reads the copies only, never the mapping again (a file rewritten under
// its mapping cannot slip a node in between the check and the use). Only
// leaf records' values (data, not structure) are read from the mapping
// again, at references checked in the copies.
template <typename NodeT>
struct Scratch {
  std::vector<uint32_t> index;  // per node-region unit: 0 unseen, then 1 + visit number
  std::vector<NodeT> copies;    // per visit number: the node as checked
  std::vector<uint32_t> order;  // per position in file order: the visit number
  std::vector<uint64_t> stack;  // DFS: ref << 8 | depth
  uint64_t num_nodes = 0;
  uint64_t num_records = 0;  // leaf-record leaves, roots included
};

// Why a file is not a forest of trees (FORMAT.md §5), as plain data: the
// checking pass runs where a SIGBUS may jump out.
struct Fault {
  enum Code : uint8_t {
    kNone = 0,
    kOutside,       // a node outside the node region or across a trailer
    kTooDeep,       // deeper than the header's max depth
    kReachedTwice,  // shared, or a cycle
    kTooMany,       // more nodes than the header says
    kFeature,       // a feature the model does not have
    kBadLeaf,       // a leaf outside the region, a class out of range
  };
  Code code = kNone;
  uint64_t tree = 0;
  uint64_t ref = 0;
};

Status FaultToStatus(const PacFile& file, const Fault& f) {
  static const char* const kWhat[] = {
      "",
      "has a node outside the node region or across a block trailer",
      "has a path longer than the header's max depth",
      "reaches a node twice (shared, or a cycle)",
      "has more internal nodes than the header says",
      ("splits on a feature the model does not have, or has a categorical node naming a split "
       "the file does not have or a reserved outside direction"),
      "has a leaf outside the node region or a class out of range"};
  return Status::Corruption(file.name() + ": tree " + std::to_string(f.tree) + " " + kWhat[f.code] +
                            " (unit " + std::to_string(f.ref) + ")");
}

template <typename NodeT>
struct Builder {
  const PacFile& file;
  const char* image;
  uint64_t lo;  // first unit of the node region
  uint32_t leaf_bytes;

  NodeT Node(uint64_t ref) const {
    NodeT n;
    std::memcpy(&n, image + ref * kUnit, sizeof(NodeT));
    return n;
  }

  bool LeafOk(uint64_t ref, uint32_t kind) const {
    switch (static_cast<RefKind>(kind)) {
      case RefKind::kInlineValue:
        return true;
      case RefKind::kInlineClass:
        return ref < file.header().num_outputs;
      case RefKind::kLeafRecord:
        return file.RefInNodeRegion(ref, leaf_bytes);
      case RefKind::kNode:
        break;
    }
    return false;
  }

  // Pass 1: every tree's nodes, checked and copied (the only pass that reads
  // nodes from the mapping). Creates nothing with a destructor.
  Fault Collect(Scratch<NodeT>& s) const {
    using V = NodeView<NodeT>;
    constexpr uint64_t kNodeUnits = sizeof(NodeT) / kUnit;
    const PacHeader& h = file.header();
    const size_t stack_cap = s.stack.size();
    const std::vector<TreeRecord>& trees = file.trees();
    for (uint64_t ti = 0; ti < trees.size(); ++ti) {
      const TreeRecord& t = trees[ti];
      if (t.root_kind != kNodeKind) {
        if (!LeafOk(t.root, t.root_kind)) return {Fault::kBadLeaf, ti, t.root};
        s.num_records += t.root_kind == static_cast<uint32_t>(RefKind::kLeafRecord);
        continue;
      }
      size_t top = 0;
      s.stack[top++] = t.root << 8;
      while (top) {
        const uint64_t e = s.stack[--top];
        const uint64_t ref = e >> 8;
        const uint32_t depth = e & 0xFF;
        if (!file.RefInNodeRegion(ref, sizeof(NodeT))) return {Fault::kOutside, ti, ref};
        if (depth > h.max_depth) return {Fault::kTooDeep, ti, ref};
        for (uint64_t k = 0; k < kNodeUnits; ++k)
          if (s.index[ref - lo + k]) return {Fault::kReachedTwice, ti, ref};
        if (s.num_nodes == s.copies.size()) return {Fault::kTooMany, ti, ref};
        const uint64_t visit = s.num_nodes++;
        s.index[ref - lo] = static_cast<uint32_t>(visit + 1);
        if (kNodeUnits > 1) s.index[ref - lo + 1] = UINT32_MAX;  // taken, not a node start
        s.copies[visit] = Node(ref);
        const NodeT& n = s.copies[visit];
        if (V::Feature(n) >= h.num_features) return {Fault::kFeature, ti, ref};
        if ((V::Flags(n) & kNodeFlagCategorical) &&
            !CategoricalNodeOk(V::Flags(n), SplitIndex(n), file.categorical_splits().size()))
          return {Fault::kFeature, ti, ref};
        const uint32_t flags = V::Flags(n);
        const uint64_t child[2] = {n.left, n.right};
        for (int c = 0; c < 2; ++c) {
          const uint32_t kind = (flags >> (kLeftKindShift + 2 * c)) & 3u;
          if (kind != kNodeKind) {
            if (!LeafOk(child[c], kind)) return {Fault::kBadLeaf, ti, child[c]};
            s.num_records += kind == static_cast<uint32_t>(RefKind::kLeafRecord);
          } else {
            if (top == stack_cap || child[c] >= (uint64_t{1} << 56))
              return {Fault::kTooDeep, ti, child[c]};
            s.stack[top++] = child[c] << 8 | (depth + 1);
          }
        }
      }
    }
    return {};
  }

  // Pass 2: the nodes in file order, children renumbered. Leaf entries
  // [0, num_outputs) are the one-hot classes (a random forest to purity
  // needs no other); the others follow. True when every leaf is an inline
  // value.
  template <typename Out>
  bool Fill(const Scratch<NodeT>& s, WarmForest* w, Out* out) const {
    using V = NodeView<NodeT>;
    const uint32_t K = file.header().num_outputs;
    for (uint32_t c = 0; c < K; ++c)
      w->leaves[c] = c | uint64_t{static_cast<uint32_t>(RefKind::kInlineClass)}
                             << kWarmLeafKindShift;
    uint64_t num_leaves = K, num_values = 0;
    const uint32_t width = file.header().leaf_width;
    bool values_only = true;
    auto child_of = [&](uint64_t ref, uint32_t kind) -> int32_t {
      values_only &= kind == kNodeKind || kind == static_cast<uint32_t>(RefKind::kInlineValue);
      if (kind == kNodeKind) return static_cast<int32_t>(s.index[ref - lo] - 1);
      if (kind == static_cast<uint32_t>(RefKind::kInlineClass)) return ~static_cast<int32_t>(ref);
      if (kind == static_cast<uint32_t>(RefKind::kLeafRecord)) {
        std::memcpy(&w->records[num_values], image + ref * kUnit, 8 * width);
        ref = num_values;
        num_values += width;
      }
      w->leaves[num_leaves] = ref | uint64_t{kind} << kWarmLeafKindShift;
      return ~static_cast<int32_t>(num_leaves++);
    };
    for (size_t i = 0; i < s.order.size(); ++i) {
      const NodeT& n = s.copies[s.order[i]];
      const uint32_t flags = V::Flags(n);
      out[i].threshold = n.threshold;
      if (flags & kNodeFlagCategorical) {  // the split's index, bit for bit
        static_assert(sizeof(out[i].threshold) == sizeof(n.threshold));
        std::memcpy(&out[i].threshold, &n.threshold, sizeof(n.threshold));
      }
      out[i].feature = V::Feature(n);
      out[i].child[0] = child_of(n.left, (flags >> kLeftKindShift) & 3u);
      out[i].child[1] = child_of(n.right, (flags >> kRightKindShift) & 3u);
      const bool categorical = flags & kNodeFlagCategorical;
      w->flags[i] =
          static_cast<uint8_t>((flags & kRoutingFlagMask) | (categorical ? kCategorical : 0));
      if ((flags & kZeroIsMissing) || categorical) w->plain_routing = false;
    }
    const std::vector<TreeRecord>& trees = file.trees();
    for (size_t t = 0; t < trees.size(); ++t)
      w->roots[t] = child_of(trees[t].root, trees[t].root_kind);
    w->leaves.resize(num_leaves);  // shrinks: no allocation
    return values_only;
  }
};

// Whether every node routes as the SIMD kernels can: no numerical node uses
// LightGBM's NaN-as-zero or zero-as-missing rule (on a categorical node those
// bits are its outside direction).
bool KernelsRouteEveryNode(const WarmForest& w) {
  for (uint8_t fl : w.flags)
    if (!(fl & kCategorical) && (fl & (kNanIsZero | kZeroIsMissing))) return false;
  return true;
}

// WarmForest::direction_words; false (and none) when padding every split to
// the widest would take too much memory (more than 4 MiB and 16 times the
// file's category words, or 64 MiB), or the widest reaches categories XGBoost's rule
// does not have (2^24: the kernels then need no rule of their own past the
// words). Padding costs memory only: a walk reads the words of its category.
bool BuildDirectionWords(WarmForest* w) {
  constexpr uint32_t kMaxShift = 19;  // 32 << 19 = 2^24 categories
  constexpr uint64_t kMaxWords = uint64_t{1} << 24, kMaxBlowup = 16, kSmallWords = 1u << 20;
  const std::vector<CategoricalSplit>& splits = w->categorical_splits;
  if (splits.empty()) return true;
  uint32_t widest = 1;
  for (const CategoricalSplit& s : splits) widest = std::max({widest, s.left_words, s.right_words});
  uint32_t shift = 0;
  while ((uint64_t{1} << shift) < widest) ++shift;
  if (shift > kMaxShift) return false;
  const uint64_t total = uint64_t{splits.size()} * 2 << shift;
  if (total > kMaxWords ||
      total > std::max<uint64_t>(kSmallWords, kMaxBlowup * w->category_words.size()))
    return false;
  w->direction_shift = shift;
  w->direction_words.assign(total, 0);
  const uint32_t* words = w->category_words.data();
  const uint64_t categories = uint64_t{32} << shift;
  for (size_t i = 0; i < splits.size(); ++i) {
    const CategoricalSplit& s = splits[i];
    uint32_t* out_right = &w->direction_words[(2 * i) << shift];     // outside goes right
    uint32_t* out_left = &w->direction_words[(2 * i + 1) << shift];  // outside goes left
    for (uint64_t c = 0; c < categories; ++c) {
      const bool in_left =
          InCategorySet(words + s.left_first, s.left_words, static_cast<int64_t>(c));
      const bool in_right =
          InCategorySet(words + s.right_first, s.right_words, static_cast<int64_t>(c));
      out_right[c >> 5] |= uint32_t{in_left} << (c & 31);
      out_left[c >> 5] |= uint32_t{in_left || !in_right} << (c & 31);
    }
  }
  return true;
}

// The routing bits of node i's feature word in nodes32 (kWarmFeatureMask).
uint32_t KernelRoutingBits(const WarmForest& w, size_t i, uint64_t split) {
  const uint8_t fl = w.flags[i];
  const bool default_left = fl & kDefaultLeft;
  uint32_t bits = default_left ? kWarmDefaultLeftBit : 0;
  if (fl & kCategorical) {
    const uint8_t outside = (fl & kOutsideMask) >> kOutsideShift;
    const bool outside_left =
        outside == static_cast<uint8_t>(OutsideDirection::kLeft) ||
        (outside == static_cast<uint8_t>(OutsideDirection::kDefault) && default_left);
    const bool truncates =
        w.categorical_splits[split].rule == static_cast<uint8_t>(CategoryRule::kLightgbm);
    bits |= kWarmCategoricalBit | (outside_left ? kWarmOutsideLeftBit : 0) |
            (truncates ? kWarmTruncatesBit : 0);
  }
  return bits;
}

// nodes32 for the SIMD kernels (wide files: the float32 view of nodes64),
// its feature words' routing bits, and simd_routing.
void BuildKernelView(const PacHeader& h, WarmForest* w) {
  if (h.num_features > uint64_t{kWarmFeatureMask} + 1) {
    if (!w->nodes64.empty()) w->nodes32.clear();
    return;
  }
  const bool routable = KernelsRouteEveryNode(*w) && BuildDirectionWords(w);
  const size_t n = w->flags.size();
  if (!w->nodes64.empty()) {
    if (!(w->plain_routing || routable) || n >= kWarmSimdMaxNodes) return;
    w->nodes32.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const WarmNode<double>& d = w->nodes64[i];
      float t;
      if (w->flags[i] & kCategorical) {  // the split's index, as bits
        const uint32_t index = static_cast<uint32_t>(WarmSplitIndex(d.threshold));
        std::memcpy(&t, &index, 4);
      } else {
        t = Float32AtOrBelow(d.threshold);
      }
      w->nodes32[i] = {t, d.feature, {d.child[0], d.child[1]}};
    }
  }
  for (size_t i = 0; i < n; ++i) {
    WarmNode<float>& node = w->nodes32[i];
    const uint64_t split = (w->flags[i] & kCategorical) ? WarmSplitIndex(node.threshold) : 0;
    node.feature |= KernelRoutingBits(*w, i, split);
  }
  w->simd_routing = routable && n < kWarmSimdMaxNodes;
  if (!w->simd_routing) {
    w->direction_words.clear();
    w->direction_words.shrink_to_fit();
  }
}

template <typename NodeT>
StatusOr<std::unique_ptr<WarmForest>> Build(const PacFile& file, const char* image) {
  const auto start = std::chrono::steady_clock::now();
  const PacHeader& h = file.header();
  const uint64_t block_units = h.block_size / kUnit;
  const uint64_t units = h.node_block_count * block_units;
  // Indices are int32; the depth fits the stack entry's low byte.
  if (h.num_nodes >= (uint64_t{1} << 30) || h.num_outputs >= (1u << 30) || h.max_depth >= 255)
    return std::unique_ptr<WarmForest>();
  Builder<NodeT> b{file, image, h.node_first_block * block_units, LeafRecordBytes(h.leaf_width)};
  Scratch<NodeT> s;
  s.index.assign(units, 0);
  s.copies.resize(h.num_nodes);  // PacHeader checked that they fit the node region
  s.stack.resize(h.max_depth + 2);
  Fault fault;
  {
    SigbusScope scope(image, file.size(), h.block_size);
    if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file.name());
    scope.Arm();
    fault = b.Collect(s);
    scope.Disarm();
  }
  if (fault.code != Fault::kNone) return FaultToStatus(file, fault);
  if (s.num_nodes != h.num_nodes || s.num_records != h.num_leaf_records)
    return Status::Corruption(file.name() + ": the trees have " + std::to_string(s.num_nodes) +
                              " internal nodes and " + std::to_string(s.num_records) +
                              " leaf records, the header says " + std::to_string(h.num_nodes) +
                              " and " + std::to_string(h.num_leaf_records));
  // Number the nodes in file order (index: unit -> 1 + that number).
  s.order.reserve(s.num_nodes);
  for (uint32_t& v : s.index) {
    if (v == 0 || v == UINT32_MAX) continue;
    s.order.push_back(v - 1);
    v = static_cast<uint32_t>(s.order.size());
  }

  auto w = std::make_unique<WarmForest>();
  w->categorical_splits = file.categorical_splits();
  w->category_words = file.category_words();
  if constexpr (std::is_same_v<NodeT, CompactNode>) {
    w->nodes32.resize(s.num_nodes);
  } else {
    w->nodes64.resize(s.num_nodes);
  }
  w->flags.resize(s.num_nodes);
  w->leaves.resize(h.num_outputs + 2 * s.num_nodes + h.num_trees);
  w->records.resize(s.num_records * h.leaf_width);
  w->roots.resize(h.num_trees);
  bool values_only;
  {
    SigbusScope scope(image, file.size(), h.block_size);
    if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(file.name());
    scope.Arm();
    if constexpr (std::is_same_v<NodeT, CompactNode>) {
      values_only = b.Fill(s, w.get(), w->nodes32.data());
    } else {
      values_only = b.Fill(s, w.get(), w->nodes64.data());
    }
    scope.Disarm();
  }
  w->leaves.shrink_to_fit();
  BuildKernelView(h, w.get());
  if (values_only) {
    w->leaf_values.resize(w->leaves.size());
    for (size_t i = 0; i < w->leaves.size(); ++i) {
      const uint32_t bits = static_cast<uint32_t>(w->leaves[i]);
      std::memcpy(&w->leaf_values[i], &bits, 4);
    }
  }
  w->build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return w;
}

}  // namespace

StatusOr<std::unique_ptr<WarmForest>> BuildWarmForest(const PacFile& file, const char* image) {
  if (file.header().node_format == static_cast<uint8_t>(NodeFormat::kCompact16))
    return Build<CompactNode>(file, image);
  return Build<WideNode>(file, image);
}

}  // namespace pacset::internal
