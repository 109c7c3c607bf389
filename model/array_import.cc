// ElementType helpers and the flat builder (model/array_import.h). The
// scikit-learn mapping lives in model/import_sklearn.cc.
#include "model/array_import.h"

#include <cmath>
#include <limits>

namespace pacset {

size_t ElementSize(ElementType t) {
  size_t n = 0;
  array_view_internal::Visit(t, [&](auto s) { n = sizeof(s); });
  return n;
}

const char* ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::kBool:
      return "bool";
    case ElementType::kInt8:
      return "int8";
    case ElementType::kUint8:
      return "uint8";
    case ElementType::kInt16:
      return "int16";
    case ElementType::kUint16:
      return "uint16";
    case ElementType::kInt32:
      return "int32";
    case ElementType::kUint32:
      return "uint32";
    case ElementType::kInt64:
      return "int64";
    case ElementType::kUint64:
      return "uint64";
    case ElementType::kFloat32:
      return "float32";
    case ElementType::kFloat64:
      return "float64";
  }
  return "?";
}

namespace {

Status FieldError(const std::string& name, size_t t, const char* field, const std::string& what) {
  return Status::InvalidArgument(name + ": trees/" + std::to_string(t) + "/" + field + ": " + what);
}

// The Forest threshold (x <= it goes left, x rounded to `precision`) that
// routes every input exactly as the arrays' rule with threshold `t` does.
bool MapThreshold(double t, bool strict_less, Precision precision, double* out) {
  if (std::isnan(t)) return false;
  if (strict_less && t == -std::numeric_limits<double>::infinity())
    return false;  // x < -inf: never
  if (precision == Precision::kFloat32) {
    float f = Float32AtOrBelow(t);  // float32 x <= t  <=>  x <= f
    if (strict_less && static_cast<double>(f) == t)
      f = std::nextafter(f, -std::numeric_limits<float>::infinity());
    *out = f;
  } else {
    *out = strict_less ? std::nextafter(t, -std::numeric_limits<double>::infinity()) : t;
  }
  return true;
}

Status AddTree(const FlatForestSpec& spec, size_t t, const std::string& name, Forest& f) {
  const FlatTreeArrays& tree = spec.trees[t];
  const size_t n = tree.left_child.size;
  if (n == 0) return FieldError(name, t, "left_child", "a tree needs at least one node");
  if (n > static_cast<size_t>(INT32_MAX))
    return FieldError(name, t, "left_child", "tree too large");
  auto length = [&](const ArrayView& a, size_t expected, const char* field,
                    bool optional) -> Status {
    if (optional && a.empty()) return Status::Ok();
    if (a.size != expected)
      return FieldError(
          name, t, field,
          "expected " + std::to_string(expected) + " values, found " + std::to_string(a.size));
    return Status::Ok();
  };
  PACSET_RETURN_IF_ERROR(length(tree.right_child, n, "right_child", false));
  PACSET_RETURN_IF_ERROR(length(tree.feature, n, "feature", false));
  PACSET_RETURN_IF_ERROR(length(tree.threshold, n, "threshold", false));
  PACSET_RETURN_IF_ERROR(length(tree.default_left, n, "default_left", true));
  PACSET_RETURN_IF_ERROR(length(tree.leaf_value, n * spec.leaf_width, "leaf_value", false));
  PACSET_RETURN_IF_ERROR(length(tree.cardinality, n, "cardinality", true));
  for (auto [a, field] :
       {std::pair{&tree.left_child, "left_child"}, std::pair{&tree.right_child, "right_child"},
        std::pair{&tree.feature, "feature"}})
    if (!a->is_integer())
      return FieldError(name, t, field,
                        std::string("expected integers, found ") + ElementTypeName(a->type));
  if (spec.leaf_width == 1 && tree.group >= spec.num_outputs)
    return FieldError(name, t, "group",
                      "output " + std::to_string(tree.group) + " but the forest has " +
                          std::to_string(spec.num_outputs));

  const uint64_t base = f.AddTree(spec.leaf_width == 1 ? tree.group : 0, static_cast<uint32_t>(n));
  size_t bad = 0;
  auto child = [&](std::vector<int32_t>& out) {
    return [&, n](size_t i, int64_t c) {
      if (c < -1 || c >= static_cast<int64_t>(n)) {
        bad = i;
        return false;
      }
      out[base + i] = static_cast<int32_t>(c);
      return true;
    };
  };
  if (!tree.left_child.ForEach<int64_t>(child(f.left_child)))
    return FieldError(
        name, t, "left_child",
        "node " + std::to_string(bad) + " has a child outside -1.." + std::to_string(n - 1));
  if (!tree.right_child.ForEach<int64_t>(child(f.right_child)))
    return FieldError(
        name, t, "right_child",
        "node " + std::to_string(bad) + " has a child outside -1.." + std::to_string(n - 1));
  const int32_t* left = f.left_child.data() + base;
  const int32_t* right = f.right_child.data() + base;
  for (size_t i = 0; i < n; ++i)
    if ((left[i] < 0) != (right[i] < 0))
      return FieldError(name, t, "left_child", "node " + std::to_string(i) + " has one child");
  const int64_t nf = spec.num_features;
  if (!tree.feature.ForEach<int64_t>([&](size_t i, int64_t v) {
        if (left[i] >= 0 && (v < 0 || v >= nf)) {
          bad = i;
          return false;
        }
        f.split_feature[base + i] = left[i] >= 0 ? static_cast<uint32_t>(v) : 0;
        return true;
      }))
    return FieldError(name, t, "feature",
                      "node " + std::to_string(bad) + " splits on a feature outside 0.." +
                          std::to_string(nf - 1));
  if (!tree.threshold.ForEach<double>([&](size_t i, double v) {
        if (left[i] < 0) return true;
        bad = i;
        return MapThreshold(v, spec.strict_less, spec.input_precision, &f.threshold[base + i]);
      }))
    return FieldError(name, t, "threshold",
                      "node " + std::to_string(bad) + " has a NaN threshold (or x < -inf)");
  if (!tree.default_left.empty())
    tree.default_left.ForEach<int64_t>([&](size_t i, int64_t v) {
      f.flags[base + i] = left[i] >= 0 && v != 0 ? kDefaultLeft : 0;
      return true;
    });
  const uint32_t w = spec.leaf_width;
  if (!tree.leaf_value.ForEach<double>([&](size_t i, double v) {
        if (left[i / w] >= 0) return true;
        bad = i / w;
        f.leaf_value[base * w + i] = v;
        return !std::isnan(v);
      }))
    return FieldError(name, t, "leaf_value", "leaf " + std::to_string(bad) + " has a NaN value");
  if (!tree.cardinality.empty())
    tree.cardinality.ForEach<double>([&](size_t i, double v) {
      f.cardinality[base + i] = std::isfinite(v) && v > 0 ? v : 0.0;
      return true;
    });
  return Status::Ok();
}

}  // namespace

