// Forests from flat arrays that live elsewhere: a scikit-learn estimator's
// tree_ arrays (read where numpy holds them, no JSON, no copy of the input)
// and a caller's own per-tree arrays (the flat builder behind Python's
// Forest.from_arrays, the treelite-dask-serializer idea).
//
// Arrays are read through ArrayView, a typed strided view, so numpy arrays of
// any integer or float dtype and any stride (scikit-learn's children_left is a
// strided view into its node records) are read in place. The views must stay
// valid during the call only; the Forest returned owns its data.
//
// Both builders check everything (child ids, features, thresholds, lengths)
// and name the offending field as "trees/T/FIELD: node N ...", so bad arrays
// give an error, never a bad forest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "model/forest.h"
#include "util/status.h"

namespace pacset {

enum class ElementType : uint8_t {
  kBool,
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat32,
  kFloat64,
};

size_t ElementSize(ElementType t);
const char* ElementTypeName(ElementType t);  // numpy's names: "int64", "float32", ...

// `size` elements of `type`, element i at data + i * stride (bytes; may be
// any value, also negative). Empty (size 0) stands for "not given".
struct ArrayView {
  const void* data = nullptr;
  size_t size = 0;
  ptrdiff_t stride = 0;
  ElementType type = ElementType::kFloat64;

  bool empty() const { return size == 0; }
  bool is_integer() const { return type != ElementType::kFloat32 && type != ElementType::kFloat64; }

  template <typename T>
  static ArrayView Of(const std::vector<T>& v);

