// libFuzzer target: .pac files past their checksums (issue 31 item 5).
//
// Every byte of a .pac file lies under a checksum (XXH3 per block, seeded
// with the file's identity from format version 3, and the header's own), so
// raw mutations (fuzz/pac_file_fuzzer.cc) stop at verification. Here every
// input is resealed first (testkit/pac_edit.h ResealPac): what a reader sees
// past the checksums is exactly the mutation, and the structure checks of
// layout/FORMAT.md §5 are all that stand between it and the reader.
//
// The custom mutator edits what the format means rather than raw bytes,
// most of the time: a tree record, a node reached from a root, a header
// count, a section entry, whole blocks — each set to a value next to a
// limit (a group at num_outputs, a reference just outside the node region or
// onto a block trailer, a child that is an ancestor or another tree's node,
// a feature at num_features). Otherwise it falls back to libFuzzer's byte
// mutations. It reseals what it writes, so corpus files are valid files.
//
// Then every reader path runs on the file (as tests/hostile_pac_test.cc
// EveryPath does): the open, VerifyBlocks, SourceInfoJson, the whole-file
// structure check, and the engine with block verification on and off and
// with a source kept cold — one row, then enough rows for the warm forest to
// be built, margins, the float32 entry point, leaf ids and touched blocks. Statuses are ignored:
// the finding is a crash, an ASan or a UBSan report, or a timeout.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/block_source.h"
#include "engine/engine.h"
#include "layout/pac_format.h"
#include "layout/structure_check.h"
#include "testkit/cold_source.h"
#include "testkit/pac_edit.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace pacset {
namespace {

// Bounds that keep one input well under scripts/fuzz.sh's 25 s and 2 GB:
// files are at most -max_len (256 KiB) but may claim a row width or a depth
// that makes rows or walks huge. A walk that loops (a cycle) runs up to
// max_depth steps per (row, tree); the engine's bound, not a finding.
constexpr uint32_t kMaxFuzzFeatures = 4096;
constexpr uint64_t kWalkBudget = uint64_t{1} << 21;  // node steps per request
constexpr size_t kWarmRows = 64;

// ---------------------------------------------------------------------------
// The mutator.

using Rng = std::mt19937_64;

template <typename T>
T Pick(Rng& rng, const std::vector<T>& v) {
  return v[rng() % v.size()];
}

// A file being mutated and what the mutator knows of it. `h` is valid only
// when `decoded`: the header decoded before this round's edits (sections,
// node region, counts). Edits may leave it stale (every read through it is
// bounds-checked against `bytes`); one that changes the size clears it.
struct Target {
  std::string bytes;
  PacHeader h;
  bool decoded = false;

