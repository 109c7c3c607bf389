// The validating reader: truncated, corrupt and hostile .pac files get a
// clear error, never an out-of-bounds read or a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "engine/engine.h"
#include "layout/pack.h"
#include "testkit/random_forest.h"

namespace pacset {
namespace {

std::string Packed(uint32_t bs = 4096, uint32_t seed = 3, uint32_t format_version = 0) {
  testing::RandomForestSpec spec;
  spec.seed = seed;
  spec.trees = 30;
  PackOptions o;
  o.block_size = bs;
  o.format_version = format_version;
  auto b = PackForestToBuffer(testing::MakeRandomForest(spec), o);
  EXPECT_TRUE(b.ok());
  return *b;
}

Status OpenStatus(std::string bytes) {
  return PacFile::FromBuffer(std::move(bytes), "f.pac").status();
}

PacHeader HeaderOf(const std::string& bytes) {
  auto h = PacHeader::DecodeFromFile(bytes.data(), bytes.size(), "f.pac");
  EXPECT_TRUE(h.ok());
  return *h;
}

// Seals a block edited by a test with the file's seed, read straight from the
// header bytes (which the test may have made invalid).
void Reseal(std::string& bytes, uint32_t bs, uint64_t block) {
  uint32_t version;
  uint64_t file_id;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&file_id, bytes.data() + 128, 8);
  SealBlock(bytes.data() + block * bs, bs, block, version >= 3 ? file_id : 0);
}

TEST(PacFile, OpensWhatThePackerWrites) {
  auto f = PacFile::FromBuffer(Packed(), "f.pac");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->header().num_trees, 30u);
  EXPECT_TRUE((*f)->VerifyBlocks().empty());
  EXPECT_NE((*f)->SourceInfoJson().find("\"layout\":\"pacset\""), std::string::npos);
}

TEST(PacFile, RejectsSomethingElse) {
  Status s = OpenStatus(std::string(8192, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a .pac file"), std::string::npos);
  EXPECT_FALSE(OpenStatus("PACSET").ok());
}

TEST(PacFile, RejectsATruncatedFileNamingBothSizes) {
  std::string b = Packed();
  b.resize(b.size() - 4096);
  Status s = OpenStatus(b);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("(truncated)"), std::string::npos) << s.message();
  b.resize(100);
  EXPECT_FALSE(OpenStatus(b).ok());
}

TEST(PacFile, RejectsAFlippedHeaderByte) {
  std::string b = Packed();
  b[50] ^= 1;
  Status s = OpenStatus(b);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("header checksum"), std::string::npos) << s.message();
}

TEST(PacFile, RejectsANewerFormatVersionAsNotSupported) {
  std::string b = Packed();
  b[8] = 4;
  Status s = OpenStatus(b);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("version 4"), std::string::npos);
}

// The header stream of a file (FORMAT.md section 2), gathered from payloads.
std::string HeaderStream(const std::string& file, uint32_t bs) {
  uint32_t size;
  std::memcpy(&size, file.data() + 12, 4);
  std::string out;
  for (uint32_t j = 0; j < size; ++j) out.push_back(file[PayloadStreamOffset(j, bs)]);
  return out;
}

TEST(PacFile, WritesVersion3UnlessAskedForAnOlderOne) {
  for (uint32_t bs : {256u, 4096u, 65536u}) {
    const PacHeader h = HeaderOf(Packed(bs));
    EXPECT_EQ(h.version, 3u) << bs;
    EXPECT_NE(h.file_id, 0u) << bs;
    EXPECT_EQ(h.block_seed(), h.file_id) << bs;
    EXPECT_EQ(HeaderOf(Packed(bs, 3, 2)).block_seed(), 0u) << bs;
  }
}

TEST(PacFile, FormatVersion2WritesVersion1From4KiBAndVersion2WithAHeaderFlowingOverSmallBlocks) {
  const std::string big = Packed(4096, 3, 2);
  EXPECT_EQ(HeaderOf(big).version, 1u);
  const std::string small = Packed(256, 3, 2);
  auto f = PacFile::FromBuffer(small, "f.pac");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const PacHeader& h = (*f)->header();
  EXPECT_EQ(h.version, 2u);
  EXPECT_EQ(h.block_size, 256u);
  ASSERT_GT(h.EncodedSize(), h.payload_size()) << "the header must go on in block 1";
  EXPECT_TRUE((*f)->VerifyBlocks().empty());
  // Block 1's payload starts with the rest of the header, byte for byte.
  const std::string stream = HeaderStream(small, 256);
  ASSERT_EQ(stream.size(), h.EncodedSize());
  EXPECT_EQ(0, std::memcmp(small.data() + 256, stream.data() + 240, stream.size() - 240));
  EXPECT_EQ(Checksum64(stream.data(), stream.size() - 8), h.checksum);
  // The tree table starts right after it, 16-byte aligned, in block 1.
  EXPECT_EQ(h.FindSection(SectionType::kTreeTable)->offset,
            256 + (stream.size() + 15) / 16 * 16 - 240);
  for (uint32_t bs : {512u, 1024u, 2048u}) EXPECT_EQ(HeaderOf(Packed(bs, 3, 2)).version, 2u) << bs;
}

