// LightGBM text model importer: the files written by Booster.save_model /
// model_to_string (LightGBM src/boosting/gbdt_model_text.cpp, src/io/tree.cpp).
//
// File layout. A header of key=value lines (the model type line "tree",
// version, num_class, num_tree_per_iteration, label_index, max_feature_idx,
// objective, a bare "average_output" line for random forests, feature_names,
// feature_infos, tree_sizes), then one block per tree: a "Tree=i" line,
// key=value lines (num_leaves, num_cat, split_feature, split_gain, threshold,
// decision_type, left_child, right_child, leaf_value, leaf_weight, leaf_count,
// internal_value, internal_weight, internal_count, cat_boundaries,
// cat_threshold, is_linear, shrinkage) and
// blank lines; then "end of trees" and sections the importer ignores
// (feature_importances:, parameters:, pandas_categorical:). A tree with one
// leaf has empty split arrays and only its leaf_value matters.
//
// Strictness. What LightGBM refuses to load is refused here too (a missing
// num_class, label_index, max_feature_idx, feature_names, feature_infos,
// num_leaves, num_cat or leaf_value; array lengths that disagree with
// num_leaves; tree_sizes that do not match the tree blocks, since LightGBM
// finds trees by those byte sizes). What LightGBM would silently misread is
// refused as well: children out of range or shared, features beyond
// max_feature_idx, trees out of order, a tree count that is not a multiple of
// num_tree_per_iteration, a file without its "end of trees" line (truncated),
// category sets whose boundaries decrease or leave cat_threshold, a
// categorical node whose threshold is not the index of a set (< num_cat).
// Every error names the file, the line and the key.
//
// Node ids. LightGBM numbers a tree's internal nodes 0..L-2 (0 is the root)
// and its L leaves 0..L-1 separately; a child c < 0 is leaf ~c. The forest's
// local ids are
//   internal node i -> i              (0 <= i <= L-2)
//   leaf j          -> (L - 1) + j    (0 <= j <= L-1)
// so LightGBM's leaf index (predict(pred_leaf=True)) is a leaf's local id
// minus (num_leaves - 1); `pacset predict --leaf` prints local ids. A
// one-leaf tree is the single node 0 under both numberings.
//
// Exactness. Tree::NumericalDecision routes a float64 value x by
//   missing type NaN (2):  NaN takes the default direction;
//   missing type Zero (1): NaN counts as 0.0, and |x| <= kZeroThreshold
//                          (1e-35f) takes the default direction;
//   missing type None (0): NaN counts as 0.0 (default_left is never used);
//   then x <= threshold goes left;
// routing.h applies exactly this rule given kNanIsZero / kZeroIsMissing /
// kDefaultLeft. Before that, every LightGBM predictor (C API and Python for
// dense and sparse rows, the CLI's text parsers) keeps only values with
// |x| > kZeroThreshold or NaN and reads the rest as 0.0. Under missing types
// None and NaN that matters only for a threshold t in [-kZeroThreshold,
// kZeroThreshold), where the importer stores the equivalent threshold for
// unfiltered x (see ThresholdForUnfilteredInput); LightGBM writes t =
// -kZeroThreshold itself (a bin bound around zero), and every other threshold
// is stored unchanged. Leaf values are float64 with the learning rate already
// applied (shrinkage is informational). A raw score is the sum of leaf values
// in file order, starting from 0.0, with tree i adding to output
// i % num_tree_per_iteration (GBDT::PredictRaw); average_output divides it by
// the number of iterations (GBDT::Predict); then the objective's
// ConvertOutput, all in float64.
//
// Categorical splits (decision_type bit 0). A categorical node's threshold is
// the index k < num_cat of its category set: the uint32 bitset words
// cat_threshold[cat_boundaries[k] .. cat_boundaries[k+1]). Tree::
// CategoricalDecision (include/LightGBM/tree.h, LightGBM 3.3.0 and later)
// routes a float64 value x by
//   NaN:                                 right;
//   c = static_cast<int>(x) < 0:         right;
//   bit c of the set (FindInBitset):     left, otherwise right (a category
//                                        beyond the set's last word included);
// bits 1-3 (default_left, missing type) are ignored. static_cast<int> truncates
// toward zero, so -0.5 and 0.7 are category 0; values at or beyond 2^31 in
// magnitude and +-inf do not fit an int (undefined in C++): x86-64 gives
// INT_MIN, so they go right, and where the conversion saturates (aarch64) a
// huge value is category INT_MAX, beyond every set, so right as well. That is
// CategoryRule::kLightgbm with left set = the bitset, right set empty,
// OutsideDirection::kRight and no kDefaultLeft (model/routing.h). The rule
// belongs to the LightGBM that predicts, not to the model file's version:
// every LightGBM since 3.3.0 applies it to v2, v3 and v4 files alike. Before
// 3.3.0 (LightGBM PR #4468) the cast came before the NaN test; on x86-64 NaN
// became INT_MIN and went right just the same (that code compiled by gcc and
// clang, -O0 to -O3, sends NaN right for every missing type), while on a
// platform that casts
// NaN to 0 it was category 0 unless the missing type was NaN; such builds
// are not reproduced. LightGBM's predictors read |x| <= 1e-35f as 0.0 first,
// which truncation makes category 0 anyway.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/import.h"
#include "model/routing.h"
#include "util/string_util.h"