  uint32_t bs() const { return GetField<uint32_t>(bytes.data(), 16); }
  uint64_t units() const { return bytes.size() / kUnit; }
  uint64_t node_begin() const { return h.node_first_block * h.block_size / kUnit; }
  uint64_t node_end() const {
    return (h.node_first_block + h.node_block_count) * h.block_size / kUnit;
  }
  bool Fits(uint64_t offset, uint64_t n) const {
    return offset <= bytes.size() && n <= bytes.size() - offset;
  }
  template <typename T>
  T Get(uint64_t offset) const {
    return GetField<T>(bytes.data(), offset);
  }
  template <typename T>
  void Put(uint64_t offset, T v) {
    PutField<T>(bytes.data(), offset, v);
  }
  // A field of the header stream, wherever its bytes lie (FORMAT.md §2);
  // false when the field is not in the file.
  template <typename T>
  bool PutHeader(uint32_t j, T v) {
    const uint32_t b = bs();
    if (!IsValidBlockSize(b) || PayloadStreamOffset(j + sizeof(T) - 1, b) >= bytes.size())
      return false;
    char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    for (uint32_t i = 0; i < sizeof(T); ++i) bytes[PayloadStreamOffset(j + i, b)] = raw[i];
    return true;
  }
  template <typename T>
  T GetHeader(uint32_t j) const {
    char raw[sizeof(T)] = {};
    const uint32_t b = bs();
    if (IsValidBlockSize(b) && PayloadStreamOffset(j + sizeof(T) - 1, b) < bytes.size())
      for (uint32_t i = 0; i < sizeof(T); ++i) raw[i] = bytes[PayloadStreamOffset(j + i, b)];
    T v;
    std::memcpy(&v, raw, sizeof(T));
    return v;
  }
  uint64_t TreeOffset(uint64_t t) const {
    return SectionRecordOffset(*h.FindSection(SectionType::kTreeTable), h.block_size, t);
  }
};

// What a walk from a root found: nodes (with their path from the root) and
// leaf records, all real, to point at or to edit.
struct Found {
  uint64_t tree = 0;
  std::vector<uint64_t> path;  // node refs from the root down
  std::vector<uint64_t> leaf_records;
};

bool Compact(const Target& t) { return t.h.node_format == 0; }

// Reads a node's fields whatever its format: flag byte, children.
struct NodeView {
  uint8_t flags = 0;
  uint64_t left = 0, right = 0;
};
bool ReadNode(const Target& t, uint64_t ref, NodeView* v) {
  const uint64_t off = ref * kUnit;
  if (Compact(t)) {
    if (!t.Fits(off, sizeof(CompactNode))) return false;
    const CompactNode n = t.Get<CompactNode>(off);
    *v = {static_cast<uint8_t>(n.feature_flags >> 24), n.left, n.right};
  } else {
    if (!t.Fits(off, sizeof(WideNode))) return false;
    const WideNode n = t.Get<WideNode>(off);
    *v = {n.flags, n.left, n.right};
  }
  return true;
}

// A random root-to-somewhere walk in a random tree whose root is a node.
Found WalkSomewhere(const Target& t, Rng& rng) {
  Found f;
  for (int attempt = 0; attempt < 4 && f.path.empty(); ++attempt) {
    f.tree = rng() % t.h.num_trees;
    const uint64_t off = t.TreeOffset(f.tree);
    if (!t.Fits(off, sizeof(TreeRecord))) continue;
    const TreeRecord r = t.Get<TreeRecord>(off);
    if (r.root_kind == static_cast<uint8_t>(RefKind::kNode) && r.root < t.units())
      f.path.push_back(r.root);
  }
  const int depth = static_cast<int>(rng() % 10);
  while (!f.path.empty() && static_cast<int>(f.path.size()) <= depth) {
    NodeView v;
    if (!ReadNode(t, f.path.back(), &v)) break;
    const bool left = rng() & 1;
    const uint8_t kind = (v.flags >> (left ? kLeftKindShift : kRightKindShift)) & 3;
    const uint64_t child = left ? v.left : v.right;
    if (kind == static_cast<uint8_t>(RefKind::kLeafRecord)) f.leaf_records.push_back(child);
    if (kind != static_cast<uint8_t>(RefKind::kNode) || child >= t.units()) break;
    f.path.push_back(child);
  }
  return f;
}

// A reference next to a limit: the node region's ends, a block trailer, the
// last payload unit (a wide node or a record there crosses the trailer),
// metadata, the leaf-id section, another node or an ancestor (sharing and
// cycles), values past 32 bits (wide nodes).
uint64_t InterestingRef(const Target& t, Rng& rng, const Found& f) {
  const uint64_t bu = t.h.block_size / kUnit;  // units per block
  const uint64_t pu = bu - 1;                  // payload units per block
  const uint64_t block = t.h.node_first_block + rng() % t.h.node_block_count;
  const uint64_t leaf_ids = [&] {
    const SectionEntry* s = t.h.FindSection(SectionType::kLeafIds);
    return s ? s->offset / kUnit : t.node_end();
  }();
  std::vector<uint64_t> v = {t.node_begin(),
                             t.node_begin() - 1,
                             t.node_begin() + 1,
                             t.node_end() - 1,
                             t.node_end() - 2,
                             t.node_end(),
                             t.node_end() + 1,
                             block * bu + pu,      // the trailer
                             block * bu + pu - 1,  // the last payload unit
                             block * bu,
                             0,
                             1,
                             leaf_ids,
                             t.units(),
                             t.units() - 1,
                             0xFFFFFFFFu,
                             0x80000000u,
                             uint64_t{1} << 32,
                             t.node_begin() + (uint64_t{1} << 32),
                             uint64_t{1} << 63,
                             ~uint64_t{0},
                             t.node_begin() + rng() % (t.node_end() - t.node_begin())};
  for (uint64_t ref : f.path) v.push_back(ref);  // an ancestor: a cycle
  for (uint64_t ref : f.leaf_records) v.push_back(ref);
  // A node of another walk: sharing across trees.
  const Found other = WalkSomewhere(t, rng);
  for (uint64_t ref : other.path) v.push_back(ref);
  for (uint64_t ref : other.leaf_records) v.push_back(ref);
  return Pick(rng, v);
}

// Values of the reference in an inline leaf: float32 bit patterns (kind 2)
// and class indices (kind 3), with high bits set for wide references.
uint64_t InterestingInline(const Target& t, Rng& rng) {
  const uint32_t k = t.h.num_outputs;
  return Pick<uint64_t>(rng, {0x3f800000u, 0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000001u,
                              0x80000000u, 0x7f7fffffu, 0, k - 1, k, k + 1, 0xFFFFFFFFu,
                              uint64_t{1} << 32, (uint64_t{1} << 32) | 1, ~uint64_t{0}});
}

uint32_t InterestingGroup(const Target& t, Rng& rng) {
  const uint32_t k = t.h.num_outputs;
  return Pick<uint32_t>(
      rng, {0, 1, 2, 3, 5, 64, 4096, k - 1, k, k + 1, t.h.leaf_width, t.h.num_classes, 0x7FFFFFFFu,
            0x80000000u, 0xFFFFFFFFu, static_cast<uint32_t>(rng())});
}

uint32_t InterestingFeature(const Target& t, Rng& rng) {
  const uint32_t nf = t.h.num_features;
  return Pick<uint32_t>(rng, {0, 1, nf - 1, nf, nf + 1, kMaxCompactFeature, kMaxCompactFeature + 1,
                              0x7FFFFFFFu, 0xFFFFFFFFu});
}

double InterestingThreshold(Rng& rng) {
  return Pick<double>(rng, {0.0, -0.0, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(), 1.0000000180025095e-35,
                            -1.0000000180025096e-35, std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(), 1e300, 0.1, -2.5});
}

// Tree record: group, root kind, root (a node, a leaf record, an inline
// value or class, or a limit), reserved bytes.
bool MutateTree(Target& t, Rng& rng) {
  const uint64_t tree = rng() % t.h.num_trees;
  const uint64_t off = t.TreeOffset(tree);
  if (!t.Fits(off, sizeof(TreeRecord))) return false;
  TreeRecord r = t.Get<TreeRecord>(off);
  switch (rng() % 5) {
    case 0:
      r.group = InterestingGroup(t, rng);
      break;
    case 1:  // a kind over the same reference
      r.root_kind = static_cast<uint8_t>(Pick<int>(rng, {0, 1, 2, 3, 4, 255}));
      break;
    case 2:  // the root elsewhere; the kind a node most often
      r.root = InterestingRef(t, rng, WalkSomewhere(t, rng));
      if (rng() % 3) r.root_kind = static_cast<uint8_t>(rng() % 2);
      break;
    case 3:  // an inline root (the issue 31 crash: an inline value's group)
      r.root_kind = static_cast<uint8_t>(2 + rng() % 2);
      r.root = InterestingInline(t, rng);
      if (rng() & 1) r.group = InterestingGroup(t, rng);
      break;
    default:
      r.reserved[rng() % 3] = static_cast<uint8_t>(rng());
  }
  t.Put(off, r);
  return true;
}

// A node reached from a root (or, sometimes, any unit of the node region):
// threshold, feature, routing flags, child kinds, children.
bool MutateNode(Target& t, Rng& rng) {
  Found f = WalkSomewhere(t, rng);
  uint64_t ref;
  if (f.path.empty() || rng() % 8 == 0) {
    ref = t.node_begin() + rng() % (t.node_end() - t.node_begin());
  } else {
    const size_t i = rng() % f.path.size();
    ref = f.path[i];
    f.path.resize(i + 1);  // its ancestors and itself: cycles
  }
  NodeView v;
  if (!ReadNode(t, ref, &v)) return false;
  const uint64_t off = ref * kUnit;
  const bool left = rng() & 1;
  const int shift = left ? kLeftKindShift : kRightKindShift;
  uint8_t flags = v.flags;
  uint64_t child = left ? v.left : v.right;
  double threshold = 0;
  bool set_threshold = false;
  uint32_t feature = 0;
  bool set_feature = false;
  switch (rng() % 7) {
    case 0:  // a kind over the same reference
      flags = static_cast<uint8_t>((flags & ~(3 << shift)) | (rng() % 4) << shift);
      break;
    case 1:  // a reference next to a limit, as a node or a leaf record
      child = InterestingRef(t, rng, f);
      if (rng() & 1) flags = static_cast<uint8_t>((flags & ~(3 << shift)) | (rng() % 2) << shift);
      break;
    case 2:  // an inline leaf
      child = InterestingInline(t, rng);
      flags = static_cast<uint8_t>((flags & ~(3 << shift)) | (2 + rng() % 2) << shift);
      break;
    case 3:
      feature = InterestingFeature(t, rng);
      set_feature = true;
      break;
    case 4:
      threshold = InterestingThreshold(rng);
      set_threshold = true;
      break;
    case 5:  // routing bits, the reserved bit
      flags ^= static_cast<uint8_t>(Pick<int>(rng, {1, 2, 4, kNodeFlagCategorical}));
      break;
    default:  // both children the same node: reached twice
      child = InterestingRef(t, rng, f);
      flags = static_cast<uint8_t>(flags & ~(0x0F << kLeftKindShift));
      v.left = v.right = child;
  }
  if (left)
    v.left = child;
  else
    v.right = child;
  if (Compact(t)) {
    CompactNode n = t.Get<CompactNode>(off);
    if (set_threshold) n.threshold = static_cast<float>(threshold);
    if (set_feature) n.feature_flags = (n.feature_flags & 0xFF000000u) | (feature & 0xFFFFFFu);
    n.feature_flags = (n.feature_flags & 0xFFFFFFu) | uint32_t{flags} << 24;
    n.left = static_cast<uint32_t>(v.left);
    n.right = static_cast<uint32_t>(v.right);
    t.Put(off, n);
  } else {
    WideNode n = t.Get<WideNode>(off);
    if (set_threshold) n.threshold = threshold;
    if (set_feature) n.feature = feature;
    n.flags = flags;
    n.left = v.left;
    n.right = v.right;
    t.Put(off, n);
  }
  return true;
}

// Header counts and enums (FORMAT.md §2 offsets), near their limits. Needs
// only a block size: it works on headers that no longer decode too, and can
// make them decode again.
bool MutateHeader(Target& t, Rng& rng) {
  struct Field {
    uint32_t offset;
    uint8_t size;
  };
  static const Field kFields[] = {
      {8, 4},  {24, 8}, {32, 1},  {33, 1},  {34, 1},  {35, 1},  {36, 1},  {37, 1}, {38, 1},
      {40, 4}, {44, 4}, {48, 4},  {52, 4},  {56, 8},  {64, 8},  {72, 8},  {80, 8}, {88, 4},
      {92, 4}, {96, 8}, {104, 8}, {112, 8}, {120, 4}, {124, 4}, {128, 8}, {44, 4}, {52, 4},
      {64, 8}, {72, 8}, {96, 8},  {104, 8}, {120, 4}, {56, 8},  {40, 4}};  // counts twice as often
  const Field f = kFields[rng() % (sizeof(kFields) / sizeof(kFields[0]))];
  uint64_t cur = 0;
  if (f.size == 1) cur = t.GetHeader<uint8_t>(f.offset);
  if (f.size == 4) cur = t.GetHeader<uint32_t>(f.offset);
  if (f.size == 8) cur = t.GetHeader<uint64_t>(f.offset);
  const uint64_t outputs = t.GetHeader<uint32_t>(44);
  uint64_t v = Pick<uint64_t>(rng, {0,
                                    1,
                                    2,
                                    3,
                                    4,
                                    5,
                                    6,
                                    cur - 1,
                                    cur + 1,
                                    cur * 2,
                                    cur / 2,
                                    outputs,
                                    outputs + 1,
                                    kMaxOutputs,
                                    kMaxOutputs + 1,
                                    kMaxDepth,
                                    kMaxDepth + 1,
                                    0xFFFFFFu,
                                    0x7FFFFFFFu,
                                    0xFFFFFFFFu,
                                    uint64_t{1} << 32,
                                    kMaxBlockCount,
                                    ~uint64_t{0},
                                    rng()});
  if (f.offset == 80) {  // sigmoid_alpha
    const double d = Pick<double>(rng, {0.0, -1.0, 0.5, 1e308, std::nan(""), INFINITY});
    std::memcpy(&v, &d, 8);
  }
  if (f.size == 1) return t.PutHeader<uint8_t>(f.offset, static_cast<uint8_t>(v));
  if (f.size == 4) return t.PutHeader<uint32_t>(f.offset, static_cast<uint32_t>(v));
  return t.PutHeader<uint64_t>(f.offset, v);
}

// A section entry: duplicate or unknown types (required or optional),
// offsets past the end or onto a trailer or another section, counts and
// record sizes next to their limits; or one entry more or fewer.
bool MutateSection(Target& t, Rng& rng) {
  const uint32_t version = t.GetHeader<uint32_t>(8);
  const uint32_t fixed = static_cast<uint32_t>(FixedHeaderSize(version));
  const uint32_t nsec = t.GetHeader<uint32_t>(20);
  const uint32_t bs = t.bs();
  if (nsec == 0 || nsec > kMaxSections || !IsValidBlockSize(bs)) return false;
  if (rng() % 8 == 0) {  // one entry fewer or more; the header checksum moves
    const uint32_t n = (rng() & 1) ? nsec - 1 : nsec + 1;
    return t.PutHeader<uint32_t>(20, n) &&
           t.PutHeader<uint32_t>(12, static_cast<uint32_t>(fixed + n * kSectionEntrySize + 8));
  }
  const uint32_t e = fixed + static_cast<uint32_t>(rng() % nsec) * kSectionEntrySize;
  const uint32_t other = fixed + static_cast<uint32_t>(rng() % nsec) * kSectionEntrySize;
  const uint64_t size = t.bytes.size();
  const uint64_t offset = t.GetHeader<uint64_t>(e + 8);
  switch (rng() % 5) {
    case 0:
      return t.PutHeader<uint32_t>(e, Pick<uint32_t>(rng, {0, 1, 2, 3, 4, 5, 6, 77, 0xFFFFFFFFu,
                                                           t.GetHeader<uint32_t>(other)}));
    case 1:
      return t.PutHeader<uint32_t>(e + 4, Pick<uint32_t>(rng, {0, 1, 2, 0xFFFFFFFFu}));
    case 2:
      return t.PutHeader<uint64_t>(
          e + 8,
          Pick<uint64_t>(rng, {0, size, size - 1, size - 8, uint64_t{1} << 50,
                               t.GetHeader<uint64_t>(other + 8), (offset / bs + 1) * bs - 16,
                               (offset / bs + 1) * bs - 8, offset + 1, offset - 1, offset + bs}));
    case 3: {
      const uint64_t count = t.GetHeader<uint64_t>(e + 16);
      return t.PutHeader<uint64_t>(
          e + 16, Pick<uint64_t>(rng, {0, 1, count - 1, count + 1, count * 2, size, size + 1,
                                       uint64_t{1} << 40, ~uint64_t{0}}));
    }
    default:
      return t.PutHeader<uint32_t>(
          e + 24, Pick<uint32_t>(rng, {0, 1, 8, 16, 17, bs - 16, bs - 15, bs, 0xFFFFFFFFu}));
  }
}

// Whole blocks: one block's payload over another's (a block of the same
// file at the wrong place passes its checksum once resealed), two swapped,
// the file one block shorter or longer (with or without block_count).
bool MutateBlocks(Target& t, Rng& rng, size_t max_size) {
  const uint32_t bs = t.bs();
  if (!IsValidBlockSize(bs) || t.bytes.size() < bs) return false;
  const uint64_t blocks = t.bytes.size() / bs;
  const uint64_t a = rng() % blocks, b = rng() % blocks;
  switch (rng() % 4) {
    case 0:
      t.bytes.replace(a * bs, bs - kBlockTrailerSize,
                      t.bytes.substr(b * bs, bs - kBlockTrailerSize));
      return true;
    case 1: {
      std::string tmp = t.bytes.substr(a * bs, bs);
      t.bytes.replace(a * bs, bs, t.bytes, b * bs, bs);
      t.bytes.replace(b * bs, bs, tmp);
      return true;
    }
    case 2:
      if (blocks < 2) return false;
      t.bytes.resize((blocks - 1) * bs);
      break;
    default:
      if ((blocks + 1) * bs > max_size) return false;
      t.bytes.append(t.bytes.substr(b * bs, bs));
  }
  if (rng() % 4) t.PutHeader<uint64_t>(24, t.bytes.size() / bs);
  t.decoded = false;  // the node region may lie past the end now
  return true;
}

// libFuzzer's byte mutations inside one block's payload, the file's size
// and layout kept.
bool MutateInBlock(Target& t, Rng& rng) {
  const uint32_t bs = t.bs();
  if (!IsValidBlockSize(bs) || t.bytes.size() < bs) return false;
  const uint64_t blocks = t.bytes.size() / bs;
  // Node blocks most of the time, when the region is known.
  uint64_t b = rng() % blocks;
  if (t.decoded && rng() % 4) b = t.h.node_first_block + rng() % t.h.node_block_count;
  if (b >= blocks) return false;
  const size_t payload = bs - kBlockTrailerSize;
  const size_t at = rng() % payload;
  const size_t len = std::min<size_t>(payload - at, 1 + rng() % 64);
  std::vector<uint8_t> slice(t.bytes.begin() + b * bs + at, t.bytes.begin() + b * bs + at + len);
  const size_t n = LLVMFuzzerMutate(slice.data(), len, len);
  std::memcpy(&t.bytes[b * bs + at], slice.data(), n);
  return true;
}

size_t Mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  Rng rng(seed);
  Target t;
  t.bytes.assign(reinterpret_cast<const char*>(data), size);
  testing::ResealPac(t.bytes);  // an input from elsewhere (a crossover, a raw file)
  auto h = PacHeader::DecodeFromFile(t.bytes.data(), t.bytes.size(), "fuzz.pac");
  t.decoded = h.ok() && h->block_count * h->block_size == t.bytes.size();
  if (t.decoded) t.h = *h;
  bool changed = false;
  if (rng() % 10 != 0 && t.bytes.size() >= kFixedHeaderSize) {
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < edits; ++i) {
      const unsigned pick = rng() % 16;
      // Tree, node and section edits need the decoded header; the others
      // work on any file with a block size.
      if (t.decoded && pick < 4)
        changed |= MutateTree(t, rng);
      else if (t.decoded && pick < 9)
        changed |= MutateNode(t, rng);
      else if (pick < 11)
        changed |= MutateHeader(t, rng);
      else if (pick < 13)
        changed |= MutateSection(t, rng);
      else if (pick < 14)
        changed |= MutateBlocks(t, rng, max_size);
      else
        changed |= MutateInBlock(t, rng);
    }
  }
  if (!changed) {  // raw bytes: sizes and layout change too
    const size_t had = t.bytes.size();
    t.bytes.resize(std::max(max_size, had));
    t.bytes.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(t.bytes.data()), had, max_size));
  }
  testing::ResealPac(t.bytes);
  if (t.bytes.size() > max_size) t.bytes.resize(max_size);
  std::memcpy(data, t.bytes.data(), t.bytes.size());
  return t.bytes.size();
}

