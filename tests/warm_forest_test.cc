// The warm forest (layout/internal/warm_forest.h): the compact private copy
// of the nodes that warm requests walk. It must give the in-memory
// predictor's bits and the checked mapping walk's bits on adversarial rows
// (thresholds and their neighbours, NaN, +-0, +-inf, LightGBM's zero rule),
// for every flavor, layout and node width, rows with NaN (the flag-aware
// step) and rows without (the compare-only step); it must not be built for a
// small first request, nor for a file that is not a plain forest of trees —
// whose faults the checked walk then reports as before.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "layout/engine.h"
#include "layout/pack.h"
#include "model/predict.h"
#include "testkit/random_forest.h"
#include "tests/flavor_params.h"

namespace pacset {
namespace {

using testing::MakeAdversarialRows;
using testing::MakeRandomForest;
using testing::RandomForestSpec;

std::unique_ptr<PacEngine> EngineOver(const std::string& bytes, bool warm_forest,
                                      bool verify = true) {
  EngineOptions o;
  o.warm_forest = warm_forest;
  o.verify_blocks = verify;
  auto file = PacFile::FromBuffer(bytes, "test.pac");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto e = PacEngine::FromFile(std::move(*file), o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

std::string Pack(const Forest& f, LayoutKind layout, uint32_t block_size, bool wide) {
  PackOptions o;
  o.layout = layout;
  o.block_size = block_size;
  o.bin_depth = 2;
  o.force_wide_nodes = wide;
  auto bytes = PackForestToBuffer(f, o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

// The in-memory predictor, one row at a time.
std::vector<double> Reference(const Forest& f, const RowMatrix& rows, bool margin) {
  ForestPredictor ref(f);
  const size_t C = margin ? f.num_outputs : f.num_prediction_columns();
  std::vector<double> out(rows.num_rows * C);
  for (size_t r = 0; r < rows.num_rows; ++r) {
    if (margin) {
      ref.PredictMargin(rows.row(r), out.data() + r * C);
    } else {
      ref.Predict(rows.row(r), out.data() + r * C);
    }
  }
  return out;
}

void ExpectSameBits(const std::vector<double>& got, const std::vector<double>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint64_t a, b;
    std::memcpy(&a, &got[i], 8);
    std::memcpy(&b, &want[i], 8);
    ASSERT_EQ(a, b) << what << " value " << i << ": " << got[i] << " vs " << want[i];
  }
}

// The same rows with every NaN replaced: no row of any block has NaN.
RowMatrix WithoutNan(RowMatrix rows) {
  for (double& v : rows.values)
    if (std::isnan(v)) v = -0.0;
  return rows;
}

class WarmForestEveryLayout : public ::testing::TestWithParam<testing::FlavorCase> {};

TEST_P(WarmForestEveryLayout, MatchesTheReferenceAndTheCheckedWalkBitForBit) {
  RandomForestSpec spec;
  spec.flavor = GetParam().flavor;
  spec.trees = 30;
  spec.max_depth = 12;
  spec.seed = 23;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix with_nan = MakeAdversarialRows(f, 300, 9);
  const RowMatrix without_nan = WithoutNan(with_nan);
  size_t nan_rows = 0;
  for (size_t r = 0; r < with_nan.num_rows; ++r)
    for (size_t c = 0; c < with_nan.num_cols; ++c) nan_rows += std::isnan(with_nan.row(r)[c]);
  ASSERT_GT(nan_rows, 0u);
  for (LayoutKind layout : AllLayoutKinds()) {
    for (bool wide : {false, true}) {
      const std::string bytes = Pack(f, layout, 4096, wide);
      const std::string what = std::string(GetParam().name) + " " + LayoutKindName(layout) +
                               (wide ? " wide" : " compact");
      const auto checked = EngineOver(bytes, false);
      const auto fast = EngineOver(bytes, true);
      // A first request large enough to build the warm forest.
      std::vector<double> out;
      ASSERT_TRUE(fast->PredictAll(without_nan, false, 1, &out).ok());
      ASSERT_GT(fast->stats().warm_forest_bytes, 0u) << what;
      EXPECT_EQ(checked->stats().warm_forest_bytes, 0u) << what;
      for (const RowMatrix* rows : {&with_nan, &without_nan}) {
        const std::string w = what + (rows == &with_nan ? " with NaN" : " without NaN");
        for (bool margin : {false, true}) {
          const std::vector<double> want = Reference(f, *rows, margin);
          std::vector<double> a, b;
          ASSERT_TRUE(checked->PredictAll(*rows, margin, 1, &a).ok()) << w;
          ExpectSameBits(a, want, w + " checked walk");
          for (int threads : {1, 3}) {
            ASSERT_TRUE(fast->PredictAll(*rows, margin, threads, &b).ok()) << w;
            ExpectSameBits(b, want, w + " warm forest, threads " + std::to_string(threads));
          }
          // Requests of 1..20 rows: lanes left idle, blocks not a multiple of the lanes.
          const size_t C = fast->num_columns(margin);
          for (size_t n = 1; n <= 20; n += 3) {
            std::vector<double> part(n * C);
            ASSERT_TRUE(fast->Predict(*rows, 7, 7 + n, margin, part.data()).ok()) << w;
            EXPECT_EQ(0, std::memcmp(part.data(), &want[7 * C], n * C * 8)) << w << " n " << n;
          }
        }
      }
      EXPECT_GT(fast->stats().warm_requests, 0u) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flavors, WarmForestEveryLayout, testing::AllFlavors(),
                         testing::FlavorCaseName);

Forest SmallXgboostForest() {
  RandomForestSpec spec;
  spec.trees = 40;
  spec.max_depth = 10;
  spec.seed = 5;
  return MakeRandomForest(spec);
}

TEST(WarmForest, IsNotBuiltForASmallFirstRequestButForLaterWork) {
  const Forest f = SmallXgboostForest();
  const auto e = EngineOver(Pack(f, LayoutKind::kPacset, 4096, false), true);
  const RowMatrix rows = MakeAdversarialRows(f, 2000, 3);
  // A first warm request of a few rows does not wait for the copy.
  std::vector<double> all;
  ASSERT_TRUE(e->PredictAll(rows, false, 1, &all).ok());  // makes every block resident
  const auto fresh = EngineOver(Pack(f, LayoutKind::kPacset, 4096, false), true, false);
  std::vector<double> few(4 * fresh->num_columns(false));
  ASSERT_TRUE(fresh->Predict(rows, 0, 4, false, few.data()).ok());
  EXPECT_EQ(fresh->stats().warm_requests, 1u);
  EXPECT_EQ(fresh->stats().warm_forest_bytes, 0u);
  EXPECT_EQ(0, std::memcmp(few.data(), all.data(), few.size() * 8));
  EXPECT_GT(e->stats().warm_forest_bytes, 0u);
  ExpectSameBits(all, Reference(f, rows, false), "after building");
}

// Rewrites the root node of tree 0 in a compact, unverified file.
std::string WithRoot(const std::string& bytes, void (*edit)(CompactNode&, uint64_t root)) {
  auto file = PacFile::FromBuffer(bytes, "x.pac");
  EXPECT_TRUE(file.ok());
  const TreeRecord& t = (*file)->trees()[0];
  EXPECT_EQ(t.root_kind, static_cast<uint8_t>(RefKind::kNode));
  std::string out = bytes;
  CompactNode n;
  std::memcpy(&n, out.data() + t.root * kUnit, sizeof(n));
  edit(n, t.root);
  std::memcpy(out.data() + t.root * kUnit, &n, sizeof(n));
  return out;
}

void ExpectCorruptionAndNoWarmForest(const std::string& bytes, const Forest& f) {
  const auto e = EngineOver(bytes, true, /*verify=*/false);
  const RowMatrix rows = MakeAdversarialRows(f, 500, 4);
  std::vector<double> out;
  for (int i = 0; i < 3; ++i) {
    const Status s = e->PredictAll(rows, false, 1, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("tree 0"), std::string::npos) << s.message();
  }
  EXPECT_GT(e->stats().warm_requests, 0u);
  EXPECT_EQ(e->stats().warm_forest_bytes, 0u);
}

TEST(WarmForest, AFeatureOutOfRangeIsNotCopiedAndTheCheckedWalkReportsIt) {
  const Forest f = SmallXgboostForest();
  ExpectCorruptionAndNoWarmForest(
      WithRoot(Pack(f, LayoutKind::kPacset, 4096, false),
               [](CompactNode& n, uint64_t) { n.feature_flags |= 0xFFFFFFu; }),
      f);
}

TEST(WarmForest, ACycleIsNotCopiedAndTheCheckedWalkReportsIt) {
  const Forest f = SmallXgboostForest();
  // Both children of the root are the root itself.
  ExpectCorruptionAndNoWarmForest(
      WithRoot(Pack(f, LayoutKind::kPacset, 4096, false),
               [](CompactNode& n, uint64_t root) {
                 n.feature_flags &= ~(uint32_t{0xF} << (24 + kLeftKindShift));  // both kinds: node
                 n.left = n.right = static_cast<uint32_t>(root);
               }),
      f);
}

TEST(WarmForest, AReferenceOutsideTheNodeRegionIsNotCopiedAndTheCheckedWalkReportsIt) {
  const Forest f = SmallXgboostForest();
  ExpectCorruptionAndNoWarmForest(WithRoot(Pack(f, LayoutKind::kPacset, 4096, false),
                                           [](CompactNode& n, uint64_t) {
                                             n.feature_flags &=
                                                 ~(uint32_t{0xF} << (24 + kLeftKindShift));
                                             n.left = n.right = 0xFFFFFFF0u;
                                           }),
                                  f);
}

}  // namespace
}  // namespace pacset
