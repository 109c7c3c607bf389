#include "testkit/stored_redis_blocks.h"

#include "store/internal/backends.h"
#include "testkit/raw_redis.h"

namespace pacset {
namespace store_test {

uint64_t BlockBytesOn(int port) {
  RawRedis r(port);
  uint64_t bytes = 0;
  std::string cursor = "0";
  do {
    // SCAN replies [cursor, [keys...]]; RawRedis flattens to lines.
    std::string reply = r.Command({"SCAN", cursor, "MATCH", "pacset:blk:*", "COUNT", "1000"});
    size_t nl = reply.find('\n');
    cursor = reply.substr(0, nl);
    while (nl != std::string::npos) {
      const size_t next = reply.find('\n', nl + 1);
      const std::string key =
          reply.substr(nl + 1, next == std::string::npos ? next : next - nl - 1);
      if (!key.empty()) bytes += std::stoull(r.Command({"STRLEN", key}));
      nl = next;
    }
  } while (cursor != "0");
  return bytes;
}

std::string CorruptRedisBlock(int port, const ForestInfo& f, uint64_t index) {
  RawRedis r(port);
  const std::string key = store_internal::RedisBlockKey(f.name, f.generation, index);
  std::string value = r.Command({"GET", key});
  if (value.size() != f.block_size) return "GET " + key + " returned " + value.substr(0, 40);
  value[value.size() / 2] ^= 0x01;
  const std::string reply = r.Command({"SET", key, value});
  return reply == "OK" ? "" : "SET failed: " + reply;
}

std::string DeleteRedisBlock(int port, const ForestInfo& f, uint64_t index) {
  const std::string reply =
      RawRedis(port).Command({"DEL", store_internal::RedisBlockKey(f.name, f.generation, index)});
  return reply == "1" ? "" : "DEL returned " + reply;
}

}  // namespace store_test
}  // namespace pacset
