// Internal to the packer: what the layout policies work on and produce.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "layout/pac_format.h"
#include "model/forest.h"

namespace pacset {

inline constexpr uint64_t kUnplaced = std::numeric_limits<uint64_t>::max();

// Per global node of the forest: how it is stored and how hot it is.
struct PackInput {
  const Forest* forest = nullptr;
  std::vector<uint8_t> kind;    // RefKind used when something refers to this node
  std::vector<uint32_t> units;  // space taken in the node region (0 when inlined)
  std::vector<double> weight;   // access probability per traversal of its tree
  std::vector<uint32_t> depth;  // edges from the tree root (reachable nodes only)
  std::vector<uint8_t> reachable;
  std::vector<uint32_t> tree_of;  // tree index of every node
  uint32_t bin_depth = 0;
  uint32_t trees_per_bin = 0;  // 0 = auto

  bool stored(uint64_t g) const { return reachable[g] && units[g] > 0; }
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

// A layout policy: assigns every stored node a position.
class LayoutPolicy {
 public:
  virtual ~LayoutPolicy() = default;
  virtual Placement Place(const PackInput& in, uint32_t block_size) const = 0;
};

std::unique_ptr<LayoutPolicy> MakeLayoutPolicy(LayoutKind kind);

}  // namespace pacset