namespace pacset {
namespace {

// Largest num_leaves accepted: keeps 2 * num_leaves - 1 local ids in int32.
constexpr int64_t kMaxLeaves = int64_t{1} << 30;
constexpr int64_t kMaxClasses = int64_t{1} << 20;
constexpr int64_t kMaxFeatureIdx = (int64_t{1} << 31) - 2;

struct Line {
  std::string_view text;  // without the line break (and without a trailing '\r')
  size_t number;          // 1-based
  size_t offset;          // byte offset of the line in the file
};

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({line, lines.size() + 1, pos});
    pos = end + 1;
  }
  return lines;
}

// Space-separated values; runs of spaces count as one, like LightGBM's Split.
std::vector<std::string_view> SplitValues(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    if (s[pos] == ' ') {
      ++pos;
      continue;
    }
    size_t end = s.find(' ', pos);
    if (end == std::string_view::npos) end = s.size();
    out.push_back(s.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// A leading '+' is accepted (std::stod does); from_chars does not take one.
std::string_view StripPlus(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return s;
}

bool ParseInt64(std::string_view s, int64_t* out) {
  s = StripPlus(s);
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end && !s.empty();
}

// Correctly rounded, locale-independent; accepts "inf", "-inf", "nan" as
// LightGBM's writer ({fmt} "{:.17g}") spells them. Values that overflow, or
// underflow to zero, are errors (LightGBM's "{:.17g}" never writes them;
// subnormals read fine).
bool ParseDouble(std::string_view s, double* out) {
  s = StripPlus(s);
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, *out, std::chars_format::general);
  return r.ec == std::errc() && r.ptr == end && !s.empty();
}

struct Field {
  std::string_view value;
  size_t line;
};
using Fields = std::map<std::string_view, Field>;

// A tree's category sets as LightGBM stores them (Tree::cat_boundaries_,
// Tree::cat_threshold_): set k is the bitset words[boundaries[k] ..
// boundaries[k+1]), category c being bit c % 32 of word c / 32
// (Common::FindInBitset; a category beyond the last word is not in it).
struct CategorySets {
  std::vector<int64_t> boundaries;  // num_cat + 1, non-decreasing, last == words.size()
  std::vector<uint32_t> words;
  size_t boundaries_line = 0, words_line = 0;
};

// Largest bitset a categorical split may have: the .pac format keeps a set's
// word count in 16 bits (layout/pac_format.h CategoricalSplitRecord), so
// categories go up to 65535 * 32 - 1.
constexpr int64_t kMaxCategoryWords = 0xFFFF;

struct TreeBlock {
  size_t line;    // the "Tree=i" line
  size_t offset;  // its byte offset
  size_t bytes;   // up to the next "Tree=" or "end of trees" line
  Fields fields;
};

class LightgbmTextReader {
 public:
  LightgbmTextReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  StatusOr<Forest> Read();

 private:
  // "<file> line <n> (<where>): <what>"
  std::string At(size_t line, const std::string& where) const {
    return name_ + " line " + std::to_string(line) + " (" + where + "): ";
  }
  Status Invalid(size_t line, const std::string& where, const std::string& what) const {
    return Status::InvalidArgument(At(line, where) + what);
  }
  Status Unsupported(size_t line, const std::string& where, const std::string& what) const {
    return Status::NotSupported(At(line, where) + what);
  }

  Status ReadKeyValue(const Line& line, const std::string& where, Fields* fields) const;
  Status SplitSections(const std::vector<Line>& lines);
  StatusOr<const Field*> Require(const Fields& fields, std::string_view key, size_t line,
                                 const std::string& where) const;
  StatusOr<int64_t> Integer(const Field& f, const std::string& where, int64_t lo, int64_t hi) const;
  StatusOr<std::vector<std::string_view>> Values(const Field& f, const std::string& where,
                                                 int64_t expected) const;
  StatusOr<std::vector<int64_t>> Integers(const Field& f, const std::string& where,
                                          int64_t expected) const;
  StatusOr<std::vector<double>> Doubles(const Field& f, const std::string& where,
                                        int64_t expected) const;
  Status ReadHeader(Forest& f);
  Status ReadObjective(const Field* objective, Forest& f);
  Status CheckTreeSizes() const;
  Status ReadTree(size_t t, const TreeBlock& block, Forest& f, bool* has_counts) const;
  StatusOr<CategorySets> ReadCategorySets(const TreeBlock& block, const std::string& tree,
                                          int64_t num_cat) const;
  StatusOr<uint32_t> AddCategorySet(const CategorySets& sets, int64_t k, const std::string& tree,
                                    Forest& f) const;

  std::string_view text_;
  const std::string& name_;
  Fields header_;
  size_t header_end_line_ = 1;
  std::vector<TreeBlock> trees_;
  int64_t num_class_ = 1;
  int64_t trees_per_iteration_ = 1;
  int64_t max_feature_idx_ = 0;
};

Status LightgbmTextReader::ReadKeyValue(const Line& line, const std::string& where,
                                        Fields* fields) const {
  const size_t eq = line.text.find('=');
  // A line without '=' is a key with an empty value ("tree", "average_output").
  std::string_view key = line.text.substr(0, eq);
  std::string_view value = eq == std::string_view::npos ? "" : line.text.substr(eq + 1);
  auto [it, inserted] = fields->emplace(key, Field{value, line.number});
  if (!inserted)
    return Invalid(line.number, where.empty() ? std::string(key) : where + " " + std::string(key),
                   "duplicate key (first at line " + std::to_string(it->second.line) + ")");
  return Status::Ok();
}

// Splits the file into the header fields and the tree blocks.
Status LightgbmTextReader::SplitSections(const std::vector<Line>& lines) {
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    const std::string_view s = lines[i].text;
    if (StartsWith(s, "Tree=") || s == "end of trees") break;
    if (s.empty()) continue;
    PACSET_RETURN_IF_ERROR(ReadKeyValue(lines[i], "", &header_));
  }
  header_end_line_ = i < lines.size() ? lines[i].number : lines.size() + 1;
  // Without "end of trees" the file was cut short: check before anything else,
  // so that a truncated file is reported as such.
  bool has_end = false;
  for (size_t j = i; j < lines.size() && !has_end; ++j) has_end = lines[j].text == "end of trees";
  if (!has_end)
    return Status::InvalidArgument(name_ + ": no 'end of trees' line in " +
                                   std::to_string(lines.size()) +
                                   " lines: the file is truncated or is not a LightGBM text model");

  while (lines[i].text != "end of trees") {
    const Line& head = lines[i];
    if (!StartsWith(head.text, "Tree="))
      return Invalid(head.number, "trees",
                     "expected 'Tree=" + std::to_string(trees_.size()) +
                         "' or 'end of trees', found " + QuoteExcerpt(head.text));
    int64_t index = -1;
    if (!ParseInt64(head.text.substr(5), &index))
      return Invalid(head.number, "Tree",
                     QuoteExcerpt(head.text.substr(5)) + " is not a tree index");
    if (index != static_cast<int64_t>(trees_.size())) {
      if (index >= 0 && index < static_cast<int64_t>(trees_.size()))
        return Invalid(head.number, "Tree=" + std::to_string(index),
                       "duplicate tree (first at line " + std::to_string(trees_[index].line) + ")");
      return Invalid(head.number, "Tree=" + std::to_string(index),
                     "expected Tree=" + std::to_string(trees_.size()) +
                         " (trees are numbered 0, 1, 2, ... in order)");
    }
    TreeBlock block;
    block.line = head.number;
    block.offset = head.offset;
    const std::string where = "Tree=" + std::to_string(index);
    ++i;
    // Key=value lines up to a blank line, then blank lines.
    for (; !lines[i].text.empty() && !StartsWith(lines[i].text, "Tree=") &&
           lines[i].text != "end of trees";
         ++i) {
      if (lines[i].text.find('=') == std::string_view::npos)
        return Invalid(lines[i].number, where,
                       "expected key=value, found " + QuoteExcerpt(lines[i].text));
      PACSET_RETURN_IF_ERROR(ReadKeyValue(lines[i], where, &block.fields));
    }
    while (lines[i].text.empty()) ++i;
    block.bytes = lines[i].offset - block.offset;
    trees_.push_back(std::move(block));
  }
  return Status::Ok();
}

