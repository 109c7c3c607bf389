// A validated, read-only view of a .pac file, mapped or in memory.
//
// Open() checks what every reader needs before it touches a node: the
// header (magic, version, checksum, field ranges), the trailers of the
// metadata blocks, and every tree table entry. It reads the metadata blocks
// with pread into memory it owns, so an unreadable block (EIO on a pacsetfs
// mount) is a Status here, never a SIGBUS. Node blocks are not read at open;
// readers fetch and verify them (engine/block_source.h) and check each
// reference before following it (engine/engine.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layout/pac_format.h"
#include "model/forest.h"
#include "util/status.h"

namespace pacset {

class PacFile {
 public:
  ~PacFile();
  PacFile(const PacFile&) = delete;
  PacFile& operator=(const PacFile&) = delete;

  // Maps `path` read-only (MAP_SHARED, so pages come from the page cache or
  // a pacsetfs mount on demand) and keeps it open for pread.
  static StatusOr<std::unique_ptr<PacFile>> Open(const std::string& path);
  // Takes ownership of a whole file held in memory; `name` is for messages.
  static StatusOr<std::unique_ptr<PacFile>> FromBuffer(std::string bytes, const std::string& name);
  // Only the metadata: `meta` holds at least the file's metadata blocks
  // [0, node_first_block) of a file of `file_size` bytes whose other blocks
  // live elsewhere (a block store; engine/block_source.h brings them).
  // data() is null and ReadBlock fails with kNotSupported (VerifyBlocks
  // has nothing to read).
  static StatusOr<std::unique_ptr<PacFile>> FromMetadata(std::string meta, uint64_t file_size,
                                                         const std::string& name);
  // Reads a whole file at `data` in place, without copying: the caller keeps
  // the bytes valid and unchanged while the PacFile lives; `keep_alive`
  // (e.g. the Python buffer they belong to) is held until then.
  static StatusOr<std::unique_ptr<PacFile>> FromMemory(const char* data, uint64_t size,
                                                       std::shared_ptr<const void> keep_alive,
                                                       const std::string& name);

  const PacHeader& header() const { return header_; }
  // The whole file: the mapping, or the buffer of FromBuffer (null for
  // FromMetadata). Reading a mapped block that cannot be read raises SIGBUS
  // (engine/internal/sigbus.h).
  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The open file behind the mapping; -1 for FromBuffer.
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  // True for Open (a mapping of a file), false for a buffer in memory.
  bool mapped() const { return map_ != nullptr; }
  const std::vector<TreeRecord>& trees() const { return trees_; }
  const std::vector<double>& base_score() const { return base_score_; }
  // The postprocess's parameters (section 8; empty when it takes none):
  // isolation score {denominator, offset}, checked finite, denominator >= 0.
  const std::vector<double>& postprocess_params() const { return postprocess_params_; }
  std::string SourceInfoJson() const;

  // Blocks whose trailer does not verify or that cannot be read (reads the
  // whole file with pread; no SIGBUS).
  std::vector<uint64_t> VerifyBlocks() const;

  // Reads block `b` into `dst` (block_size bytes) with pread, or copies it
  // from the buffer; kIOError naming the block when the read fails.
  Status ReadBlock(uint64_t b, char* dst) const;

  // True when `ref` (in 16-byte units) addresses `bytes` bytes inside one
  // block payload of the node region.
  bool RefInNodeRegion(uint64_t ref, uint32_t bytes) const {
    if (ref < node_begin_unit_ || ref >= node_end_unit_) return false;
    const uint64_t in_block = (ref * kUnit) & (header_.block_size - 1);
    return in_block + bytes <= header_.payload_size();
  }

  // The categorical splits and the words of their category sets (FORMAT.md
  // §3), copied from the metadata blocks and checked at open (every set
  // inside the words, a known rule); empty for a file without.
  const std::vector<CategoricalSplit>& categorical_splits() const { return cat_splits_; }
  const std::vector<uint32_t>& category_words() const { return cat_words_; }

  // Whether the file has the leaf-id section, and the file offset of the two
  // u32 library leaf ids of the children of the node at `node_ref` (they
  // never cross a trailer).
  bool has_leaf_ids() const { return leaf_ids_ != nullptr; }
  uint64_t LeafIdsOffset(uint64_t node_ref) const;

 private:
  PacFile() = default;
  // Parses the metadata in `meta` (the first `meta_size` bytes of the file,
  // at least every metadata block once the header is known).
  Status Init(const char* meta, uint64_t meta_size);
  Status ReadMetadata();  // Open: pread the metadata blocks into meta_, then Init

  std::string name_;
  std::string owned_;                     // FromBuffer
  std::shared_ptr<const void> borrowed_;  // FromMemory
  std::string meta_;                      // Open, FromMetadata: the metadata blocks
  const char* meta_data_ = nullptr;       // meta_ or the buffer
  uint64_t meta_size_ = 0;
  int fd_ = -1;
  void* map_ = nullptr;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  PacHeader header_;
  std::vector<TreeRecord> trees_;
  std::vector<double> base_score_;
  std::vector<double> postprocess_params_;
  uint64_t node_begin_unit_ = 0, node_end_unit_ = 0;
  const SectionEntry* leaf_ids_ = nullptr;
  std::vector<CategoricalSplit> cat_splits_;
  std::vector<uint32_t> cat_words_;
};

}  // namespace pacset
