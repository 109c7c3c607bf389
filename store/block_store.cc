#include "store/block_store.h"

#include <algorithm>

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "layout/block.h"
#include "store/internal/backend_plugin.h"
#include "store/internal/backends.h"
#include "store/internal/codec.h"
#include "util/file_io.h"
#include "util/string_util.h"

namespace pacset {

Status BlockStore::Get(const ForestInfo& forest, uint64_t block, std::string* out) {
  std::vector<std::string> blocks;
  PACSET_RETURN_IF_ERROR(MultiGet(forest, {block}, &blocks));
  *out = std::move(blocks[0]);
  return Status::Ok();
}

Status BlockStore::MultiGet(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                            std::vector<std::string>* out) {
  out->clear();
  const std::string context = ForestContext(forest.name, forest.generation);
  if (!IsValidBlockSize(forest.block_size))
    return Status::InvalidArgument(context + ": invalid block size " +
                                   std::to_string(forest.block_size));
  for (uint64_t b : blocks) {
    if (b >= forest.block_count)
      return Status::InvalidArgument(context + " has " + std::to_string(forest.block_count) +
                                     " blocks; block " + std::to_string(b) + " requested");
  }
  if (blocks.empty()) return Status::Ok();
  Status s = ReadBlocks(forest, blocks, out);
  if (!s.ok()) {
    out->clear();
    // Backends name the block ("block 7: missing from the store"); a block of a
    // generation that was published and is still being read must be there.
    if (s.IsNotFound()) return Status::Corruption(context + " " + s.message());
    return s.WithContext(context);
  }
  if (out->size() != blocks.size()) {
    out->clear();
    return Status::Internal(context + ": backend returned " + std::to_string(out->size()) +
                            " blocks for " + std::to_string(blocks.size()) + " requested");
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string& data = (*out)[i];
    Status v;
    if (data.size() != forest.block_size) {
      v = Status::Corruption(context + " block " + std::to_string(blocks[i]) +
                             ": stored block has " + std::to_string(data.size()) +
                             " bytes, expected " + std::to_string(forest.block_size));
    } else {
      v = VerifyBlock(data.data(), forest.block_size, blocks[i], forest.block_seed, context);
    }
    if (!v.ok()) {
      out->clear();
      return v;
    }
  }
  return Status::Ok();
}

void BlockStore::GetMany(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                         std::vector<std::string>* out, std::vector<Status>* status) {
  if (MultiGet(forest, blocks, out).ok()) {
    status->assign(blocks.size(), Status::Ok());
    return;
  }
  out->assign(blocks.size(), std::string());
  status->clear();
  for (size_t i = 0; i < blocks.size(); ++i) status->push_back(Get(forest, blocks[i], &(*out)[i]));
}

std::string ForestContext(const std::string& name, uint64_t generation) {
  return "forest '" + name + "' generation " + std::to_string(generation);
}

Status ValidateForestName(const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("invalid forest name: " + why +
                                   " (use 1 to 200 of A-Z a-z 0-9 . _ -, not starting with '.')");
  };
  if (name.empty()) return bad("the name is empty");
  if (name.size() > 200) return bad("the name has " + std::to_string(name.size()) + " bytes");
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (ok) continue;
    std::string what;
    if (c < 0x20 || c == 0x7f) {
      what = "a control character";
    } else if (c >= 0x80) {
      what = "a non-ASCII byte";
    } else if (c == ' ') {
      what = "a space";
    } else {
      what = std::string("'") + static_cast<char>(c) + "'";
    }
    return bad("the name contains " + what + " at byte " + std::to_string(i));
  }
  if (name[0] == '.') return bad("'" + name.substr(0, 40) + "' starts with '.'");
  return Status::Ok();
}

std::string DefaultStoreUri() {
  const char* env = std::getenv("PACSET_STORE");
  if (env != nullptr && *env != '\0') return env;
  if (::geteuid() == 0) return "rocksdb:/var/lib/pacsetfs/store";
  std::string home;
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    home = h;
  } else if (struct passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
    home = pw->pw_dir;
  } else {
    home = "/tmp";
  }
  return "rocksdb:" + home + "/.local/share/pacsetfs/store";
}

