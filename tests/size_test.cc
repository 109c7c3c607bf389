#include "util/size.h"

#include <gtest/gtest.h>

#include "layout/block.h"

namespace pacset {
namespace {

uint64_t Bytes(const std::string& text) {
  auto v = ParseByteSize(text, "size");
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : 0;
}

TEST(ParseByteSize, ReadsPlainNumbersAndBinaryUnitsInAnyCase) {
  EXPECT_EQ(Bytes("0"), 0u);
  EXPECT_EQ(Bytes("4096"), 4096u);
  EXPECT_EQ(Bytes("4K"), 4096u);
  EXPECT_EQ(Bytes("4k"), 4096u);
  EXPECT_EQ(Bytes("64KiB"), 65536u);
  EXPECT_EQ(Bytes("64kib"), 65536u);
  EXPECT_EQ(Bytes("1M"), 1u << 20);
  EXPECT_EQ(Bytes("3MiB"), 3u << 20);
  EXPECT_EQ(Bytes("1G"), 1ull << 30);
  EXPECT_EQ(Bytes("16GiB"), 16ull << 30);
  EXPECT_EQ(Bytes("18446744073709551615"), UINT64_MAX);
}

TEST(ParseByteSize, RejectsOtherSpellingsNamingWhatAndText) {
  for (const char* bad : {"", "K", "KiB", "-4K", "+4K", " 4K", "4K ", "4 K", "1.5M", "4KB", "4MB",
                          "4T", "4Ki", "0x10", "4KiBx", "12X"}) {
    auto v = ParseByteSize(bad, "option cache_size");
    ASSERT_FALSE(v.ok()) << "'" << bad << "' was accepted as " << *v;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(v.status().message(), std::string("option cache_size '") + bad +
                                        "' is not a size like 4096, 4K, 64KiB or 1GiB");
  }
}

TEST(ParseByteSize, RejectsValuesThatDoNotFitIn64Bits) {
  EXPECT_FALSE(ParseByteSize("18446744073709551616", "size").ok());
  EXPECT_FALSE(ParseByteSize("99999999999999999999", "size").ok());
  EXPECT_EQ(Bytes("17179869183G"), 17179869183ull << 30);
  EXPECT_FALSE(ParseByteSize("17179869184G", "size").ok());  // 2^64
  EXPECT_FALSE(ParseByteSize("18014398509481984K", "size").ok());
}

TEST(FormatByteSize, UsesTheLargestBinaryUnitAtLeastOne) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1.0 KiB");
  EXPECT_EQ(FormatByteSize(3584), "3.5 KiB");
  EXPECT_EQ(FormatByteSize(5u << 19), "2.50 MiB");
  EXPECT_EQ(FormatByteSize(3ull << 30), "3.00 GiB");
}

TEST(ParseBlockSize, AcceptsPowersOfTwoFrom256BTo1MiBOnly) {
  EXPECT_EQ(ParseBlockSize("256").value(), 256u);
  EXPECT_EQ(ParseBlockSize("2K").value(), 2048u);
  EXPECT_EQ(ParseBlockSize("4KiB").value(), 4096u);
  EXPECT_EQ(ParseBlockSize("65536").value(), 65536u);
  EXPECT_EQ(ParseBlockSize("1m").value(), 1u << 20);
  for (const char* bad : {"128", "2M", "1G", "6K", "4095", "0"}) {
    auto v = ParseBlockSize(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message(),
              std::string("block size ") + bad + " must be a power of two from 256 to 1MiB");
  }
  EXPECT_EQ(ParseBlockSize("4KB").status().message(),
            "block size '4KB' is not a size like 4096, 4K, 64KiB or 1GiB");
}

}  // namespace
}  // namespace pacset