// ---------------------------------------------------------------------------
// The reader paths.

// Rows that reach both sides of the file's own thresholds, plus the values
// routing treats specially (NaN, ±0, tiny values around the zero-is-missing
// bound, infinities). Deterministic for a given file.
RowMatrix MakeRows(const PacFile& file, size_t n) {
  const PacHeader& h = file.header();
  Rng rng(31);
  std::uniform_real_distribution<double> u(-2.5, 2.5);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             0.0,
                             -0.0,
                             1e-36,
                             -1e-36,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             1e300};
  const uint64_t first = h.node_first_block * h.block_size / kUnit;
  const uint64_t units = h.node_block_count * h.block_size / kUnit;
  RowMatrix m;
  m.num_rows = n;
  m.num_cols = h.num_features;
  m.values.resize(n * m.num_cols);
  for (double& v : m.values) {
    const unsigned pick = rng() % 10;
    if (pick < 4) {  // a threshold of some unit of the node region, or next to it
      const uint64_t off = (first + rng() % units) * kUnit;
      const double t = h.node_format == 0 ? GetField<float>(file.data(), off)
                                          : GetField<double>(file.data(), off);
      v = Pick<double>(rng, {t, std::nextafter(t, 1e300), std::nextafter(t, -1e300)});
    } else if (pick == 4) {
      v = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
    } else {
      v = u(rng);
    }
  }
  return m;
}

