#include "store/stored_metadata.h"

#include <algorithm>

#include "layout/pac_format.h"
#include "util/le_fields.h"

namespace pacset {

StatusOr<std::string> ReadStoredMetadata(
    const ForestInfo& info, const std::string& what,
    const std::function<Status(uint64_t first, uint64_t end, std::string* out)>& read) {
  const uint64_t bs = info.block_size;
  std::string meta;
  PACSET_RETURN_IF_ERROR(read(0, 1, &meta));
  PACSET_ASSIGN_OR_RETURN(const uint64_t header_bytes,
                          HeaderFileBytes(meta.data(), meta.size(), what));
  if (header_bytes > info.size_bytes)
    return Status::Corruption(what + ": its header needs " + std::to_string(header_bytes) +
                              " bytes, the forest has " + std::to_string(info.size_bytes));
  // node_first_block (FORMAT.md section 2, offset 96), checked with the rest
  // of the header by DecodeFromFile below.
  const uint64_t claimed_meta_blocks =
      std::min(GetField<uint64_t>(meta.data(), 96), info.block_count);
  PACSET_RETURN_IF_ERROR(read(1, std::max(header_bytes / bs, claimed_meta_blocks), &meta));
  PACSET_ASSIGN_OR_RETURN(PacHeader h, PacHeader::DecodeFromFile(meta.data(), meta.size(), what));
  if (h.block_size != info.block_size || h.block_count != info.block_count)
    return Status::Corruption(what + ": its header says " + std::to_string(h.block_count) +
                              " blocks of " + std::to_string(h.block_size) +
                              " bytes, the catalog " + std::to_string(info.block_count) + " of " +
                              std::to_string(info.block_size));
  if ((info.header_checksum != 0 && h.checksum != info.header_checksum) ||
      h.block_seed() != info.block_seed)
    return Status::Corruption(what + ": its header does not match the catalog entry");
  PACSET_RETURN_IF_ERROR(read(meta.size() / bs, h.node_first_block, &meta));
  return meta;
}

}  // namespace pacset
