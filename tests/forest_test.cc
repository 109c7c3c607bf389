#include "model/forest.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>

#include <cmath>
#include <fstream>
#include <limits>

#include "model/predict.h"
#include "tests/test_forests.h"

namespace pacset {
namespace {

TEST(Forest, HandBuiltForestValidatesAndPredicts) {
  Forest f = testing::TwoTreeRegression();
  ASSERT_TRUE(f.Validate().ok()) << f.Validate().ToString();
  ForestPredictor p(f);
  double row[2] = {0.5, 3.0}, out = 0;
  p.Predict(row, &out);
  EXPECT_EQ(out, 0.5 + 2 + 20);
  double missing[2] = {std::nan(""), std::nan("")};
  p.Predict(missing, &out);  // root defaults left, then x1 NaN defaults right in both trees
  EXPECT_EQ(out, 0.5 + 2 + 20);
  EXPECT_EQ(p.LeafIndex(0, row), 4);
}

TEST(Forest, ValidateRejectsAChildOutsideTheTree) {
  Forest f = testing::TwoTreeRegression();
  f.right_child[1] = 9;
  EXPECT_NE(f.Validate().message().find("tree 0 node 1 has child 9"), std::string::npos);
}

// Found by fuzzing LoadForest: only the last tree offset was compared with
// the node count, so a middle offset past the end made Validate() read
// beyond the node arrays.
TEST(Forest, ValidateRejectsATreeEndingBeyondTheNodes) {
  Forest f = testing::TwoTreeRegression();  // offsets {0, 5, 8}
  f.tree_offset[1] = 9;
  Status s = f.Validate();
  EXPECT_NE(s.message().find("tree 0 ends at node 9 of 8"), std::string::npos) << s.ToString();
}

TEST(Forest, ValidateRejectsANodeWithTwoParents) {
  Forest f = testing::TwoTreeRegression();
  f.left_child[1] = 2;  // node 2 is already the root's right child
  EXPECT_NE(f.Validate().message().find("two parents"), std::string::npos);
}

TEST(Forest, ValidateRejectsACycleThroughTheRoot) {
  Forest f = testing::TwoTreeRegression();
  f.left_child[1] = 0;
  EXPECT_FALSE(f.Validate().ok());
}

TEST(Forest, ValidateRejectsUnknownFeaturesAndNonFloat32Thresholds) {
  Forest f = testing::TwoTreeRegression();
  f.split_feature[0] = 2;
  EXPECT_NE(f.Validate().message().find("feature 2"), std::string::npos);
  f = testing::TwoTreeRegression();
  f.threshold[0] = 0.1;  // not a float32 value, but the forest compares in float32
  EXPECT_NE(f.Validate().message().find("float32"), std::string::npos);
}

TEST(Forest, SaveAndLoadRoundTripsEveryField) {
  Forest f = testing::TwoTreeRegression();
  f.source.format = "test";
  const std::string path = ::testing::TempDir() + "/forest_roundtrip.forest";
  ASSERT_TRUE(SaveForest(f, path).ok());
  auto g = LoadForest(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->left_child, f.left_child);
  EXPECT_EQ(g->threshold, f.threshold);
  EXPECT_EQ(g->leaf_value, f.leaf_value);
  EXPECT_EQ(g->cardinality, f.cardinality);
  EXPECT_EQ(g->base_score, f.base_score);
  EXPECT_EQ(g->source.format, "test");
  EXPECT_EQ(g->accumulate_precision, Precision::kFloat32);
  unlink(path.c_str());
}

TEST(Forest, LoadingATruncatedFileIsACorruptionError) {
  Forest f = testing::TwoTreeRegression();
  const std::string path = ::testing::TempDir() + "/forest_truncated.forest";
  ASSERT_TRUE(SaveForest(f, path).ok());
  ASSERT_EQ(truncate(path.c_str(), 40), 0);
  auto g = LoadForest(path);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(g.status().IsCorruption()) << g.status().ToString();
  unlink(path.c_str());
}

// A forged length prefix must be refused before it is allocated: a 40-byte
// file claiming a 2 GiB base-score array used to allocate and zero-fill it.
TEST(Forest, LoadingAForgedArrayLengthFailsBeforeAllocating) {
  const std::string path = ::testing::TempDir() + "/forest_forged.forest";
  ASSERT_TRUE(SaveForest(testing::TwoTreeRegression(), path).ok());
  // Portable binary: endianness byte, magic, version, task (u8), 4 x u32,
  // then base_score's u64 length.
  const off_t length_at = 1 + 4 + 4 + 1 + 4 * 4;
  const uint64_t forged = uint64_t{1} << 28;  // 2 GiB of doubles
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  uint64_t was = 0;
  ASSERT_EQ(std::fseek(f, length_at, SEEK_SET), 0);
  ASSERT_EQ(std::fread(&was, 8, 1, f), 1u);
  EXPECT_EQ(was, 1u);  // TwoTreeRegression has one base score: the offset is right
  ASSERT_EQ(std::fseek(f, length_at, SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(&forged, 8, 1, f), 1u);
  std::fclose(f);
  auto g = LoadForest(path);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(g.status().IsCorruption()) << g.status().ToString();
  EXPECT_NE(g.status().message().find("remaining bytes"), std::string::npos)
      << g.status().ToString();
  unlink(path.c_str());
}

TEST(Float32AtOrBelow, IsTheLargestFloatNotAboveTheValue) {
  EXPECT_EQ(Float32AtOrBelow(0.5), 0.5f);
  const float f = Float32AtOrBelow(0.1);
  EXPECT_LE(static_cast<double>(f), 0.1);
  EXPECT_GT(static_cast<double>(std::nextafter(f, 1.0f)), 0.1);
  EXPECT_EQ(Float32AtOrBelow(1e300), std::numeric_limits<float>::max());
  EXPECT_EQ(Float32AtOrBelow(-1e300), -std::numeric_limits<float>::infinity());
}

TEST(CalibrateCardinality, CountsRowsReachingEachNode) {
  Forest f = testing::TwoTreeRegression();
  RowMatrix rows;
  rows.num_cols = 2;
  rows.values = {0, 0, 1, 5, 0, 9};
  rows.num_rows = 3;
  CalibrateCardinality(f, rows);
  EXPECT_EQ(f.cardinality_source, CardinalitySource::kCalibrated);
  EXPECT_EQ(f.cardinality[0], 3);  // root
  EXPECT_EQ(f.cardinality[1], 2);  // x0 <= 0.5
  EXPECT_EQ(f.cardinality[2], 1);
  EXPECT_EQ(f.cardinality[3], 1);
  EXPECT_EQ(f.cardinality[4], 1);
  EXPECT_EQ(f.cardinality[5 + 2], 3);  // tree 1: all go right
}

}  // namespace
}  // namespace pacset
