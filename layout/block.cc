#include "layout/block.h"

#include <xxhash.h>

#include <cstring>

namespace pacset {

uint64_t Checksum64(const void* data, size_t n) { return XXH3_64bits(data, n); }

void SealBlock(char* block, uint32_t block_size, uint64_t block_index) {
  std::memcpy(block + block_size - 16, &block_index, 8);
  const uint64_t sum = Checksum64(block, block_size - 8);
  std::memcpy(block + block_size - 8, &sum, 8);
}

Status VerifyBlock(const char* block, uint32_t block_size, uint64_t expected_index,
                   const std::string& what) {
  uint64_t index, sum;
  std::memcpy(&index, block + block_size - 16, 8);
  std::memcpy(&sum, block + block_size - 8, 8);
  const std::string where = what + " block " + std::to_string(expected_index);
  if (Checksum64(block, block_size - 8) != sum)
    return Status::Corruption(where + ": checksum mismatch");
  if (index != expected_index)
    return Status::Corruption(where + ": holds block " + std::to_string(index) + " instead");
  return Status::Ok();
}

}  // namespace pacset
