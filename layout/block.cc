#include "layout/block.h"

#include "util/xxhash.h"

#include <cstring>

#include "util/size.h"

namespace pacset {

uint64_t Checksum64(const void* data, size_t n, uint64_t seed) {
  return XXH3_64bits_withSeed(data, n, seed);
}

void SealBlock(char* block, uint32_t block_size, uint64_t block_index, uint64_t seed) {
  std::memcpy(block + block_size - 16, &block_index, 8);
  const uint64_t sum = Checksum64(block, block_size - 8, seed);
  std::memcpy(block + block_size - 8, &sum, 8);
}

bool BlockTrailerMatches(const char* block, uint32_t block_size, uint64_t expected_index,
                         uint64_t seed) {
  uint64_t index, sum;
  std::memcpy(&index, block + block_size - 16, 8);
  std::memcpy(&sum, block + block_size - 8, 8);
  return index == expected_index && Checksum64(block, block_size - 8, seed) == sum;
}

Status VerifyBlock(const char* block, uint32_t block_size, uint64_t expected_index, uint64_t seed,
                   const std::string& what) {
  uint64_t index, sum;
  std::memcpy(&index, block + block_size - 16, 8);
  std::memcpy(&sum, block + block_size - 8, 8);
  // Read the bytes before building any message: callers may be inside a
  // SIGBUS recovery region (engine/internal/sigbus.h).
  const bool sum_ok = Checksum64(block, block_size - 8, seed) == sum;
  if (sum_ok && index == expected_index) return Status::Ok();
  const std::string where = what + " block " + std::to_string(expected_index);
  if (!sum_ok)
    return Status::Corruption(
        where + ": checksum mismatch" +
        (seed != 0 ? " (damaged, or a block of another file or generation)" : ""));
  return Status::Corruption(where + ": holds block " + std::to_string(index) + " instead");
}

StatusOr<uint32_t> ParseBlockSize(const std::string& text) {
  PACSET_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(text, "block size"));
  if (!IsValidBlockSize(bytes))
    return Status::InvalidArgument("block size " + text +
                                   " must be a power of two from 256 to 1MiB");
  return static_cast<uint32_t>(bytes);
}

}  // namespace pacset