StatusOr<const Field*> LightgbmTextReader::Require(const Fields& fields, std::string_view key,
                                                   size_t line, const std::string& where) const {
  auto it = fields.find(key);
  if (it == fields.end()) return Invalid(line, where, "missing key " + std::string(key));
  return &it->second;
}

StatusOr<int64_t> LightgbmTextReader::Integer(const Field& f, const std::string& where, int64_t lo,
                                              int64_t hi) const {
  int64_t v = 0;
  if (!ParseInt64(f.value, &v))
    return Invalid(f.line, where, QuoteExcerpt(f.value) + " is not an integer");
  if (v < lo || v > hi)
    return Invalid(
        f.line, where,
        std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

StatusOr<std::vector<std::string_view>> LightgbmTextReader::Values(const Field& f,
                                                                   const std::string& where,
                                                                   int64_t expected) const {
  std::vector<std::string_view> v = SplitValues(f.value);
  if (static_cast<int64_t>(v.size()) != expected)
    return Invalid(
        f.line, where,
        "expected " + std::to_string(expected) + " values, found " + std::to_string(v.size()));
  return v;
}

StatusOr<std::vector<int64_t>> LightgbmTextReader::Integers(const Field& f,
                                                            const std::string& where,
                                                            int64_t expected) const {
  PACSET_ASSIGN_OR_RETURN(auto tokens, Values(f, where, expected));
  std::vector<int64_t> out(tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k)
    if (!ParseInt64(tokens[k], &out[k]))
      return Invalid(
          f.line, where,
          "entry " + std::to_string(k) + " " + QuoteExcerpt(tokens[k]) + " is not an integer");
  return out;
}

StatusOr<std::vector<double>> LightgbmTextReader::Doubles(const Field& f, const std::string& where,
                                                          int64_t expected) const {
  PACSET_ASSIGN_OR_RETURN(auto tokens, Values(f, where, expected));
  std::vector<double> out(tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k)
    if (!ParseDouble(tokens[k], &out[k]))
      return Invalid(f.line, where,
                     "entry " + std::to_string(k) + " " + QuoteExcerpt(tokens[k]) +
                         " is not a number (or is out of the double range)");
  return out;
}

Status LightgbmTextReader::ReadHeader(Forest& f) {
  const size_t end = header_end_line_;
  f.source.format = "lightgbm-text";
  if (auto it = header_.find("version"); it != header_.end()) {
    const std::string_view v = it->second.value;
    if (v != "v2" && v != "v3" && v != "v4")
      return Unsupported(
          it->second.line, "version",
          "model format " + QuoteExcerpt(v) +
              " is not supported (v2, v3 and v4 are: save it with LightGBM 2.x to 4.x)");
    f.source.library_version = std::string(v);
  }
  PACSET_ASSIGN_OR_RETURN(const Field* num_class, Require(header_, "num_class", end, "header"));
  PACSET_ASSIGN_OR_RETURN(num_class_, Integer(*num_class, "num_class", 1, kMaxClasses));
  trees_per_iteration_ = num_class_;  // LightGBM's default when the key is absent
  if (auto it = header_.find("num_tree_per_iteration"); it != header_.end()) {
    PACSET_ASSIGN_OR_RETURN(trees_per_iteration_,
                            Integer(it->second, "num_tree_per_iteration", 1, kMaxClasses));
  }
  if (trees_per_iteration_ != num_class_)
    return Invalid(header_.at("num_class").line, "num_class",
                   "num_class is " + std::to_string(num_class_) +
                       " but num_tree_per_iteration is " + std::to_string(trees_per_iteration_) +
                       "; LightGBM writes them equal");
  PACSET_ASSIGN_OR_RETURN(const Field* label, Require(header_, "label_index", end, "header"));
  PACSET_RETURN_IF_ERROR(Integer(*label, "label_index", -1, INT32_MAX).status());
  PACSET_ASSIGN_OR_RETURN(const Field* mfi, Require(header_, "max_feature_idx", end, "header"));
  PACSET_ASSIGN_OR_RETURN(max_feature_idx_, Integer(*mfi, "max_feature_idx", 0, kMaxFeatureIdx));
  for (const char* key : {"feature_names", "feature_infos"}) {
    PACSET_ASSIGN_OR_RETURN(const Field* names, Require(header_, key, end, "header"));
    const size_t n = SplitValues(names->value).size();
    if (static_cast<int64_t>(n) != max_feature_idx_ + 1)
      return Invalid(names->line, key,
                     "expected " + std::to_string(max_feature_idx_ + 1) +
                         " values (max_feature_idx + 1), found " + std::to_string(n));
  }
  f.num_features = static_cast<uint32_t>(max_feature_idx_ + 1);
  f.num_outputs = static_cast<uint32_t>(trees_per_iteration_);
  f.leaf_width = 1;
  f.base_score.assign(f.num_outputs, 0.0);
  f.aggregation = header_.count("average_output") ? Aggregation::kMean : Aggregation::kSum;
  f.input_precision = Precision::kFloat64;
  f.accumulate_precision = Precision::kFloat64;
  auto it = header_.find("objective");
  return ReadObjective(it == header_.end() ? nullptr : &it->second, f);
}

// The objective line is the objective's ToString(): its name, then options
// such as "sigmoid:1", "num_class:3" or "sqrt". Options an objective does not
// read are ignored, as LightGBM does.
Status LightgbmTextReader::ReadObjective(const Field* objective, Forest& f) {
  const int64_t k = num_class_;
  auto single_output = [&](const std::string& name) -> Status {
    if (k != 1)
      return Invalid(objective->line, "objective",
                     name + " has one output but num_class is " + std::to_string(k));
    return Status::Ok();
  };
  f.task = k == 1 ? Task::kRegression : Task::kMulticlassClassification;
  f.num_classes = static_cast<uint32_t>(k);
  f.postprocess = Postprocess::kIdentity;
  if (objective == nullptr) {
    // A custom objective writes no objective line; LightGBM predicts raw scores.
    f.source.objective = "custom";
    return Status::Ok();
  }
  std::string text(objective->value);
  f.source.objective = text;
  // LightGBM applies ParseObjectiveAlias to the whole string, so aliases only
  // matter for option-less objectives in hand-edited files.
  static const std::pair<const char*, const char*> kAliases[] = {
      {"regression_l2", "regression"},
      {"mean_squared_error", "regression"},
      {"mse", "regression"},
      {"l2", "regression"},
      {"l2_root", "regression"},
      {"root_mean_squared_error", "regression"},
      {"rmse", "regression"},
      {"mean_absolute_error", "regression_l1"},
      {"l1", "regression_l1"},
      {"mae", "regression_l1"},
      {"xentropy", "cross_entropy"},
      {"xentlambda", "cross_entropy_lambda"},
      {"mean_absolute_percentage_error", "mape"},
      {"xendcg", "rank_xendcg"},
      {"xe_ndcg", "rank_xendcg"},
      {"xe_ndcg_mart", "rank_xendcg"},
      {"xendcg_mart", "rank_xendcg"},
      {"none", "custom"},
      {"null", "custom"},
      {"na", "custom"},
  };
  for (const auto& [alias, canonical] : kAliases)
    if (text == alias) text = canonical;
  const std::vector<std::string_view> tokens = SplitValues(text);
  if (tokens.empty()) return Invalid(objective->line, "objective", "empty objective");
  const std::string name(tokens[0]);
  bool has_sqrt = false;
  double sigmoid = -1;
  int64_t objective_classes = -1;
  for (size_t t = 1; t < tokens.size(); ++t) {
    const std::string_view opt = tokens[t];
    if (opt == "sqrt") has_sqrt = true;
    const size_t colon = opt.find(':');
    if (colon == std::string_view::npos || opt.find(':', colon + 1) != std::string_view::npos)
      continue;
    const std::string_view key = opt.substr(0, colon), value = opt.substr(colon + 1);
    if (key == "sigmoid" && !ParseDouble(value, &sigmoid))
      return Invalid(objective->line, "objective", QuoteExcerpt(opt) + " is not sigmoid:<number>");
    if (key == "num_class" && !ParseInt64(value, &objective_classes))
      return Invalid(objective->line, "objective",
                     QuoteExcerpt(opt) + " is not num_class:<integer>");
  }
  auto need_sigmoid = [&]() -> Status {
    if (!(sigmoid > 0) || std::isinf(sigmoid))
      return Invalid(
          objective->line, "objective",
          name + " needs a positive sigmoid:<alpha> option (LightGBM refuses the model)");
    f.sigmoid_alpha = sigmoid;
    return Status::Ok();
  };
  auto need_classes = [&]() -> Status {
    if (objective_classes != k)
      return Invalid(objective->line, "objective",
                     name + " needs num_class:" + std::to_string(k) + " (the header's num_class)");
    if (k < 2) return Invalid(objective->line, "objective", name + " needs at least two classes");
    return Status::Ok();
  };

  // Objectives whose ConvertOutput is the identity unless "sqrt" (reg_sqrt) is
  // set, and those whose constructors switch sqrt off.
  static const char* const kSqrtCapable[] = {"regression", "regression_l1", "quantile", "fair",
                                             "mape"};
  static const char* const kIdentity[] = {"huber", "lambdarank", "rank_xendcg"};
  for (const char* n : kSqrtCapable) {
    if (name != n) continue;
    if (has_sqrt)
      return Unsupported(
          objective->line, "objective",
          "'" + name +
              " sqrt' (reg_sqrt=true) squares the raw score, which pacset does not do; "
              "retrain with reg_sqrt=false");
    return single_output(name);
  }
  for (const char* n : kIdentity)
    if (name == n) return single_output(name);
  if (name == "poisson" || name == "gamma" || name == "tweedie") {
    f.postprocess = Postprocess::kExponential;
    return single_output(name);
  }
  if (name == "binary") {
    PACSET_RETURN_IF_ERROR(single_output(name));
    f.task = Task::kBinaryClassification;
    f.num_classes = 2;
    f.postprocess = Postprocess::kSigmoid;
    return need_sigmoid();
  }
  if (name == "cross_entropy") {
    // Probabilistic labels in [0, 1]: like XGBoost's reg:logistic.
    f.postprocess = Postprocess::kSigmoid;
    f.sigmoid_alpha = 1.0;
    return single_output(name);
  }
  if (name == "multiclass") {
    PACSET_RETURN_IF_ERROR(need_classes());
    f.postprocess = Postprocess::kSoftmax;
    return Status::Ok();
  }
  if (name == "multiclassova") {
    // One binary sigmoid per class, not normalised (MulticlassOVA::ConvertOutput).
    PACSET_RETURN_IF_ERROR(need_classes());
    f.postprocess = Postprocess::kSigmoid;
    return need_sigmoid();
  }
  if (name == "custom") {
    f.source.objective = "custom";
    return Status::Ok();
  }
  if (name == "cross_entropy_lambda")
    return Unsupported(objective->line, "objective",
                       "cross_entropy_lambda (log1p(exp(score)) link) is not supported; retrain "
                       "with objective=cross_entropy, which is");
  return Unsupported(objective->line, "objective",
                     "LightGBM objective " + QuoteExcerpt(name) +
                         " is not supported (supported: regression, regression_l1, huber, fair, "
                         "quantile, mape, poisson, gamma, tweedie, binary, cross_entropy, "
                         "multiclass, multiclassova, lambdarank, rank_xendcg, custom; a model "
                         "whose objective line says 'custom' is read as raw scores)");
}

// LightGBM reads tree i at the byte offset sum(tree_sizes[0..i)) from the
// first "Tree=" line, so sizes that do not match the blocks make it misread
// the file.
Status LightgbmTextReader::CheckTreeSizes() const {
  auto it = header_.find("tree_sizes");
  if (it == header_.end()) return Status::Ok();
  PACSET_ASSIGN_OR_RETURN(auto sizes,
                          Integers(it->second, "tree_sizes", static_cast<int64_t>(trees_.size())));
  for (size_t t = 0; t < trees_.size(); ++t)
    if (sizes[t] != static_cast<int64_t>(trees_[t].bytes))
      return Invalid(it->second.line, "tree_sizes",
                     "Tree=" + std::to_string(t) + " takes " + std::to_string(trees_[t].bytes) +
                         " bytes but tree_sizes says " + std::to_string(sizes[t]) +
                         "; LightGBM locates trees by these sizes and would misread the file "
                         "(after editing a model by hand, delete the tree_sizes line)");
  return Status::Ok();
}

// Under missing types None and NaN LightGBM compares x' = (|x| <= z ? 0 : x)
// with t, z = kZeroThreshold. x' is monotone in x, so "x' <= t" is "x <= t2"
// for one t2: t itself unless t lies in [-z, z), where
//   0 <= t < z:  x' <= t  <=>  x <= z
//   -z <= t < 0: x' <= t  <=>  x < -z  <=>  x <= nextafter(-z, -inf)
// NaN, read as 0.0 under type None, lands on the same side of t and t2.
double ThresholdForUnfilteredInput(double t) {
  constexpr double z = kLightgbmZeroThreshold;
  if (t >= 0 && t < z) return z;
  if (t >= -z && t < 0) return std::nextafter(-z, -std::numeric_limits<double>::infinity());
  return t;
}

// cat_boundaries and cat_threshold, which LightGBM requires in a tree of more
// than one leaf with num_cat > 0 and reads by count (Tree::Tree(const char*):
// num_cat + 1 boundaries, then as many words as the last boundary says), so
// counts that disagree would make it misread the file.
StatusOr<CategorySets> LightgbmTextReader::ReadCategorySets(const TreeBlock& block,
                                                            const std::string& tree,
                                                            int64_t num_cat) const {
  const std::string b_where = tree + " cat_boundaries", w_where = tree + " cat_threshold";
  CategorySets sets;
  PACSET_ASSIGN_OR_RETURN(const Field* b_f,
                          Require(block.fields, "cat_boundaries", block.line, tree));
  sets.boundaries_line = b_f->line;
  const size_t num_boundaries = SplitValues(b_f->value).size();
  if (static_cast<int64_t>(num_boundaries) != num_cat + 1)
    return Invalid(b_f->line, b_where,
                   "expected " + std::to_string(num_cat + 1) + " values (num_cat + 1), found " +
                       std::to_string(num_boundaries));
  PACSET_ASSIGN_OR_RETURN(sets.boundaries, Integers(*b_f, b_where, num_cat + 1));
  for (int64_t k = 0; k <= num_cat; ++k) {
    const int64_t below = k == 0 ? 0 : sets.boundaries[k - 1];
    if (sets.boundaries[k] < below)
      return Invalid(b_f->line, b_where,
                     "entry " + std::to_string(k) + " (" + std::to_string(sets.boundaries[k]) +
                         ") is below " + (k == 0 ? "0" : "entry " + std::to_string(k - 1)) +
                         "; the entries are offsets into cat_threshold, non-negative and "
                         "non-decreasing");
  }
  PACSET_ASSIGN_OR_RETURN(const Field* w_f,
                          Require(block.fields, "cat_threshold", block.line, tree));
  sets.words_line = w_f->line;
  const int64_t num_words = sets.boundaries.back();
  const size_t found = SplitValues(w_f->value).size();
  if (static_cast<int64_t>(found) != num_words)
    return Invalid(w_f->line, w_where,
                   "expected " + std::to_string(num_words) +
                       " values (the last cat_boundaries entry), found " + std::to_string(found));
  PACSET_ASSIGN_OR_RETURN(const auto words, Integers(*w_f, w_where, num_words));
  sets.words.resize(words.size());
  for (size_t w = 0; w < words.size(); ++w) {
    if (words[w] < 0 || words[w] > UINT32_MAX)
      return Invalid(w_f->line, w_where,
                     "entry " + std::to_string(w) + " (" + std::to_string(words[w]) +
                         ") is not a 32-bit bitset word (0.." + std::to_string(UINT32_MAX) + ")");
    sets.words[w] = static_cast<uint32_t>(words[w]);
  }
  return sets;
}

// Adds category set k as a categorical split and returns its index. LightGBM
// sends the set's categories left and everything else right (see
// "Categorical splits" at the top): left set = the bitset, right set empty,
// OutsideDirection::kRight on the node.
StatusOr<uint32_t> LightgbmTextReader::AddCategorySet(const CategorySets& sets, int64_t k,
                                                      const std::string& tree, Forest& f) const {
  const int64_t first = sets.boundaries[k], n = sets.boundaries[k + 1] - first;
  std::vector<uint32_t> categories;
  for (int64_t w = 0; w < n; ++w) {
    const uint32_t word = sets.words[first + w];
    if (word == 0) continue;
    if (w >= kMaxCategoryWords) {
      int bit = 0;
      while (!((word >> bit) & 1u)) ++bit;
      return Unsupported(sets.words_line, tree + " cat_threshold",
                         "category set " + std::to_string(k) + " holds category " +
                             std::to_string(w * 32 + bit) + "; categories above " +
                             std::to_string(kMaxCategoryWords * 32 - 1) +
                             " are not supported (renumber the feature's categories as "
                             "consecutive integers from 0, as LightGBM advises)");
    }
    for (uint32_t bit = 0; bit < 32; ++bit)
      if ((word >> bit) & 1u) categories.push_back(static_cast<uint32_t>(w) * 32 + bit);
  }
  return AddCategoricalSplit(f, categories, {}, CategoryRule::kLightgbm);
}

Status LightgbmTextReader::ReadTree(size_t t, const TreeBlock& block, Forest& f,
                                    bool* has_counts) const {
  const std::string tree = "Tree=" + std::to_string(t);
  const Fields& fs = block.fields;
  auto where = [&](const char* key) { return tree + " " + key; };
  auto find = [&](const char* key) -> const Field* {
    auto it = fs.find(key);
    return it == fs.end() ? nullptr : &it->second;
  };

  PACSET_ASSIGN_OR_RETURN(const Field* nl_f, Require(fs, "num_leaves", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const int64_t n, Integer(*nl_f, where("num_leaves"), 1, kMaxLeaves));
  PACSET_ASSIGN_OR_RETURN(const Field* nc_f, Require(fs, "num_cat", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const int64_t num_cat, Integer(*nc_f, where("num_cat"), 0, INT32_MAX));
  if (const Field* lin = find("is_linear")) {
    PACSET_ASSIGN_OR_RETURN(int64_t linear,
                            Integer(*lin, where("is_linear"), INT32_MIN, INT32_MAX));
    if (linear != 0)
      return Unsupported(lin->line, where("is_linear"),
                         "linear trees (linear_tree=true) are not supported; retrain with "
                         "linear_tree=false");
  }
  PACSET_ASSIGN_OR_RETURN(const Field* lv_f, Require(fs, "leaf_value", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const auto leaf_value, Doubles(*lv_f, where("leaf_value"), n));
  for (int64_t j = 0; j < n; ++j)
    if (std::isnan(leaf_value[j]))
      return Invalid(lv_f->line, where("leaf_value"), "leaf " + std::to_string(j) + " is NaN");
  std::vector<int64_t> leaf_count;
  if (const Field* lc = find("leaf_count")) {
    PACSET_ASSIGN_OR_RETURN(leaf_count, Integers(*lc, where("leaf_count"), n));
    for (int64_t j = 0; j < n; ++j)
      if (leaf_count[j] < 0)
        return Invalid(lc->line, where("leaf_count"),
                       "leaf " + std::to_string(j) + " has a negative count");
  } else {
    *has_counts = false;
  }

  const uint32_t group = static_cast<uint32_t>(t % static_cast<size_t>(trees_per_iteration_));
  if (n == 1) {
    // LightGBM ignores the (empty) split arrays of a one-leaf tree.
    const uint64_t g = f.AddTree(group, 1);
    f.leaf_value[g] = leaf_value[0];
    if (!leaf_count.empty()) f.cardinality[g] = static_cast<double>(leaf_count[0]);
    return Status::Ok();
  }

  const int64_t m = n - 1;  // internal nodes
  PACSET_ASSIGN_OR_RETURN(const Field* sf_f, Require(fs, "split_feature", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const auto feature, Integers(*sf_f, where("split_feature"), m));
  PACSET_ASSIGN_OR_RETURN(const Field* th_f, Require(fs, "threshold", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const auto threshold, Doubles(*th_f, where("threshold"), m));
  PACSET_ASSIGN_OR_RETURN(const Field* lc_f, Require(fs, "left_child", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const auto left, Integers(*lc_f, where("left_child"), m));
  PACSET_ASSIGN_OR_RETURN(const Field* rc_f, Require(fs, "right_child", block.line, tree));
  PACSET_ASSIGN_OR_RETURN(const auto right, Integers(*rc_f, where("right_child"), m));
  std::vector<int64_t> decision(m, 0);  // LightGBM's default when the key is absent
  const Field* dt_f = find("decision_type");
  if (dt_f) {
    PACSET_ASSIGN_OR_RETURN(decision, Integers(*dt_f, where("decision_type"), m));
  }
  std::vector<int64_t> internal_count;
  if (const Field* ic = find("internal_count")) {
    PACSET_ASSIGN_OR_RETURN(internal_count, Integers(*ic, where("internal_count"), m));
    for (int64_t i = 0; i < m; ++i)
      if (internal_count[i] < 0)
        return Invalid(ic->line, where("internal_count"),
                       "node " + std::to_string(i) + " has a negative count");
  } else {
    *has_counts = false;
  }
  // Not used for prediction, but LightGBM checks their lengths when loading.
  for (const char* key : {"split_gain", "internal_value", "internal_weight"})
    if (const Field* fld = find(key)) PACSET_RETURN_IF_ERROR(Doubles(*fld, where(key), m).status());
  if (const Field* lw = find("leaf_weight"))
    PACSET_RETURN_IF_ERROR(Doubles(*lw, where("leaf_weight"), n).status());

  // decision_type bits: 0 categorical, 1 default_left, 2-3 missing type.
  for (int64_t i = 0; i < m; ++i) {
    const int64_t d = decision[i];
    const std::string node = "node " + std::to_string(i);
    if (d < 0 || d > 15 || ((d >> 2) & 3) == 3)
      return Invalid(dt_f->line, where("decision_type"),
                     node + " has decision_type " + std::to_string(d) +
                         "; expected bit 0 categorical, bit 1 default_left, bits 2-3 missing type "
                         "0 (None), 1 (Zero) or 2 (NaN)");
    if ((d & 1) && num_cat == 0)
      return Invalid(dt_f->line, where("decision_type"),
                     node + " is a categorical split but num_cat is 0");
  }
  CategorySets sets;
  if (num_cat > 0) {
    PACSET_ASSIGN_OR_RETURN(sets, ReadCategorySets(block, tree, num_cat));
  }

  const int64_t size = 2 * n - 1;
  // Local id of child c of some node (see the numbering at the top).
  auto local = [&](int64_t c) { return c >= 0 ? c : m + ~c; };
  std::vector<int64_t> parent(size, -1);
  for (int64_t i = 0; i < m; ++i) {
    for (int side = 0; side < 2; ++side) {
      const int64_t c = side == 0 ? left[i] : right[i];
      const Field* fld = side == 0 ? lc_f : rc_f;
      const char* key = side == 0 ? "left_child" : "right_child";
      if (c == 0 || c >= m || c < -n)
        return Invalid(fld->line, where(key),
                       "node " + std::to_string(i) + " has child " + std::to_string(c) +
                           "; expected an internal node 1.." + std::to_string(m - 1) +
                           " or a leaf -1..-" + std::to_string(n));
      const int64_t id = local(c);
      if (parent[id] >= 0)
        return Invalid(fld->line, where(key),
                       "node " + std::to_string(i) + " and node " + std::to_string(parent[id]) +
                           " both have child " + std::to_string(c));
      parent[id] = i;
    }
  }
  // Every non-root node now has exactly one parent; a cycle among internal
  // nodes would still leave them unreachable from the root.
  {
    std::vector<uint8_t> seen(size, 0);
    std::vector<int64_t> stack{0};
    int64_t reached = 0;
    while (!stack.empty()) {
      const int64_t id = stack.back();
      stack.pop_back();
      seen[id] = 1;
      ++reached;
      if (id < m) {
        stack.push_back(local(left[id]));
        stack.push_back(local(right[id]));
      }
    }
    if (reached != size) {
      int64_t lost = 0;
      while (seen[lost]) ++lost;
      return Invalid(lc_f->line, where("left_child"),
                     "node " + std::to_string(lost) +
                         " is not reachable from the root (the child links form a cycle)");
    }
  }

  // Category set k becomes one categorical split, shared by the nodes that
  // name it (LightGBM gives each node its own set; sharing keeps a hostile
  // file from multiplying one large set).
  std::vector<int64_t> split_of_set(static_cast<size_t>(num_cat), -1);
  for (int64_t i = 0; i < m; ++i) {
    if (decision[i] & 1) {
      // LightGBM's cat_idx = static_cast<int>(threshold): it writes the index
      // itself, so anything but an index of a set is refused.
      const double k = threshold[i];
      if (!(k >= 0 && k < static_cast<double>(num_cat)) || k != std::floor(k))
        return Invalid(th_f->line, where("threshold"),
                       "node " + std::to_string(i) + " is a categorical split whose threshold " +
                           QuoteExcerpt(SplitValues(th_f->value)[i]) +
                           " is not a category set index 0.." + std::to_string(num_cat - 1) +
                           " (num_cat - 1)");
      int64_t& split = split_of_set[static_cast<size_t>(k)];
      if (split < 0) {
        PACSET_ASSIGN_OR_RETURN(split, AddCategorySet(sets, static_cast<int64_t>(k), tree, f));
      }
    }
    if (feature[i] < 0 || feature[i] > max_feature_idx_)
      return Invalid(sf_f->line, where("split_feature"),
                     "node " + std::to_string(i) + " splits on feature " +
                         std::to_string(feature[i]) + " but max_feature_idx is " +
                         std::to_string(max_feature_idx_));
    if (std::isnan(threshold[i]))
      return Invalid(th_f->line, where("threshold"), "node " + std::to_string(i) + " is NaN");
  }

  const uint64_t base = f.AddTree(group, static_cast<uint32_t>(size));
  for (int64_t i = 0; i < m; ++i) {
    const uint64_t g = base + i;
    const int64_t d = decision[i];
    const int missing_type = static_cast<int>((d >> 2) & 3);
    uint8_t flags = (d & 2) ? kDefaultLeft : 0;
    if (missing_type == 0) flags |= kNanIsZero;
    if (missing_type == 1) flags |= kNanIsZero | kZeroIsMissing;
    f.left_child[g] = static_cast<int32_t>(local(left[i]));
    f.right_child[g] = static_cast<int32_t>(local(right[i]));
    f.split_feature[g] = static_cast<uint32_t>(feature[i]);
    f.threshold[g] = missing_type == 1 ? threshold[i] : ThresholdForUnfilteredInput(threshold[i]);
    f.flags[g] = flags;
    if (d & 1) {
      // NaN goes right too: no kDefaultLeft, whatever bits 1-3 say.
      f.threshold[g] = static_cast<double>(split_of_set[static_cast<size_t>(threshold[i])]);
      f.flags[g] =
          kCategorical |
          static_cast<uint8_t>(static_cast<uint8_t>(OutsideDirection::kRight) << kOutsideShift);
    }
    if (!internal_count.empty()) f.cardinality[g] = static_cast<double>(internal_count[i]);
  }
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t g = base + m + j;
    f.leaf_value[g] = leaf_value[j];
    if (!leaf_count.empty()) f.cardinality[g] = static_cast<double>(leaf_count[j]);
  }
  return Status::Ok();
}

StatusOr<Forest> LightgbmTextReader::Read() {
  const std::vector<Line> lines = SplitLines(text_);
  PACSET_RETURN_IF_ERROR(SplitSections(lines));
  Forest f;
  PACSET_RETURN_IF_ERROR(ReadHeader(f));
  if (trees_.empty()) return Invalid(header_end_line_, "trees", "the model has no trees");
  if (trees_.size() % static_cast<size_t>(trees_per_iteration_) != 0)
    return Invalid(header_end_line_, "trees",
                   "the model has " + std::to_string(trees_.size()) +
                       " trees, not a multiple of num_tree_per_iteration = " +
                       std::to_string(trees_per_iteration_));
  bool has_counts = true;
  for (size_t t = 0; t < trees_.size(); ++t)
    PACSET_RETURN_IF_ERROR(ReadTree(t, trees_[t], f, &has_counts));
  // After the trees, so that a malformed tree is reported as such rather than
  // as the size mismatch its edit also caused.
  PACSET_RETURN_IF_ERROR(CheckTreeSizes());
  f.cardinality_source = has_counts ? CardinalitySource::kTraining : CardinalitySource::kNone;
  PACSET_RETURN_IF_ERROR(f.Validate().WithContext(name_));
  return f;
}

}  // namespace

StatusOr<Forest> ImportLightgbmText(std::string_view text, const std::string& name) {
  return LightgbmTextReader(text, name).Read();
}

}  // namespace pacset
