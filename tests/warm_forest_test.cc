// The warm forest (engine/internal/warm_forest.h): the compact private copy
// of the nodes that warm requests walk. It must give the in-memory
// predictor's bits and the checked mapping walk's bits on adversarial rows
// (thresholds and their neighbours, NaN, +-0, +-inf, LightGBM's zero rule),
// for every flavor, layout and node width, rows with NaN (the flag-aware
// step) and rows without (the compare-only step), with the scalar lanes and
// with each SIMD kernel this CPU can run (engine/internal/warm_simd.h: they
// must walk every row without NaN of a file they apply to, and none of a
// file they do not apply to); it must not be built for a small first
// request, and a file that is not a forest of trees is kCorruption naming
// the tree, on every warm request.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/engine.h"
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
                                      bool verify = true, WarmIsa isa = WarmIsa::kAuto) {
  EngineOptions o;
  o.warm_forest = warm_forest;
  o.verify_blocks = verify;
  o.warm_isa = isa;
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

// The same rows with every value rounded to float32: the float32 neighbours
// of every threshold the rows hit (for float64 thresholds, the floats on
// either side of one, which the SIMD kernels compare against the threshold
// rounded down).
RowMatrix AsFloat32Values(RowMatrix rows) {
  for (double& v : rows.values) v = static_cast<double>(static_cast<float>(v));
  return rows;
}

// Whether float32 holds every value of `rows` (NaN included).
bool AllFloat32(const RowMatrix& rows) {
  for (double v : rows.values)
    if (static_cast<double>(static_cast<float>(v)) != v && v == v) return false;
  return true;
}

// Every instruction set the warm loop has; those this CPU lacks resolve to a
// narrower one (and are then checked as that one).
constexpr WarmIsa kEveryIsa[] = {WarmIsa::kScalar, WarmIsa::kAvx2, WarmIsa::kAvx512};

// Whether a numerical node of `f` has one of `rules` (on a categorical node
// those bits are its outside direction).
bool AnyNumericalNodeHas(const Forest& f, uint8_t rules) {
  for (uint8_t fl : f.flags)
    if (!(fl & kCategorical) && (fl & rules)) return true;
  return false;
}

// Whether the routed SIMD kernels walk `f` (engine/internal/warm_simd.h):
// rows with NaN and categorical nodes, unless a numerical node uses
// LightGBM's NaN-as-zero or zero-as-missing rule.
bool RoutedKernelsTake(const Forest& f) {
  return !AnyNumericalNodeHas(f, kNanIsZero | kZeroIsMissing);
}

// Whether the plain SIMD kernels walk `f`'s rows without NaN: no
// categorical node, no numerical node with the zero-as-missing rule.
bool PlainKernelsTake(const Forest& f) {
  return f.categorical_splits.empty() && !AnyNumericalNodeHas(f, kZeroIsMissing);
}

// Whether warm requests go through a SIMD kernel (an instruction set with
// kernels; compact or wide nodes, these through their float32 rounding,
// WarmForest::nodes32): rows with NaN (`nan_rows`) through the routed
// kernels, rows without through either. Float64 input only for blocks whose
// every value float32 holds.
bool TakesSimdPath(const PacEngine& e, const Forest& f, bool nan_rows) {
  if (e.stats().warm_isa == WarmIsa::kScalar) return false;
  return RoutedKernelsTake(f) || (!nan_rows && PlainKernelsTake(f));
}

bool Float64Input(const PacEngine& e) {
  return e.file().header().input_precision == static_cast<uint8_t>(Precision::kFloat64);
}

// The warm forest's walks (scalar lanes, and each SIMD kernel this CPU has)
// against the in-memory predictor and the checked mapping walk, bit for bit,
// on `with_nan` (blocks with NaN: the routed kernels when the file
// qualifies, else the flag-aware scalar step), the same rows without NaN
// (the compare-only step or a kernel when the file qualifies, which must
// then walk every one of those rows — for float64 input, whose rows hold
// values float32 does not, not all of them) and both rounded to float32 (a
// kernel for every row when the file qualifies: the test fails if a kernel
// silently leaves rows to the scalar lanes).
void ExpectEveryWalkMatches(const Forest& f, const std::string& bytes, const RowMatrix& with_nan,
                            const std::string& what) {
  const RowMatrix without_nan = WithoutNan(with_nan);
  const RowMatrix float32_values = AsFloat32Values(without_nan);
  const RowMatrix float32_with_nan = AsFloat32Values(with_nan);
  const auto checked = EngineOver(bytes, false);
  EXPECT_EQ(checked->stats().warm_forest_bytes, 0u) << what;
  for (WarmIsa isa : kEveryIsa) {
    const auto fast = EngineOver(bytes, true, true, isa);
    const WarmIsa used = fast->stats().warm_isa;
    EXPECT_LE(static_cast<int>(used), static_cast<int>(isa)) << what;
    const bool simd = TakesSimdPath(*fast, f, false);
    const bool simd_nan = TakesSimdPath(*fast, f, true);
    const std::string on = what + " isa " + WarmIsaName(used);
    // A first request large enough to build the warm forest.
    std::vector<double> out;
    ASSERT_TRUE(fast->PredictAll(without_nan, false, 1, &out).ok());
    ASSERT_GT(fast->stats().warm_forest_bytes, 0u) << on;
    for (const RowMatrix* rows : {&with_nan, &without_nan, &float32_values, &float32_with_nan}) {
      const bool nan = rows == &with_nan || rows == &float32_with_nan;
      const std::string w = on + (rows == &with_nan      ? " with NaN"
                                  : rows == &without_nan ? " without NaN"
                                  : nan                  ? " float32 values with NaN"
                                                         : " float32 values");
      for (bool margin : {false, true}) {
        const std::vector<double> want = Reference(f, *rows, margin);
        std::vector<double> a, b;
        ASSERT_TRUE(checked->PredictAll(*rows, margin, 1, &a).ok()) << w;
        ExpectSameBits(a, want, w + " checked walk");
        for (int threads : {1, 3}) {
          const uint64_t simd_before = fast->stats().warm_simd_rows;
          ASSERT_TRUE(fast->PredictAll(*rows, margin, threads, &b).ok()) << w;
          ExpectSameBits(b, want, w + " warm forest, threads " + std::to_string(threads));
          const uint64_t simd_rows = fast->stats().warm_simd_rows - simd_before;
          if ((rows == &without_nan || rows == &with_nan) && Float64Input(*fast) &&
              !AllFloat32(*rows)) {
            // Most values are not float32: the blocks holding one (some at
            // least) walk the scalar lanes.
            EXPECT_LT(simd_rows, rows->num_rows) << w;
          } else if (!nan) {
            EXPECT_EQ(simd_rows, simd ? rows->num_rows : 0u) << w;
          } else if (simd_nan || !simd) {  // else: blocks without NaN may take the plain kernel
            EXPECT_EQ(simd_rows, simd_nan ? rows->num_rows : 0u) << w;
          }
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
    EXPECT_GT(fast->stats().warm_requests, 0u) << on;
  }
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
  size_t nan_rows = 0;
  for (size_t r = 0; r < with_nan.num_rows; ++r)
    for (size_t c = 0; c < with_nan.num_cols; ++c) nan_rows += std::isnan(with_nan.row(r)[c]);
  ASSERT_GT(nan_rows, 0u);
  for (LayoutKind layout : AllLayoutKinds()) {
    for (bool wide : {false, true}) {
      ExpectEveryWalkMatches(f, Pack(f, layout, 4096, wide), with_nan,
                             std::string(GetParam().name) + " " + LayoutKindName(layout) +
                                 (wide ? " wide" : " compact"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flavors, WarmForestEveryLayout, testing::AllFlavors(),
                         testing::FlavorCaseName);

// LightGBM's routing rules on a float32 forest of compact nodes: NaN as zero
// only concerns NaN, so rows without NaN still take the SIMD kernels; zero as
// missing sends values near zero the default way, which a plain compare does
// not, so a forest with one such node never takes them.
TEST(WarmForest, LightgbmRulesOnFloat32NodesKeepTheBitsAndZeroAsMissingStaysScalar) {
  RandomForestSpec spec;
  spec.trees = 30;
  spec.max_depth = 12;
  spec.seed = 41;
  Forest nan_is_zero = MakeRandomForest(spec);
  for (size_t g = 0; g < nan_is_zero.flags.size(); ++g)
    if (g % 2) nan_is_zero.flags[g] |= kNanIsZero;
  Forest zero_is_missing = nan_is_zero;
  for (size_t g = 0; g < zero_is_missing.flags.size(); ++g)
    if (g % 3 == 0) zero_is_missing.flags[g] |= kZeroIsMissing;
  for (const Forest* f : {&nan_is_zero, &zero_is_missing}) {
    const std::string bytes = Pack(*f, LayoutKind::kPacset, 4096, false);
    const auto e = EngineOver(bytes, true);
    ASSERT_EQ(e->file().header().node_format, static_cast<uint8_t>(NodeFormat::kCompact16));
    ASSERT_EQ(TakesSimdPath(*e, *f, false),
              f == &nan_is_zero && e->stats().warm_isa != WarmIsa::kScalar);
    EXPECT_FALSE(TakesSimdPath(*e, *f, true));
    ExpectEveryWalkMatches(*f, bytes, MakeAdversarialRows(*f, 300, 12),
                           f == &nan_is_zero ? "NaN as zero" : "zero as missing");
  }
}

// Rows that meet every node they reach, as far as they can, at a float32
// neighbour of its threshold: through each tree from its root, a feature not
// yet set takes the largest float32 <= the threshold, the float32 below it or
// the one above (at random), and the walk goes the way the threshold sends
// that value. Other features take random float32 values.
RowMatrix ThresholdNeighbourRows(const Forest& f, size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.5f, 2.5f);
  const uint32_t nf = f.num_features;
  RowMatrix m;
  m.num_rows = n;
  m.num_cols = nf;
  m.values.resize(n * nf);
  std::vector<char> set(nf);
  for (size_t r = 0; r < n; ++r) {
    double* row = &m.values[r * nf];
    std::fill(set.begin(), set.end(), 0);
    for (size_t t = 0; t < f.num_trees(); ++t) {
      uint64_t g = f.tree_offset[t];
      while (!f.is_leaf(g)) {
        const uint32_t c = f.split_feature[g];
        const double th = f.threshold[g];
        if (!set[c]) {
          set[c] = 1;
          const float lo = Float32AtOrBelow(th);
          const float inf = std::numeric_limits<float>::infinity();
          const int how = static_cast<int>(rng() % 3);
          row[c] = how == 0 ? lo : std::nextafter(lo, how == 1 ? -inf : inf);
        }
        g = f.tree_offset[t] + (row[c] <= th ? f.left_child[g] : f.right_child[g]);
      }
    }
    for (uint32_t c = 0; c < nf; ++c)
      if (!set[c]) row[c] = u(rng);
  }
  return m;
}

// A float64-input forest (LightGBM's thresholds, wide nodes) without the
// zero-as-missing rule: blocks whose every value float32 holds take the SIMD
// kernels through the thresholds rounded down to float32 — rows at the
// float32 neighbours on both sides of every float64 threshold keep the bits
// — and blocks holding other values the float64 compare.
TEST(WarmForest, Float64ThresholdsTakeTheKernelsForFloat32ValuesAndKeepTheBits) {
  RandomForestSpec spec;
  spec.flavor = testing::Flavor::kLightgbm;
  spec.trees = 30;
  spec.max_depth = 12;
  spec.seed = 29;
  Forest f = MakeRandomForest(spec);
  size_t between_floats = 0;
  for (size_t g = 0; g < f.flags.size(); ++g) {
    f.flags[g] &= static_cast<uint8_t>(~kZeroIsMissing);
    between_floats += f.is_leaf(g) ? 0 : f.threshold[g] != static_cast<float>(f.threshold[g]);
  }
  ASSERT_GT(between_floats, 50u);
  const std::string bytes = Pack(f, LayoutKind::kPacset, 4096, false);
  const auto e = EngineOver(bytes, true);
  ASSERT_EQ(e->file().header().node_format, static_cast<uint8_t>(NodeFormat::kWide32));
  ASSERT_TRUE(Float64Input(*e));
  ExpectEveryWalkMatches(f, bytes, MakeAdversarialRows(f, 300, 31), "float64 thresholds");
  const RowMatrix rows = ThresholdNeighbourRows(f, 600, 37);
  const std::vector<double> want = Reference(f, rows, true);
  for (WarmIsa isa : kEveryIsa) {
    const auto fast = EngineOver(bytes, true, true, isa);
    std::vector<double> got;
    ASSERT_TRUE(fast->PredictAll(rows, true, 1, &got).ok());
    ExpectSameBits(got, want, std::string("neighbour rows isa ") + WarmIsaName(isa));
    EXPECT_EQ(fast->stats().warm_simd_rows, TakesSimdPath(*fast, f, false) ? rows.num_rows : 0u);
  }
}

// Trees whose paths end anywhere from the root's children to max_depth, and
// single-leaf trees, through blocks whose rows are not a multiple of a
// kernel's batch: every lane's row keeps its own leaf.
TEST(WarmForest, SimdKernelsHandleUnevenPathsAndPartialBatches) {
  RandomForestSpec spec;
  spec.trees = 60;
  spec.max_depth = 14;
  spec.features = 40;
  spec.split_probability = 0.75;
  spec.seed = 77;
  const Forest f = MakeRandomForest(spec);
  const RowMatrix rows = MakeAdversarialRows(f, 1000 + 37, 5);
  ExpectEveryWalkMatches(f, Pack(f, LayoutKind::kPacset, 4096, false), rows, "uneven");
}

// Rows for categorical splits: NaN in every column of some rows, and in the
// others values around every category rule's edges — categories inside and
// past every split's words (sets of more than 32 and 64 categories, and
// `widest`), fractions, -0.5 (category 0 for LightGBM only), negatives,
// +-0, +-inf, 2^24 and 2^31 and their neighbours, huge values — mixed with
// the adversarial values of MakeAdversarialRows.
RowMatrix CategoryEdgeRows(const Forest& f, size_t n, uint32_t widest, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity();
  const double edges[] = {0.0,
                          -0.0,
                          0.5,
                          -0.5,
                          -0.999,
                          -1.0,
                          -1e-40,
                          1e-40,
                          31.0,
                          31.99,
                          32.0,
                          63.0,
                          64.0,
                          69.0,
                          95.0,
                          96.0,
                          127.0,
                          128.0,
                          widest - 1.0,
                          static_cast<double>(widest),
                          widest + 0.5,
                          16777215.0,
                          16777216.0,
                          2147483520.0,
                          2147483648.0,
                          4294967296.0,
                          1e30,
                          -1e30,
                          inf,
                          -inf,
                          std::numeric_limits<double>::quiet_NaN()};
  std::mt19937_64 rng(seed);
  RowMatrix m = MakeAdversarialRows(f, n, seed);
  for (size_t r = 0; r < n; ++r) {
    double* row = &m.values[r * m.num_cols];
    for (size_t c = 0; c < m.num_cols; ++c) {
      if (r % 17 == 0) {
        row[c] = std::numeric_limits<double>::quiet_NaN();
      } else if (rng() % 2) {
        row[c] = rng() % 3 ? static_cast<double>(rng() % (widest + 40))
                           : edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
      }
    }
  }
  return m;
}

// A forest whose numerical nodes keep only the default direction (no
// LightGBM missing-value rules), with categorical splits of the flavor's
// library rule.
Forest CategoricalForest(testing::Flavor flavor, uint32_t seed) {
  RandomForestSpec spec;
  spec.flavor = flavor;
  spec.trees = 30;
  spec.max_depth = 10;
  spec.categorical_probability = 0.5;
  spec.seed = seed;
  Forest f = MakeRandomForest(spec);
  for (uint8_t& fl : f.flags)
    if (!(fl & kCategorical)) fl &= static_cast<uint8_t>(~(kNanIsZero | kZeroIsMissing));
  return f;
}

// Categorical forests of each library's rule (XGBoost: float32, one set
// right; scikit-learn-like float32 sets both ways; LightGBM's float64
// truncation, one set left) walk every row through the routed kernels —
// rows with NaN in every column, categories in and past sets of 70
// categories, negative, fractional, infinite and huge values — with the
// in-memory predictor's bits, in every layout, compact and wide nodes.
TEST(WarmForestSimdRouting, CategoricalForestsOfEachRuleTakeTheKernelsForEveryRowBitForBit) {
  const std::pair<testing::Flavor, const char*> flavors[] = {
      {testing::Flavor::kXgboost, "xgboost"},
      {testing::Flavor::kSklearnProba, "sklearn-proba"},
      {testing::Flavor::kLightgbm, "lightgbm"}};
  for (const auto& [flavor, name] : flavors) {
    const Forest f = CategoricalForest(flavor, 61);
    ASSERT_GT(f.categorical_splits.size(), 20u) << name;
    ASSERT_TRUE(RoutedKernelsTake(f)) << name;
    const RowMatrix rows = CategoryEdgeRows(f, 400, 70, 3);
    for (LayoutKind layout : {LayoutKind::kPacset, AllLayoutKinds().back()}) {
      for (bool wide : {false, true}) {
        ExpectEveryWalkMatches(f, Pack(f, layout, 4096, wide), rows,
                               std::string(name) + " categorical " + LayoutKindName(layout) +
                                   (wide ? " wide" : " compact"));
      }
    }
  }
}

// One forest mixing the three category rules and all three outside
// directions, float64 thresholds, and one split of 1,000 categories (so
// every split's direction words are padded to 32 words): NaN, default
// directions and each node's own rule, through the routed kernels.
TEST(WarmForestSimdRouting, MixedRulesAndAWideSplitKeepTheBits) {
  Forest f = CategoricalForest(testing::Flavor::kLightgbm, 67);
  std::vector<uint32_t> left, right;
  for (uint32_t c = 0; c < 1000; ++c)  // 0, 11, 22, ...: in neither set
    if (c % 11) (c % 7 == 0 ? left : c % 3 == 0 ? right : left).push_back(c);
  const uint32_t wide = AddCategoricalSplit(f, left, right, CategoryRule::kSklearn);
  size_t k = 0;
  for (size_t g = 0; g < f.flags.size(); ++g) {
    if (!(f.flags[g] & kCategorical)) continue;
    const auto split = static_cast<size_t>(f.threshold[g]);
    const size_t pick = k++ % 4;
    const OutsideDirection outside = pick == 0   ? OutsideDirection::kRight
                                     : pick == 1 ? OutsideDirection::kLeft
                                                 : OutsideDirection::kDefault;
    f.categorical_splits[split].rule = static_cast<uint8_t>(pick == 0   ? CategoryRule::kLightgbm
                                                            : pick == 1 ? CategoryRule::kXgboost
                                                                        : CategoryRule::kSklearn);
    if (pick == 3) f.threshold[g] = wide;
    f.flags[g] = static_cast<uint8_t>(kCategorical | (k % 3 ? kDefaultLeft : 0) |
                                      static_cast<uint8_t>(outside) << kOutsideShift);
  }
  ASSERT_GT(k, 20u);
  const RowMatrix rows = CategoryEdgeRows(f, 500, 1000, 5);
  for (bool wide_nodes : {false, true})
    ExpectEveryWalkMatches(f, Pack(f, LayoutKind::kPacset, 4096, wide_nodes), rows,
                           wide_nodes ? "mixed rules wide" : "mixed rules compact");
}

// Numerical forests with default directions (XGBoost, scikit-learn): rows
// with NaN in every column go through the routed kernels with the bits of
// the in-memory predictor; on values at, above and below every threshold.
TEST(WarmForestSimdRouting, NanTakesEachNodesDefaultDirectionInTheKernels) {
  for (testing::Flavor flavor : {testing::Flavor::kXgboost, testing::Flavor::kLightgbm}) {
    RandomForestSpec spec;
    spec.flavor = flavor;
    spec.trees = 30;
    spec.max_depth = 12;
    spec.seed = 71;
    Forest f = MakeRandomForest(spec);
    for (uint8_t& fl : f.flags) fl &= static_cast<uint8_t>(~(kNanIsZero | kZeroIsMissing));
    RowMatrix rows = ThresholdNeighbourRows(f, 500, 73);
    std::mt19937_64 rng(79);
    for (size_t r = 0; r < rows.num_rows; ++r)
      for (size_t c = 0; c < rows.num_cols; ++c)
        if (r % 13 == 0 || rng() % 4 == 0)
          rows.values[r * rows.num_cols + c] = std::numeric_limits<double>::quiet_NaN();
    ExpectEveryWalkMatches(f, Pack(f, LayoutKind::kPacset, 4096, false), rows,
                           flavor == testing::Flavor::kXgboost ? "xgboost NaN" : "float64 NaN");
  }
}

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

TEST(WarmForest, AFeatureOutOfRangeIsCorruptionNamingTheTree) {
  const Forest f = SmallXgboostForest();
  ExpectCorruptionAndNoWarmForest(
      WithRoot(Pack(f, LayoutKind::kPacset, 4096, false),
               [](CompactNode& n, uint64_t) { n.feature_flags |= 0xFFFFFFu; }),
      f);
}

TEST(WarmForest, ACycleIsCorruptionNamingTheTree) {
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

TEST(WarmForest, AReferenceOutsideTheNodeRegionIsCorruptionNamingTheTree) {
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
