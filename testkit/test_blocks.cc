#include "testkit/test_blocks.h"

#include <cstring>
#include <memory>

#include "layout/block.h"

namespace pacset {
namespace store_test {

std::string MakeBlock(uint32_t block_size, uint64_t index, uint64_t seed) {
  std::string b(block_size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + index * 0xD1B54A32D192ED03ull + 1;
  for (uint32_t i = 0; i + 8 <= block_size - kBlockTrailerSize; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(&b[i], &x, 8);
  }
  SealBlock(b.data(), block_size, index, /*seed=*/0);
  return b;
}

Status WriteForest(BlockStore& store, const std::string& name, uint32_t block_size, uint64_t count,
                   uint64_t* gen_out, int64_t seed) {
  PACSET_ASSIGN_OR_RETURN(std::unique_ptr<GenerationWriter> w,
                          store.BeginGeneration(name, block_size, count));
  const uint64_t s = seed >= 0 ? static_cast<uint64_t>(seed) : w->generation();
  for (uint64_t i = 0; i < count; ++i)
    PACSET_RETURN_IF_ERROR(w->Put(i, MakeBlock(block_size, i, s).data()));
  ForestInfo info;
  info.source_file = name + ".pac";
  info.source_format = "pac";
  PACSET_RETURN_IF_ERROR(w->Publish(info));
  if (gen_out != nullptr) *gen_out = w->generation();
  return Status::Ok();
}

}  // namespace store_test
}  // namespace pacset
