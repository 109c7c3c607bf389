// XGBoost JSON / UBJSON importer (schema: dmlc/xgboost doc/model.schema).
//
// Exactness: XGBoost stores inputs as float32 and sends x left iff
// x < split_condition (float32). For float32 x that is x <= nextafterf(t, -inf),
// our single operator. Missing values (NaN) follow default_left. Leaf values
// are float32 and already include the learning rate; margins are summed in
// float32 in tree order starting from the base margin (cpu_predictor.cc).
//
// Categorical splits (split_type 1; enable_categorical=True with hist): the
// node's categories (categories_nodes / _segments / _sizes / categories) go
// RIGHT; every other category, and any value that is no category (x < 0,
// x >= 2^24, +-inf), goes LEFT; NaN takes default_left; a category is the
// float32 x truncated toward zero (3.99 is 3, -0.0 is 0). This is
// CategoryRule::kXgboost with the stored set as the right set, no left set and
// OutsideDirection::kLeft. Verified against XGBoost 1.7.4 (pred_leaf of
// Booster.predict on a DMatrix, and margins of inplace_predict, which agree)
// for partition-based splits (max_cat_to_onehot=1) and one-hot splits
// (max_cat_to_onehot=64, stored as a one-category set) on values 0, -0.0,
// every trained category, unseen ones, -1, -0.5, -1e-45, 0.5, 3.99, 2^24 - 1,
// 2^24 and its float32 neighbours, 2^31, 1e30, +-inf and NaN
// (tests/exact/xgboost_exact_test.py checks them on each categorical model). The
// model's feature_types do not take part: a DMatrix without them routes the
// same, the tree's split_type alone decides. A categorical node's
// split_condition is NaN (written as the bare word NaN, ParseJsonDocument).
//
// DART (booster "dart") weighs each tree's output by its weight_drop w.
// XGBoost 1.7.4's Booster.predict (src/gbm/gbtree.cc, Dart::PredictBatchImpl)
// predicts each tree alone into a buffer filled with 0 and adds
// `h_out_predts[offset] += (h_predts[offset] * w)` in float32, tree by tree,
// onto the base margin: the product is rounded to float32 before the sum, so
// the float32 (0 + leaf) * w, stored as the leaf, predicts the same bits.
// Dart::InplacePredict in 1.7.4 (inplace_predict, XGBRegressor.predict) adds
// ((base + leaf) - base) * w instead, which differs by rounding when the base
// margin is not 0 (docs/exactness.md). A gbtree model holding its own
// weight_drop (not written by 1.7.4; unverified for later versions) is
// weighed the same way rather than read as unweighted.
#include <cmath>
#include <limits>

#include "model/import.h"
#include "model/json_reader.h"

