// Catalog records (store/internal/codec.h): they round-trip, and a record
// from a shared store whose length prefixes lie is refused before anything
// that large is allocated.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "store/internal/codec.h"

namespace pacset {
namespace store_internal {
namespace {

ForestInfo SampleInfo() {
  ForestInfo f;
  f.name = "model";
  f.generation = 7;
  f.size_bytes = 3 * 4096;
  f.block_size = 4096;
  f.block_count = 3;
  f.header_checksum = 0x1234;
  f.created_unix_ns = 42;
  f.source_file = "m.json";
  f.source_format = "xgboost-json";
  f.source_library = "1.7.4";
  return f;
}

TEST(StoreCodec, ForestInfoAndDirCatalogRoundTrip) {
  ForestInfo back;
  ASSERT_TRUE(DecodeForestInfo(EncodeForestInfo(SampleInfo()), "info", &back).ok());
  EXPECT_EQ(back.name, "model");
  EXPECT_EQ(back.generation, 7u);
  EXPECT_EQ(back.source_library, "1.7.4");
  DirCatalog c;
  c.current["model"] = SampleInfo();
  c.last_generation["model"] = 7;
  c.generations["model"][7] = SampleInfo();
  DirCatalog d;
  ASSERT_TRUE(DecodeDirCatalog(EncodeDirCatalog(c), "catalog", &d).ok());
  EXPECT_EQ(d.current.at("model").source_file, "m.json");
  EXPECT_EQ(d.last_generation.at("model"), 7u);
  EXPECT_EQ(d.generations.at("model").at(7).block_count, 3u);
}

// The name's length prefix claims 4 GiB: the old decoder allocated it first.
TEST(StoreCodec, ForgedStringLengthIsRefusedBeforeAllocating) {
  std::string bytes = EncodeForestInfo(SampleInfo());
  // Endianness byte, magic, version, then the name's u64 length.
  const size_t at = 1 + 4 + 4;
  uint64_t len = 0;
  std::memcpy(&len, bytes.data() + at, 8);
  ASSERT_EQ(len, 5u);
  const uint64_t forged = uint64_t{1} << 32;
  std::memcpy(bytes.data() + at, &forged, 8);
  ForestInfo out;
  Status s = DecodeForestInfo(bytes, "forged record", &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("remaining bytes"), std::string::npos) << s.ToString();
}

// Found by fuzzing: a dir-store catalog whose map key claims 4 GiB.
TEST(StoreCodec, ForgedCatalogKeyLengthIsRefused) {
  const unsigned char raw[] = {0x01, 0x50, 0x43, 0x53, 0x43, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00,
                               0x00, 0x01, 0x50, 0x43, 0x53, 0x43, 0x01, 0x00, 0x00, 0x00, 0x01,
                               0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
                               0x00, 0x00, 0x00, 0x00, 0x6d, 0x01, 0x00, 0x0a, 0x00, 0x00, 0x00,
                               0x00, 0x00, 0x6d, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x41,
                               0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  DirCatalog c;
  Status s = DecodeDirCatalog(std::string(reinterpret_cast<const char*>(raw), sizeof raw),
                              "fuzzed catalog", &c);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

}  // namespace
}  // namespace store_internal
}  // namespace pacset