TEST(PacFile, RefusesAVersion1FileWithBlocksSmallerThan4KiB) {
  std::string b = Packed(256, 3, 2);
  std::string stream = HeaderStream(b, 256);
  stream[8] = 1;  // claim version 1, with a valid header checksum
  const uint64_t sum = Checksum64(stream.data(), stream.size() - 8);
  std::memcpy(stream.data() + stream.size() - 8, &sum, 8);
  for (uint32_t j = 0; j < stream.size(); ++j) b[PayloadStreamOffset(j, 256)] = stream[j];
  Reseal(b, 256, 0);
  Reseal(b, 256, 1);
  Status s = OpenStatus(b);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("version 1 needs 4 KiB blocks"), std::string::npos) << s.message();
}

TEST(PacFile, AHeaderCutShortIsTruncated) {
  const std::string b = Packed(256);
  auto h = PacHeader::DecodeFromFile(b.data(), 256, "f.pac");
  EXPECT_TRUE(h.status().IsCorruption()) << h.status().ToString();
  EXPECT_NE(h.status().message().find("(truncated)"), std::string::npos);
  auto need = HeaderFileBytes(b.data(), 256, "f.pac");
  ASSERT_TRUE(need.ok());
  EXPECT_EQ(*need, 512u);
}

TEST(PacFile, FromMetadataOpensTheMetadataBlocksAlone) {
  const std::string b = Packed(256);
  const PacHeader h = *PacHeader::DecodeFromFile(b.data(), b.size(), "f.pac");
  auto f = PacFile::FromMetadata(b.substr(0, h.node_first_block * 256), b.size(), "stored");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->trees().size(), 30u);
  EXPECT_EQ((*f)->data(), nullptr);
  std::string block(256, '\0');
  EXPECT_EQ((*f)->ReadBlock(h.node_first_block, block.data()).code(), StatusCode::kNotSupported);
  auto cut = PacFile::FromMetadata(b.substr(0, (h.node_first_block - 1) * 256), b.size(), "x");
  EXPECT_TRUE(cut.status().IsCorruption()) << cut.status().ToString();
}

TEST(PacFile, RejectsACorruptMetadataBlock) {
  std::string b = Packed();
  const PacHeader h = HeaderOf(b);
  // Inside block 0 but past the header: the tree table. Header checksum still
  // matches, the block trailer does not.
  b[h.EncodedSize() + 20] ^= 0x40;
  Status s = OpenStatus(b);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("block 0: checksum mismatch"), std::string::npos) << s.message();
}

TEST(PacFile, RejectsATreeTableEntryOutsideTheNodeRegionEvenWhenResealed) {
  std::string b = Packed();
  const PacHeader h = HeaderOf(b);
  const SectionEntry& tt = *h.FindSection(SectionType::kTreeTable);
  TreeRecord r;
  std::memcpy(&r, b.data() + tt.offset, sizeof(r));
  r.root = 1ull << 40;
  r.root_kind = 0;
  std::memcpy(b.data() + tt.offset, &r, sizeof(r));
  Reseal(b, h.block_size, 0);
  Status s = OpenStatus(b);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("tree 0 has its root outside the node region"), std::string::npos);
}

TEST(PacFile, SkipsUnknownOptionalSectionsAndRefusesUnknownRequiredOnes) {
  std::string b = Packed();
  PacHeader h = HeaderOf(b);
  // Turn the source-info entry into a section type from the future.
  SectionEntry* info = nullptr;
  for (auto& s : h.sections)
    if (s.type == static_cast<uint32_t>(SectionType::kSourceInfo)) info = &s;
  ASSERT_NE(info, nullptr);
  info->type = 99;
  h.EncodeTo(b.data());
  Reseal(b, h.block_size, 0);
  ASSERT_TRUE(OpenStatus(b).ok()) << OpenStatus(b).ToString();
  info->flags = kSectionRequired;
  h.EncodeTo(b.data());
  Reseal(b, h.block_size, 0);
  Status s = OpenStatus(b);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("section type 99"), std::string::npos) << s.message();
}

TEST(PacFile, VerifyBlocksReportsEveryCorruptBlock) {
  std::string b = Packed();
  const PacHeader h = HeaderOf(b);
  ASSERT_GT(h.block_count, 5u);
  b[2 * h.block_size + 100] ^= 1;
  b[4 * h.block_size + 7] ^= 1;
  auto f = PacFile::FromBuffer(b, "f.pac");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->VerifyBlocks(), (std::vector<uint64_t>{2, 4}));
}

