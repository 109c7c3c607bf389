#include "testkit/raw_redis.h"

#include <hiredis/hiredis.h>

namespace pacset {
namespace store_test {
namespace {

std::string Text(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string s;
      for (size_t i = 0; i < r->elements; ++i) s += (i ? "\n" : "") + Text(r->element[i]);
      return s;
    }
  }
  return "";
}

}  // namespace

RawRedis::RawRedis(int port, const std::string& password, int db) {
  timeval tv{2, 0};
  c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c_ != nullptr && c_->err == 0) {
    redisSetTimeout(c_, tv);
    if (!password.empty()) Command({"AUTH", password});
    if (db != 0) Command({"SELECT", std::to_string(db)});
  }
}

RawRedis::~RawRedis() {
  if (c_ != nullptr) redisFree(c_);
}

bool RawRedis::ok() const { return c_ != nullptr && c_->err == 0; }

std::string RawRedis::Command(const std::vector<std::string>& args) {
  if (!ok()) return "(no connection)";
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) return "(io error)";
  std::string out = Text(r);
  freeReplyObject(r);
  return out;
}

std::string ReplyLine(const std::string& reply, const std::string& prefix) {
  size_t begin = 0;
  while (begin < reply.size()) {
    size_t end = reply.find_first_of("\r\n", begin);
    if (end == std::string::npos) end = reply.size();
    const std::string line = reply.substr(begin, end - begin);
    if (line.rfind(prefix, 0) == 0) return line;
    begin = end + 1;
  }
  return "";
}

}  // namespace store_test
}  // namespace pacset
