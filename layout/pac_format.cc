#include "layout/pac_format.h"

#include "util/xxhash.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "model/forest.h"
#include "util/le_fields.h"

namespace pacset {

const char* LayoutKindName(LayoutKind k) {
  switch (k) {
    case LayoutKind::kBfs:
      return "bfs";
    case LayoutKind::kDfs:
      return "dfs";
    case LayoutKind::kWdfs:
      return "wdfs";
    case LayoutKind::kBlockWdfs:
      return "block-wdfs";
    case LayoutKind::kBinBfs:
      return "bin-bfs";
    case LayoutKind::kBinDfs:
      return "bin-dfs";
    case LayoutKind::kBinWdfs:
      return "bin-wdfs";
    case LayoutKind::kPacset:
      return "pacset";
    case LayoutKind::kBinBlockWdfs:
      return "bin-block-wdfs";
  }
  return "?";
}

const char* NodeFormatName(NodeFormat f) {
  return f == NodeFormat::kCompact16 ? "compact16" : "wide32";
}

const SectionEntry* PacHeader::FindSection(SectionType t) const {
  for (const auto& s : sections)
    if (s.type == static_cast<uint32_t>(t)) return &s;
  return nullptr;
}

size_t PacHeader::EncodedSize() const {
  return FixedHeaderSize(EncodedVersion()) + sections.size() * kSectionEntrySize + 8;
}

uint32_t PacHeader::EncodedVersion() const {
  if (max_version >= 3) return 3;
  const size_t v1_size = kFixedHeaderSize + sections.size() * kSectionEntrySize + 8;
  return block_size >= kPacVersion1MinBlockSize && v1_size <= payload_size() ? 1 : 2;
}

uint64_t FileIdentity(const char* file, uint32_t block_size, uint64_t block_count) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (uint64_t b = 0; b < block_count; ++b)
    XXH3_64bits_update(state, file + b * block_size, block_size - kBlockTrailerSize);
  const uint64_t id = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return id;
}

void PacHeader::EncodeTo(char* dst) {
  const size_t size = EncodedSize();
  version = EncodedVersion();
  std::memset(dst, 0, size);
  std::memcpy(dst, kPacMagic, 8);
  PutField<uint32_t>(dst, 8, version);
  PutField<uint32_t>(dst, 12, static_cast<uint32_t>(size));
  PutField<uint32_t>(dst, 16, block_size);
  PutField<uint32_t>(dst, 20, static_cast<uint32_t>(sections.size()));
  PutField<uint64_t>(dst, 24, block_count);
  const uint8_t bytes[8] = {
      task,        postprocess, aggregation,       input_precision, accumulate_precision,
      node_format, layout,      cardinality_source};
  std::memcpy(dst + 32, bytes, 8);
  PutField<uint32_t>(dst, 40, num_features);
  PutField<uint32_t>(dst, 44, num_outputs);
  PutField<uint32_t>(dst, 48, num_classes);
  PutField<uint32_t>(dst, 52, leaf_width);
  PutField<uint64_t>(dst, 56, num_trees);
  PutField<uint64_t>(dst, 64, num_nodes);
  PutField<uint64_t>(dst, 72, num_leaf_records);
  PutField<double>(dst, 80, sigmoid_alpha);
  PutField<uint32_t>(dst, 88, bin_depth);
  PutField<uint32_t>(dst, 92, trees_per_bin);
  PutField<uint64_t>(dst, 96, node_first_block);
  PutField<uint64_t>(dst, 104, node_block_count);
  PutField<uint64_t>(dst, 112, bin_block_count);
  PutField<uint32_t>(dst, 120, max_depth);
  PutField<uint32_t>(dst, 124, 0);
  if (version >= 3) {
    PutField<uint64_t>(dst, 128, file_id);
    PutField<uint64_t>(dst, 136, 0);
  }
  const size_t table = FixedHeaderSize(version);
  for (size_t i = 0; i < sections.size(); ++i) {
    char* e = dst + table + i * kSectionEntrySize;
    PutField<uint32_t>(e, 0, sections[i].type);
    PutField<uint32_t>(e, 4, sections[i].flags);
    PutField<uint64_t>(e, 8, sections[i].offset);
    PutField<uint64_t>(e, 16, sections[i].count);
    PutField<uint32_t>(e, 24, sections[i].record_size);
    PutField<uint32_t>(e, 28, 0);
  }
  checksum = Checksum64(dst, size - 8);
  PutField<uint64_t>(dst, size - 8, checksum);
}

