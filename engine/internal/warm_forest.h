// The warm-path representation of a .pac node region: every tree's internal
// nodes copied once, validated, into private memory as compact arrays the
// warm loop walks with no per-node checks (engine/warm_walk.cc).
//
// Why a copy: the .pac layout serves cold I/O (few blocks per row); once
// everything is in memory the walk is bound by instructions per node, and a
// node that was checked when copied needs no check again. Walking the
// mapping itself would have to keep the per-node range and feature checks,
// since a shared mapping can change under us.
//
// What it holds, in the file's node order (so the layout's locality stays):
//   nodes: threshold (the file's type), feature, children; a child >= 0 is
//          a node index, < 0 is ~(index into `leaves`);
//   flags: the node's routing flags (model/forest.h), for rows with NaN and
//          for LightGBM's zero/NaN rules;
//   leaves: a leaf reference and its RefKind as ref | kind << 62 (the same
//          (ref, kind) the walk of the file ends on, so sums stay bit-exact);
//          entries [0, num_outputs) are the one-hot classes, shared by every
//          such leaf (a random forest to purity needs no others); a leaf
//          record's ref is the offset of its copy in `records`;
//   records: the values of every leaf record (leaf_width float64 each);
//   roots: per tree, its node index or ~leaf.
// Built only when the file is a forest of trees (FORMAT.md §5): every
// reference inside the node region, every feature and class in range, no
// node reached twice (no cycle, no sharing), no path longer than the
// header's max_depth, every leaf record inside the region, and exactly the
// header's numbers of nodes and leaf records. Otherwise the build is
// kCorruption naming the tree; the engine then fails every warm request
// with it. The nodes are read from the mapping once, into private copies
// that are checked and then used: a file rewritten under its mapping
// cannot change a node between its check and its use.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "layout/pac_file.h"
#include "util/status.h"

namespace pacset::internal {

template <typename Threshold>
struct WarmNode {
  Threshold threshold;
  uint32_t feature;
  int32_t child[2];  // left, right
};
static_assert(sizeof(WarmNode<float>) == 16);
static_assert(sizeof(WarmNode<double>) == 24);

inline constexpr int kWarmLeafKindShift = 62;

// A categorical warm node's split index: the bits of its threshold.
inline uint64_t WarmSplitIndex(float t) {
  uint32_t i;
  std::memcpy(&i, &t, 4);
  return i;
}
inline uint64_t WarmSplitIndex(double t) {
  uint64_t i;
  std::memcpy(&i, &t, 8);
  return i;
}

// nodes32's feature words: the feature in the low 24 bits, and above it the
// node's routing as the SIMD kernels read it (engine/internal/warm_simd.h),
// so that a step gathers them with the threshold: the default direction,
// and for a categorical node its kind, where a value outside its sets goes
// (OutsideDirection resolved), and whether its rule truncates values in
// (-1, 0) to category 0 (CategoryRule::kLightgbm). Every reader of nodes32
// masks the feature with kWarmFeatureMask.
inline constexpr uint32_t kWarmFeatureMask = (1u << 24) - 1;
inline constexpr uint32_t kWarmDefaultLeftBit = 1u << 24;
inline constexpr uint32_t kWarmCategoricalBit = 1u << 25;
inline constexpr int kWarmOutsideLeftShift = 26;
inline constexpr uint32_t kWarmOutsideLeftBit = 1u << kWarmOutsideLeftShift;
inline constexpr uint32_t kWarmTruncatesBit = 1u << 27;

struct WarmForest {
  // Compact files: the nodes. Wide files: the same nodes (nodes64) with each
  // threshold t rounded down to float32 (the largest float32 <= t, NaN
  // kept), which route every value float32 holds as t does — for such x,
  // x <= t iff x <= that float — so the SIMD kernels (float32 compares) can
  // walk them for blocks of such rows; empty when kWarmSimdMaxNodes or more,
  // when the file has more than kWarmFeatureMask + 1 features, or when
  // neither plain_routing nor simd_routing (the kernels are not used then).
  // Feature words as above; a categorical node's threshold holds its split's
  // index, as in nodes64.
  std::vector<WarmNode<float>> nodes32;
  std::vector<WarmNode<double>> nodes64;  // wide files
  std::vector<uint8_t> flags;
  std::vector<uint64_t> leaves;
  std::vector<double> records;
  std::vector<int32_t> roots;
  // Categorical nodes (flags with model/forest.h kCategorical) hold their
  // split's index in the bits of their threshold; the file's splits and
  // category words, copied (PacFile checked them).
  std::vector<CategoricalSplit> categorical_splits;
  std::vector<uint32_t> category_words;
  // True when no node uses LightGBM's zero-as-missing rule: for rows without
  // NaN a node then routes by `x <= threshold` alone (the default direction
  // and LightGBM's NaN-as-zero only concern NaN; model/routing.h GoesLeft).
  bool plain_routing = true;
  // True when the SIMD kernels can walk any row, NaN included, through every
  // node (numerical or categorical): no node uses LightGBM's NaN-as-zero or
  // zero-as-missing rules, nodes32 is built, and the direction words fit.
  bool simd_routing = false;
  // The categorical splits as the SIMD kernels read them: per split s, two
  // bitsets of 2^direction_shift words each, at (2s + o) << direction_shift:
  // bit c says whether category c goes left when a value outside the
  // split's sets goes right (o = 0: the left set) or left (o = 1: the left
  // set and every category not in the right set). A category past the
  // bitsets (or no category) goes the node's outside way; the words are
  // padded to the widest split so that a node needs no length of its own.
  std::vector<uint32_t> direction_words;
  uint32_t direction_shift = 0;
  // When every leaf a walk can end on is an inline value (XGBoost, LightGBM
  // regression): per entry of `leaves`, that value (entries [0, num_outputs),
  // the one-hot classes, are never reached then), so adding a leaf is one
  // float load. Empty otherwise.
  std::vector<float> leaf_values;
  double build_seconds = 0;

  uint64_t bytes() const {
    return nodes32.size() * sizeof(nodes32[0]) + nodes64.size() * sizeof(nodes64[0]) +
           flags.size() + leaves.size() * 8 + records.size() * 8 + roots.size() * 4 +
           leaf_values.size() * 4 + direction_words.size() * 4;
  }
};

// Builds the warm forest from `image` (the whole file, blocks of the node
// region in memory and verified). nullptr for forests too large for it (2^30
// nodes or more, paths of 255 edges or more): the checked walk then runs;
// kCorruption when the file is not a forest of trees (above). A SIGBUS while
// reading gives kIOError naming the block.
StatusOr<std::unique_ptr<WarmForest>> BuildWarmForest(const PacFile& file, const char* image);

}  // namespace pacset::internal