TEST(PacFile, BlockServedAtTheWrongPositionIsCaught) {
  std::string b = Packed();
  const PacHeader h = HeaderOf(b);
  // Copy block 2 over block 3: both are well-formed blocks.
  std::memcpy(b.data() + 3 * h.block_size, b.data() + 2 * h.block_size, h.block_size);
  auto f = PacFile::FromBuffer(b, "f.pac");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->VerifyBlocks(), std::vector<uint64_t>{3});
  EXPECT_NE(VerifyBlock(b.data() + 3 * h.block_size, h.block_size, 3, h.block_seed(), "f")
                .message()
                .find("holds block 2"),
            std::string::npos);
}

TEST(PacFile, OpenFromDiskReportsMissingAndShortFiles) {
  EXPECT_TRUE(PacFile::Open("/nonexistent/x.pac").status().IsNotFound());
  const std::string path = ::testing::TempDir() + "/short.pac";
  std::ofstream(path) << "PACSET";
  EXPECT_EQ(PacFile::Open(path).status().code(), StatusCode::kInvalidArgument);
  unlink(path.c_str());
}

// Mutate node blocks (resealed, so checksums pass) and predict: every result
// is OK or a Corruption status; nothing crashes or reads out of bounds (run
// under the sanitizer build to check the latter).
TEST(Engine, SurvivesHostileNodeBlocks) {
  const std::string good = Packed(4096, 5);
  const PacHeader h = HeaderOf(good);
  testing::RandomForestSpec spec;
  spec.seed = 5;
  spec.trees = 30;
  const Forest f = testing::MakeRandomForest(spec);
  const RowMatrix rows = testing::MakeAdversarialRows(f, 20, 1);
  std::mt19937 rng(42);
  int corrupt = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string b = good;
    const uint64_t block = h.node_first_block + rng() % h.node_block_count;
    for (int k = 0; k < 1 + iter % 8; ++k) {
      const uint64_t off = block * h.block_size + rng() % (h.block_size - 16);
      b[off] = static_cast<char>(rng());
    }
    Reseal(b, h.block_size, block);
    auto file = PacFile::FromBuffer(std::move(b), "f.pac");
    ASSERT_TRUE(file.ok());
    auto e = PacEngine::FromFile(std::move(file).value());
    ASSERT_TRUE(e.ok());
    std::vector<double> out;
    Status s = (*e)->PredictAll(rows, false, 1, &out);
    EXPECT_TRUE(s.ok() || s.IsCorruption()) << s.ToString();
    if (!s.ok()) ++corrupt;
  }
  EXPECT_GT(corrupt, 0);  // the checks do fire
}

TEST(Engine, DetectsAReferenceCycle) {
  std::string b = Packed(4096, 9);
  const PacHeader h = HeaderOf(b);
  auto file = PacFile::FromBuffer(b, "f.pac");
  const TreeRecord root = (*file)->trees()[0];
  ASSERT_EQ(root.root_kind, 0);
  CompactNode n;
  std::memcpy(&n, b.data() + root.root * 16, 16);
  n.left = static_cast<uint32_t>(root.root);
  n.right = static_cast<uint32_t>(root.root);
  n.feature_flags &= 0x07FFFFFFu;  // both children: kind node
  std::memcpy(b.data() + root.root * 16, &n, 16);
  Reseal(b, h.block_size, root.root * 16 / h.block_size);
  auto e = PacEngine::FromFile(std::move(PacFile::FromBuffer(b, "f.pac")).value());
  ASSERT_TRUE(e.ok());
  RowMatrix rows;
  rows.num_cols = h.num_features;
  rows.num_rows = 1;
  rows.values.assign(rows.num_cols, 0.0);
  std::vector<double> out;
  Status s = (*e)->PredictAll(rows, false, 1, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("cycle"), std::string::npos);
}

TEST(Engine, VerifyOptionCatchesACorruptNodeBlockOnFirstTouch) {
  std::string b = Packed(4096, 2);
  const PacHeader h = HeaderOf(b);
  auto file = PacFile::FromBuffer(b, "f.pac");
  const uint64_t root_block = (*file)->trees()[0].root * 16 / h.block_size;
  b[root_block * h.block_size + h.block_size - 20] ^= 1;  // padding byte: structure intact
  EngineOptions o;
  o.verify_blocks = true;
  auto e = PacEngine::FromFile(std::move(PacFile::FromBuffer(b, "f.pac")).value(), o);
  ASSERT_TRUE(e.ok());
  RowMatrix rows;
  rows.num_cols = h.num_features;
  rows.num_rows = 1;
  rows.values.assign(rows.num_cols, 0.0);
  std::vector<double> out;
  Status s = (*e)->PredictAll(rows, false, 1, &out);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("block " + std::to_string(root_block) + ": checksum mismatch"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace pacset
