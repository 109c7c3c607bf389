#include "layout/structure_check.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>

#include "layout/block.h"

namespace pacset {
namespace {

class PacFileBlockReader final : public StructureBlockReader {
 public:
  explicit PacFileBlockReader(const PacFile& file) : file_(file) {}
  Status Read(uint64_t b, std::string* out) override {
    const PacHeader& h = file_.header();
    out->resize(h.block_size);
    PACSET_RETURN_IF_ERROR(file_.ReadBlock(b, out->data()));
    return VerifyBlock(out->data(), h.block_size, b, h.block_seed(), file_.name());
  }

 private:
  const PacFile& file_;
};

// Node blocks, read through the reader and kept a few hundred at a time
// (first in, first out: a depth-first walk of a PACSET layout stays in a few
// blocks for long).
class BlockCache {
 public:
  BlockCache(StructureBlockReader& reader, uint32_t block_size)
      : reader_(reader), bs_(block_size), capacity_(std::max<uint64_t>(4, (16u << 20) / bs_)) {}

  // Copies `n` bytes at file offset `offset` (inside one payload) to `dst`.
  Status Copy(uint64_t offset, void* dst, size_t n) {
    const uint64_t b = offset / bs_;
    auto it = blocks_.find(b);
    if (it == blocks_.end()) {
      if (blocks_.size() >= capacity_) {
        blocks_.erase(order_.front());
        order_.pop_front();
      }
      std::string bytes;
      PACSET_RETURN_IF_ERROR(reader_.Read(b, &bytes));
      if (bytes.size() != bs_) return Status::Internal("a block of the wrong size");
      ++reads_;
      it = blocks_.emplace(b, std::move(bytes)).first;
      order_.push_back(b);
    }
    std::memcpy(dst, it->second.data() + offset % bs_, n);
    return Status::Ok();
  }
  uint64_t reads() const { return reads_; }

