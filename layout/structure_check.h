// The whole structure of a .pac file, checked once: every tree from its root
// to its leaves against the rules of layout/FORMAT.md §5. `pacset import`
// runs it before a forest is published and `pacset verify` reports it, so a
// store only ever holds forests that every reader accepts.
//
// The engine enforces the same rules on the nodes a request walks (a cold
// row reads a few blocks, not the file), from a copy of each node, so a file
// that fails here gives an error there too, on the paths it takes, never a
// wrong access. Two rules need the whole file and are checked only here and
// when the warm forest is built (engine/internal/warm_forest.h): no node is
// reached twice, and the header's node and leaf-record counts are exact.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layout/pac_file.h"
#include "util/status.h"

namespace pacset {

// Where the checker's blocks come from. Read returns block `b` verified
// (checksum under the file's block seed, and index), or an error naming it.
class StructureBlockReader {
 public:
  virtual ~StructureBlockReader() = default;
  virtual Status Read(uint64_t b, std::string* out) = 0;
};

// The blocks of `file` itself (pread, or its buffer), each verified: kIOError
// or kCorruption naming the block. `file` must have its bytes (not
// PacFile::FromMetadata) and outlive the reader.
std::unique_ptr<StructureBlockReader> NewPacFileBlockReader(const PacFile& file);

struct StructureSummary {
  uint64_t nodes = 0;          // internal nodes, each reached once
  uint64_t leaf_records = 0;   // leaf-record leaves
  uint64_t inline_leaves = 0;  // inline values and classes, roots included
  uint64_t deepest = 0;        // longest root-to-leaf path in edges
  uint64_t blocks_read = 0;    // node blocks the check read (with repeats)
};

// Checks every tree of `file` (whose metadata PacFile already checked):
// kCorruption naming the tree, the node (its unit and block) and the rule
// broken; the first one found. Reads node blocks through `reader`, a few
// hundred at a time kept, so memory stays bounded by the node region's size
// / 128 (one bit per 16-byte unit) plus that cache.
StatusOr<StructureSummary> CheckForestStructure(const PacFile& file, StructureBlockReader& reader);

}  // namespace pacset
