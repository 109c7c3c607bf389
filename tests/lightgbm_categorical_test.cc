// LightGBM categorical splits, from the text model to a packed file.
//
// LightGBM is not packaged for Debian 12, so the oracle is LightGBM's own
// prediction code transcribed below (LgbReference): its arrays read straight
// from the text model by a minimal parser, routed by Tree::Decision /
// NumericalDecision / CategoricalDecision and summed by GBDT::PredictRaw,
// independent of the importer, of its node numbering and of
// model/routing.h. Hand-worked rows check the transcription itself. The
// fixtures (tests/data/lightgbm/categorical*.txt) are hand-written in the
// layout LightGBM's save_model() produces.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "layout/pack.h"
#include "model/import.h"
#include "model/predict.h"
#include "model/routing.h"
#include "tests/test_files.h"
#include "tests/test_forests.h"
#include "tools/commands.h"

namespace pacset {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");
constexpr double kTwo31 = 2147483648.0;

std::string FixturePath(const std::string& name) {
  return std::string(PACSET_TEST_DATA) + "/lightgbm/" + name;
}

std::string ReadFixture(const std::string& name) {
  const std::string text = ::pacset::testing::ReadAll(FixturePath(name));
  EXPECT_FALSE(text.empty()) << FixturePath(name);
  return text;
}

// ---- the reference: LightGBM's prediction code, transcribed ----

// One tree as LightGBM holds it (include/LightGBM/tree.h members).
struct LgbTree {
  int num_leaves = 1;
  std::vector<int> split_feature, decision_type, left_child, right_child, cat_boundaries;
  std::vector<double> threshold, leaf_value;
  std::vector<uint32_t> cat_threshold;
};

struct LgbModel {
  int num_tree_per_iteration = 1;
  std::vector<LgbTree> trees;
};

template <typename T>
std::vector<T> Numbers(const std::string& s) {
  std::vector<T> out;
  std::istringstream in(s);
  std::string token;
  while (in >> token) out.push_back(static_cast<T>(std::strtod(token.c_str(), nullptr)));
  return out;
}

// The key=value lines of the header and of each "Tree=" block; no checks
// (the fixtures are well-formed; the importer's checks are tested elsewhere).
LgbModel ParseLgb(const std::string& text) {
  LgbModel m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line != "end of trees") {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "Tree") m.trees.emplace_back();
    if (key == "num_tree_per_iteration") m.num_tree_per_iteration = std::atoi(value.c_str());
    if (m.trees.empty()) continue;
    LgbTree& t = m.trees.back();
    if (key == "num_leaves") t.num_leaves = std::atoi(value.c_str());
    if (key == "split_feature") t.split_feature = Numbers<int>(value);
    if (key == "decision_type") t.decision_type = Numbers<int>(value);
    if (key == "left_child") t.left_child = Numbers<int>(value);
    if (key == "right_child") t.right_child = Numbers<int>(value);
    if (key == "threshold") t.threshold = Numbers<double>(value);
    if (key == "leaf_value") t.leaf_value = Numbers<double>(value);
    if (key == "cat_boundaries") t.cat_boundaries = Numbers<int>(value);
    if (key == "cat_threshold") t.cat_threshold = Numbers<uint32_t>(value);
  }
  return m;
}

// include/LightGBM/meta.h: const double kZeroThreshold = 1e-35f.
constexpr double kZeroThreshold = static_cast<double>(1e-35f);

// What LightGBM's predictors hand to the trees (src/c_api.cpp
// RowFunctionFromDenseMatric, the CLI parsers alike): values with
// |x| > kZeroThreshold or NaN; everything else is absent, i.e. 0.0.
double PredictorInput(double x) { return std::fabs(x) > kZeroThreshold || std::isnan(x) ? x : 0.0; }

// static_cast<int>(fval) as x86-64 computes it (cvttsd2si): a value outside
// int's range converts to INT_MIN (in C++ the conversion is undefined).
int X86Int(double x) { return x > -2147483649.0 && x < kTwo31 ? static_cast<int>(x) : INT_MIN; }

// include/LightGBM/utils/common.h Common::FindInBitset.
bool FindInBitset(const uint32_t* bits, int n, int pos) {
  int i1 = pos / 32;
  if (i1 >= n) return false;
  int i2 = pos % 32;
  return (bits[i1] >> i2) & 1;
}