void PacHeader::EncodeToFile(char* file) {
  std::string stream(EncodedSize(), '\0');
  EncodeTo(stream.data());
  const uint64_t payload = payload_size();
  for (uint64_t i = 0; i < stream.size(); i += payload)
    std::memcpy(file + PayloadStreamOffset(i, block_size), stream.data() + i,
                std::min<uint64_t>(payload, stream.size() - i));
}

namespace {

// Magic and version: the first check of every reader.
Status CheckMagicAndVersion(const char* src, const std::string& what) {
  if (std::memcmp(src, kPacMagic, 8) != 0)
    return Status::InvalidArgument(what + ": not a .pac file");
  const uint32_t version = GetField<uint32_t>(src, 8);
  if (version < 1 || version > kPacVersion)
    return Status::NotSupported(what + ": .pac format version " + std::to_string(version) +
                                " (this pacset reads versions 1 to " + std::to_string(kPacVersion) +
                                ")");
  return Status::Ok();
}

}  // namespace

StatusOr<uint64_t> HeaderFileBytes(const char* file, uint64_t avail, const std::string& what) {
  if (avail < kFixedHeaderSize) return Status::Corruption(what + ": too short to be a .pac file");
  PACSET_RETURN_IF_ERROR(CheckMagicAndVersion(file, what));
  const uint32_t version = GetField<uint32_t>(file, 8);
  const uint32_t size = GetField<uint32_t>(file, 12);
  const uint32_t block_size = GetField<uint32_t>(file, 16);
  if (!IsValidBlockSize(block_size))
    return Status::Corruption(what + ": block size " + std::to_string(block_size) +
                              " is not a power of two in 256 B..1 MiB");
  const size_t fixed = FixedHeaderSize(version);
  if (size < fixed + 8 || size > fixed + kMaxSections * kSectionEntrySize + 8)
    return Status::Corruption(what + ": header size " + std::to_string(size) + " is inconsistent");
  const uint64_t payload = block_size - kBlockTrailerSize;
  return (size + payload - 1) / payload * block_size;
}

StatusOr<PacHeader> PacHeader::DecodeFromFile(const char* file, uint64_t avail,
                                              const std::string& what) {
  PACSET_ASSIGN_OR_RETURN(const uint64_t need, HeaderFileBytes(file, avail, what));
  if (avail < need)
    return Status::Corruption(what + ": the header needs the first " + std::to_string(need) +
                              " bytes, only " + std::to_string(avail) + " are there (truncated)");
  const uint32_t block_size = GetField<uint32_t>(file, 16);
  const uint32_t size = GetField<uint32_t>(file, 12);
  const uint64_t payload = block_size - kBlockTrailerSize;
  if (size <= payload) return DecodeFrom(file, size, what);  // all in block 0
  std::string stream(size, '\0');
  for (uint64_t i = 0; i < size; i += payload)
    std::memcpy(stream.data() + i, file + PayloadStreamOffset(i, block_size),
                std::min<uint64_t>(payload, size - i));
  return DecodeFrom(stream.data(), stream.size(), what);
}