 private:
  StructureBlockReader& reader_;
  const uint32_t bs_;
  const uint64_t capacity_;
  std::unordered_map<uint64_t, std::string> blocks_;
  std::deque<uint64_t> order_;
  uint64_t reads_ = 0;
};

struct Decoded {
  uint32_t feature;
  uint8_t flags;
  uint64_t child[2];
  uint64_t split_index;  // a categorical node's (SplitIndex)
};

}  // namespace

std::unique_ptr<StructureBlockReader> NewPacFileBlockReader(const PacFile& file) {
  return std::make_unique<PacFileBlockReader>(file);
}

StatusOr<StructureSummary> CheckForestStructure(const PacFile& file, StructureBlockReader& reader) {
  const PacHeader& h = file.header();
  const bool compact = h.node_format == static_cast<uint8_t>(NodeFormat::kCompact16);
  const uint32_t node_bytes = compact ? sizeof(CompactNode) : sizeof(WideNode);
  const uint32_t record_bytes =
      static_cast<uint32_t>((8ull * h.leaf_width + kUnit - 1) / kUnit * kUnit);
  const uint64_t lo = h.node_first_block * (h.block_size / kUnit);
  const uint64_t units = h.node_block_count * (h.block_size / kUnit);
  std::vector<uint64_t> seen((units + 63) / 64, 0);
  BlockCache blocks(reader, h.block_size);
  StructureSummary sum;
  struct Entry {
    uint64_t ref;
    uint32_t depth;
  };
  std::vector<Entry> stack;

  for (uint64_t t = 0; t < h.num_trees; ++t) {
    const TreeRecord& tree = file.trees()[t];
    const std::string where = file.name() + ": tree " + std::to_string(t);
    auto node_name = [&](uint64_t ref) {
      return " at unit " + std::to_string(ref) + " (block " +
             std::to_string(ref * kUnit / h.block_size) + ")";
    };
    // A leaf reached from `parent` (or the root), checked as FORMAT.md §5 says.
    auto leaf = [&](uint64_t ref, uint32_t kind, uint32_t depth) -> Status {
      if (depth > sum.deepest) sum.deepest = depth;
      switch (static_cast<RefKind>(kind)) {
        case RefKind::kLeafRecord:
          if (!file.RefInNodeRegion(ref, record_bytes))
            return Status::Corruption(where + ": a leaf record" + node_name(ref) +
                                      " lies outside the node region or crosses a trailer");
          ++sum.leaf_records;
          return Status::Ok();
        case RefKind::kInlineClass:
          if (ref >= h.num_outputs)
            return Status::Corruption(where + ": a leaf of class " + std::to_string(ref) +
                                      " (the forest has " + std::to_string(h.num_outputs) +
                                      " outputs)");
          ++sum.inline_leaves;
          return Status::Ok();
        case RefKind::kInlineValue:
          ++sum.inline_leaves;
          return Status::Ok();
        case RefKind::kNode:
          break;
      }
      return Status::Internal("not a leaf");
    };
    if (tree.root_kind != static_cast<uint8_t>(RefKind::kNode)) {
      PACSET_RETURN_IF_ERROR(leaf(tree.root, tree.root_kind, 0));  // PacFile checked it too
      continue;
    }
    stack.clear();
    stack.push_back({tree.root, 0});
    while (!stack.empty()) {
      const Entry e = stack.back();
      stack.pop_back();
      if (!file.RefInNodeRegion(e.ref, node_bytes))
        return Status::Corruption(where + ": a node" + node_name(e.ref) +
                                  " lies outside the node region or crosses a trailer");
      if (e.depth > h.max_depth)
        return Status::Corruption(where + ": a node" + node_name(e.ref) + " lies " +
                                  std::to_string(e.depth) +
                                  " edges below the root, deeper than the header's max depth " +
                                  std::to_string(h.max_depth) + " (or a cycle)");
      const uint64_t u = e.ref - lo;
      for (uint64_t k = u; k < u + node_bytes / kUnit; ++k) {
        if ((seen[k >> 6] >> (k & 63)) & 1)
          return Status::Corruption(where + ": the node" + node_name(e.ref) +
                                    " overlaps a node reached before (shared, or a cycle)");
        seen[k >> 6] |= uint64_t{1} << (k & 63);
      }
      if (++sum.nodes > h.num_nodes)
        return Status::Corruption(where + ": more internal nodes than the header's " +
                                  std::to_string(h.num_nodes));
      // Decoded from a private copy: the bytes are read once.
      Decoded n;
      if (compact) {
        CompactNode c;
        PACSET_RETURN_IF_ERROR(blocks.Copy(e.ref * kUnit, &c, sizeof(c)));
        n = {c.feature_flags & 0xFFFFFFu,
             static_cast<uint8_t>(c.feature_flags >> 24),
             {c.left, c.right},
             SplitIndex(c)};
      } else {
        WideNode w;
        PACSET_RETURN_IF_ERROR(blocks.Copy(e.ref * kUnit, &w, sizeof(w)));
        n = {w.feature, w.flags, {w.left, w.right}, SplitIndex(w)};
      }
      if (n.feature >= h.num_features)
        return Status::Corruption(where + ": the node" + node_name(e.ref) + " splits on feature " +
                                  std::to_string(n.feature) + " (the forest has " +
                                  std::to_string(h.num_features) + ")");
      if ((n.flags & kNodeFlagCategorical) &&
          !CategoricalNodeOk(n.flags, n.split_index, file.categorical_splits().size()))
        return Status::Corruption(
            where + ": the categorical node" + node_name(e.ref) + " names split " +
            std::to_string(n.split_index) + " (the file has " +
            std::to_string(file.categorical_splits().size()) + ") or a reserved outside direction");
      // Right child first on the stack: the left subtree is checked first.
      for (int side = 1; side >= 0; --side) {
        const uint32_t kind = (n.flags >> (kLeftKindShift + 2 * side)) & 3u;
        if (kind == static_cast<uint32_t>(RefKind::kNode)) {
          stack.push_back({n.child[side], e.depth + 1});
        } else {
          PACSET_RETURN_IF_ERROR(leaf(n.child[side], kind, e.depth + 1));
        }
      }
    }
  }
  if (sum.nodes != h.num_nodes)
    return Status::Corruption(file.name() + ": the trees have " + std::to_string(sum.nodes) +
                              " internal nodes, the header says " + std::to_string(h.num_nodes));
  if (sum.leaf_records != h.num_leaf_records)
    return Status::Corruption(file.name() + ": the trees have " + std::to_string(sum.leaf_records) +
                              " leaf records, the header says " +
                              std::to_string(h.num_leaf_records));
  sum.blocks_read = blocks.reads();
  return sum;
}

}  // namespace pacset