std::pair<size_t, size_t> StoreUriPasswordSpan(const std::string& uri) {
  const size_t slashes = uri.find("://");
  if (slashes == std::string::npos) return {0, 0};
  const size_t start = slashes + 3;
  const size_t at = uri.rfind('@');
  if (at == std::string::npos || at < start) return {0, 0};
  const size_t colon = uri.find(':', start);
  return {colon != std::string::npos && colon < at ? colon + 1 : start, at};
}

void HideStorePasswords(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const auto [begin, end] = StoreUriPasswordSpan(argv[i]);
    std::fill(argv[i] + begin, argv[i] + end, '*');
  }
}

std::string RedactStoreUri(const std::string& uri) {
  const auto [begin, end] = StoreUriPasswordSpan(uri);
  if (begin == end) return uri;
  return uri.substr(0, begin) + "***" + uri.substr(end);
}

namespace {

const char kUriHelp[] =
    "expected rocksdb:PATH, dir:PATH, redis://[:PASSWORD@]HOST:PORT[/DB] or "
    "redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]";

Status BadUri(const std::string& uri, const std::string& why) {
  return Status::InvalidArgument("bad store URI '" + RedactStoreUri(uri) + "': " + why + " (" +
                                 kUriHelp + ")");
}

// PATH of rocksdb:PATH / dir:PATH, made absolute ("~/" is the home directory,
// since no shell expands it after the scheme).
StatusOr<std::string> ParseStorePath(const std::string& uri, const std::string& rest) {
  std::string path = rest;
  if (path.rfind("///", 0) == 0) path = path.substr(2);  // rocksdb:///abs/path
  if (path.rfind("//", 0) == 0) return BadUri(uri, "a path is expected, not a host");
  if (path.empty()) return BadUri(uri, "the path is empty");
  if (path.find('\0') != std::string::npos) return BadUri(uri, "the path contains a NUL byte");
  if (path == "~" || path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0') return BadUri(uri, "'~' used but $HOME is not set");
    path = std::string(home) + path.substr(1);
  }
  if (!MakeAbsolute(&path)) return Status::FromErrno("resolve relative store path " + path, errno);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool ParsePort(const std::string& s, int* port) {
  uint64_t v = 0;
  if (s.size() > 5 || !ParseUint64(s, &v) || v < 1 || v > 65535) return false;
  *port = static_cast<int>(v);
  return true;
}

StatusOr<std::string> PercentDecode(const std::string& uri, const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= s.size()) return BadUri(uri, "bad %-escape");
    const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return BadUri(uri, "bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// HOST[:PORT] or [IPV6][:PORT] into a->host, a->port.
Status ParseHostPort(const std::string& uri, const std::string& authority,
                     store_internal::RedisAddress* a) {
  std::string port;
  if (!authority.empty() && authority[0] == '[') {  // [::1]:6379
    const size_t close = authority.find(']');
    if (close == std::string::npos) return BadUri(uri, "unclosed '[' in the host");
    a->host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return BadUri(uri, "expected ':PORT' after the host");
      port = after.substr(1);
      if (port.empty()) return BadUri(uri, "the port is empty");
    }
  } else {
    const size_t colon = authority.rfind(':');
    a->host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return BadUri(uri, "the port is empty");
    }
  }
  if (a->host.empty()) return BadUri(uri, "the host is empty");
  if (!port.empty() && !ParsePort(port, &a->port))
    return BadUri(uri, "'" + port + "' is not a port number (1-65535)");
  return Status::Ok();
}

StatusOr<store_internal::RedisAddress> ParseRedisUri(const std::string& uri,
                                                     const StoreOptions& options) {
  store_internal::RedisAddress a;
  std::string rest = uri.substr(uri.find(':') + 1);
  if (rest.rfind("//", 0) != 0) return BadUri(uri, "redis needs '//' after the scheme");
  rest = rest.substr(2);
  if (rest.find_first_of("?#") != std::string::npos)
    return BadUri(uri, "query strings and fragments are not supported");
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  const std::string db = slash == std::string::npos ? "" : rest.substr(slash + 1);
  const size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string::npos)
      return BadUri(uri, "write the password as ':PASSWORD@' (or 'USER:PASSWORD@')");
    PACSET_ASSIGN_OR_RETURN(a.user, PercentDecode(uri, userinfo.substr(0, colon)));
    PACSET_ASSIGN_OR_RETURN(a.password, PercentDecode(uri, userinfo.substr(colon + 1)));
  }
  PACSET_RETURN_IF_ERROR(ParseHostPort(uri, authority, &a));
  if (!db.empty()) {
    uint64_t n = 0;
    bool digits = db.size() <= 6;
    for (char c : db) digits = digits && c >= '0' && c <= '9';
    if (!digits) return BadUri(uri, "'" + db + "' is not a database number");
    n = std::stoull(db);
    a.db = static_cast<int>(n);
  }
  if (a.password.empty()) a.password = options.password;
  if (a.password.empty())
    if (const char* env = std::getenv(kRedisPasswordEnv); env != nullptr) a.password = env;
  return a;
}

