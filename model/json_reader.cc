#include "model/json_reader.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

namespace pacset {

namespace {

// "[json.exception.parse_error.101] parse error at line 1, column 3: ..." -> "parse error at ..."
std::string CleanJsonError(const std::exception& e) {
  std::string m = e.what();
  const size_t p = m.find("] ");
  if (m.rfind("[json.exception", 0) == 0 && p != std::string::npos) m = m.substr(p + 2);
  return m;
}

}  // namespace

namespace {

// JSON has no NaN or infinity, but XGBoost writes them as the bare words
// NaN, Infinity and -Infinity (src/common/charconv.cc, PrintSpecialFloat:
// any NaN is "NaN", without its sign), e.g. as the split condition of a
// categorical node, and so does Python's json module (allow_nan=True, the
// default). These three words, and no other spelling, are read as numbers:
// outside strings, each is replaced by a string of the same length (so a
// syntax error's line and column do not move), and the builder below turns
// those strings back into numbers, knowing them by their place among the
// document's strings and keys.
struct NonFiniteWord {
  std::string_view word;
  std::string_view placeholder;  // a JSON string as long as the word
  double value;
};
constexpr NonFiniteWord kNonFiniteWords[] = {
    {"NaN", "\"N\"", std::numeric_limits<double>::quiet_NaN()},
    {"Infinity", "\"Infini\"", std::numeric_limits<double>::infinity()},
    {"-Infinity", "\"-Infini\"", -std::numeric_limits<double>::infinity()},
};

struct NonFiniteWords {
  std::string text;  // the document with the words replaced; empty if it has none
  // (index of the placeholder among the document's strings and keys, value)
  std::vector<std::pair<size_t, double>> values;
};

NonFiniteWords ReplaceNonFiniteWords(std::string_view text) {
  NonFiniteWords out;
  size_t strings = 0;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {  // skip the string; an unterminated one is nlohmann's to report
      ++strings;
      for (++i; i < text.size() && text[i] != '"'; i += text[i] == '\\' ? 2 : 1) {
      }
      ++i;
      continue;
    }
    const NonFiniteWord* found = nullptr;
    for (const auto& w : kNonFiniteWords)
      if (text.substr(i, w.word.size()) == w.word) found = &w;
    if (found == nullptr) {
      ++i;
      continue;
    }
    if (out.text.empty()) out.text.assign(text);
    out.text.replace(i, found->word.size(), found->placeholder);
    out.values.emplace_back(strings++, found->value);
    i += found->word.size();
  }
  return out;
}

// Builds the document like nlohmann's own DOM parser, within two limits
// checked while parsing (a handler returning false stops the reader at once):
// - no container deeper than kMaxJsonDepth: nlohmann's UBJSON reader recurses
//   once per nesting level (40,000 '[' overflow the stack), and copying,
//   dumping or comparing a document recurses too;
// - no more values than the input has bytes: a UBJSON container counted and
//   typed as null, true or false ("[$Z#l" and a count) holds values that take
//   no bytes at all, so 9 bytes made nlohmann build 2^31 nulls (found by
//   fuzzing). Every value of any other document takes at least one byte.
// It also turns the placeholders of ReplaceNonFiniteWords back into numbers
// (one in the place of an object key is an error).
class LimitedDomBuilder {
 public:
  using json = nlohmann::json;
  LimitedDomBuilder(json& root, size_t max_values,
                    const std::vector<std::pair<size_t, double>>* non_finite = nullptr)
      : dom_(root, /*allow_exceptions=*/false), values_left_(max_values), non_finite_(non_finite) {}

  bool null() { return Value() && dom_.null(); }
  bool boolean(bool v) { return Value() && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return Value() && dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Value() && dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return Value() && dom_.number_float(v, s);
  }
  bool string(json::string_t& v) {
    if (NextStringIsNonFinite())
      return Value() && dom_.number_float(non_finite_->at(next_non_finite_++).second, v);
    return Value() && dom_.string(v);
  }
  bool binary(json::binary_t& v) { return Value() && dom_.binary(v); }
  bool start_object(std::size_t n) { return Value() && Enter() && dom_.start_object(n); }
  bool key(json::string_t& k) {
    if (!NextStringIsNonFinite()) return dom_.key(k);
    error_ = "NaN, Infinity or -Infinity where an object key belongs";
    return false;
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Value() && Enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const Exception& e) {
    if (error_.empty()) error_ = CleanJsonError(e);
    return false;
  }

  // Why parsing stopped ("" if it did not).
  const std::string& error() const { return error_; }

 private:
  bool Enter() {
    if (++depth_ <= kMaxJsonDepth) return true;
    error_ = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  }
  bool Value() {
    if (values_left_ > 0) {
      --values_left_;
      return true;
    }
    error_ = "more values than bytes (a counted container of nulls or booleans)";
    return false;
  }

