// Serialised forms of catalog records (cereal portable binary archives), shared
// by the backends. Every record starts with a magic and a version so a newer
// store format is reported as kNotSupported rather than misread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "store/block_store.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

// One ForestInfo: catalog entries, published generations and pending markers
// (a pending marker is the ForestInfo of the generation being written, with
// created_unix_ns the time the import began).
std::string EncodeForestInfo(const ForestInfo& info);
// `what` names the record in errors ("catalog entry 'x'").
Status DecodeForestInfo(const std::string& bytes, const std::string& what, ForestInfo* info);

// The dir: backend's catalog file.
struct DirCatalog {
  std::map<std::string, ForestInfo> current;        // name -> current generation
  std::map<std::string, uint64_t> last_generation;  // name -> last allocated (survives Delete)
  // name -> generation -> info of every published generation still stored
  std::map<std::string, std::map<uint64_t, ForestInfo>> generations;
};
std::string EncodeDirCatalog(const DirCatalog& catalog);
Status DecodeDirCatalog(const std::string& bytes, const std::string& what, DirCatalog* catalog);

int64_t NowUnixNs();

}  // namespace store_internal
}  // namespace pacset