namespace pacset {
namespace {

struct ObjectiveInfo {
  Task task;
  Postprocess post;
  enum class BaseLink { kIdentity, kLogit, kLog } link;
};

StatusOr<ObjectiveInfo> LookupObjective(const std::string& name, uint32_t num_class,
                                        const std::string& file) {
  using L = ObjectiveInfo::BaseLink;
  static const std::string kIdentityRegression[] = {
      "reg:squarederror",     "reg:linear",        "reg:squaredlogerror",
      "reg:pseudohubererror", "reg:absoluteerror", "reg:quantileerror",
      "rank:pairwise",        "rank:ndcg",         "rank:map"};
  for (const auto& n : kIdentityRegression)
    if (name == n) return ObjectiveInfo{Task::kRegression, Postprocess::kIdentity, L::kIdentity};
  if (name == "binary:logistic")
    return ObjectiveInfo{Task::kBinaryClassification, Postprocess::kSigmoid, L::kLogit};
  if (name == "reg:logistic")
    return ObjectiveInfo{Task::kRegression, Postprocess::kSigmoid, L::kLogit};
  if (name == "binary:logitraw")  // margins out; base_score is used as a margin (measured, 1.7.4)
    return ObjectiveInfo{Task::kBinaryClassification, Postprocess::kIdentity, L::kIdentity};
  if (name == "count:poisson" || name == "reg:gamma" || name == "reg:tweedie")
    return ObjectiveInfo{Task::kRegression, Postprocess::kExponential, L::kLog};
  if (name == "multi:softprob" || name == "multi:softmax") {
    if (num_class < 2)
      return Status::InvalidArgument(file + ": objective " + name + " needs num_class >= 2");
    return ObjectiveInfo{
        Task::kMulticlassClassification,
        name == "multi:softprob" ? Postprocess::kSoftmax : Postprocess::kClassIndex, L::kIdentity};
  }
  return Status::NotSupported(file + ": XGBoost objective '" + name +
                              "' is not supported (supported: reg:squarederror and other "
                              "identity-link regression, reg:logistic, binary:logistic, "
                              "binary:logitraw, multi:softprob, multi:softmax, count:poisson, "
                              "reg:gamma, reg:tweedie); retrain with one of those objectives");
}

// XGBoost's categories are below 2^24 (larger values are no category); a
// hostile file could still ask for huge bitsets cheaply (one category near
// 2^24 costs 2 MiB of words), so a model's bitsets are capped at 64 MiB.
constexpr int64_t kXgboostCategoryLimit = int64_t{1} << 24;
constexpr size_t kMaxCategoryWords = size_t{1} << 24;

// The stored categories of each categorical node of one tree (empty for the
// other nodes), from categories_nodes / _segments / _sizes / categories.
// Checked: the four arrays agree in length, every listed node is a node of
// the tree with split_type 1, listed once, its segment lies inside
// `categories`, the sizes add up to at most its length, every category is in [0, 2^24), and every
// internal node of split_type 1 is listed. A leaf of split_type 1 (XGBoost keeps the type of a
// pruned split) needs no entry, and one it has is not used.
StatusOr<std::vector<std::vector<uint32_t>>> ReadTreeCategories(
    const JsonReader& tree, const std::vector<int64_t>& split_type,
    const std::vector<int64_t>& left, const std::string& where) {
  const int64_t n = static_cast<int64_t>(split_type.size());
  std::vector<std::vector<uint32_t>> categories(n);
  bool any = false;
  for (int64_t i = 0; i < n; ++i) {
    if (split_type[i] != 0 && split_type[i] != 1) {
      PACSET_ASSIGN_OR_RETURN(auto st_r, tree.Member("split_type"));
      return st_r.Error(where + std::to_string(i) + " has split_type " +
                        std::to_string(split_type[i]) + " (0 numerical, 1 categorical)");
    }
    any |= split_type[i] == 1;
  }
  if (!any) return categories;
  PACSET_ASSIGN_OR_RETURN(auto nodes_r, tree.Member("categories_nodes"));
  PACSET_ASSIGN_OR_RETURN(auto nodes, nodes_r.Integers());
  const int64_t m = static_cast<int64_t>(nodes.size());
  PACSET_ASSIGN_OR_RETURN(auto segments_r, tree.Member("categories_segments"));
  PACSET_ASSIGN_OR_RETURN(auto segments, segments_r.Integers(m));
  PACSET_ASSIGN_OR_RETURN(auto sizes_r, tree.Member("categories_sizes"));
  PACSET_ASSIGN_OR_RETURN(auto sizes, sizes_r.Integers(m));
  PACSET_ASSIGN_OR_RETURN(auto values_r, tree.Member("categories"));
  PACSET_ASSIGN_OR_RETURN(auto values, values_r.Integers());
  const int64_t num_values = static_cast<int64_t>(values.size());
  // XGBoost writes the segments one after another. Overlapping ones would let
  // a small file make every node copy the whole array: the sizes must fit.
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || size > num_values - total)
      return sizes_r.Error("the sizes add up to more than the " + std::to_string(num_values) +
                           " categories stored");
    total += size;
  }
  std::vector<bool> listed(n, false);
  for (int64_t k = 0; k < m; ++k) {
    const int64_t node = nodes[k];
    const std::string entry = "entry " + std::to_string(k) + " ";
    if (node < 0 || node >= n)
      return nodes_r.Error(entry + "names node " + std::to_string(node) + " but the tree has " +
                           std::to_string(n) + " nodes");
    if (split_type[node] != 1)
      return nodes_r.Error(entry + "names node " + std::to_string(node) +
                           ", whose split_type is not 1 (categorical)");
    if (listed[node]) return nodes_r.Error("node " + std::to_string(node) + " is listed twice");
    listed[node] = true;
    if (segments[k] < 0 || sizes[k] < 0 || segments[k] > num_values ||
        sizes[k] > num_values - segments[k])
      return segments_r.Error(entry + "(node " + std::to_string(node) + ") spans categories [" +
                              std::to_string(segments[k]) + ", +" + std::to_string(sizes[k]) +
                              ") but the categories array has " + std::to_string(num_values));
    for (int64_t j = segments[k]; j < segments[k] + sizes[k]; ++j) {
      if (values[j] < 0 || values[j] >= kXgboostCategoryLimit)
        return values_r.Error("element " + std::to_string(j) + " is category " +
                              std::to_string(values[j]) + ", outside XGBoost's 0..16777215");
      categories[node].push_back(static_cast<uint32_t>(values[j]));
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (split_type[i] == 1 && left[i] != -1 && !listed[i])
      return nodes_r.Error(where + std::to_string(i) +
                           " is a categorical split but has no categories entry");
  return categories;
}

StatusOr<Forest> ImportXgboostDocument(const nlohmann::json& doc, const std::string& file,
                                       const std::string& format_name) {
  JsonReader root(doc, file);
  Forest f;
  f.source.format = format_name;
  if (root.Has("version")) {
    PACSET_ASSIGN_OR_RETURN(auto v, root.Member("version"));
    if (v.json().is_array()) {
      std::string s;
      for (const auto& e : v.json()) s += (s.empty() ? "" : ".") + e.dump();
      f.source.library_version = "xgboost " + s;
    }
  }
  PACSET_ASSIGN_OR_RETURN(auto learner, root.Member("learner"));
  PACSET_ASSIGN_OR_RETURN(auto lmp, learner.Member("learner_model_param"));
  PACSET_ASSIGN_OR_RETURN(auto num_feature_r, lmp.Member("num_feature"));
  PACSET_ASSIGN_OR_RETURN(int64_t num_feature, num_feature_r.Integer());
  if (num_feature <= 0 || num_feature > (1 << 30))
    return num_feature_r.Error("num_feature must be between 1 and 2^30");
  int64_t num_class = 0, num_target = 1;
  if (lmp.Has("num_class")) {
    PACSET_ASSIGN_OR_RETURN(auto r, lmp.Member("num_class"));
    PACSET_ASSIGN_OR_RETURN(num_class, r.Integer());
  }
  if (lmp.Has("num_target")) {
    PACSET_ASSIGN_OR_RETURN(auto r, lmp.Member("num_target"));
    PACSET_ASSIGN_OR_RETURN(num_target, r.Integer());
  }
  if (num_class < 0 || num_class > 100000 || num_target < 1 || num_target > 100000)
    return lmp.Error("num_class / num_target out of range");
  PACSET_ASSIGN_OR_RETURN(auto objective, learner.Member("objective"));
  PACSET_ASSIGN_OR_RETURN(auto objective_name_r, objective.Member("name"));
  PACSET_ASSIGN_OR_RETURN(std::string objective_name, objective_name_r.String());
  PACSET_ASSIGN_OR_RETURN(ObjectiveInfo obj,
                          LookupObjective(objective_name, static_cast<uint32_t>(num_class), file));
  f.source.objective = objective_name;

  PACSET_ASSIGN_OR_RETURN(auto booster, learner.Member("gradient_booster"));
  PACSET_ASSIGN_OR_RETURN(auto booster_name_r, booster.Member("name"));
  PACSET_ASSIGN_OR_RETURN(std::string booster_name, booster_name_r.String());
  if (booster_name != "gbtree" && booster_name != "dart")
    return Status::NotSupported(file + ": booster '" + booster_name +
                                "' is not a tree ensemble (pacset reads booster gbtree and "
                                "dart); retrain with booster=gbtree");
  // DART: {"name": "dart", "gbtree": {"model": ...}, "weight_drop": [...]}.
  JsonReader trees_owner = booster;
  if (booster_name == "dart") {
    PACSET_ASSIGN_OR_RETURN(trees_owner, booster.Member("gbtree"));
  }
  PACSET_ASSIGN_OR_RETURN(auto model, trees_owner.Member("model"));
  PACSET_ASSIGN_OR_RETURN(auto trees, model.Member("trees"));
  PACSET_ASSIGN_OR_RETURN(size_t num_trees, trees.ArraySize());
  PACSET_ASSIGN_OR_RETURN(auto tree_info_r, model.Member("tree_info"));
  PACSET_ASSIGN_OR_RETURN(auto tree_info, tree_info_r.Integers(static_cast<int64_t>(num_trees)));
  if (num_trees == 0) return trees.Error("the model has no trees");
  std::vector<float> tree_weight;  // empty: every tree has weight 1
  if (booster_name == "dart" || model.Has("weight_drop")) {
    PACSET_ASSIGN_OR_RETURN(auto wd_r,
                            (booster_name == "dart" ? booster : model).Member("weight_drop"));
    PACSET_ASSIGN_OR_RETURN(auto wd, wd_r.Doubles(static_cast<int64_t>(num_trees)));
    for (size_t t = 0; t < num_trees; ++t) {
      tree_weight.push_back(static_cast<float>(wd[t]));
      if (!std::isfinite(tree_weight.back()))
        return wd_r.Error("tree " + std::to_string(t) + " has weight " + std::to_string(wd[t]));
    }
  }

  f.task = obj.task;
  f.num_features = static_cast<uint32_t>(num_feature);
  f.num_outputs = static_cast<uint32_t>(std::max<int64_t>({num_class, num_target, 1}));
  f.num_classes = obj.task == Task::kRegression             ? 1
                  : obj.task == Task::kBinaryClassification ? 2
                                                            : static_cast<uint32_t>(num_class);
  f.leaf_width = 1;
  f.postprocess = obj.post;
  f.aggregation = Aggregation::kSum;
  f.input_precision = Precision::kFloat32;
  f.accumulate_precision = Precision::kFloat32;
  f.cardinality_source = CardinalitySource::kHessian;

  // base_score: "5E-1", 0.5, or (3.1+) "[5E-1]" / one value per output.
  PACSET_ASSIGN_OR_RETURN(auto base_r, lmp.Member("base_score"));
  PACSET_ASSIGN_OR_RETURN(std::vector<double> base, base_r.Numbers());
  if (base.size() == 1) base.assign(f.num_outputs, base[0]);
  if (base.size() != f.num_outputs)
    return base_r.Error("expected 1 or " + std::to_string(f.num_outputs) + " values");
  f.base_score.resize(f.num_outputs);
  for (uint32_t k = 0; k < f.num_outputs; ++k) {
    const float b = static_cast<float>(base[k]);
    float margin = b;
    if (obj.link == ObjectiveInfo::BaseLink::kLogit) {
      if (!(b > 0.0f && b < 1.0f))
        return base_r.Error("base_score must be in (0, 1) for " + objective_name);
      margin = -logf(1.0f / b - 1.0f);
    } else if (obj.link == ObjectiveInfo::BaseLink::kLog) {
      if (!(b > 0.0f)) return base_r.Error("base_score must be > 0 for " + objective_name);
      margin = logf(b);
    }
    f.base_score[k] = margin;
  }

  for (size_t t = 0; t < num_trees; ++t) {
    PACSET_ASSIGN_OR_RETURN(auto tree, trees.Element(t));
    if (tree_info[t] < 0 || tree_info[t] >= static_cast<int64_t>(f.num_outputs))
      return tree_info_r.Error("tree " + std::to_string(t) + " has output group " +
                               std::to_string(tree_info[t]) + " but the model has " +
                               std::to_string(f.num_outputs));
    PACSET_ASSIGN_OR_RETURN(auto left_r, tree.Member("left_children"));
    PACSET_ASSIGN_OR_RETURN(auto left, left_r.Integers());
    const int64_t n = static_cast<int64_t>(left.size());
    if (n == 0) return left_r.Error("a tree needs at least one node");
    if (n > INT32_MAX) return left_r.Error("tree too large");
    if (tree.Has("tree_param")) {
      PACSET_ASSIGN_OR_RETURN(auto tp, tree.Member("tree_param"));
      if (tp.Has("size_leaf_vector")) {
        PACSET_ASSIGN_OR_RETURN(auto slv_r, tp.Member("size_leaf_vector"));
        PACSET_ASSIGN_OR_RETURN(int64_t slv, slv_r.Integer());
        if (slv > 1)
          return Status::NotSupported(file + ": tree " + std::to_string(t) +
                                      " has vector leaves (multi_strategy=multi_output_tree), "
                                      "which are not supported yet; retrain with "
                                      "multi_strategy=one_output_per_tree (the default)");
      }
      if (tp.Has("num_nodes")) {
        PACSET_ASSIGN_OR_RETURN(auto nn_r, tp.Member("num_nodes"));
        PACSET_ASSIGN_OR_RETURN(int64_t nn, nn_r.Integer());
        if (nn != n)
          return nn_r.Error("num_nodes is " + std::to_string(nn) + " but left_children has " +
                            std::to_string(n) + " entries");
      }
    }
    PACSET_ASSIGN_OR_RETURN(auto right_r, tree.Member("right_children"));
    PACSET_ASSIGN_OR_RETURN(auto right, right_r.Integers(n));
    PACSET_ASSIGN_OR_RETURN(auto feat_r, tree.Member("split_indices"));
    PACSET_ASSIGN_OR_RETURN(auto feat, feat_r.Integers(n));
    PACSET_ASSIGN_OR_RETURN(auto cond_r, tree.Member("split_conditions"));
    PACSET_ASSIGN_OR_RETURN(auto cond, cond_r.Doubles(n));
    PACSET_ASSIGN_OR_RETURN(auto dl_r, tree.Member("default_left"));
    PACSET_ASSIGN_OR_RETURN(auto default_left, dl_r.Integers(n));
    std::vector<int64_t> split_type(n, 0);
    if (tree.Has("split_type")) {
      PACSET_ASSIGN_OR_RETURN(auto st_r, tree.Member("split_type"));
      PACSET_ASSIGN_OR_RETURN(split_type, st_r.Integers(n));
    }
    const std::string where = "tree " + std::to_string(t) + " node ";
    PACSET_ASSIGN_OR_RETURN(auto categories, ReadTreeCategories(tree, split_type, left, where));
    std::vector<double> hess;
    if (tree.Has("sum_hessian")) {
      PACSET_ASSIGN_OR_RETURN(auto h_r, tree.Member("sum_hessian"));
      PACSET_ASSIGN_OR_RETURN(hess, h_r.Doubles(n));
    } else {
      f.cardinality_source = CardinalitySource::kNone;
    }
    const uint64_t base_id =
        f.AddTree(static_cast<uint32_t>(tree_info[t]), static_cast<uint32_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t g = base_id + i;
      if (!hess.empty()) f.cardinality[g] = std::max(0.0, hess[i]);
      if (left[i] == -1) {
        if (right[i] != -1) return right_r.Error(where + std::to_string(i) + " has only one child");
        const double v = cond[i];
        if (std::isnan(v)) return cond_r.Error(where + std::to_string(i) + " has a NaN leaf value");
        float leaf = static_cast<float>(v);
        // XGBoost's float32 (0 + leaf) * w (see the top of this file).
        if (!tree_weight.empty()) leaf = (0.0f + leaf) * tree_weight[t];
        f.leaf_value[g] = leaf;
        continue;
      }
      if (left[i] <= 0 || left[i] >= n || right[i] <= 0 || right[i] >= n)
        return left_r.Error(where + std::to_string(i) + " has a child outside 1.." +
                            std::to_string(n - 1));
      if (feat[i] < 0 || feat[i] >= num_feature)
        return feat_r.Error(where + std::to_string(i) + " splits on feature " +
                            std::to_string(feat[i]) + " but num_feature is " +
                            std::to_string(num_feature));
      f.left_child[g] = static_cast<int32_t>(left[i]);
      f.right_child[g] = static_cast<int32_t>(right[i]);
      f.split_feature[g] = static_cast<uint32_t>(feat[i]);
      const uint8_t default_dir = default_left[i] ? kDefaultLeft : 0;
      if (split_type[i] == 1) {  // the stored set goes right (see the top of this file)
        f.threshold[g] = AddCategoricalSplit(f, {}, categories[i], CategoryRule::kXgboost);
        f.flags[g] =
            static_cast<uint8_t>(kCategorical | default_dir |
                                 static_cast<uint8_t>(OutsideDirection::kLeft) << kOutsideShift);
        if (f.category_words.size() > kMaxCategoryWords)
          return Status::ResourceExhausted(file + ": " + where + std::to_string(i) +
                                           ": the model's category sets exceed 64 MiB");
        continue;
      }
      const float th = static_cast<float>(cond[i]);
      if (std::isnan(th) || th == -std::numeric_limits<float>::infinity())
        return cond_r.Error(where + std::to_string(i) + " has threshold " +
                            std::to_string(cond[i]) + ", which no value is below");
      // x < th  <=>  x <= the next float32 below th (x is a float32).
      f.threshold[g] = std::nextafter(th, -std::numeric_limits<float>::infinity());
      f.flags[g] = default_dir;
    }
  }
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(file));
  return f;
}

}  // namespace

StatusOr<Forest> ImportXgboostJson(std::string_view text, const std::string& name) {
  PACSET_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, name));
  return ImportXgboostDocument(doc, name, "xgboost-json");
}

StatusOr<Forest> ImportXgboostUbjson(std::string_view bytes, const std::string& name) {
  PACSET_ASSIGN_OR_RETURN(nlohmann::json doc, ParseUbjsonDocument(bytes, name));
  return ImportXgboostDocument(doc, name, "xgboost-ubjson");
}

}  // namespace pacset
