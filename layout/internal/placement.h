// Internal to the packer: what the layout policies work on and produce.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "layout/pac_format.h"
#include "layout/pack.h"
#include "model/forest.h"

namespace pacset {

inline constexpr uint64_t kUnplaced = std::numeric_limits<uint64_t>::max();

// Per global node of the forest: how it is stored and how hot it is.
// weight, depth and tree_of serve the placement only; the packer empties
// them before encoding.
struct PackInput {
  const Forest* forest = nullptr;
  std::vector<uint8_t> kind;    // RefKind used when something refers to this node
  std::vector<double> weight;   // access probability per traversal of its tree
  std::vector<uint32_t> depth;  // edges from the tree root (reachable nodes only)
  std::vector<uint8_t> reachable;
  std::vector<uint32_t> tree_of;  // tree index of every node
  // Classes whose rows the estimate follows separately (LatentClasses), 0 for none.
  uint32_t latent_classes = 0;

  // Units of the node region a node and a leaf record take (set by the packer
  // with the node format).
  uint32_t node_units = 1;
  uint32_t record_units = 1;

  // Space `g` takes in the node region: 0 when it is inlined or unreachable.
  uint32_t units(uint64_t g) const {
    if (!reachable[g]) return 0;
    switch (static_cast<RefKind>(kind[g])) {
      case RefKind::kNode:
        return node_units;
      case RefKind::kLeafRecord:
        return record_units;
      default:
        return 0;
    }
  }
  bool stored(uint64_t g) const { return units(g) > 0; }
};

// The interleaved bins of a binned layout (ignored by the others).
struct BinParams {
  uint32_t depth = 0;          // levels per bin; 0 = no bins
  uint32_t trees_per_bin = 0;  // 0 = as many trees as fit one block
};

// Hands out positions in the node region block by block: an item never
// straddles a block trailer.
class BlockFiller {
 public:
  explicit BlockFiller(uint32_t block_size)
      : block_units_(block_size / kUnit),
        payload_units_((block_size - kBlockTrailerSize) / kUnit) {}

  // Position (in units from the start of the node region) for an item.
  uint64_t Place(uint32_t units) {
    if (used_ + units > payload_units_) NewBlock();
    const uint64_t pos = block_ * block_units_ + used_;
    used_ += units;
    return pos;
  }
  bool Fits(uint32_t units) const { return used_ + units <= payload_units_; }
  // Moves to a fresh block unless the current one is empty.
  void NewBlock() {
    if (used_ > 0) {
      ++block_;
      used_ = 0;
    }
  }
  bool block_empty() const { return used_ == 0; }
  uint64_t blocks_used() const { return used_ > 0 ? block_ + 1 : block_; }
  uint32_t payload_units() const { return payload_units_; }

 private:
  uint64_t block_units_;
  uint32_t payload_units_;
  uint64_t block_ = 0;
  uint32_t used_ = 0;
};

struct Placement {
  std::vector<uint64_t> pos;  // per global node; kUnplaced for inlined / unreachable
  uint64_t node_blocks = 0;
  uint64_t bin_blocks = 0;
  uint64_t num_bins = 0;
  uint32_t max_trees_per_bin = 0;
};

// A layout policy: assigns every stored node a position. Place is const
// and only reads `in`, so candidates can be placed side by side.
class LayoutPolicy {
 public:
  virtual ~LayoutPolicy() = default;
  virtual Placement Place(const PackInput& in, const BinParams& bins,
                          uint32_t block_size) const = 0;
};

std::unique_ptr<LayoutPolicy> MakeLayoutPolicy(LayoutKind kind);

// Expected number of distinct node-region blocks one row touches, from the
// node weights alone (no rows). The chance that tree t's path enters block b
// is the summed access probability of t's nodes in b that have no ancestor in
// b (exact within a tree); trees are taken as independent given the row's
// class when the leaves hold class distributions (`in.latent_classes`), as
// independent otherwise. Independence alone overestimates large blocks
// badly, enough to choose the wrong depth: trees of a random forest send a
// row the same way (docs/bin-choice.md). O(nodes x classes + blocks x
// classes). layout/pack_bin_choice.cc.
double EstimateBlocksPerRow(const PackInput& in, const Placement& p, uint32_t block_size);

// The number of classes when every reachable leaf holds a class distribution
// (non-negative, summing to 1: scikit-learn classifiers) and the forest has
// cardinalities, at most kMaxLatentClasses; else 0.
inline constexpr uint32_t kMaxLatentClasses = 64;
uint32_t LatentClasses(const Forest& f, const std::vector<uint8_t>& reachable);

// Mean distinct node-region blocks per row over `rows`, routed through the
// forest: the count CountBlocksPerRow (engine/blocks_per_row.h) makes with the
// engine on the packed file, made on a placement before anything is encoded
// (tests hold the two equal). O(rows x path lengths).
double CountPlacedBlocksPerRow(const PackInput& in, const Placement& p, uint32_t block_size,
                               const RowMatrix& rows);

// Places the forest with the bin parameters of `o` (PackOptions::bin_depth
// and trees_per_bin; kChooseBins ones are chosen, see pack.h): every
// candidate is placed in full and scored, on o.score_rows when given, else
// by EstimateBlocksPerRow; the lowest score wins (ties: the first tried).
// Layouts without bins are placed once.
struct BinDecision {
  BinParams params;
  Placement placement;
  double expected_blocks_per_row = 0;  // EstimateBlocksPerRow of `placement`
  uint64_t scored_rows = 0;            // rows the scores were counted on; 0: expected
  std::vector<LayoutCandidate>
      candidates;     // what was compared, in order; empty if nothing was chosen
  size_t chosen = 0;  // index of the packed one in `candidates`
};
BinDecision DecideBins(const LayoutPolicy& policy, const PackInput& in, const PackOptions& o);

}  // namespace pacset
