// Random forests and adversarial rows for property tests.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/forest.h"
#include "util/row_matrix.h"

namespace pacset::testing {

enum class Flavor {
  kXgboost,       // float32 inputs, float32 sums, scalar float32 leaves, several groups
  kSklearnProba,  // float32 inputs, float64 mean of probability vectors (one-hot and impure)
  kSklearnReg,    // float32 inputs, float64 scalar leaves that float32 cannot hold (leaf records)
  kLightgbm,      // float64 inputs and thresholds, missing-value flags, float64 leaves
};

struct RandomForestSpec {
  Flavor flavor = Flavor::kXgboost;
  int trees = 20;
  int max_depth = 8;
  int features = 6;
  int outputs = 3;  // groups (xgboost) or classes (sklearn proba)
  double split_probability = 0.85;
  uint32_t seed = 1;
  bool cardinality = true;
  // Share of internal nodes that are categorical splits, with each flavor's
  // library rule (XGBoost: a set going right, the rest left; LightGBM: a set
  // going left, the rest and NaN right; scikit-learn: a left set and a right
  // set, the rest the missing-value way). 0: none (no random draws for them).
  double categorical_probability = 0.0;
};

inline Forest MakeRandomForest(const RandomForestSpec& s) {
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> u(0, 1);
  Forest f;
  f.num_features = s.features;
  switch (s.flavor) {
    case Flavor::kXgboost:
      f.task = s.outputs > 1 ? Task::kMulticlassClassification : Task::kRegression;
      f.num_outputs = s.outputs;
      f.num_classes = s.outputs > 1 ? s.outputs : 1;
      f.leaf_width = 1;
      f.postprocess = s.outputs > 1 ? Postprocess::kSoftmax : Postprocess::kIdentity;
      f.input_precision = Precision::kFloat32;
      f.accumulate_precision = Precision::kFloat32;
      break;
    case Flavor::kSklearnProba:
      f.task = Task::kMulticlassClassification;
      f.num_outputs = s.outputs;
      f.num_classes = s.outputs;
      f.leaf_width = s.outputs;
      f.aggregation = Aggregation::kMean;
      f.input_precision = Precision::kFloat32;
      f.accumulate_precision = Precision::kFloat64;
      break;
    case Flavor::kSklearnReg:
      f.num_outputs = 1;
      f.aggregation = Aggregation::kMean;
      f.input_precision = Precision::kFloat32;
      f.accumulate_precision = Precision::kFloat64;
      break;
    case Flavor::kLightgbm:
      f.task = Task::kBinaryClassification;
      f.num_outputs = 1;
      f.num_classes = 2;
      f.postprocess = Postprocess::kSigmoid;
      f.sigmoid_alpha = 0.7;
      f.input_precision = Precision::kFloat64;
      f.accumulate_precision = Precision::kFloat64;
      break;
  }
  f.base_score.assign(f.num_outputs, s.flavor == Flavor::kXgboost ? 0.5 : 0.0);
  f.cardinality_source = s.cardinality ? CardinalitySource::kTraining : CardinalitySource::kNone;
  for (int t = 0; t < s.trees; ++t) {
    // Grow a random shape first: node -> (left, right) or leaf.
    std::vector<std::pair<int32_t, int32_t>> kids{{-1, -1}};
    std::vector<int> depth{0};
    for (size_t i = 0; i < kids.size(); ++i) {
      const double p = i == 0 ? 0.97 : s.split_probability;
      if (depth[i] < s.max_depth && u(rng) < p) {
        kids[i] = {static_cast<int32_t>(kids.size()), static_cast<int32_t>(kids.size() + 1)};
        kids.push_back({-1, -1});
        kids.push_back({-1, -1});
        depth.push_back(depth[i] + 1);
        depth.push_back(depth[i] + 1);
      }
    }
    const uint64_t b =
        f.AddTree(f.leaf_width == 1 ? t % f.num_outputs : 0, static_cast<uint32_t>(kids.size()));
    // Cardinalities: split each node's count randomly between its children.
    f.cardinality[b] = 1000;
    for (size_t i = 0; i < kids.size(); ++i) {
      const uint64_t g = b + i;
      if (kids[i].first < 0) {
        if (s.flavor == Flavor::kSklearnProba) {
          if (u(rng) < 0.6) {
            f.leaf_value[g * f.leaf_width + (rng() % f.leaf_width)] = 1.0;  // pure leaf
          } else {
            double sum = 0;
            for (uint32_t k = 0; k < f.leaf_width; ++k)
              sum += (f.leaf_value[g * f.leaf_width + k] = u(rng));
            for (uint32_t k = 0; k < f.leaf_width; ++k) f.leaf_value[g * f.leaf_width + k] /= sum;
          }
        } else if (s.flavor == Flavor::kXgboost) {
          f.leaf_value[g] = static_cast<float>(u(rng) * 2 - 1);
        } else {
          f.leaf_value[g] = (u(rng) * 2 - 1) / 3.0;  // not a float32 value
        }
        continue;
      }
      f.left_child[g] = kids[i].first;
      f.right_child[g] = kids[i].second;
      f.split_feature[g] = static_cast<uint32_t>(rng() % s.features);
      double th = std::round((u(rng) * 4 - 2) * 8) / 8;  // shared values make ties likely
      if (u(rng) < 0.3) th = u(rng) * 4 - 2;
      if (f.input_precision == Precision::kFloat32) th = static_cast<float>(th);
      f.threshold[g] = th;
      if (s.categorical_probability > 0 && u(rng) < s.categorical_probability) {
        // Categories 0..69: sets of a few words, some categories in neither.
        std::vector<uint32_t> left, right;
        for (uint32_t c = 0; c < 70; ++c) {
          const double r = u(rng);
          if (r < 0.35) {
            left.push_back(c);
          } else if (r < 0.7) {
            right.push_back(c);
          }
        }
        CategoryRule rule = CategoryRule::kSklearn;
        OutsideDirection outside = OutsideDirection::kDefault;
        uint8_t default_left = u(rng) < 0.5 ? kDefaultLeft : 0;
        if (s.flavor == Flavor::kXgboost) {
          rule = CategoryRule::kXgboost;
          outside = OutsideDirection::kLeft;
          left.clear();
        } else if (s.flavor == Flavor::kLightgbm) {
          rule = CategoryRule::kLightgbm;
          outside = OutsideDirection::kRight;
          right.clear();
          default_left = 0;
        }
        f.threshold[g] = AddCategoricalSplit(f, left, right, rule);
        f.flags[g] = static_cast<uint8_t>(kCategorical | default_left |
                                          static_cast<uint8_t>(outside) << kOutsideShift);
        const double c = f.cardinality[g];
        const double share = std::floor(c * (0.05 + 0.9 * u(rng)));
        f.cardinality[b + kids[i].first] = share;
        f.cardinality[b + kids[i].second] = c - share;
        continue;
      }
      if (s.flavor == Flavor::kLightgbm) {
        const int missing = static_cast<int>(rng() % 3);
        f.flags[g] =
            (u(rng) < 0.5 ? kDefaultLeft : 0) | (missing == 0   ? kNanIsZero
                                                 : missing == 1 ? (kNanIsZero | kZeroIsMissing)
                                                                : 0);
      } else {
        f.flags[g] = u(rng) < 0.5 ? kDefaultLeft : 0;
      }
      const double c = f.cardinality[g];
      const double share = std::floor(c * (0.05 + 0.9 * u(rng)));
      f.cardinality[b + kids[i].first] = share;
      f.cardinality[b + kids[i].second] = c - share;
    }
  }
  if (!s.cardinality) std::fill(f.cardinality.begin(), f.cardinality.end(), 0.0);
  return f;
}

// Rows that hit thresholds exactly, their neighbours, missing values and extremes.
inline RowMatrix MakeAdversarialRows(const Forest& f, size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2.5, 2.5);
  RowMatrix m;
  m.num_cols = f.num_features;
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             0.0,
                             -0.0,
                             1e-36,
                             -1e-36,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             1e300};
  // Values around categories: integers in and beyond the sets, fractions,
  // negatives, -0, the edges of each rule's range.
  const double categories[] = {
      0.0,  -0.0,   0.5,        0.999,      1.0,          7.0,          31.0,
      32.0, 33.5,   69.0,       70.0,       255.0,        256.0,        -0.5,
      -1.0, -1e-30, 16777215.0, 16777216.0, 2147483647.0, 2147483648.0, 4294967296.0};
  const bool categorical = !f.categorical_splits.empty();
  for (size_t r = 0; r < n; ++r) {
    for (uint32_t c = 0; c < f.num_features; ++c) {
      double v = u(rng);
      const int pick = static_cast<int>(rng() % 10);
      if (categorical && pick < 4 && rng() % 2) {
        v = rng() % 3 ? static_cast<double>(rng() % 80)
                      : categories[rng() % (sizeof(categories) / sizeof(categories[0]))];
      } else if (pick < 4) {
        const uint64_t g = rng() % f.num_nodes();
        const double t = f.threshold[g];
        const int how = static_cast<int>(rng() % 4);
        v = how == 0   ? t
            : how == 1 ? std::nextafter(t, 1e300)
            : how == 2 ? std::nextafter(t, -1e300)
                       : static_cast<double>(std::nextafter(static_cast<float>(t), 1e30f));
      } else if (pick == 4) {
        v = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
      }
      m.values.push_back(v);
    }
    ++m.num_rows;
  }
  return m;
}

}  // namespace pacset::testing