// redis-cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]: the seeds, each
// with the credentials. A cluster has only database 0.
StatusOr<std::vector<store_internal::RedisAddress>> ParseRedisClusterUri(
    const std::string& uri, const StoreOptions& options) {
  const size_t scheme_end = uri.find(':');
  const std::string rest = uri.substr(scheme_end + 1);
  const size_t at = rest.rfind('@');
  const size_t hosts_begin = at == std::string::npos ? 2 : at + 1;  // after "//"
  if (rest.find('/', std::min(hosts_begin, rest.size())) != std::string::npos)
    return BadUri(uri, "a Redis Cluster has only database 0: no /DB");
  // The first seed with the credentials parses like redis://; the others are HOST:PORT.
  const size_t comma = rest.find(',', std::min(hosts_begin, rest.size()));
  PACSET_ASSIGN_OR_RETURN(
      store_internal::RedisAddress first,
      ParseRedisUri(uri.substr(0, scheme_end + 1) + rest.substr(0, comma), options));
  std::vector<store_internal::RedisAddress> seeds = {first};
  for (size_t begin = comma; begin != std::string::npos;) {
    const size_t end = rest.find(',', begin + 1);
    store_internal::RedisAddress a = first;
    PACSET_RETURN_IF_ERROR(ParseHostPort(
        uri, rest.substr(begin + 1, end == std::string::npos ? end : end - begin - 1), &a));
    seeds.push_back(a);
    begin = end;
  }
  return seeds;
}

}  // namespace

StatusOr<std::unique_ptr<BlockStore>> OpenBlockStore(const std::string& uri,
                                                     const StoreOptions& options) {
  const size_t colon = uri.find(':');
  if (uri.empty()) return BadUri(uri, "the URI is empty");
  if (colon == std::string::npos || colon == 0)
    return BadUri(uri, "no scheme (a bare path is ambiguous)");
  const std::string scheme = uri.substr(0, colon);
  // rocksdb: and redis: are plugins, loaded when first named
  // (store/internal/backend_plugin.h); the URI is checked first.
  if (scheme == "rocksdb") {
    PACSET_ASSIGN_OR_RETURN(std::string path, ParseStorePath(uri, uri.substr(colon + 1)));
    PACSET_ASSIGN_OR_RETURN(const store_internal::StoreBackend* b,
                            store_internal::LoadStoreBackend("rocksdb"));
    return b->open_rocksdb(path, options);
  }
  if (scheme == "dir") {
    PACSET_ASSIGN_OR_RETURN(std::string path, ParseStorePath(uri, uri.substr(colon + 1)));
    return store_internal::OpenDirStore(path, options);
  }
  if (scheme == "redis") {
    PACSET_ASSIGN_OR_RETURN(store_internal::RedisAddress address, ParseRedisUri(uri, options));
    PACSET_ASSIGN_OR_RETURN(const store_internal::StoreBackend* b,
                            store_internal::LoadStoreBackend("redis"));
    return b->open_redis(address, options);
  }
  // redis+cluster:// is the spelling of the issue that asked for it.
  if (scheme == "redis-cluster" || scheme == "redis+cluster") {
    PACSET_ASSIGN_OR_RETURN(std::vector<store_internal::RedisAddress> seeds,
                            ParseRedisClusterUri(uri, options));
    PACSET_ASSIGN_OR_RETURN(const store_internal::StoreBackend* b,
                            store_internal::LoadStoreBackend("redis"));
    return b->open_redis_cluster(seeds, options);
  }
  if (scheme == "rediss") return BadUri(uri, "TLS (rediss://) is not supported");
  return BadUri(uri, "unknown scheme '" + scheme + "'");
}

}  // namespace pacset
