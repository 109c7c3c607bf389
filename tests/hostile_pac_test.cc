// Hostile .pac files (issue 31): fields edited as an attacker would, every
// checksum made valid again (testkit/pac_edit.h), so that nothing but the
// structure rules of layout/FORMAT.md §5 stands between the edit and the
// reader. Whatever the file holds, the result is a prediction or an error
// naming what is wrong — never a signal, an out-of-bounds access (these
// tests run under AddressSanitizer in CI) or a different answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "layout/pack.h"
#include "layout/structure_check.h"
#include "model/predict.h"
#include "testkit/cold_source.h"
#include "testkit/pac_edit.h"
#include "testkit/random_forest.h"
#include "tests/test_files.h"
#include "util/atomic_file.h"

namespace pacset {
namespace {

using testing::Flavor;
using testing::MakeAdversarialRows;
using testing::MakeRandomForest;
using testing::PacEditor;
using testing::RandomForestSpec;

Forest MakeForest(Flavor flavor, uint32_t seed = 5, int trees = 12, double categorical = 0) {
  RandomForestSpec spec;
  spec.flavor = flavor;
  spec.trees = trees;
  spec.max_depth = 6;
  spec.outputs = 3;
  spec.seed = seed;
  spec.categorical_probability = categorical;
  return MakeRandomForest(spec);
}

std::string Pack(const Forest& f, uint32_t bs, bool wide, uint32_t format_version = 0,
                 LayoutKind layout = LayoutKind::kPacset) {
  PackOptions o;
  o.block_size = bs;
  o.force_wide_nodes = wide;
  o.format_version = format_version;
  o.layout = layout;
  auto b = PackForestToBuffer(f, o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : std::string();
}

// Every way a reader can take a file: the metadata check at open, the
// structure check, cold (in flight) and warm predictions, margins, leaf ids
// and touched blocks. Each gives a result or a clean error; the first
// error is returned ("" when every path accepted the file).
std::string EveryPath(const std::string& bytes, const Forest& f) {
  auto file = PacFile::FromBuffer(bytes, "hostile.pac");
  if (!file.ok()) {
    EXPECT_TRUE(file.status().IsCorruption() || file.status().code() == StatusCode::kNotSupported)
        << file.status().ToString();
    return file.status().message();
  }
  std::string first;
  auto note = [&](const Status& s) {
    if (s.ok()) return;
    EXPECT_TRUE(s.IsCorruption() || s.code() == StatusCode::kIOError) << s.ToString();
    if (first.empty()) first = s.message();
  };
  auto reader = NewPacFileBlockReader(**file);
  note(CheckForestStructure(**file, *reader).status());
  const RowMatrix rows = MakeAdversarialRows(f, 64, 3);
  const PacEngine::SourceFactory cold = [](const PacFile& file, const EngineOptions& o) {
    return std::make_unique<testing::ColdSource>(
        NewPacFileSource(file, o.verify_blocks, o.max_in_flight, o.block_io));
  };
  // Blocks verified and not, and a source kept cold (every request in
  // flight, every block read through a fetch: what a cold row on a big file
  // does, which a small file in memory does not do otherwise).
  for (int config = 0; config < 3; ++config) {
    EngineOptions o;
    o.verify_blocks = config != 1;
    auto copy = PacFile::FromBuffer(bytes, "hostile.pac");
    auto e = PacEngine::FromFile(std::move(*copy), o, config == 2 ? cold : nullptr);
    if (!e.ok()) {
      note(e.status());
      continue;
    }
    std::vector<double> out;
    // One row cold, then enough work for the warm forest to be built.
    RowMatrix one = rows;
    one.num_rows = 1;
    one.values.resize(rows.num_cols);
    note((*e)->PredictAll(one, false, 1, &out));
    for (int i = 0; i < 4; ++i) note((*e)->PredictAll(rows, i % 2 == 1, 2, &out));
    std::vector<int32_t> leaves;
    const Status leaf = (*e)->PredictLeaves(rows, 1, &leaves);
    if (leaf.code() != StatusCode::kNotSupported) note(leaf);
    std::vector<uint64_t> blocks;
    note((*e)->TouchedBlocks(rows.row(0), &blocks));
  }
  return first;
}

struct Shape {
  Flavor flavor;
  uint32_t bs;
  bool wide;
};
const Shape kShapes[] = {
    {Flavor::kSklearnProba, 4096, false},  // leaf width 3: records and inline classes
    {Flavor::kSklearnProba, 256, true},
    {Flavor::kXgboost, 4096, false},  // leaf width 1, three groups
    {Flavor::kXgboost, 256, false},
    {Flavor::kLightgbm, 1024, true},
};

std::string ShapeName(const Shape& s) {
  return "flavor " + std::to_string(static_cast<int>(s.flavor)) + " at " + std::to_string(s.bs) +
         (s.wide ? " wide" : " compact");
}

TEST(HostilePac, ATreeGroupOutsideTheOutputsIsRefusedAtOpenWhateverTheLeafWidth) {
  for (const Shape& shape : kShapes) {
    const Forest f = MakeForest(shape.flavor);
    const std::string packed = Pack(f, shape.bs, shape.wide);
    for (uint32_t group : {3u, 5u, 64u, 4096u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
      for (bool inline_root : {true, false}) {
        PacEditor ed(packed);
        ASSERT_TRUE(ed.ok());
        TreeRecord r = ed.Tree(0);
        r.group = group;
        if (inline_root) {  // the root itself a leaf: 1.0f, added to acc[group]
          r.root_kind = static_cast<uint8_t>(RefKind::kInlineValue);
          r.root = 0x3f800000u;
        }
        ed.SetTree(0, r);
        const std::string msg = EveryPath(ed.Reseal(), f);
        EXPECT_NE(msg.find("tree 0 has output group " + std::to_string(group)), std::string::npos)
            << ShapeName(shape) << ": " << msg;
      }
    }
  }
}

TEST(HostilePac, ALeafWidthWidenedOverScalarLeavesStillChecksEveryTreeGroup) {
  // A 3-group boosted forest (leaf width 1) whose header claims leaf width
  // 3: tree groups above 2 were only checked for leaf width 1 before.
  const Forest f = MakeForest(Flavor::kXgboost);
  for (uint32_t bs : {256u, 4096u}) {
    PacEditor ed(Pack(f, bs, false));
    ASSERT_TRUE(ed.ok());
    ed.SetHeaderField<uint32_t>(52, 3);  // leaf_width
    TreeRecord r = ed.Tree(0);
    r.group = 64;
    ed.SetTree(0, r);
    const std::string msg = EveryPath(ed.Reseal(), f);
    EXPECT_NE(msg.find("tree 0 has output group 64"), std::string::npos) << msg;
  }
}

TEST(HostilePac, HeaderFieldsThatDisagreeAreRefusedNamingTheField) {
  const Forest f = MakeForest(Flavor::kSklearnProba);
  const std::string packed = Pack(f, 4096, false);
  struct Edit {
    uint32_t offset;
    uint64_t value;
    int bytes;
    const char* expect;
  };
  const PacHeader h = PacEditor(packed).header();
  const Edit edits[] = {
      {104, 0, 8, "node region"},                           // no node blocks
      {64, h.node_block_count * 255 + 1, 8, "do not fit"},  // num_nodes past the region
      {72, uint64_t{1} << 40, 8, "do not fit"},             // num_leaf_records
      {44, 0, 4, "output count 0"},
      {52, 2, 4, "leaf width 2"},
      {33, 5, 1, "sigmoid pair with 3 outputs"},
      {33, 9, 1, "unknown postprocess 9"},
      {37, 2, 1, "unknown node_format 2"},
      {56, 0, 8, "no trees"},
      {40, 0, 4, "no features"},
      {120, (1u << 24) + 1, 4, "max depth"},
  };
  for (const Edit& e : edits) {
    PacEditor ed(packed);
    if (e.bytes == 1) ed.SetHeaderField<uint8_t>(e.offset, static_cast<uint8_t>(e.value));
    if (e.bytes == 4) ed.SetHeaderField<uint32_t>(e.offset, static_cast<uint32_t>(e.value));
    if (e.bytes == 8) ed.SetHeaderField<uint64_t>(e.offset, e.value);
    const Status s = PacFile::FromBuffer(ed.Reseal(), "h.pac").status();
    EXPECT_TRUE(s.IsCorruption()) << e.offset << ": " << s.ToString();
    EXPECT_NE(s.message().find(e.expect), std::string::npos) << e.offset << ": " << s.message();
  }
  // Informative fields take any value.
  for (uint32_t offset : {32u, 38u, 39u}) {  // task, layout, cardinality source
    PacEditor ed(packed);
    ed.SetHeaderField<uint8_t>(offset, 200);
    EXPECT_TRUE(PacFile::FromBuffer(ed.Reseal(), "h.pac").ok()) << offset;
  }
}

TEST(HostilePac, SectionsAreUniqueAndUnknownOptionalOnesAreSkippedUnchecked) {
  const Forest f = MakeForest(Flavor::kXgboost);
  const std::string packed = Pack(f, 4096, false);
  const PacHeader h = PacEditor(packed).header();
  const uint32_t table = static_cast<uint32_t>(FixedHeaderSize(h.version));
  // The source-info entry (type 4) retyped as a second tree table.
  int info = -1;
  for (size_t i = 0; i < h.sections.size(); ++i)
    if (h.sections[i].type == static_cast<uint32_t>(SectionType::kSourceInfo)) info = int(i);
  ASSERT_GE(info, 0);
  {
    PacEditor ed(packed);
    ed.SetHeaderField<uint32_t>(table + 32 * info, 1);
    const Status s = PacFile::FromBuffer(ed.Reseal(), "s.pac").status();
    EXPECT_NE(s.message().find("a second section of its type"), std::string::npos) << s.ToString();
  }
  {  // An unknown optional type pointing past the end of the file: ignored.
    PacEditor ed(packed);
    ed.SetHeaderField<uint32_t>(table + 32 * info, 77);
    ed.SetHeaderField<uint64_t>(table + 32 * info + 8, uint64_t{1} << 50);
    auto file = PacFile::FromBuffer(ed.Reseal(), "s.pac");
    EXPECT_TRUE(file.ok()) << file.status().ToString();
  }
  {  // The same, required: refused as written by a newer version.
    PacEditor ed(packed);
    ed.SetHeaderField<uint32_t>(table + 32 * info, 77);
    ed.SetHeaderField<uint32_t>(table + 32 * info + 4, kSectionRequired);
    const Status s = PacFile::FromBuffer(ed.Reseal(), "s.pac").status();
    EXPECT_TRUE(s.code() == StatusCode::kNotSupported) << s.ToString();
  }
}

// The root node of tree `t`, as a reference (the tree's root must be a node).
uint64_t RootOf(const PacEditor& ed, uint64_t t) {
  const TreeRecord r = ed.Tree(t);
  EXPECT_EQ(r.root_kind, static_cast<uint8_t>(RefKind::kNode));
  return r.root;
}

TEST(HostilePac, ASharedNodeOrAWrongNodeCountIsFoundByTheWholeFileChecks) {
  const Forest f = MakeForest(Flavor::kXgboost, 9);
  const std::string packed = Pack(f, 4096, false);
  {  // Tree 1's root is tree 0's root: every reference is in bounds.
    PacEditor ed(packed);
    TreeRecord r = ed.Tree(1);
    r.root = RootOf(ed, 0);
    ed.SetTree(1, r);
    const std::string msg = EveryPath(ed.Reseal(), f);
    EXPECT_NE(msg.find("tree 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reached before"), std::string::npos) << msg;
  }
  {  // One node fewer than the header says.
    PacEditor ed(packed);
    ed.SetHeaderField<uint64_t>(64, ed.header().num_nodes + 1);
    const std::string msg = EveryPath(ed.Reseal(), f);
    EXPECT_NE(msg.find("internal nodes, the header says"), std::string::npos) << msg;
  }
}

// The first categorical node reached from tree 0 onwards (depth first), or
// UINT64_MAX.
template <typename NodeT>
uint64_t FirstCategoricalNode(const PacEditor& ed) {
  for (uint64_t t = 0; t < ed.header().num_trees; ++t) {
    const TreeRecord r = ed.Tree(t);
    std::vector<uint64_t> stack;
    if (r.root_kind == static_cast<uint8_t>(RefKind::kNode)) stack.push_back(r.root);
    while (!stack.empty()) {
      const uint64_t ref = stack.back();
      stack.pop_back();
      const NodeT n = ed.Node<NodeT>(ref);
      uint32_t flags;
      if constexpr (std::is_same_v<NodeT, CompactNode>) {
        flags = n.feature_flags >> 24;
      } else {
        flags = n.flags;
      }
      if (flags & kNodeFlagCategorical) return ref;
      if (((flags >> kLeftKindShift) & 3) == 0) stack.push_back(n.left);
      if (((flags >> kRightKindShift) & 3) == 0) stack.push_back(n.right);
    }
  }
  return UINT64_MAX;
}

// A categorical node's split index (the bits of its threshold) and its
// outside direction come from the file: an index past the split records, or
// the reserved direction 3, is corruption on every path (FORMAT.md §5 rule
// 22), never a read outside the split table.
template <typename NodeT>
void ExpectCategoricalNodeEditsRefused(const Forest& f, const std::string& packed) {
  PacEditor probe(packed);
  const uint64_t ref = FirstCategoricalNode<NodeT>(probe);
  ASSERT_NE(ref, UINT64_MAX);
  const uint64_t splits = f.categorical_splits.size();
  for (uint64_t index : {splits, splits + 1, uint64_t{0xFFFFFFFF}}) {
    PacEditor ed(packed);
    NodeT n = ed.Node<NodeT>(ref);
    if constexpr (std::is_same_v<NodeT, CompactNode>) {
      const uint32_t i = static_cast<uint32_t>(index);
      std::memcpy(&n.threshold, &i, 4);
    } else {
      std::memcpy(&n.threshold, &index, 8);
    }
    ed.SetNode(ref, n);
    const std::string msg = EveryPath(ed.Reseal(), f);
    EXPECT_NE(msg.find("categorical"), std::string::npos) << index << ": " << msg;
  }
  PacEditor ed(packed);
  NodeT n = ed.Node<NodeT>(ref);
  if constexpr (std::is_same_v<NodeT, CompactNode>) {
    n.feature_flags |= uint32_t{kNodeFlagOutsideMask} << 24;
  } else {
    n.flags |= kNodeFlagOutsideMask;
  }
  ed.SetNode(ref, n);
  const std::string msg = EveryPath(ed.Reseal(), f);
  EXPECT_NE(msg.find("outside direction"), std::string::npos) << msg;
}

TEST(HostilePac, ACategoricalNodeNamingNoSplitOrTheReservedDirectionIsCorruptionOnEveryPath) {
  const Forest f = MakeForest(Flavor::kXgboost, 17, 8, 0.4);
  ASSERT_FALSE(f.categorical_splits.empty());
  ExpectCategoricalNodeEditsRefused<CompactNode>(f, Pack(f, 4096, false));
  ExpectCategoricalNodeEditsRefused<WideNode>(f, Pack(f, 256, true));
}

// A split record's sets must lie inside the category words and its rule be
// known; the two sections come together (rules 18 and 20): refused at open.
TEST(HostilePac, ACategoricalSplitRecordOutsideTheWordsIsRefusedAtOpen) {
  const Forest f = MakeForest(Flavor::kLightgbm, 3, 6, 0.5);
  ASSERT_FALSE(f.categorical_splits.empty());
  for (uint32_t bs : {256u, 4096u}) {
    const std::string packed = Pack(f, bs, false);
    const PacEditor probe(packed);
    const SectionEntry& sec = *probe.header().FindSection(SectionType::kCategoricalSplits);
    const uint64_t words = probe.header().FindSection(SectionType::kCategoryWords)->count;
    const uint64_t at = SectionRecordOffset(sec, bs, 0);
    const auto edit = [&](auto change) {
      PacEditor ed(packed);
      CategoricalSplitRecord r;
      std::memcpy(&r, ed.bytes().data() + at, sizeof(r));
      change(r);
      std::memcpy(ed.bytes().data() + at, &r, sizeof(r));
      auto file = PacFile::FromBuffer(ed.Reseal(), "hostile.pac");
      EXPECT_FALSE(file.ok());
      return file.ok() ? std::string() : file.status().message();
    };
    EXPECT_NE(edit([](CategoricalSplitRecord& r) { r.rule = 3; }).find("unknown rule"),
              std::string::npos);
    EXPECT_NE(edit([&](CategoricalSplitRecord& r) {
                r.left_first = static_cast<uint32_t>(words);
                r.left_words = 1;
              }).find("outside the category words"),
              std::string::npos);
    EXPECT_NE(edit([&](CategoricalSplitRecord& r) {
                r.right_first = 0xFFFFFFFF;
                r.right_words = 0xFFFF;
              }).find("outside the category words"),
              std::string::npos);
    // Section 7 renamed to an unknown optional type: words without splits.
    PacEditor ed(packed);
    const auto& secs = ed.header().sections;
    size_t i = 0;
    while (secs[i].type != static_cast<uint32_t>(SectionType::kCategoricalSplits)) ++i;
    const uint32_t entry = static_cast<uint32_t>(FixedHeaderSize(ed.header().version) + 32 * i);
    ed.SetHeaderField<uint32_t>(entry, 99);
    ed.SetHeaderField<uint32_t>(entry + 4, 0);
    auto file = PacFile::FromBuffer(ed.Reseal(), "hostile.pac");
    ASSERT_FALSE(file.ok());
    EXPECT_NE(file.status().message().find("category words without"), std::string::npos)
        << file.status().ToString();
  }
}

// Random field edits anywhere in the node region and the tree table, every
// checksum fixed up: each file gives results or errors on every path.
TEST(HostilePac, RandomEditsPastTheChecksumsNeverBreakAReader) {
  std::mt19937_64 rng(31);
  for (const Shape& shape : kShapes) {
    const Forest f = MakeForest(shape.flavor, 11, 6);
    const std::string packed = Pack(f, shape.bs, shape.wide);
    const PacHeader h = PacEditor(packed).header();
    const uint64_t lo = h.node_first_block * h.block_size;
    const uint64_t hi = (h.node_first_block + h.node_block_count) * h.block_size;
    int errors = 0;
    for (int round = 0; round < 60; ++round) {
      PacEditor ed(packed);
      std::string& b = ed.bytes();
      for (int k = 0; k < 3; ++k) {
        const uint64_t at = lo + rng() % (hi - lo - 8);
        const uint64_t v = rng();
        // A reference-sized value, a byte, or a plausible unit number.
        switch (rng() % 3) {
          case 0:
            std::memcpy(&b[at & ~uint64_t{3}], &v, 4);
            break;
          case 1:
            b[at] = static_cast<char>(v);
            break;
          default: {
            const uint32_t unit = static_cast<uint32_t>(lo / kUnit + v % ((hi - lo) / kUnit + 4));
            std::memcpy(&b[at & ~uint64_t{3}], &unit, 4);
          }
        }
      }
      const uint64_t t = rng() % h.num_trees;
      TreeRecord r = ed.Tree(t);
      if (rng() % 4 == 0) r.root_kind = static_cast<uint8_t>(rng() % 5);
      ed.SetTree(t, r);
      errors += !EveryPath(ed.Reseal(), f).empty();
    }
    EXPECT_GT(errors, 0) << ShapeName(shape) << ": no edit was ever caught";
  }
}

TEST(HostilePac, ANodeOnABlockTrailerIsCorruptionOnEveryPath) {
  // Wide nodes at 256 B blocks: the root's children point at the trailer of
  // a node block. A cold walk read such a node from its fetched copy of the
  // block, 16 bytes past its end (found by fuzz/pac_structure_fuzzer).
  const Forest f = MakeForest(Flavor::kXgboost, 23);
  for (bool wide : {true, false}) {
    PacEditor ed(Pack(f, 256, wide));
    const PacHeader& h = ed.header();
    const uint64_t trailer_unit = (h.node_first_block + 1) * (h.block_size / kUnit) - 1;
    const uint64_t root = RootOf(ed, 0);
    if (wide) {
      WideNode n = ed.Node<WideNode>(root);
      n.flags &= static_cast<uint8_t>(~(0xF << kLeftKindShift));  // both children nodes
      n.left = n.right = trailer_unit;
      ed.SetNode(root, n);
    } else {
      CompactNode n = ed.Node<CompactNode>(root);
      n.feature_flags &= ~(uint32_t{0xF} << (24 + kLeftKindShift));
      n.left = n.right = static_cast<uint32_t>(trailer_unit);
      ed.SetNode(root, n);
    }
    const std::string msg = EveryPath(ed.Reseal(), f);
    EXPECT_NE(msg.find("tree 0"), std::string::npos) << (wide ? "wide: " : "compact: ") << msg;
  }
}

TEST(HostilePac, ABlockOfAnotherPackingAtTheSameIndexIsCorruptionNamingTheBlock) {
  const Forest f = MakeForest(Flavor::kXgboost, 13, 30);
  const std::string a = Pack(f, 4096, false);
  const PacHeader h = PacEditor(a).header();
  const uint64_t block = h.node_first_block;  // the first node block: every row reads it
  // The same model packed by another layout: as many blocks, other contents.
  LayoutKind other = LayoutKind::kPacset;
  std::string b;
  for (LayoutKind layout : AllLayoutKinds()) {
    b = Pack(f, 4096, false, 0, layout);
    if (b.size() == a.size() &&
        std::memcmp(a.data() + block * 4096, b.data() + block * 4096, 4096) != 0) {
      other = layout;
      break;
    }
  }
  ASSERT_NE(other, LayoutKind::kPacset) << "no other layout with as many blocks";
  std::string spliced = a;
  std::memcpy(spliced.data() + block * 4096, b.data() + block * 4096, 4096);
  auto file = PacFile::FromBuffer(spliced, "spliced.pac");
  ASSERT_TRUE(file.ok()) << file.status().ToString();  // metadata blocks are its own
  EXPECT_EQ((*file)->VerifyBlocks(), std::vector<uint64_t>{block});
  auto e = PacEngine::FromFile(std::move(*file));
  ASSERT_TRUE(e.ok());
  const RowMatrix rows = MakeAdversarialRows(f, 10, 1);
  std::vector<double> out;
  const Status s = (*e)->PredictAll(rows, false, 1, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("block " + std::to_string(block)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("another file or generation"), std::string::npos) << s.message();
  // Version 2 files have no identity: the same splice passes their checks
  // (why version 3 exists), and their own blocks still verify.
  const std::string a2 = Pack(f, 4096, false, 2);
  const std::string b2 = Pack(f, 4096, false, 2, other);
  std::string spliced2 = a2;
  std::memcpy(spliced2.data() + block * 4096, b2.data() + block * 4096, 4096);
  auto file2 = PacFile::FromBuffer(spliced2, "spliced2.pac");
  ASSERT_TRUE(file2.ok());
  EXPECT_TRUE((*file2)->VerifyBlocks().empty());
}

TEST(HostilePac, TheStructureCheckAcceptsEveryFileThePackerWrites) {
  for (Flavor flavor :
       {Flavor::kXgboost, Flavor::kSklearnProba, Flavor::kSklearnReg, Flavor::kLightgbm}) {
    const Forest f = MakeForest(flavor, 17, 20);
    for (uint32_t bs : {256u, 4096u}) {
      for (bool wide : {false, true}) {
        for (LayoutKind layout : AllLayoutKinds()) {
          const std::string bytes = Pack(f, bs, wide, 0, layout);
          auto file = PacFile::FromBuffer(bytes, "ok.pac");
          ASSERT_TRUE(file.ok()) << file.status().ToString();
          auto reader = NewPacFileBlockReader(**file);
          auto sum = CheckForestStructure(**file, *reader);
          ASSERT_TRUE(sum.ok()) << LayoutKindName(layout) << " " << bs << ": "
                                << sum.status().ToString();
          EXPECT_EQ(sum->nodes, (*file)->header().num_nodes);
          EXPECT_EQ(sum->leaf_records, (*file)->header().num_leaf_records);
          EXPECT_LE(sum->deepest, (*file)->header().max_depth);
        }
      }
    }
  }
}

// A process rewriting a local .pac under the mapping of another that
// predicts from it: the bytes change between any two reads. The reader gets
// predictions or errors, never a signal (a crash fails the whole test run).
TEST(HostilePac, AFileRewrittenUnderItsMappingGivesPredictionsOrErrorsNeverASignal) {
  const Forest f = MakeForest(Flavor::kXgboost, 21, 40);
  const std::string good = Pack(f, 4096, false);
  const PacHeader h = PacEditor(good).header();
  // The hostile version: every node's children made node references far
  // outside the region (the value that crashed the warm forest's build).
  std::string bad = good;
  const uint64_t lo = h.node_first_block * h.block_size;
  const uint64_t hi = (h.node_first_block + h.node_block_count) * h.block_size;
  for (uint64_t at = lo; at + 16 <= hi; at += 16) {
    if ((at % h.block_size) + 16 > h.payload_size()) continue;
    CompactNode n;
    std::memcpy(&n, bad.data() + at, 16);
    n.feature_flags &= ~(uint32_t{0xF} << (24 + kLeftKindShift));  // both children nodes
    n.left = n.right = 4294967280u;
    std::memcpy(bad.data() + at, &n, 16);
  }
  testing::ResealPac(bad);
  const auto dir = TempDir::Create("pacset-store").value();
  const std::string path = dir->path() + "/rewritten.pac";
  pacset::testing::WriteAll(path, good);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    for (uint64_t i = 0; !stop.load(); ++i) {
      const std::string& src = i % 2 ? bad : good;
      for (uint64_t at = lo; at < hi; at += 4096)
        if (::pwrite(fd, src.data() + at, 4096, static_cast<off_t>(at)) != 4096) break;
    }
    ::close(fd);
  });
  const RowMatrix rows = MakeAdversarialRows(f, 200, 7);
  uint64_t predictions = 0, errors = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < end) {
    for (bool verify : {false, true}) {
      EngineOptions o;
      o.verify_blocks = verify;
      auto e = PacEngine::Open(path, o);
      if (!e.ok()) {
        ++errors;
        continue;
      }
      std::vector<double> out;
      for (int i = 0; i < 3; ++i) {
        const Status s = (*e)->PredictAll(rows, false, 1, &out);
        EXPECT_TRUE(s.ok() || s.IsCorruption() || s.code() == StatusCode::kIOError) << s.ToString();
        s.ok() ? ++predictions : ++errors;
      }
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(predictions + errors, 20u);
  EXPECT_GT(errors, 0u) << "the hostile version was never seen";
}

}  // namespace
}  // namespace pacset