  // Counts a string or key; true if it is the placeholder of a NaN or infinity.
  bool NextStringIsNonFinite() {
    const size_t index = strings_seen_++;
    return non_finite_ != nullptr && next_non_finite_ < non_finite_->size() &&
           (*non_finite_)[next_non_finite_].first == index;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  size_t depth_ = 0;
  size_t values_left_;
  const std::vector<std::pair<size_t, double>>* non_finite_;
  size_t strings_seen_ = 0;
  size_t next_non_finite_ = 0;
  std::string error_;
};

StatusOr<nlohmann::json> ParseLimited(
    std::string_view bytes, nlohmann::json::input_format_t format, const std::string& name,
    const char* what, const std::vector<std::pair<size_t, double>>* non_finite = nullptr) {
  nlohmann::json doc;
  LimitedDomBuilder builder(doc, bytes.size(), non_finite);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &builder, format);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc, or a reader that throws anyway
    return Status::InvalidArgument(name + ": not valid " + what + ": " + CleanJsonError(e));
  }
  if (!ok || !builder.error().empty())
    return Status::InvalidArgument(name + ": not valid " + what + ": " +
                                   (builder.error().empty() ? "parse error" : builder.error()));
  return doc;
}

}  // namespace

StatusOr<nlohmann::json> ParseJsonDocument(std::string_view text, const std::string& name) {
  const NonFiniteWords words = ReplaceNonFiniteWords(text);
  if (words.values.empty())
    return ParseLimited(text, nlohmann::json::input_format_t::json, name, "JSON");
  return ParseLimited(words.text, nlohmann::json::input_format_t::json, name, "JSON",
                      &words.values);
}

StatusOr<nlohmann::json> ParseUbjsonDocument(std::string_view bytes, const std::string& name) {
  return ParseLimited(bytes, nlohmann::json::input_format_t::ubjson, name, "UBJSON");
}

bool ParseNumberString(const std::string& s, double* out) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '[')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == ']')) --e;
  if (b == e) return false;
  const char* first = s.data() + b;
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, s.data() + e, *out);
  return ec == std::errc() && ptr == s.data() + e;
}

Status JsonReader::Error(const std::string& what) const {
  return Status::InvalidArgument(file_ + ": " + (path_.empty() ? "<top level>" : path_) + ": " +
                                 what);
}

StatusOr<JsonReader> JsonReader::Member(const std::string& key) const {
  if (!j_->is_object()) return Error("expected an object");
  auto it = j_->find(key);
  const std::string child = path_.empty() ? key : path_ + "/" + key;
  if (it == j_->end()) return Status::InvalidArgument(file_ + ": missing field " + child);
  return JsonReader(*it, file_, child);
}

StatusOr<JsonReader> JsonReader::Element(size_t i) const {
  if (!j_->is_array()) return Error("expected an array");
  if (i >= j_->size()) return Error("index " + std::to_string(i) + " out of range");
  return JsonReader((*j_)[i], file_, path_ + "/" + std::to_string(i));
}

StatusOr<size_t> JsonReader::ArraySize() const {
  if (!j_->is_array()) return Error("expected an array");
  return j_->size();
}

StatusOr<double> JsonReader::Number() const {
  if (j_->is_number()) return j_->get<double>();
  if (j_->is_boolean()) return j_->get<bool>() ? 1.0 : 0.0;
  if (j_->is_string()) {
    double v;
    const std::string& s = j_->get_ref<const std::string&>();
    if (ParseNumberString(s, &v)) return v;
    return Error("'" + s.substr(0, 40) + "' is not a number");
  }
  if (j_->is_array() && j_->size() == 1) {
    return JsonReader((*j_)[0], file_, path_ + "/0").Number();
  }
  return Error(std::string("expected a number, found ") + j_->type_name());
}

StatusOr<int64_t> JsonReader::Integer() const {
  PACSET_ASSIGN_OR_RETURN(double v, Number());
  if (!(v >= -9.0e15 && v <= 9.0e15) || v != std::floor(v)) return Error("expected an integer");
  return static_cast<int64_t>(v);
}

StatusOr<std::string> JsonReader::String() const {
  if (!j_->is_string()) return Error(std::string("expected a string, found ") + j_->type_name());
  return j_->get<std::string>();
}

StatusOr<std::vector<double>> JsonReader::Numbers() const {
  std::vector<double> out;
  if (j_->is_string()) {
    // XGBoost 3.1 writes vectors as one string: "[5E-1,2E-1]".
    std::string s = j_->get<std::string>();
    size_t b = s.find('['), e = s.rfind(']');
    if (b == std::string::npos || e == std::string::npos) {
      double v;
      if (!ParseNumberString(s, &v)) return Error("'" + s.substr(0, 40) + "' is not a number");
      return std::vector<double>{v};
    }
    std::string body = s.substr(b + 1, e - b - 1);
    size_t pos = 0;
    while (pos <= body.size()) {
      size_t c = body.find(',', pos);
      if (c == std::string::npos) c = body.size();
      double v;
      if (!ParseNumberString(body.substr(pos, c - pos), &v))
        return Error("'" + s.substr(0, 40) + "' is not a list of numbers");
      out.push_back(v);
      pos = c + 1;
    }
    return out;
  }
  if (j_->is_number()) return std::vector<double>{j_->get<double>()};
  return Doubles();
}