  // Element i converted with static_cast (integers to double exactly up to 2^53).
  template <typename T>
  T Get(size_t i) const;
  // All elements, converted, into out[0..size).
  template <typename T>
  void CopyTo(T* out) const;
  // All elements, converted, as the whole of *out (resized to size).
  template <typename T>
  void CopyTo(std::vector<T>* out) const {
    out->resize(size);
    CopyTo(out->data());
  }
  // fn(i, element i converted to T) for every i; false from fn stops early
  // and is returned. The element type is dispatched once, not per element.
  template <typename T, typename Fn>
  bool ForEach(Fn&& fn) const;
};

// ---- scikit-learn ----

// One fitted DecisionTree*'s tree_ (sklearn/tree/_tree.pyx), node 0 the root;
// or one HistGradientBoosting TreePredictor's nodes (sklearn/ensemble/
// _hist_gradient_boosting/predictor.py), whose leaves are marked by is_leaf
// (their children are 0) and whose missing_go_to_left is always given.
struct SklearnTreeArrays {
  uint32_t output = 0;  // gradient boosting: the raw-prediction column k of estimators_[stage, k]
  ArrayView children_left, children_right;  // -1 at leaves
  ArrayView feature;                        // ignored at leaves
  ArrayView threshold;                      // float64 thresholds
  ArrayView value;  // tree_.value flattened row-major: node_count * value_width
  ArrayView n_node_samples;
  ArrayView missing_go_to_left;  // scikit-learn >= 1.3; empty when absent
  // HistGradientBoosting only (empty otherwise).
  ArrayView is_leaf, is_categorical;
  ArrayView bitset_idx;        // a categorical node's row of left_cat_bitsets
  ArrayView left_cat_bitsets;  // raw_left_cat_bitsets flattened: bitset_words per row
};

// What the estimator says about itself; the same members as the exported JSON
// (docs/sklearn-export.md), whose reader fills this struct.
struct SklearnEstimatorArrays {
  std::string estimator;  // class name, e.g. "RandomForestClassifier"
  std::string sklearn_version;
  int64_t n_features = 0;
  int64_t n_classes = 1;  // 1 for regressors
  // Gradient boosting only.
  std::string loss;
  double learning_rate = 1.0;
  std::vector<double> init_raw_prediction;  // n_outputs values
  // HistGradientBoosting only: words per category bitset, the categorical
  // features (ascending) and each one's known categories (bitset_words words
  // per feature, _bin_mapper.make_known_categories_bitsets()).
  uint32_t bitset_words = 0;
  std::vector<int64_t> categorical_features;
  std::vector<uint32_t> known_category_bitsets;
  // IsolationForest only: n_estimators * c(max_samples_) and offset_ (each
  // tree's value array holds c(n_node_samples) per node, feature ids are
  // the estimator's columns: docs/sklearn-export.md).
  double score_denominator = 0.0;
  double offset = 0.0;
  std::vector<SklearnTreeArrays> trees;  // prediction order
};

// The one home of the scikit-learn -> Forest mapping (routing, leaf
// normalisation, losses, missing values: see model/import_sklearn.cc).
// `name` prefixes error messages.
StatusOr<Forest> ImportSklearnArrays(const SklearnEstimatorArrays& est, const std::string& name);

// ---- the flat builder ----

struct FlatTreeArrays {
  ArrayView left_child, right_child;  // local child ids; -1 (both) at leaves
  ArrayView feature;
  ArrayView threshold;
  ArrayView default_left;  // nonzero: a missing value goes left; empty: all right
  ArrayView leaf_value;    // node_count * leaf_width values, read at leaves only
  ArrayView cardinality;   // optional training counts (layouts put hot nodes together)
  uint32_t group = 0;      // output the tree's scalar leaves add to
};

struct FlatForestSpec {
  uint32_t num_features = 0;
  uint32_t num_outputs = 1;
  uint32_t num_classes = 1;
  uint32_t leaf_width = 1;  // 1 or num_outputs
  Task task = Task::kRegression;
  Postprocess postprocess = Postprocess::kIdentity;
  double sigmoid_alpha = 1.0;
  Aggregation aggregation = Aggregation::kSum;
  std::vector<double> base_score;  // num_outputs margins (empty: zeros)
  Precision input_precision = Precision::kFloat32;
  Precision accumulate_precision = Precision::kFloat64;
  // The arrays' split rule: false "x <= threshold goes left" (scikit-learn,
  // LightGBM), true "x < threshold goes left" (XGBoost). Either is mapped
  // exactly onto the Forest's one rule at input_precision.
  bool strict_less = false;
  ModelSource source;
  std::vector<FlatTreeArrays> trees;
};

StatusOr<Forest> BuildForestFromArrays(const FlatForestSpec& spec, const std::string& name);

// ---- inline definitions ----

template <typename T>
ArrayView ArrayView::Of(const std::vector<T>& v) {
  ArrayView a;
  a.data = v.data();
  a.size = v.size();
  a.stride = sizeof(T);
  if constexpr (std::is_same_v<T, double>) {
    a.type = ElementType::kFloat64;
  } else if constexpr (std::is_same_v<T, float>) {
    a.type = ElementType::kFloat32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    a.type = ElementType::kInt64;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    a.type = ElementType::kInt32;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    a.type = ElementType::kUint8;
  } else {
    static_assert(sizeof(T) == 0, "ArrayView::Of: unsupported element type");
  }
  return a;
}

namespace array_view_internal {
template <typename S, typename T>
inline T Load(const char* p) {
  S s;
  std::memcpy(&s, p, sizeof(S));
  return static_cast<T>(s);
}
// Calls fn(S{}) with S the C++ type of `t`.
template <typename Fn>
inline void Visit(ElementType t, Fn&& fn) {
  switch (t) {
    case ElementType::kBool:
    case ElementType::kUint8:
      return fn(uint8_t{});
    case ElementType::kInt8:
      return fn(int8_t{});
    case ElementType::kInt16:
      return fn(int16_t{});
    case ElementType::kUint16:
      return fn(uint16_t{});
    case ElementType::kInt32:
      return fn(int32_t{});
    case ElementType::kUint32:
      return fn(uint32_t{});
    case ElementType::kInt64:
      return fn(int64_t{});
    case ElementType::kUint64:
      return fn(uint64_t{});
    case ElementType::kFloat32:
      return fn(float{});
    case ElementType::kFloat64:
      return fn(double{});
  }
}
}  // namespace array_view_internal

template <typename T>
T ArrayView::Get(size_t i) const {
  const char* p = static_cast<const char*>(data) + static_cast<ptrdiff_t>(i) * stride;
  T out{};
  array_view_internal::Visit(type,
                             [&](auto s) { out = array_view_internal::Load<decltype(s), T>(p); });
  return out;
}

template <typename T>
void ArrayView::CopyTo(T* out) const {
  const char* p = static_cast<const char*>(data);
  array_view_internal::Visit(type, [&](auto s) {
    using S = decltype(s);
    for (size_t i = 0; i < size; ++i, p += stride) out[i] = array_view_internal::Load<S, T>(p);
  });
}

template <typename T, typename Fn>
bool ArrayView::ForEach(Fn&& fn) const {
  const char* p = static_cast<const char*>(data);
  bool ok = true;
  array_view_internal::Visit(type, [&](auto s) {
    using S = decltype(s);
    for (size_t i = 0; i < size && ok; ++i, p += stride)
      ok = fn(i, array_view_internal::Load<S, T>(p));
  });
  return ok;
}

}  // namespace pacset