// include/LightGBM/tree.h Tree::NumericalDecision.
int NumericalDecision(const LgbTree& t, double fval, int node) {
  const int missing_type = (t.decision_type[node] >> 2) & 3;  // GetMissingType
  if (std::isnan(fval) && missing_type != 2) fval = 0.0f;
  const bool is_zero = fval >= -kZeroThreshold && fval <= kZeroThreshold;  // IsZero
  if ((missing_type == 1 && is_zero) || (missing_type == 2 && std::isnan(fval)))
    return (t.decision_type[node] & 2) ? t.left_child[node] : t.right_child[node];
  return fval <= t.threshold[node] ? t.left_child[node] : t.right_child[node];
}

// include/LightGBM/tree.h Tree::CategoricalDecision (LightGBM 3.3.0 to 4.6).
int CategoricalDecision(const LgbTree& t, double fval, int node) {
  int int_fval;
  if (std::isnan(fval)) {
    return t.right_child[node];
  } else {
    int_fval = X86Int(fval);
    if (int_fval < 0) return t.right_child[node];
  }
  int cat_idx = static_cast<int>(t.threshold[node]);
  if (FindInBitset(t.cat_threshold.data() + t.cat_boundaries[cat_idx],
                   t.cat_boundaries[cat_idx + 1] - t.cat_boundaries[cat_idx], int_fval))
    return t.left_child[node];
  return t.right_child[node];
}

// Tree::Decision and Tree::GetLeaf: LightGBM's leaf index (pred_leaf).
int GetLeaf(const LgbTree& t, const std::vector<double>& features) {
  if (t.num_leaves <= 1) return 0;
  int node = 0;
  while (node >= 0) {
    const double fval = features[t.split_feature[node]];
    node = (t.decision_type[node] & 1) ? CategoricalDecision(t, fval, node)
                                       : NumericalDecision(t, fval, node);
  }
  return ~node;
}

// GBDT::PredictRaw: tree i adds its leaf to output i % num_tree_per_iteration,
// in tree order, from 0.0.
std::vector<double> PredictRaw(const LgbModel& m, const std::vector<double>& row) {
  std::vector<double> features(row.size());
  for (size_t j = 0; j < row.size(); ++j) features[j] = PredictorInput(row[j]);
  std::vector<double> raw(m.num_tree_per_iteration, 0.0);
  for (size_t i = 0; i < m.trees.size(); ++i)
    raw[i % m.num_tree_per_iteration] += m.trees[i].leaf_value[GetLeaf(m.trees[i], features)];
  return raw;
}

// The pacset local id of LightGBM's leaf: (num_leaves - 1) + leaf
// (model/import_lightgbm.cc, "Node ids").
int32_t LocalLeafId(const LgbModel& m, size_t t, const std::vector<double>& row) {
  std::vector<double> features(row.size());
  for (size_t j = 0; j < row.size(); ++j) features[j] = PredictorInput(row[j]);
  return m.trees[t].num_leaves - 1 + GetLeaf(m.trees[t], features);
}

// MulticlassSoftmax::ConvertOutput (Common::Softmax).
std::vector<double> Softmax(const std::vector<double>& raw) {
  double wmax = raw[0];
  for (double v : raw) wmax = std::max(wmax, v);
  std::vector<double> out(raw.size());
  double sum = 0.0;
  for (size_t k = 0; k < raw.size(); ++k) sum += out[k] = std::exp(raw[k] - wmax);
  for (double& v : out) v /= sum;
  return out;
}

// ---- adversarial values ----

// Values that tell category rules apart: every category of the fixtures'
// sets and its neighbours, category 0, the word boundaries 31/32/63/64,
// values beyond the last word, negative and fractional values, 2^31 and its
// neighbours, huge values, +-0, +-inf, NaN, LightGBM's zero band, and the
// numerical thresholds of feature 0 with their neighbours.
std::vector<double> AdversarialValues() {
  std::vector<double> v = {0.0,
                           -0.0,
                           kNan,
                           kInf,
                           -kInf,
                           1e300,
                           -1e300,
                           -0.5,
                           -0.999,
                           2.7,
                           0.9999999999999999,
                           3.999,
                           1e-36,
                           -1e-36,
                           1e-300,
                           -1,
                           -2,
                           -31,
                           -32,
                           -1e-320,
                           95,
                           96,
                           127,
                           128,
                           1000,
                           2097119,
                           2097120,
                           4294967296.0};
  for (double c : {1.0, 2.0, 3.0, 5.0, 31.0, 32.0, 40.0, 63.0, 64.0, 100.0})
    for (double x : {c, c - 1, c + 1, c + 0.5, std::nextafter(c, -kInf), std::nextafter(c, kInf)})
      v.push_back(x);
  for (double x : {kTwo31, kTwo31 - 1, kTwo31 - 0.5, kTwo31 + 1, std::nextafter(kTwo31, -kInf),
                   std::nextafter(kTwo31, kInf), -kTwo31, -kTwo31 - 1, 2 * kTwo31})
    v.push_back(x);
  for (double t : {0.5, -1.0, 4.5})
    for (double x : {t, std::nextafter(t, -kInf), std::nextafter(t, kInf)}) v.push_back(x);
  return v;
}