StatusOr<Forest> BuildForestFromArrays(const FlatForestSpec& spec, const std::string& name) {
  auto bad = [&](const std::string& what) { return Status::InvalidArgument(name + ": " + what); };
  if (spec.num_features == 0) return bad("num_features must be at least 1");
  if (spec.num_outputs == 0) return bad("num_outputs must be at least 1");
  if (spec.leaf_width != 1 && spec.leaf_width != spec.num_outputs)
    return bad("leaf_width must be 1 or num_outputs (" + std::to_string(spec.num_outputs) + ")");
  if (spec.trees.empty()) return bad("the forest has no trees");
  if (!spec.base_score.empty() && spec.base_score.size() != spec.num_outputs)
    return bad("base_score has " + std::to_string(spec.base_score.size()) + " values for " +
               std::to_string(spec.num_outputs) + " outputs");
  for (double b : spec.base_score)
    if (!std::isfinite(b)) return bad("base_score must be finite");
  if (!std::isfinite(spec.sigmoid_alpha)) return bad("sigmoid_alpha must be finite");

  Forest f;
  f.task = spec.task;
  f.num_features = spec.num_features;
  f.num_outputs = spec.num_outputs;
  f.num_classes = spec.num_classes;
  f.leaf_width = spec.leaf_width;
  f.base_score =
      spec.base_score.empty() ? std::vector<double>(spec.num_outputs, 0.0) : spec.base_score;
  f.postprocess = spec.postprocess;
  f.sigmoid_alpha = spec.sigmoid_alpha;
  f.aggregation = spec.aggregation;
  f.input_precision = spec.input_precision;
  f.accumulate_precision = spec.accumulate_precision;
  f.source = spec.source;
  size_t total = 0;
  bool all_counted = true;
  for (const auto& tree : spec.trees) {
    total += tree.left_child.size;
    all_counted = all_counted && !tree.cardinality.empty();
  }
  f.cardinality_source = all_counted ? CardinalitySource::kTraining : CardinalitySource::kNone;
  f.Reserve(spec.trees.size(), total);
  for (size_t t = 0; t < spec.trees.size(); ++t) PACSET_RETURN_IF_ERROR(AddTree(spec, t, name, f));
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(name));
  return f;
}

}  // namespace pacset
