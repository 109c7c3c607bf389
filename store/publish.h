// Moving whole .pac files in and out of a block store, and checking a stored
// forest block by block. Used by `pacset import`, `export` and `verify`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/structure_check.h"
#include "store/block_store.h"
#include "util/status.h"

namespace pacset {

// Stores the .pac file at `pac_path` as a new generation of `name` and
// publishes it. The file must be a whole number of `block_size` blocks (the
// caller reads block_size from the .pac header); every block is verified
// before it is stored, so a damaged file is rejected with kCorruption naming
// the file and block, and nothing is published. `info` supplies the catalog
// metadata (source model, header checksum, block seed: blocks are verified
// with it); the store fills in name,
// generation and sizes. `generation_out` (may be null) receives the new
// generation.
Status PublishFile(BlockStore& store, const std::string& name, const std::string& pac_path,
                   uint32_t block_size, ForestInfo info, uint64_t* generation_out);

// Writes every block of `forest` (verified) to `path`: to a temporary file
// beside it first, fsync'ed and then renamed over `path`, so `path` is either
// untouched or byte-identical to what was published.
Status ExportToFile(BlockStore& store, const ForestInfo& forest, const std::string& path);

// Reads every block of `forest` and returns the indexes of all blocks that
// are corrupt or missing (empty: the forest is intact). Other failures
// (store unreachable, I/O errors) are returned as the status.
StatusOr<std::vector<uint64_t>> VerifyForest(BlockStore& store, const ForestInfo& forest);

// Checks the structure of the stored `forest` (layout/structure_check.h):
// its metadata (the header against the catalog entry, the tree table) and
// every tree, reading the blocks from the store. kCorruption naming forest,
// generation and what is wrong; the store's own errors as they come.
StatusOr<StructureSummary> CheckStoredStructure(BlockStore& store, const ForestInfo& forest);

}  // namespace pacset