// Rows of `width` features: every value in every column, the others cycling
// through the list at different strides, so that each column meets each value
// with many companions.
RowMatrix AdversarialRows(size_t width, size_t rounds) {
  const std::vector<double> v = AdversarialValues();
  RowMatrix m;
  m.num_cols = width;
  for (size_t r = 0; r < rounds; ++r)
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t col = 0; col < width; ++col) {
        ++m.num_rows;
        for (size_t j = 0; j < width; ++j)
          m.values.push_back(j == col ? v[i] : v[(i * (2 * j + 3) + r * 7 + j) % v.size()]);
      }
  return m;
}

std::vector<double> Row(const RowMatrix& m, size_t r) {
  return std::vector<double>(m.row(r), m.row(r) + m.num_cols);
}

std::string Show(const std::vector<double>& row) { return ::testing::PrintToString(row); }

// Bit equality, NaN included.
bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 8) == 0;
}

using testing::Margins;
using testing::Predictions;

Forest ImportFixture(const std::string& name) {
  auto f = ImportLightgbmText(ReadFixture(name), name);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : Forest{};
}

// The fixture with the first occurrence of `from` replaced by `to`, and its
// tree_sizes line dropped (the edit changes a block's length).
std::string Edit(const std::string& fixture, const std::string& from, const std::string& to) {
  std::string s = ReadFixture(fixture);
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  const size_t sizes = s.find("tree_sizes=");
  if (sizes != std::string::npos) s.erase(sizes, s.find('\n', sizes) + 1 - sizes);
  return s;
}

// ---- categorical_multiclass.txt ---- (3 classes, 2 iterations; tree i
// feeds class i % 3; feature 0 numerical, 1 and 2 categorical)
//   Tree=0: n0 f1 in {0,31,32,63,64} (3 words; decision_type 1) ? n1 : n2
//           n1 f0 <= 0.5 (None, default left) ? 0.5 : -0.25
//           n2 f2 in {2,40} (2 words; 9: missing type NaN) ? 1.5 : -2
//   Tree=1: n0 f0 <= -1 (NaN, default left) ? 0.25 : n1
//           n1 f1 in {1,3} (3: default_left set) ? -0.75 : 0.125
//   Tree=2: f2 in {5} (words 32 0: a zero last word) ? 0.375 : -0.5
//   Tree=3: one leaf, 0.0625
//   Tree=4: f2 in {0} (5: missing type Zero) ? -0.0625 : 0.75
//   Tree=5: n0 f1 in {100} (words 0 0 0 16; 11: NaN, default left) ? 1 : n1
//           n1 f2 in {} (an empty set) ? -1 : 0.5

TEST(LightgbmCategorical, NodesBecomeTheirBitsetsGoingLeftWithAllElseRight) {
  const Forest f = ImportFixture("categorical_multiclass.txt");
  ASSERT_EQ(f.num_trees(), 6u);
  // One split per category set: 2 + 1 + 1 + 0 + 1 + 2.
  ASSERT_EQ(f.categorical_splits.size(), 7u);
  for (const CategoricalSplit& s : f.categorical_splits) {
    EXPECT_EQ(s.rule, static_cast<uint8_t>(CategoryRule::kLightgbm));
    EXPECT_EQ(s.right_words, 0u);
  }
  // Categorical nodes, whatever their decision_type bits 1-3 say: NaN and
  // values outside the set go right (no kDefaultLeft, outside kRight).
  const struct {
    size_t tree;
    uint64_t node;
    double count;  // internal_count
  } categorical[] = {{0, 0, 100}, {0, 2, 55},  {1, 1, 70}, {2, 0, 100},
                     {4, 0, 100}, {5, 0, 100}, {5, 1, 90}};
  for (const auto& c : categorical) {
    const uint64_t g = f.tree_offset[c.tree] + c.node;
    EXPECT_EQ(f.flags[g], kCategorical) << "tree " << c.tree << " node " << c.node;
    EXPECT_EQ(f.cardinality[g], c.count) << "tree " << c.tree << " node " << c.node;
  }
  // Tree=0's first set, {0, 31, 32, 63, 64}: words 2147483649 2147483649 1.
  const CategoricalSplit& s0 = f.categorical_splits[static_cast<size_t>(f.threshold[0])];
  ASSERT_EQ(s0.left_words, 3u);
  const uint32_t* w = f.category_words.data() + s0.left_first;
  EXPECT_EQ(std::vector<uint32_t>(w, w + 3), (std::vector<uint32_t>{2147483649u, 2147483649u, 1}));
  // Tree=5's empty set has no words.
  const CategoricalSplit& empty =
      f.categorical_splits[static_cast<size_t>(f.threshold[f.tree_offset[5] + 1])];
  EXPECT_EQ(empty.left_words, 0u);
}