void EveryPath(const std::string& bytes) {
  auto file = PacFile::FromBuffer(bytes, "fuzz.pac");
  if (!file.ok()) return;
  (void)(*file)->VerifyBlocks();
  (void)(*file)->SourceInfoJson();
  {
    auto reader = NewPacFileBlockReader(**file);
    (void)CheckForestStructure(**file, *reader);
  }
  const PacHeader& h = (*file)->header();
  if (h.num_features > kMaxFuzzFeatures) return;
  // Rows per request within the walk budget; one request runs at most
  // rows * trees * (max_depth + 1) node steps.
  const uint64_t per_row = h.num_trees * (uint64_t{h.max_depth} + 1);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(kWarmRows, kWalkBudget / per_row));
  if (n == 0) return;
  const RowMatrix rows = MakeRows(**file, n);
  RowMatrix one = rows;
  one.num_rows = 1;
  one.values.resize(rows.num_cols);
  const std::vector<float> rows32(rows.values.begin(), rows.values.end());
  const PacEngine::SourceFactory cold = [](const PacFile& f, const EngineOptions& o) {
    return std::make_unique<testing::ColdSource>(
        NewPacFileSource(f, o.verify_blocks, o.max_in_flight, o.block_io));
  };
  // Blocks verified and not (the structure checks alone then), and a source
  // kept cold (every request in flight).
  const struct {
    bool verify;
    bool cold;
  } kEngines[] = {{true, false}, {false, false}, {true, true}};
  for (const auto& config : kEngines) {
    EngineOptions o;
    o.verify_blocks = config.verify;
    auto copy = PacFile::FromBuffer(bytes, "fuzz.pac");
    if (!copy.ok()) return;
    auto e = PacEngine::FromFile(std::move(*copy), o, config.cold ? cold : nullptr);
    if (!e.ok()) continue;
    std::vector<double> out;
    // One row first (cold when the file has blocks enough), then enough
    // work for the warm forest to be built.
    (void)(*e)->PredictAll(one, false, 1, &out);
    for (int i = 0; i < 4; ++i) (void)(*e)->PredictAll(rows, i % 2 == 1, 1 + i / 2, &out);
    out.resize(rows.num_rows * (*e)->num_columns(false));
    (void)(*e)->Predict(rows32.data(), rows.num_rows, false, out.data());
    std::vector<int32_t> leaves;
    (void)(*e)->PredictLeaves(rows, 1, &leaves);
    std::vector<uint64_t> blocks;
    (void)(*e)->TouchedBlocks(rows.row(0), &blocks);
  }
}

}  // namespace
}  // namespace pacset

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return pacset::Mutate(data, size, max_size, seed);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  pacset::testing::ResealPac(bytes);
  pacset::EveryPath(bytes);
  return 0;
}
