// The .pac file format, versions 1 to 3: constants, on-disk records and the
// header's EncodeTo / DecodeFrom. The normative description is
// layout/FORMAT.md; keep the two in step.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "layout/block.h"
#include "util/status.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .pac format is little-endian; this code reads it natively");

namespace pacset {

inline constexpr char kPacMagic[8] = {'P', 'A', 'C', 'S', 'E', 'T', '\r', '\n'};
// Version 2 allows blocks below 4 KiB and a header that flows over the
// payloads of several blocks; version 3 adds the file's identity (file_id),
// which seeds every block's checksum, so a block of another file or
// generation at the same index fails verification. Writers write version 3
// unless asked for an older one (PacHeader::max_version), for readers that
// predate it; then the lowest of 1 and 2 that can hold the file.
inline constexpr uint32_t kPacVersion = 3;  // the newest version this code reads and writes
inline constexpr uint32_t kPacVersion1MinBlockSize = 4096;
// Offsets and sizes in the node region are counted in 16-byte units.
inline constexpr uint32_t kUnit = 16;

// Layout policies (stored in the header; names in layout/pack.h).
enum class LayoutKind : uint8_t {
  kBfs = 0,
  kDfs = 1,
  kWdfs = 2,
  kBlockWdfs = 3,
  kBinBfs = 4,
  kBinDfs = 5,
  kBinWdfs = 6,
  kPacset = 7,
  kBinBlockWdfs = 8,
};

enum class NodeFormat : uint8_t {
  kCompact16 = 0,  // float32 threshold, 24-bit feature, u32 child references
  kWide32 = 1,     // float64 threshold, u32 feature, u64 child references
};

// What a child reference (or a tree's root reference) points at.
enum class RefKind : uint8_t {
  kNode = 0,        // an internal node at file offset ref * 16
  kLeafRecord = 1,  // leaf_width float64 values at file offset ref * 16
  kInlineValue =
      2,  // the reference holds a float32 leaf value (bit pattern), added to the tree's group
  kInlineClass = 3,  // the reference holds a class index k: adds 1.0 to output k (one-hot leaf)
};

// Node flag byte: routing bits (model/forest.h NodeFlag) plus child kinds.
inline constexpr uint8_t kRoutingFlagMask = 0x07;
inline constexpr int kLeftKindShift = 3;
inline constexpr int kRightKindShift = 5;
// Bit 7: a categorical split (FORMAT.md §3): the threshold field holds the
// index of its record in the categorical-split section, and bits 1-2 are
// its outside direction (model/forest.h OutsideDirection).
inline constexpr uint8_t kNodeFlagCategorical = 0x80;
inline constexpr uint8_t kNodeFlagOutsideMask = 0x06;  // bits 1-2 of a categorical node

// Whether a categorical node (flag byte `flags`, split index `index`) is
// sound: it names a split the file has, and its outside direction is 0, 1 or
// 2 (3 is reserved). FORMAT.md §5; every reader checks it before routing.
inline bool CategoricalNodeOk(uint32_t flags, uint64_t index, uint64_t num_splits) {
  return index < num_splits && (flags & kNodeFlagOutsideMask) != kNodeFlagOutsideMask;
}

struct CompactNode {  // 16 bytes
  float threshold;
  uint32_t feature_flags;  // feature in bits 0-23, flag byte in bits 24-31
  uint32_t left;
  uint32_t right;
};
static_assert(sizeof(CompactNode) == 16);

struct WideNode {  // 32 bytes
  double threshold;
  uint32_t feature;
  uint8_t flags;
  uint8_t reserved[3];
  uint64_t left;
  uint64_t right;
};
static_assert(sizeof(WideNode) == 32);

// A categorical node's split index: the bits of its threshold field.
template <typename NodeT>
inline uint64_t SplitIndex(const NodeT& n) {
  if constexpr (std::is_same_v<NodeT, CompactNode>) {
    uint32_t i;
    std::memcpy(&i, &n.threshold, 4);
    return i;
  } else {
    uint64_t i;
    std::memcpy(&i, &n.threshold, 8);
    return i;
  }
}

inline constexpr uint32_t kMaxCompactFeature = (1u << 24) - 1;

// One entry of the tree table section.
struct TreeRecord {   // 16 bytes
  uint64_t root;      // reference, interpreted by root_kind
  uint32_t group;     // output group for kInlineValue / scalar leaf records
  uint8_t root_kind;  // RefKind
  uint8_t reserved[3];
};
static_assert(sizeof(TreeRecord) == 16);

// Section types. Unknown optional sections are skipped by readers; an unknown
// section with the required flag makes the file unreadable to them.
enum class SectionType : uint32_t {
  kTreeTable = 1,          // TreeRecord[num_trees]
  kBaseScore = 2,          // float64[num_outputs]
  kNodes = 3,              // the node region: nodes and leaf records (bins first)
  kSourceInfo = 4,         // UTF-8 JSON: where the model came from, layout parameters
  kLeafIds = 5,            // u32[2] per node-region unit: library leaf ids of a node's children
  kCategoryWords = 6,      // u32 bitset words of the categorical splits' sets
  kCategoricalSplits = 7,  // CategoricalSplitRecord per categorical split
  // float64 parameters of the postprocess, when it has some: isolation score
  // (6) has {denominator, offset}.
  kPostprocessParams = 8,
};
inline constexpr uint32_t kLastSectionType = 8;
// How many float64 parameters postprocess `p` takes (section 8's count).
inline uint64_t PostprocessParamCount(uint8_t p) { return p == 6 ? 2 : 0; }

// One categorical split (16 bytes): its left and right category sets as
// ranges of the category-word section, and its CategoryRule.
struct CategoricalSplitRecord {
  uint32_t left_first;
  uint32_t right_first;
  uint16_t left_words;
  uint16_t right_words;
  uint8_t rule;
  uint8_t reserved[3];
};
static_assert(sizeof(CategoricalSplitRecord) == 16);
inline constexpr uint32_t kMaxCategorySetWords = 0xFFFF;  // so categories < 2,097,120
inline constexpr uint32_t kSectionRequired = 1;

struct SectionEntry {  // 32 bytes on disk
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;       // byte offset of the first record in the file
  uint64_t count = 0;        // number of records
  uint32_t record_size = 0;  // bytes per record; records never straddle a trailer
  uint32_t reserved = 0;
};

// The fixed header at the start of block 0 (see FORMAT.md for offsets).
struct PacHeader {
  uint32_t version = kPacVersion;  // set by EncodeTo (EncodedVersion), checked by DecodeFrom
  // Writers: the newest version EncodeTo may write (3; 2 for readers that
  // predate version 3, which then writes 1 or 2). Not stored.
  uint32_t max_version = kPacVersion;
  uint32_t block_size = 0;
  uint64_t block_count = 0;
  uint8_t task = 0;
  uint8_t postprocess = 0;
  uint8_t aggregation = 0;
  uint8_t input_precision = 0;
  uint8_t accumulate_precision = 0;
  uint8_t node_format = 0;
  uint8_t layout = 0;
  uint8_t cardinality_source = 0;
  uint32_t num_features = 0;
  uint32_t num_outputs = 0;
  uint32_t num_classes = 0;
  uint32_t leaf_width = 0;
  uint64_t num_trees = 0;
  uint64_t num_nodes = 0;         // internal nodes stored
  uint64_t num_leaf_records = 0;  // leaves stored as records (others are inlined)
  double sigmoid_alpha = 1.0;
  uint32_t bin_depth = 0;  // 0 for layouts without bins
  uint32_t trees_per_bin = 0;
  uint64_t node_first_block = 0;  // node region: blocks [first, first + count)
  uint64_t node_block_count = 0;
  uint64_t bin_block_count = 0;  // the first bin_block_count node blocks hold the bins
  uint32_t max_depth = 0;        // deepest root-to-leaf path (edges); bounds traversals
  // Version 3: the file's identity, the seed of every block checksum
  // (block_seed). The packer derives it from the contents (FileIdentity), so
  // packing is deterministic and different files get different ids.
  uint64_t file_id = 0;
  std::vector<SectionEntry> sections;
  uint64_t checksum = 0;  // filled by EncodeTo, checked by DecodeFrom