TEST(LightgbmCategorical, HandWorkedRowsOfTheMulticlassFixture) {
  const Forest f = ImportFixture("categorical_multiclass.txt");
  const LgbModel ref = ParseLgb(ReadFixture("categorical_multiclass.txt"));
  const struct {
    std::vector<double> row;
    double c0, c1, c2;
  } cases[] = {
      // 64 (word 2, bit 0) is in Tree=0's set; 40 only in Tree=0's second.
      {{0, 64, 40}, 0.5 + 0.0625, 0.125 + 0.75, -0.5 + 0.5},
      // NaN goes right at every categorical node, default_left or not
      // (Tree=1's numerical node sends it left by default).
      {{kNan, kNan, kNan}, -2 + 0.0625, 0.25 + 0.75, -0.5 + 0.5},
      // -0.5 and 0.7 truncate to category 0 (and Tree=4's Zero type is
      // ignored: 0 is in its set).
      {{1, -0.5, 0.7}, -0.25 + 0.0625, 0.125 + -0.0625, -0.5 + 0.5},
      {{1, -0.0, 0.0}, -0.25 + 0.0625, 0.125 + -0.0625, -0.5 + 0.5},
      // 100.5 is category 100 (Tree=5), not in Tree=0's set; 5.9 is 5.
      {{-2, 100.5, 5.9}, -2 + 0.0625, 0.25 + 0.75, 0.375 + 1},
      // 2^31 is no category: right everywhere; -1 too.
      {{0.5, kTwo31, -1}, -2 + 0.0625, 0.125 + 0.75, -0.5 + 0.5},
      // 31.9 is category 31 (word 0, bit 31).
      {{0.5, 31.9, 40}, 0.5 + 0.0625, 0.125 + 0.75, -0.5 + 0.5},
      // 1 and 3 are Tree=1's, 2 Tree=0's second set.
      {{0, 1, 2}, 1.5 + 0.0625, -0.75 + 0.75, -0.5 + 0.5},
      // Beyond the last word of every set.
      {{0, 1000, 1e300}, -2 + 0.0625, 0.125 + 0.75, -0.5 + 0.5},
  };
  for (const auto& c : cases) {
    const std::vector<double> want = {c.c0, c.c1, c.c2};
    EXPECT_EQ(PredictRaw(ref, c.row), want) << "the reference, " << Show(c.row);
    EXPECT_EQ(Margins(f, c.row), want) << Show(c.row);
    EXPECT_EQ(Predictions(f, c.row), Softmax(want)) << Show(c.row);
  }
}

// ---- categorical.txt ---- (regression)
//   Tree=0: n0 f0 <= 4.5 (None, default left) ? n1 : -0.25
//           n1 f1 in {1, 3} (cat_threshold 10) ? 0.5 : 1.5

TEST(LightgbmCategorical, RegressionFixtureRoutesItsSetBehindANumericalSplit) {
  const Forest f = ImportFixture("categorical.txt");
  const LgbModel ref = ParseLgb(ReadFixture("categorical.txt"));
  const struct {
    std::vector<double> row;
    double raw;
  } cases[] = {
      {{0, 1}, 0.5},          {{0, 3}, 0.5},
      {{0, 3.999}, 0.5},      {{4.5, 1.5}, 0.5},
      {{0, 2}, 1.5},          {{0, 0.999}, 1.5},
      {{0, 4}, 1.5},          {{0, kNan}, 1.5},
      {{0, -1}, 1.5},         {{0, -kInf}, 1.5},
      {{0, kInf}, 1.5},       {{0, 33}, 1.5},
      {{0, kTwo31 + 1}, 1.5}, {{std::nextafter(4.5, kInf), 1}, -0.25},
      {{kNan, 1}, 0.5},  // missing type None: NaN is 0.0 <= 4.5
  };
  for (const auto& c : cases) {
    EXPECT_EQ(PredictRaw(ref, c.row)[0], c.raw) << "the reference, " << Show(c.row);
    EXPECT_EQ(Margins(f, c.row)[0], c.raw) << Show(c.row);
  }
}