namespace {

// Decodes standard base64 (RFC 4648, with padding); false on bad input.
bool DecodeBase64(const std::string& in, std::string* out) {
  static const auto kTable = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(chars[i])] = static_cast<int8_t>(i);
    return t;
  }();
  if (in.size() % 4 != 0) return false;
  out->clear();
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad) return false;
      v[k] = kTable[static_cast<unsigned char>(c)];
      if (v[k] < 0) return false;
    }
    const uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out->push_back(static_cast<char>(n >> 16));
    if (pad < 2) out->push_back(static_cast<char>((n >> 8) & 0xFF));
    if (pad < 1) out->push_back(static_cast<char>(n & 0xFF));
  }
  return true;
}

}  // namespace

// {"dtype": "<f8" | "<i8", "base64": "..."}: a little-endian binary array.
template <typename T>
static Status DecodeBinaryArray(const JsonReader& r, const char* dtype, int64_t expected,
                                std::vector<T>* out) {
  const nlohmann::json& j = r.json();
  if (!j.contains("dtype") || !j["dtype"].is_string() || !j.contains("base64") ||
      !j["base64"].is_string())
    return r.Error("expected an array or {\"dtype\", \"base64\"}");
  if (j["dtype"].get<std::string>() != dtype)
    return r.Error("dtype " + j["dtype"].get<std::string>() + " where " + dtype + " is expected");
  std::string raw;
  if (!DecodeBase64(j["base64"].get_ref<const std::string&>(), &raw))
    return r.Error("invalid base64 data");
  if (raw.size() % 8 != 0) return r.Error("binary array length is not a multiple of 8 bytes");
  const size_t n = raw.size() / 8;
  if (expected >= 0 && n != static_cast<size_t>(expected))
    return r.Error("expected " + std::to_string(expected) + " values, found " + std::to_string(n));
  out->resize(n);
  std::memcpy(out->data(), raw.data(), raw.size());  // little-endian host (see pac_format.h)
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> JsonReader::Integers(int64_t expected) const {
  if (j_->is_object()) {
    std::vector<int64_t> v;
    PACSET_RETURN_IF_ERROR(DecodeBinaryArray(*this, "<i8", expected, &v));
    return v;
  }
  if (!j_->is_array()) return Error(std::string("expected an array, found ") + j_->type_name());
  if (expected >= 0 && j_->size() != static_cast<size_t>(expected))
    return Error("expected " + std::to_string(expected) + " values, found " +
                 std::to_string(j_->size()));
  std::vector<int64_t> out;
  out.reserve(j_->size());
  for (size_t i = 0; i < j_->size(); ++i) {
    const auto& e = (*j_)[i];
    if (e.is_number_integer()) {
      out.push_back(e.get<int64_t>());
    } else if (e.is_boolean()) {
      out.push_back(e.get<bool>() ? 1 : 0);
    } else if (e.is_number_float() && e.get<double>() == std::floor(e.get<double>()) &&
               std::fabs(e.get<double>()) < 9.0e15) {
      out.push_back(static_cast<int64_t>(e.get<double>()));
    } else {
      return Error("element " + std::to_string(i) + " is not an integer");
    }
  }
  return out;
}

StatusOr<std::vector<double>> JsonReader::Doubles(int64_t expected) const {
  if (j_->is_object()) {
    std::vector<double> v;
    PACSET_RETURN_IF_ERROR(DecodeBinaryArray(*this, "<f8", expected, &v));
    return v;
  }
  if (!j_->is_array()) return Error(std::string("expected an array, found ") + j_->type_name());
  if (expected >= 0 && j_->size() != static_cast<size_t>(expected))
    return Error("expected " + std::to_string(expected) + " values, found " +
                 std::to_string(j_->size()));
  std::vector<double> out;
  out.reserve(j_->size());
  for (size_t i = 0; i < j_->size(); ++i) {
    const auto& e = (*j_)[i];
    if (e.is_number()) {
      out.push_back(e.get<double>());
    } else if (e.is_string()) {
      // The scikit-learn exporter writes non-finite values as strings
      // (bare words are read by ParseJsonDocument).
      double v;
      const std::string& s = e.get_ref<const std::string&>();
      if (s == "NaN" || s == "nan") {
        v = std::nan("");
      } else if (s == "Infinity" || s == "inf") {
        v = HUGE_VAL;
      } else if (s == "-Infinity" || s == "-inf") {
        v = -HUGE_VAL;
      } else if (!ParseNumberString(s, &v)) {
        return Error("element " + std::to_string(i) + " is not a number");
      }
      out.push_back(v);
    } else {
      return Error("element " + std::to_string(i) + " is not a number");
    }
  }
  return out;
}

}  // namespace pacset
