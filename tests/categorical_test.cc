// Categorical splits (layout/FORMAT.md §3): each library's rule on the values
// that tell them apart, and every prediction path of a packed forest with
// categorical splits bit for bit the in-memory predictor's, for every layout,
// node format and block size from 256 B.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/engine.h"
#include "layout/pack.h"
#include "layout/structure_check.h"
#include "model/routing.h"
#include "testkit/cold_source.h"
#include "testkit/random_forest.h"
#include "tests/expect_exact.h"

namespace pacset {
namespace {

using testing::Flavor;

// One split over categories {3, 5} (and, for scikit-learn, a right set
// {4, 40}), under `rule`, with the given outside direction and NaN side.
struct OneSplit {
  Forest f;
  uint8_t flags;
  OneSplit(CategoryRule rule, OutsideDirection outside, bool default_left,
           std::vector<uint32_t> left, std::vector<uint32_t> right) {
    AddCategoricalSplit(f, left, right, rule);
    flags = static_cast<uint8_t>(kCategorical | (default_left ? kDefaultLeft : 0) |
                                 static_cast<uint8_t>(outside) << kOutsideShift);
  }
  template <typename T>
  const char* Side(T x) const {
    return CategoricalGoesLeft<T>(x, flags, f.categorical_splits[0], f.category_words.data())
               ? "left"
               : "right";
  }
};

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// XGBoost 1.7.4 (float32 input), as observed with inplace_predict on a
// partition split whose stored categories go right: a category is 0 <= x <
// 2^24 truncated (-0.0 is 0, 3.99 is 3); anything else goes left with the
// categories not in the set; NaN takes the default direction.
TEST(CategoryRules, XgboostSendsItsSetRightAndEverythingElseLeft) {
  const OneSplit s(CategoryRule::kXgboost, OutsideDirection::kLeft, false, {}, {3, 5});
  const struct {
    float x;
    const char* side;
  } cases[] = {{3, "right"},
               {3.5f, "right"},
               {3.99f, "right"},
               {5, "right"},
               {4, "left"},
               {0, "left"},
               {-0.0f, "left"},
               {-0.5f, "left"},
               {-1e-40f, "left"},
               {16777216.0f, "left"},
               {1e9f, "left"},
               {std::numeric_limits<float>::infinity(), "left"},
               {-std::numeric_limits<float>::infinity(), "left"},
               {2.999f, "left"},
               {100, "left"}};
  for (const auto& c : cases) EXPECT_STREQ(s.Side(c.x), c.side) << c.x;
  EXPECT_STREQ(s.Side<float>(kNan), "right");
  const OneSplit zero(CategoryRule::kXgboost, OutsideDirection::kLeft, true, {}, {0});
  EXPECT_STREQ(zero.Side(-0.0f), "right") << "-0.0 is category 0";
  EXPECT_STREQ(zero.Side(0.9f), "right");
  EXPECT_STREQ(zero.Side(-1e-40f), "left") << "below 0 is no category";
  EXPECT_STREQ(zero.Side<float>(kNan), "left") << "NaN takes the default direction";
}

// LightGBM (float64): static_cast<int>(x) is the category, negative ones go
// right (so -0.5 is category 0 and -1 is none); the set goes left, all else
// and NaN right.
TEST(CategoryRules, LightgbmTruncatesTowardZeroAndSendsTheRestRight) {
  const OneSplit s(CategoryRule::kLightgbm, OutsideDirection::kRight, false, {0, 3, 5}, {});
  const struct {
    double x;
    const char* side;
  } cases[] = {{3, "left"},    {3.7, "left"},           {0, "left"},     {-0.0, "left"},
               {-0.5, "left"}, {-0.999, "left"},        {-1, "right"},   {4, "right"},
               {5.5, "left"},  {2147483648.0, "right"}, {kInf, "right"}, {-kInf, "right"},
               {kNan, "right"}};
  for (const auto& c : cases) EXPECT_STREQ(s.Side(c.x), c.side) << c.x;
}

// scikit-learn 1.2's HistGradientBoosting (float64): NaN, negative values
// and categories unknown to the model (in neither set) take the missing-value
// direction; known ones go by their set.
TEST(CategoryRules, SklearnSendsUnknownAndNegativeValuesTheMissingWay) {
  for (bool default_left : {false, true}) {
    const OneSplit s(CategoryRule::kSklearn, OutsideDirection::kDefault, default_left, {3, 5},
                     {4, 40});
    const char* missing = default_left ? "left" : "right";
    EXPECT_STREQ(s.Side(3.0), "left");
    EXPECT_STREQ(s.Side(5.9), "left");
    EXPECT_STREQ(s.Side(4.0), "right");
    EXPECT_STREQ(s.Side(40.0), "right");
    for (double x : {kNan, -0.5, -1.0, 6.0, 39.0, 255.0, 1e12, kInf})
      EXPECT_STREQ(s.Side(x), missing) << x;
    const OneSplit zero(CategoryRule::kSklearn, OutsideDirection::kDefault, default_left, {}, {0});
    EXPECT_STREQ(zero.Side(-0.0), "right") << "-0.0 is category 0";
    EXPECT_STREQ(zero.Side(0.5), "right");
  }
}

Forest CategoricalForest(Flavor flavor, uint32_t seed) {
  testing::RandomForestSpec spec;
  spec.flavor = flavor;
  spec.trees = 16;
  spec.max_depth = 7;
  spec.seed = seed;
  spec.categorical_probability = 0.4;
  Forest f = testing::MakeRandomForest(spec);
  EXPECT_FALSE(f.categorical_splits.empty());
  EXPECT_TRUE(f.Validate().ok()) << f.Validate().ToString();
  return f;
}

TEST(CategoricalSplits, EveryPathPredictsLikeTheInMemoryForest) {
  const PacEngine::SourceFactory cold = [](const PacFile& file, const EngineOptions& o) {
    return std::make_unique<testing::ColdSource>(
        NewPacFileSource(file, o.verify_blocks, o.max_in_flight, o.block_io));
  };
  for (Flavor flavor :
       {Flavor::kXgboost, Flavor::kSklearnProba, Flavor::kSklearnReg, Flavor::kLightgbm}) {
    const Forest f = CategoricalForest(flavor, 3);
    const RowMatrix rows = testing::MakeAdversarialRows(f, 300, 5);
    for (LayoutKind layout : {LayoutKind::kPacset, LayoutKind::kBfs, LayoutKind::kBinDfs}) {
      for (uint32_t bs : {256u, 4096u}) {
        for (bool wide : {false, true}) {
          PackOptions o;
          o.layout = layout;
          o.block_size = bs;
          o.force_wide_nodes = wide;
          auto bytes = PackForestToBuffer(f, o);
          ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
          const std::string what = "flavor " + std::to_string(static_cast<int>(flavor)) + " " +
                                   LayoutKindName(layout) + " " + std::to_string(bs) +
                                   (wide ? " wide" : "");
          auto file = PacFile::FromBuffer(*bytes, "cat.pac");
          ASSERT_TRUE(file.ok()) << what << ": " << file.status().ToString();
          EXPECT_EQ((*file)->categorical_splits().size(), f.categorical_splits.size());
          auto reader = NewPacFileBlockReader(**file);
          EXPECT_TRUE(CheckForestStructure(**file, *reader).ok()) << what;
          // Warm (the warm forest after enough work) and kept cold.
          for (bool keep_cold : {false, true}) {
            auto copy = PacFile::FromBuffer(*bytes, "cat.pac");
            auto e = PacEngine::FromFile(std::move(*copy), {}, keep_cold ? cold : nullptr);
            ASSERT_TRUE(e.ok()) << e.status().ToString();
            for (int round = 0; round < 3; ++round)
              testing::ExpectSameAsInMemory(f, **e, rows, what + (keep_cold ? " cold" : " warm"));
            if (!keep_cold) {
              EXPECT_GT((*e)->stats().warm_forest_bytes, 0u) << what;
            }
          }
        }
      }
    }
  }
}

TEST(CategoricalSplits, AFileWithThemIsRefusedByAReaderThatDoesNotKnowThem) {
  // The sections are required: a reader of the format before categorical
  // splits refuses the file ("written by a newer version") instead of
  // reading the split index as a threshold.
  const Forest f = CategoricalForest(Flavor::kXgboost, 4);
  auto bytes = PackForestToBuffer(f, {});
  ASSERT_TRUE(bytes.ok());
  auto h = PacHeader::DecodeFromFile(bytes->data(), bytes->size(), "cat.pac");
  ASSERT_TRUE(h.ok());
  for (SectionType t : {SectionType::kCategoryWords, SectionType::kCategoricalSplits}) {
    const SectionEntry* s = h->FindSection(t);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->flags & kSectionRequired, kSectionRequired);
  }
}

}  // namespace
}  // namespace pacset