// Every adversarial row, in memory: raw scores bit for bit, predictions and
// every tree's leaf as LightGBM's code computes them.
TEST(LightgbmCategorical, EveryAdversarialRowRoutesAsLightgbmDoes) {
  for (const char* name : {"categorical_multiclass.txt", "categorical.txt"}) {
    const Forest f = ImportFixture(name);
    const LgbModel ref = ParseLgb(ReadFixture(name));
    const RowMatrix rows = AdversarialRows(f.num_features, 3);
    ASSERT_EQ(rows.num_rows, AdversarialValues().size() * f.num_features * 3);
    ForestPredictor p(f);
    for (size_t r = 0; r < rows.num_rows; ++r) {
      const std::vector<double> row = Row(rows, r);
      const std::vector<double> raw = PredictRaw(ref, row);
      ASSERT_TRUE(SameBits(Margins(f, row), raw)) << name << " " << Show(row);
      if (f.num_outputs > 1) {
        ASSERT_TRUE(SameBits(Predictions(f, row), Softmax(raw))) << name << " " << Show(row);
      }
      for (size_t t = 0; t < f.num_trees(); ++t)
        ASSERT_EQ(p.LeafIndex(t, row.data()), LocalLeafId(ref, t, row))
            << name << " tree " << t << " " << Show(row);
    }
  }
}

// The whole path: import, pack (layouts, block sizes from 256 B, compact and
// wide nodes), predict from the file: margins, predictions and leaf ids as
// LightGBM's code computes them.
TEST(LightgbmCategorical, PackedFilesPredictWhatLightgbmDoes) {
  for (const char* name : {"categorical_multiclass.txt", "categorical.txt"}) {
    const Forest f = ImportFixture(name);
    const LgbModel ref = ParseLgb(ReadFixture(name));
    const RowMatrix rows = AdversarialRows(f.num_features, 1);
    for (LayoutKind layout : {LayoutKind::kPacset, LayoutKind::kBfs, LayoutKind::kBinDfs}) {
      for (uint32_t bs : {256u, 4096u, 65536u}) {
        for (bool wide : {false, true}) {
          PackOptions o;
          o.layout = layout;
          o.block_size = bs;
          o.force_wide_nodes = wide;
          const std::string what = std::string(name) + " " + LayoutKindName(layout) + " " +
                                   std::to_string(bs) + (wide ? " wide" : "");
          auto bytes = PackForestToBuffer(f, o);
          ASSERT_TRUE(bytes.ok()) << what << ": " << bytes.status().ToString();
          auto file = PacFile::FromBuffer(std::move(*bytes), "cat.pac");
          ASSERT_TRUE(file.ok()) << what << ": " << file.status().ToString();
          auto e = PacEngine::FromFile(std::move(*file));
          ASSERT_TRUE(e.ok()) << what << ": " << e.status().ToString();
          std::vector<double> margins, predictions;
          std::vector<int32_t> leaves;
          ASSERT_TRUE((*e)->PredictAll(rows, true, 1, &margins).ok()) << what;
          ASSERT_TRUE((*e)->PredictAll(rows, false, 2, &predictions).ok()) << what;
          ASSERT_TRUE((*e)->PredictLeaves(rows, 1, &leaves).ok()) << what;
          const size_t K = f.num_outputs, T = f.num_trees();
          for (size_t r = 0; r < rows.num_rows; ++r) {
            const std::vector<double> row = Row(rows, r);
            const std::vector<double> raw = PredictRaw(ref, row);
            const std::vector<double> got(margins.begin() + r * K, margins.begin() + (r + 1) * K);
            ASSERT_TRUE(SameBits(got, raw)) << what << " " << Show(row);
            const std::vector<double> want = K > 1 ? Softmax(raw) : raw;
            const std::vector<double> got_p(predictions.begin() + r * K,
                                            predictions.begin() + (r + 1) * K);
            ASSERT_TRUE(SameBits(got_p, want)) << what << " " << Show(row);
            for (size_t t = 0; t < T; ++t)
              ASSERT_EQ(leaves[r * T + t], LocalLeafId(ref, t, row))
                  << what << " tree " << t << " " << Show(row);
          }
        }
      }
    }
  }
}