  uint32_t payload_size() const { return block_size - kBlockTrailerSize; }
  // The seed of this file's block checksums: file_id from version 3, else 0.
  uint64_t block_seed() const { return version >= 3 ? file_id : 0; }
  const SectionEntry* FindSection(SectionType t) const;

  // Encoded size in bytes (fixed part + section table + checksum) when
  // written as EncodedVersion().
  size_t EncodedSize() const;
  // The version a file with this header is written as: max_version when it
  // is 3; else 1 when the blocks are at least 4 KiB and the header fits
  // block 0's payload, and 2 otherwise.
  uint32_t EncodedVersion() const;
  // Writes the header stream (EncodedSize() bytes, contiguous) at `dst`;
  // sets version (EncodedVersion) and checksum.
  void EncodeTo(char* dst);
  // Writes the header into the file image at `file` (block_size set): the
  // stream flows through the payloads of blocks 0, 1, ... (FORMAT.md §2).
  void EncodeToFile(char* file);
  // Parses and checks magic, version, header checksum and field ranges.
  // `src` is the header stream (contiguous), `avail` how many of its bytes
  // are readable.
  static StatusOr<PacHeader> DecodeFrom(const char* src, size_t avail, const std::string& what);
  // The same from the first `avail` bytes of a file: gathers the header
  // stream from the block payloads first. Too few bytes is kCorruption
  // ("truncated"); HeaderFileBytes says how many are needed.
  static StatusOr<PacHeader> DecodeFromFile(const char* file, uint64_t avail,
                                            const std::string& what);
};

// The part of the header every version shares (magic .. max_depth): it lies
// in block 0 for every block size (its payload is at least 240 bytes).
inline constexpr size_t kFixedHeaderSize = 128;
// Version 3's fixed part adds file_id (at 128) and a reserved u64 (at 136).
inline constexpr size_t kFixedHeaderSizeV3 = 144;
inline size_t FixedHeaderSize(uint32_t version) {
  return version >= 3 ? kFixedHeaderSizeV3 : kFixedHeaderSize;
}
inline constexpr size_t kSectionEntrySize = 32;
// Bounds of header fields (FORMAT.md §5).
inline constexpr uint32_t kMaxOutputs = 1u << 20;
inline constexpr uint32_t kMaxDepth = 1u << 24;
inline constexpr uint64_t kMaxBlockCount = uint64_t{1} << 40;
// Most sections a header may list (bounds the header a reader gathers).
inline constexpr uint32_t kMaxSections = 1024;

// The identity the packer gives a version-3 file (FORMAT.md §2): XXH3-64
// (seed 0) of the payloads of blocks 0 .. block_count-1 in order, taken
// while the header holds file_id 0 (and the header checksum that goes with
// it). `file` is the whole image, every payload written.
uint64_t FileIdentity(const char* file, uint32_t block_size, uint64_t block_count);

// How many leading bytes of a file hold its header (whole blocks), read from
// the fixed part at `file` (at least kFixedHeaderSize bytes): a reader reads
// this much, then DecodeFromFile. kInvalidArgument for something that is not
// a .pac file, kCorruption for an impossible block or header size.
StatusOr<uint64_t> HeaderFileBytes(const char* file, uint64_t avail, const std::string& what);

// File offset of byte `i` of a stream that flows through block payloads from
// the start of block 0 (the header stream).
inline uint64_t PayloadStreamOffset(uint64_t i, uint32_t block_size) {
  const uint64_t payload = block_size - kBlockTrailerSize;
  return i / payload * block_size + i % payload;
}

// Byte offset of record `i` of a section whose records flow through block
// payloads (skipping trailers) starting at `offset`.
uint64_t SectionRecordOffset(const SectionEntry& s, uint32_t block_size, uint64_t i);
// Byte offset one past the section's last record (for bounds checks).
uint64_t SectionEnd(const SectionEntry& s, uint32_t block_size);

// Index in the leaf-id section of the node `rel_unit` units after the start
// of the node region: the node's position counting payload units only.
inline uint64_t LeafIdIndex(uint64_t rel_unit, uint32_t block_size) {
  const uint64_t block_units = block_size / kUnit;
  const uint64_t payload_units = (block_size - kBlockTrailerSize) / kUnit;
  return rel_unit / block_units * payload_units + rel_unit % block_units;
}

const char* LayoutKindName(LayoutKind k);
const char* NodeFormatName(NodeFormat f);

}  // namespace pacset
