#include "util/csv.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pacset {
namespace {

TEST(CsvRows, SkipsAHeaderAndReadsMissingValuesAsNaN) {
  auto m = ParseCsvRows("a,b,c\n1,,3\nNaN,-0,inf\n", 3, "rows.csv");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->num_rows, 2u);
  EXPECT_EQ(m->row(0)[0], 1.0);
  EXPECT_TRUE(std::isnan(m->row(0)[1]));
  EXPECT_TRUE(std::isnan(m->row(1)[0]));
  EXPECT_EQ(m->row(1)[1], 0.0);
  EXPECT_TRUE(std::signbit(m->row(1)[1]));
  EXPECT_TRUE(std::isinf(m->row(1)[2]));
}

TEST(CsvRows, ReadsWithoutHeaderAndKeepsFullDoublePrecision) {
  auto m = ParseCsvRows("0.1000000000000000055511151231257827,1e-320\r\n+2,-1.5e300\n", 2, "x");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->num_rows, 2u);
  EXPECT_EQ(m->row(0)[0], 0.1);
  EXPECT_EQ(m->row(0)[1], 1e-320);
  EXPECT_EQ(m->row(1)[0], 2.0);
  EXPECT_EQ(m->row(1)[1], -1.5e300);
}

TEST(CsvRows, OverflowingNumbersBecomeInfinity) {
  auto m = ParseCsvRows("1e400,-1e400\n", 2, "x");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->row(0)[0], HUGE_VAL);
  EXPECT_EQ(m->row(0)[1], -HUGE_VAL);
}

TEST(CsvRows, WrongColumnCountNamesTheLine) {
  auto m = ParseCsvRows("1,2,3\n4,5\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "rows.csv line 2: expected 3 columns, found 2");
}

TEST(CsvRows, NonNumericFieldNamesLineAndColumn) {
  auto m = ParseCsvRows("1,2,3\n4,five,6\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "rows.csv line 2 column 2: 'five' is not a number");
}

TEST(CsvRows, HeaderWithWrongWidthIsAnError) {
  auto m = ParseCsvRows("a,b\n1,2\n", 3, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("header has 2 columns"), std::string::npos);
}

TEST(CsvRows, MixedFirstLineIsNotTakenForAHeader) {
  auto m = ParseCsvRows("1,x\n", 2, "rows.csv");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("line 1 column 2"), std::string::npos);
}

TEST(AppendNumber, PrintsShortestRoundTripForms) {
  std::string s;
  AppendNumber(s, 0.1, false);
  s += ' ';
  AppendNumber(s, static_cast<float>(0.1), true);
  s += ' ';
  AppendNumber(s, 3.0, true);
  EXPECT_EQ(s, "0.1 0.1 3");
  double back = 0;
  std::string t;
  AppendNumber(t, 1.0 / 3.0, false);
  back = std::stod(t);
  EXPECT_EQ(back, 1.0 / 3.0);
}

}  // namespace
}  // namespace pacset
