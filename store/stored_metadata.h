// The metadata of a forest held in a block store: its header, tree table and
// base score, read and checked against the catalog entry before anything
// else of the forest is read (StoreForest, the structure check of `pacset
// verify`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/block_store.h"
#include "util/status.h"

namespace pacset {

// The metadata blocks [0, node_first_block) of the stored forest `info`, in
// two reads through `read` (blocks [first, end), verified, appended to
// *out): block 0, whose fixed header says how far the header and the
// metadata go, then the rest. The header must match the catalog entry (block
// size and count, header checksum, block seed). No node block is read here:
// a corrupt one must fail only the walks that need it, not the open.
// `what` names the forest in errors.
StatusOr<std::string> ReadStoredMetadata(
    const ForestInfo& info, const std::string& what,
    const std::function<Status(uint64_t first, uint64_t end, std::string* out)>& read);

}  // namespace pacset
