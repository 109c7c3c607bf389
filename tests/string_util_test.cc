#include "util/string_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace pacset {
namespace {

TEST(StartsWithEndsWith, CompareWholePrefixesAndSuffixes) {
  EXPECT_TRUE(StartsWith("MOVED 3999 127.0.0.1:6381", "MOVED "));
  EXPECT_TRUE(StartsWith("abc", ""));
  EXPECT_TRUE(StartsWith("abc", "abc"));
  EXPECT_FALSE(StartsWith("ab", "abc"));
  EXPECT_FALSE(StartsWith("xabc", "abc"));
  EXPECT_TRUE(EndsWith("model.pkl", ".pkl"));
  EXPECT_TRUE(EndsWith("abc", ""));
  EXPECT_TRUE(EndsWith("7.pac.pending", ".pac.pending"));
  EXPECT_FALSE(EndsWith("7.pac.pending", ".pac"));
  EXPECT_FALSE(EndsWith("ac", "pac"));
}

TEST(ParseUint64, TakesPlainDecimalDigitsThatFit) {
  uint64_t v = 99;
  EXPECT_TRUE(ParseUint64("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ParseUint64("0012", &v));
  EXPECT_EQ(v, 12u);
  EXPECT_TRUE(ParseUint64("18446744073709551615", &v));
  EXPECT_EQ(v, UINT64_MAX);
  v = 99;
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999", "+1", "-1", " 1",
                          "1 ", "1a", "0x10", "000000000000000000001"})
    EXPECT_FALSE(ParseUint64(bad, &v)) << bad;
  EXPECT_EQ(v, 99u);  // untouched on failure
}

TEST(QuoteExcerpt, QuotesAndCutsAfterFortyBytes) {
  EXPECT_EQ(QuoteExcerpt(""), "''");
  EXPECT_EQ(QuoteExcerpt("Tree=x"), "'Tree=x'");
  const std::string forty(40, 'a');
  EXPECT_EQ(QuoteExcerpt(forty), "'" + forty + "'");
  EXPECT_EQ(QuoteExcerpt(forty + "b"), "'" + forty + "...'");
}

TEST(StringUtil, StringAppendFAppendsWhateverTheLength) {
  std::string out = "x=";
  StringAppendF(&out, "%d;", 42);
  EXPECT_EQ(out, "x=42;");
  const std::string long_name(1000, 'n');  // past any fixed line buffer
  StringAppendF(&out, "[%s] %.2f", long_name.c_str(), 0.5);
  EXPECT_EQ(out, "x=42;[" + long_name + "] 0.50");
  StringAppendF(&out, "%s", "");
  EXPECT_EQ(out.size(), 5 + 1 + 1000 + 1 + 5);
}

}  // namespace
}  // namespace pacset
