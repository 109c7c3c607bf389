// Typed, path-aware access to a parsed JSON document for the importers.
// Every accessor returns a Status naming the JSON path ("learner/
// gradient_booster/model/trees/3/split_indices") and what was expected.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace pacset {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string file, std::string path = "")
      : j_(&j), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  bool Has(const std::string& key) const { return j_->is_object() && j_->contains(key); }

  StatusOr<JsonReader> Member(const std::string& key) const;
  StatusOr<JsonReader> Element(size_t i) const;
  StatusOr<size_t> ArraySize() const;

  // Numbers that may also be written as strings ("5E-1", "[5E-1]", "10").
  StatusOr<double> Number() const;
  StatusOr<int64_t> Integer() const;
  StatusOr<std::string> String() const;
  // Array of numbers; "[1E0,2E0]" strings are accepted too.
  StatusOr<std::vector<double>> Numbers() const;
  // Array of integers (booleans read as 0/1), of the expected length when
  // `expected` >= 0.
  StatusOr<std::vector<int64_t>> Integers(int64_t expected = -1) const;
  StatusOr<std::vector<double>> Doubles(int64_t expected = -1) const;

  Status Error(const std::string& what) const;

 private:
  const nlohmann::json* j_;
  std::string file_;
  std::string path_;
};

// The deepest nesting of objects and arrays a document may have. Model files
// nest fewer than 10 levels (XGBoost: 7, the scikit-learn export: 4); the limit keeps
// a hostile file from exhausting the stack (nlohmann's UBJSON reader, and
// copying or printing any document, recurse once per level).
inline constexpr size_t kMaxJsonDepth = 128;

// Parses JSON (or UBJSON) text; a syntax error names the file, line and
// column. Refused: a document nested deeper than kMaxJsonDepth, and one with
// more values than bytes (UBJSON can count values that take no bytes).
// JSON text may also hold the bare words NaN, Infinity and -Infinity where a
// value belongs, as XGBoost and Python's json module write non-finite
// numbers; they are read as numbers. No other spelling (nan, inf, -NaN) is.
StatusOr<nlohmann::json> ParseJsonDocument(std::string_view text, const std::string& name);
StatusOr<nlohmann::json> ParseUbjsonDocument(std::string_view bytes, const std::string& name);

// Parses a decimal number written as a JSON string ("5E-1"); false when it is not one.
bool ParseNumberString(const std::string& s, double* out);

}  // namespace pacset
