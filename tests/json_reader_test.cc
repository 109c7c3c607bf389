#include "model/json_reader.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace pacset