TEST(LightgbmCategorical, CategoriesUpTo2097119AreReadAndLargerOnesRefused) {
  // categorical.txt's set {1, 3} made 65535 words long with only category
  // 65534 * 32 + 31 = 2097119 (the last bit the .pac format can hold).
  std::string words;
  for (int w = 0; w < 65534; ++w) words += "0 ";
  auto f = ImportLightgbmText(Edit("categorical.txt", "cat_boundaries=0 1\ncat_threshold=10",
                                   "cat_boundaries=0 65535\ncat_threshold=" + words + "2147483648"),
                              "model.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(Margins(*f, {0, 2097119})[0], 0.5);
  EXPECT_EQ(Margins(*f, {0, 2097119.5})[0], 0.5);
  EXPECT_EQ(Margins(*f, {0, 2097118})[0], 1.5);
  EXPECT_EQ(Margins(*f, {0, 2097120})[0], 1.5);
  EXPECT_EQ(Margins(*f, {0, 1})[0], 1.5);
  // One word more, holding category 65535 * 32 = 2097120.
  auto big = ImportLightgbmText(Edit("categorical.txt", "cat_boundaries=0 1\ncat_threshold=10",
                                     "cat_boundaries=0 65536\ncat_threshold=" + words + "0 1"),
                                "model.txt");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(big.status().message(),
            "model.txt line 27 (Tree=0 cat_threshold): category set 0 holds category 2097120; "
            "categories above 2097119 are not supported (renumber the feature's categories as "
            "consecutive integers from 0, as LightGBM advises)");
  // Zero words beyond the limit hold no category: the set is read.
  auto zeros = ImportLightgbmText(Edit("categorical.txt", "cat_boundaries=0 1\ncat_threshold=10",
                                       "cat_boundaries=0 65537\ncat_threshold=10 " + words + "0 0"),
                                  "model.txt");
  ASSERT_TRUE(zeros.ok()) << zeros.status().ToString();
  EXPECT_EQ(Margins(*zeros, {0, 3})[0], 0.5);
}

TEST(LightgbmCategorical, NodesNamingOneSetShareOneSplit) {
  // Tree=5's two nodes both name set 0 ({100}): one split, not two.
  auto f =
      ImportLightgbmText(Edit("categorical_multiclass.txt", "threshold=0 1\ndecision_type=11 1",
                              "threshold=0 0\ndecision_type=11 1"),
                         "model.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->categorical_splits.size(), 6u);
  const uint64_t root = f->tree_offset[5];
  EXPECT_EQ(f->threshold[root], f->threshold[root + 1]);
}

TEST(LightgbmCategorical, OneLeafTreesIgnoreTheirCategoryKeysAsLightgbmDoes) {
  // Tree::Tree returns before reading cat_boundaries for a single leaf.
  auto f = ImportLightgbmText(
      Edit("categorical_multiclass.txt", "num_leaves=1\nnum_cat=0", "num_leaves=1\nnum_cat=3"),
      "model.txt");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->categorical_splits.size(), 7u);
}

TEST(LightgbmCategorical, PacsetPredictReadsCategoryValuesFromCsv) {
  const std::string dir = ::testing::TempDir();
  const std::string rows = dir + "/lgb_cat_rows.csv", out = dir + "/lgb_cat_out.csv";
  ::pacset::testing::WriteAll(rows,
                              "size,colour\n0,3\n0,nan\n0,-0.5\n0,2147483648\n0,-inf\n0,3.9\n");
  PredictOptions opts;
  opts.model = FixturePath("categorical.txt");
  opts.input = rows;
  opts.output = out;
  ASSERT_TRUE(RunPredict(opts).ok());
  EXPECT_EQ(::pacset::testing::ReadAll(out), "0.5\n1.5\n1.5\n1.5\n1.5\n0.5\n");
  opts.leaf = true;  // local ids: leaf j is 2 + j
  ASSERT_TRUE(RunPredict(opts).ok());
  EXPECT_EQ(::pacset::testing::ReadAll(out), "2\n4\n4\n4\n4\n2\n");
  std::remove(rows.c_str());
  std::remove(out.c_str());
}

}  // namespace
}  // namespace pacset
