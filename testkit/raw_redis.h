// A raw connection to a redis-server, for tests that look behind a store
// (damage or count the bytes it stored) or at a server itself (roles, cluster
// state).
#pragma once

#include <string>
#include <vector>

struct redisContext;

namespace pacset {
namespace store_test {

// A raw hiredis connection to 127.0.0.1:`port`, with AUTH and SELECT done.
class RawRedis {
 public:
  explicit RawRedis(int port, const std::string& password = "", int db = 0);
  ~RawRedis();
  RawRedis(const RawRedis&) = delete;
  RawRedis& operator=(const RawRedis&) = delete;
  bool ok() const;
  // The reply as text: strings and status as is, integers in decimal, nil as
  // "(nil)", errors as "ERR...", arrays as their elements joined by '\n'.
  std::string Command(const std::vector<std::string>& args);

 private:
  redisContext* c_ = nullptr;
};

// The lines of a RawRedis reply that start with `prefix`, e.g. the
// "cluster_state:" line of CLUSTER INFO ("" if none).
std::string ReplyLine(const std::string& reply, const std::string& prefix);

}  // namespace store_test
}  // namespace pacset
