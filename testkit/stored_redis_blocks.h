// What a redis: or redis-cluster: store really stored on one redis-server:
// its block keys counted, damaged or deleted behind the store's back.
#pragma once

#include <cstdint>
#include <string>

#include "store/block_store.h"

namespace pacset {
namespace store_test {

// Bytes of the block keys (pacset:blk:*) the redis-server on `port` holds.
uint64_t BlockBytesOn(int port);

// Flips a bit of block `index` of `f` on the redis-server at `port` (which
// must hold it); empty on success, else what failed.
std::string CorruptRedisBlock(int port, const ForestInfo& f, uint64_t index);

// Deletes block `index` of `f` from the redis-server at `port`.
std::string DeleteRedisBlock(int port, const ForestInfo& f, uint64_t index);

}  // namespace store_test
}  // namespace pacset