StatusOr<PacHeader> PacHeader::DecodeFrom(const char* src, size_t avail, const std::string& what) {
  auto bad = [&](const std::string& m) { return Status::Corruption(what + ": " + m); };
  if (avail < 12) return bad("too short to be a .pac file");
  PACSET_RETURN_IF_ERROR(CheckMagicAndVersion(src, what));
  PacHeader h;
  h.version = GetField<uint32_t>(src, 8);
  h.max_version = h.version;  // encoding it again writes the same version
  const size_t fixed = FixedHeaderSize(h.version);
  if (avail < fixed + 8) return bad("too short to be a .pac file");
  const uint32_t size = GetField<uint32_t>(src, 12);
  h.block_size = GetField<uint32_t>(src, 16);
  const uint32_t nsec = GetField<uint32_t>(src, 20);
  if (nsec > kMaxSections || size != fixed + nsec * kSectionEntrySize + 8 || size > avail)
    return bad("header size " + std::to_string(size) + " is inconsistent");
  if (Checksum64(src, size - 8) != GetField<uint64_t>(src, size - 8))
    return bad("header checksum mismatch");
  h.checksum = GetField<uint64_t>(src, size - 8);
  if (!IsValidBlockSize(h.block_size))
    return bad("block size " + std::to_string(h.block_size) +
               " is not a power of two in 256 B..1 MiB");
  // Version 1 files have the header in block 0 and blocks of 4 KiB or more;
  // a version-1 reader would misread anything else.
  if (h.version == 1 && (h.block_size < kPacVersion1MinBlockSize || size > h.payload_size()))
    return bad("a version 1 file with " + std::to_string(h.block_size) + "-byte blocks and a " +
               std::to_string(size) +
               "-byte header (version 1 needs 4 KiB blocks or more and "
               "the header in block 0)");
  h.block_count = GetField<uint64_t>(src, 24);
  h.task = static_cast<uint8_t>(src[32]);
  h.postprocess = static_cast<uint8_t>(src[33]);
  h.aggregation = static_cast<uint8_t>(src[34]);
  h.input_precision = static_cast<uint8_t>(src[35]);
  h.accumulate_precision = static_cast<uint8_t>(src[36]);
  h.node_format = static_cast<uint8_t>(src[37]);
  h.layout = static_cast<uint8_t>(src[38]);
  h.cardinality_source = static_cast<uint8_t>(src[39]);
  h.num_features = GetField<uint32_t>(src, 40);
  h.num_outputs = GetField<uint32_t>(src, 44);
  h.num_classes = GetField<uint32_t>(src, 48);
  h.leaf_width = GetField<uint32_t>(src, 52);
  h.num_trees = GetField<uint64_t>(src, 56);
  h.num_nodes = GetField<uint64_t>(src, 64);
  h.num_leaf_records = GetField<uint64_t>(src, 72);
  h.sigmoid_alpha = GetField<double>(src, 80);
  h.bin_depth = GetField<uint32_t>(src, 88);
  h.trees_per_bin = GetField<uint32_t>(src, 92);
  h.node_first_block = GetField<uint64_t>(src, 96);
  h.node_block_count = GetField<uint64_t>(src, 104);
  h.bin_block_count = GetField<uint64_t>(src, 112);
  h.max_depth = GetField<uint32_t>(src, 120);
  if (h.version >= 3) h.file_id = GetField<uint64_t>(src, 128);

  // FORMAT.md §5, "Header": the rules below, in its order. Task, layout,
  // cardinality source, class count, bin depth and trees per bin are
  // informative: any value is accepted.
  const struct {
    const char* name;
    uint8_t value, max;
  } enums[] = {{"postprocess", h.postprocess, kMaxPostprocess},
               {"aggregation", h.aggregation, 1},
               {"input_precision", h.input_precision, 1},
               {"accumulate_precision", h.accumulate_precision, 1},
               {"node_format", h.node_format, 1}};
  for (const auto& e : enums)
    if (e.value > e.max)
      return bad(std::string("unknown ") + e.name + " " + std::to_string(e.value) +
                 " in the header");
  if (h.num_outputs == 0 || h.num_outputs > kMaxOutputs)
    return bad("output count " + std::to_string(h.num_outputs) + " is not in 1.." +
               std::to_string(kMaxOutputs));
  if (h.leaf_width != 1 && h.leaf_width != h.num_outputs)
    return bad("leaf width " + std::to_string(h.leaf_width) +
               " is neither 1 nor the output count " + std::to_string(h.num_outputs));
  if (h.postprocess == 2 && h.num_outputs < 2) return bad("softmax with a single output");
  if (h.postprocess == 5 && h.num_outputs != 1)
    return bad("sigmoid pair with " + std::to_string(h.num_outputs) + " outputs (it needs 1)");
  if (h.postprocess == 6 && (h.num_outputs != 1 || h.accumulate_precision != 1))
    return bad("isolation score needs 1 output and float64 accumulation");
  if (!std::isfinite(h.sigmoid_alpha)) return bad("sigmoid alpha is not finite");
  if (h.num_features == 0) return bad("no features");
  if (h.num_trees == 0) return bad("no trees");
  if (h.max_depth > kMaxDepth)
    return bad("max depth " + std::to_string(h.max_depth) + " is above " +
               std::to_string(kMaxDepth));
  if (h.block_count == 0 || h.block_count > kMaxBlockCount)
    return bad("block count " + std::to_string(h.block_count) + " is out of range");
  if (h.node_first_block == 0 || h.node_block_count == 0 || h.node_first_block >= h.block_count ||
      h.node_block_count > h.block_count - h.node_first_block)
    return bad("node region (blocks " + std::to_string(h.node_first_block) + " + " +
               std::to_string(h.node_block_count) + ") lies outside the file");
  if (h.bin_block_count > h.node_block_count) return bad("more bin blocks than node blocks");
  // What the node region holds must fit in it (readers size buffers by these).
  const uint64_t payload_units = h.payload_size() / kUnit;
  const uint64_t region_units = h.node_block_count * payload_units;
  const uint64_t node_units = h.node_format == 0 ? 1 : 2;
  const uint64_t record_units = (8ull * h.leaf_width + kUnit - 1) / kUnit;
  if (h.num_nodes > region_units / node_units ||
      h.num_leaf_records > (region_units - h.num_nodes * node_units) / record_units ||
      (h.num_leaf_records > 0 && record_units > payload_units))
    return bad(std::to_string(h.num_nodes) + " nodes and " + std::to_string(h.num_leaf_records) +
               " leaf records do not fit the node region");

  const uint64_t file_bytes = h.block_count * h.block_size;
  const uint64_t meta_end = h.node_first_block * h.block_size;
  const uint64_t node_end = (h.node_first_block + h.node_block_count) * h.block_size;
  std::set<uint32_t> types;
  for (uint32_t i = 0; i < nsec; ++i) {
    const char* e = src + fixed + i * kSectionEntrySize;
    SectionEntry s;
    s.type = GetField<uint32_t>(e, 0);
    s.flags = GetField<uint32_t>(e, 4);
    s.offset = GetField<uint64_t>(e, 8);
    s.count = GetField<uint64_t>(e, 16);
    s.record_size = GetField<uint32_t>(e, 24);
    const std::string sec =
        "section " + std::to_string(i) + " (type " + std::to_string(s.type) + ")";
    if (!types.insert(s.type).second) return bad(sec + ": a second section of its type");
    const bool known =
        s.type >= static_cast<uint32_t>(SectionType::kTreeTable) && s.type <= kLastSectionType;
    if (!known) {
      if (s.flags & kSectionRequired)
        return Status::NotSupported(what + ": needs section type " + std::to_string(s.type) +
                                    ", which this pacset does not know (written by a newer "
                                    "version)");
      h.sections.push_back(s);  // skipped: nothing about it is checked
      continue;
    }
    static constexpr uint32_t kRecordSize[] = {
        0, sizeof(TreeRecord), 8, kUnit, 1, 8, 4, sizeof(CategoricalSplitRecord), 8};
    if (s.record_size != kRecordSize[s.type])
      return bad(sec + " has record size " + std::to_string(s.record_size) + ", not " +
                 std::to_string(kRecordSize[s.type]));
    if (s.count > 0 && s.offset % h.block_size + s.record_size > h.payload_size())
      return bad(sec + ": its first record would cross a block trailer");
    const uint64_t end = SectionEnd(s, h.block_size);
    if (s.count > file_bytes || end > file_bytes)
      return bad(sec + " extends past the end of the file");
    switch (static_cast<SectionType>(s.type)) {
      case SectionType::kTreeTable:
      case SectionType::kBaseScore:
      case SectionType::kSourceInfo:
      case SectionType::kCategoryWords:
      case SectionType::kCategoricalSplits:
      case SectionType::kPostprocessParams:
        if (end > meta_end) return bad(sec + " extends past the metadata blocks");
        break;
      case SectionType::kNodes:
        if (s.offset != meta_end || s.count != region_units)
          return bad(sec + " is not the node region");
        break;
      case SectionType::kLeafIds:
        if (s.offset < node_end || s.count < region_units)
          return bad(sec + " does not follow the node region or is too short for it");
        break;
    }
    h.sections.push_back(s);
  }
  for (SectionType t : {SectionType::kTreeTable, SectionType::kBaseScore, SectionType::kNodes}) {
    if (!h.FindSection(t))
      return bad("required section type " + std::to_string(static_cast<uint32_t>(t)) +
                 " is missing");
  }
  if (h.FindSection(SectionType::kTreeTable)->count != h.num_trees)
    return bad("tree table does not match the tree count");
  if (h.FindSection(SectionType::kBaseScore)->count != h.num_outputs)
    return bad("base score section does not match the output count");
  if ((h.FindSection(SectionType::kCategoryWords) == nullptr) !=
      (h.FindSection(SectionType::kCategoricalSplits) == nullptr))
    return bad("category words without categorical splits, or splits without words");
  const SectionEntry* params = h.FindSection(SectionType::kPostprocessParams);
  if ((params ? params->count : 0) != PostprocessParamCount(h.postprocess) ||
      (params != nullptr && PostprocessParamCount(h.postprocess) == 0))
    return bad("postprocess " + std::to_string(h.postprocess) + " takes " +
               std::to_string(PostprocessParamCount(h.postprocess)) +
               " parameters but the parameter section holds " +
               (params ? std::to_string(params->count) : std::string("none")));
  return h;
}

uint64_t SectionRecordOffset(const SectionEntry& s, uint32_t block_size, uint64_t i) {
  const uint64_t payload = block_size - kBlockTrailerSize;
  const uint64_t in_block = s.offset % block_size;
  const uint64_t first_cap = (payload - in_block) / s.record_size;
  if (i < first_cap) return s.offset + i * s.record_size;
  const uint64_t per = payload / s.record_size;
  const uint64_t j = i - first_cap;
  const uint64_t block = s.offset / block_size + 1 + j / per;
  return block * block_size + (j % per) * s.record_size;
}

uint64_t SectionEnd(const SectionEntry& s, uint32_t block_size) {
  if (s.count == 0) return s.offset;
  const uint64_t payload = block_size - kBlockTrailerSize;
  const uint64_t in_block = s.offset % block_size;
  if (in_block >= payload) return UINT64_MAX;  // caught by the caller's range check
  const uint64_t per = payload / s.record_size;
  // Guard the multiplication in SectionRecordOffset against absurd counts.
  if (per == 0 || s.count / per > (uint64_t{1} << 40)) return UINT64_MAX;
  return SectionRecordOffset(s, block_size, s.count - 1) + s.record_size;
}

}  // namespace pacset
