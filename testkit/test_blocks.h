// Blocks and forests of made-up bytes, sealed like real ones, for tests that
// store and read blocks without packing a model.
#pragma once

#include <cstdint>
#include <string>

#include "store/block_store.h"
#include "util/status.h"

namespace pacset {
namespace store_test {

// Block `index` of a test forest: a payload derived from (seed, index), sealed.
std::string MakeBlock(uint32_t block_size, uint64_t index, uint64_t seed);

// Writes a test forest as a new generation (payload seed = its generation
// number unless `seed` is given) and publishes it.
Status WriteForest(BlockStore& store, const std::string& name, uint32_t block_size, uint64_t count,
                   uint64_t* gen_out = nullptr, int64_t seed = -1);

}  // namespace store_test
}  // namespace pacset
