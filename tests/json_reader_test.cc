#include "model/json_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/import.h"

namespace pacset {
namespace {

TEST(JsonReader, ReadsBase64LittleEndianArrays) {
  // [1.5, -inf] as <f8 and [7, -1] as <i8.
  auto j = nlohmann::json::parse(R"({"d": {"dtype": "<f8", "base64": "AAAAAAAA+D8AAAAAAADw/w=="},
                                     "i": {"dtype": "<i8", "base64": "BwAAAAAAAAD//////////w=="}})");
  JsonReader r(j, "m.json");
  auto d = r.Member("d")->Doubles(2);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)[0], 1.5);
  EXPECT_EQ((*d)[1], -HUGE_VAL);
  auto i = r.Member("i")->Integers(2);
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(*i, (std::vector<int64_t>{7, -1}));
}

TEST(JsonReader, RejectsBadBase64WrongDtypeAndWrongLength) {
  auto j = nlohmann::json::parse(R"({"bad": {"dtype": "<f8", "base64": "AAAA*AAA"},
                                     "dtype": {"dtype": "<f4", "base64": "AAAAAAAA+D8="},
                                     "short": {"dtype": "<f8", "base64": "AAAAAAAA+D8="}})");
  JsonReader r(j, "m.json");
  EXPECT_NE(r.Member("bad")->Doubles().status().message().find("m.json: bad: invalid base64"),
            std::string::npos);
  EXPECT_NE(r.Member("dtype")->Doubles().status().message().find("dtype <f4"), std::string::npos);
  EXPECT_NE(r.Member("short")->Doubles(2).status().message().find("expected 2 values, found 1"),
            std::string::npos);
}

TEST(JsonReader, NumbersAcceptXgboostArrayStrings) {
  auto j = nlohmann::json::parse(R"({"a": "[5E-1,2.5E-1]", "b": "5E-1", "c": 0.5})");
  JsonReader r(j, "m.json");
  EXPECT_EQ(*r.Member("a")->Numbers(), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(*r.Member("b")->Numbers(), (std::vector<double>{0.5}));
  EXPECT_EQ(*r.Member("c")->Numbers(), (std::vector<double>{0.5}));
}

// Issue 13 item 7: nlohmann's UBJSON reader recurses once per nesting level;
// this 40 KB document (found by fuzzing) overflowed the stack of `pacset pack`.
TEST(JsonDepthLimit, FortyThousandNestedUbjsonArraysAreRefusedNotACrash) {
  const std::string doc =
      "{i\x01"
      "a" +
      std::string(40000, '[');
  ASSERT_EQ(doc.size(), 40004u);
  auto j = ParseUbjsonDocument(doc, "deep.ubj");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("deep.ubj: not valid UBJSON: nested deeper than 128 levels"),
            std::string::npos)
      << j.status().ToString();
  // The importer and the file-level entry point (auto-detected as UBJSON) say the same.
  auto f = ImportXgboostUbjson(doc, "deep.ubj");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("nested deeper than 128 levels"), std::string::npos);
}

// `depth` nested arrays around one number, as JSON text and as UBJSON.
std::string NestedJson(size_t depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}
std::string NestedUbjson(size_t depth) {
  return std::string(depth, '[') + "i\x01" + std::string(depth, ']');
}

TEST(JsonDepthLimit, UbjsonAtTheLimitParsesAndOneLevelDeeperIsRefused) {
  auto ok = ParseUbjsonDocument(NestedUbjson(kMaxJsonDepth), "limit.ubj");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const nlohmann::json* v = &*ok;
  for (size_t d = 0; d < kMaxJsonDepth; ++d) {
    ASSERT_TRUE(v->is_array() && v->size() == 1) << d;
    v = &(*v)[0];
  }
  EXPECT_EQ(*v, 1);
  auto deep = ParseUbjsonDocument(NestedUbjson(kMaxJsonDepth + 1), "over.ubj");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than"), std::string::npos);
}

