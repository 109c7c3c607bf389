// Self-verifying blocks: the unit of I/O in a .pac file, in every store and
// in the filesystem's cache.
//
// A .pac file is a sequence of blocks of `block_size` bytes (a power of two,
// 256 B .. 1 MiB; blocks below the page size cannot be served by a pacsetfs
// mount, only read straight from a store). Every block ends with a 16-byte
// trailer:
//
//   offset block_size-16: u64 block_index  (little-endian; the block's position in the file)
//   offset block_size-8:  u64 checksum     (XXH3-64 of bytes [0, block_size-8), seeded
//                                           with the file's block seed)
//
// so a block can be verified on its own wherever it travels, and a block
// served for the wrong position is caught as well as flipped bits. The block
// seed is the file's identity (PacHeader::block_seed(): its file_id from
// format version 3, 0 before), so a block of another file or generation at
// the same index is caught too. The payload is the first block_size-16 bytes
// (docs: layout/FORMAT.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace pacset {

inline constexpr uint32_t kBlockTrailerSize = 16;
inline constexpr uint32_t kMinBlockSize = 256;
inline constexpr uint32_t kMaxBlockSize = 1u << 20;

inline bool IsValidBlockSize(uint64_t bs) {
  return bs >= kMinBlockSize && bs <= kMaxBlockSize && (bs & (bs - 1)) == 0;
}

// A block size as people write it ("4096", "4K", "64KiB"; util/size.h), which
// must be valid; errors name the text.
StatusOr<uint32_t> ParseBlockSize(const std::string& text);

// XXH3-64 (seed 0 unless given).
uint64_t Checksum64(const void* data, size_t n, uint64_t seed = 0);

// Writes the trailer of `block` (block_size bytes; payload already filled),
// its checksum seeded with `seed` (the file's block seed).
void SealBlock(char* block, uint32_t block_size, uint64_t block_index, uint64_t seed);

// True when the trailer matches (checksum under `seed`, and index). Allocates
// nothing and builds no message, so it may run where a SIGBUS can jump out
// (engine/internal/sigbus.h).
bool BlockTrailerMatches(const char* block, uint32_t block_size, uint64_t expected_index,
                         uint64_t seed);

// OK when the trailer matches; otherwise kCorruption naming `what` (e.g.
// "forest 'x' generation 3") and the block, never the bytes.
Status VerifyBlock(const char* block, uint32_t block_size, uint64_t expected_index, uint64_t seed,
                   const std::string& what);

}  // namespace pacset
