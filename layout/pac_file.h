// A validated, read-only view of a .pac file, mapped or in memory.
//
// Open() checks what every reader needs before it touches a node: the
// header (magic, version, checksum, field ranges), the trailers of the
// metadata blocks, and every tree table entry. Node blocks are not read at
// open; readers check each reference before following it (layout/engine.h),
// and VerifyBlocks() checks every block's trailer on demand.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layout/pac_format.h"
#include "util/status.h"

namespace pacset {

class PacFile {
 public:
  ~PacFile();
  PacFile(const PacFile&) = delete;
  PacFile& operator=(const PacFile&) = delete;

  // Maps `path` read-only (MAP_SHARED, so pages come from the page cache or
  // a pacsetfs mount on demand).
  static StatusOr<std::unique_ptr<PacFile>> Open(const std::string& path);
  // Takes ownership of a whole file held in memory; `name` is for messages.
  static StatusOr<std::unique_ptr<PacFile>> FromBuffer(std::string bytes, const std::string& name);
  // Reads a whole file at `data` in place, without copying: the caller keeps
  // the bytes valid and unchanged while the PacFile lives; `keep_alive`
  // (e.g. the Python buffer they belong to) is held until then.
  static StatusOr<std::unique_ptr<PacFile>> FromMemory(const char* data, uint64_t size,
                                                       std::shared_ptr<const void> keep_alive,
                                                       const std::string& name);

  const PacHeader& header() const { return header_; }
  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // True for Open (a mapping of a file), false for a buffer in memory.
  bool mapped() const { return map_ != nullptr; }
  const std::vector<TreeRecord>& trees() const { return trees_; }
  const std::vector<double>& base_score() const { return base_score_; }
  std::string SourceInfoJson() const;

  // Blocks whose trailer does not verify (reads the whole file).
  std::vector<uint64_t> VerifyBlocks() const;

  // True when `ref` (in 16-byte units) addresses `bytes` bytes inside one
  // block payload of the node region.
  bool RefInNodeRegion(uint64_t ref, uint32_t bytes) const {
    if (ref < node_begin_unit_ || ref >= node_end_unit_) return false;
    const uint64_t in_block = (ref * kUnit) & (header_.block_size - 1);
    return in_block + bytes <= header_.payload_size();
  }

  // Library leaf ids of the children of the node at `ref`, if the file has
  // the leaf-id section.
  bool has_leaf_ids() const { return leaf_ids_ != nullptr; }
  void ChildLeafIds(uint64_t node_ref, uint32_t ids[2]) const;

 private:
  PacFile() = default;
  Status Init();

  std::string name_;
  std::string owned_;                     // FromBuffer
  std::shared_ptr<const void> borrowed_;  // FromMemory
  void* map_ = nullptr;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  PacHeader header_;
  std::vector<TreeRecord> trees_;
  std::vector<double> base_score_;
  uint64_t node_begin_unit_ = 0, node_end_unit_ = 0;
  const SectionEntry* leaf_ids_ = nullptr;
};

}  // namespace pacset