TEST(JsonDepthLimit, JsonTextAtTheLimitParsesAndDeeperIsRefused) {
  EXPECT_TRUE(ParseJsonDocument(NestedJson(kMaxJsonDepth), "limit.json").ok());
  for (size_t depth : {kMaxJsonDepth + 1, size_t{40000}}) {
    auto deep = ParseJsonDocument(NestedJson(depth), "over.json");
    ASSERT_FALSE(deep.ok()) << depth;
    EXPECT_NE(deep.status().message().find("over.json: not valid JSON: nested deeper than"),
              std::string::npos)
        << deep.status().ToString();
  }
  // Objects count as levels too.
  std::string objects;
  for (size_t d = 0; d <= kMaxJsonDepth; ++d) objects += "{\"a\":";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_FALSE(ParseJsonDocument(objects, "objects.json").ok());
}

// Found by fuzzing: a UBJSON array counted and typed as null (or true, false)
// holds values that take no bytes; 9 bytes made nlohmann build 2^30 nulls.
TEST(JsonValueLimit, CountedUbjsonNullsBeyondTheInputSizeAreRefused) {
  const std::string nulls = std::string("[$Z#l") + std::string("\x40\x00\x00\x00", 4);
  auto j = ParseUbjsonDocument(nulls, "nulls.ubj");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("more values than bytes"), std::string::npos)
      << j.status().ToString();
  // As many booleans as there are bytes still parse: the limit is exact.
  const std::string fits = std::string("[$T#i") + '\x05';  // 6 bytes: the array and 5 values
  auto ok = ParseUbjsonDocument(fits, "fits.ubj");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 5u);
  EXPECT_FALSE(ParseUbjsonDocument(std::string("[$T#i") + '\x06', "over.ubj").ok());
}

TEST(JsonDepthLimit, SyntaxErrorsStillNameLineAndColumn) {
  auto bad = ParseJsonDocument("{\n  \"a\": [1, 2,,]\n}", "bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.json: not valid JSON: parse error at line 2, column"),
            std::string::npos)
      << bad.status().ToString();
}

TEST(JsonNonFiniteWords, BareNanAndInfinitiesAreReadAsNumbers) {
  auto j = ParseJsonDocument(
      R"({"a": [NaN, Infinity, -Infinity, 1.5, "NaN", "x Infinity"], "NaN": -Infinity})", "m.json");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  const auto& a = (*j)["a"];
  EXPECT_TRUE(a[0].is_number_float() && std::isnan(a[0].get<double>()));
  EXPECT_EQ(a[1].get<double>(), HUGE_VAL);
  EXPECT_EQ(a[2].get<double>(), -HUGE_VAL);
  EXPECT_EQ(a[3].get<double>(), 1.5);
  // Words inside strings, and keys spelled like them, stay strings.
  EXPECT_EQ(a[4].get<std::string>(), "NaN");
  EXPECT_EQ(a[5].get<std::string>(), "x Infinity");
  EXPECT_EQ((*j)["NaN"].get<double>(), -HUGE_VAL);
}

TEST(JsonNonFiniteWords, OtherSpellingsAndKeyPositionsAreSyntaxErrors) {
  for (const char* text :
       {"[nan]", "[-NaN]", "[inf]", "[+Infinity]", "[NaNa]", "[Infinit]", "{NaN: 1}", "[1, NaN"}) {
    auto j = ParseJsonDocument(text, "m.json");
    EXPECT_FALSE(j.ok()) << text;
  }
}

TEST(JsonNonFiniteWords, SyntaxErrorAfterAWordStillNamesItsColumn) {
  // The word is replaced by a placeholder of its length: columns do not move.
  auto j = ParseJsonDocument("[-Infinity, NaN,\n 1,, 2]", "m.json");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("line 2, column 4"), std::string::npos)
      << j.status().message();
}

}  // namespace
}  // namespace pacset
