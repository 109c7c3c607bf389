#include "store/internal/codec.h"

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>

#include <chrono>
#include <sstream>

#include "util/bounded_cereal.h"

namespace pacset {

// Strings bounded on loading (util/bounded_cereal.h): records come from
// shared stores that other hosts write. Record version 2 added block_seed
// (a version-1 record is a forest of .pac version 1 or 2: seed 0).
template <class Archive>
void save(Archive& ar, const ForestInfo& f) {
  ar(f.name, f.generation, f.size_bytes, f.block_size, f.block_count, f.header_checksum,
     f.created_unix_ns, f.source_file, f.source_format, f.source_library, f.block_seed);
}

template <class Archive>
void load(Archive& ar, ForestInfo& f) {
  ar(Bound(f.name), f.generation, f.size_bytes, f.block_size, f.block_count, f.header_checksum,
     f.created_unix_ns, Bound(f.source_file), Bound(f.source_format), Bound(f.source_library));
  const auto* bounded = dynamic_cast<const BoundedInputArchive*>(&ar);
  if (bounded == nullptr) throw cereal::Exception("a ForestInfo needs a BoundedInputArchive");
  f.block_seed = 0;
  if (bounded->record_version >= 2) ar(f.block_seed);
}

namespace store_internal {
namespace {

constexpr uint32_t kForestInfoMagic = 0x49534350;  // "PCSI"
constexpr uint32_t kDirCatalogMagic = 0x43534350;  // "PCSC"
constexpr uint32_t kVersion = 2;                   // written
constexpr uint32_t kOldestVersion = 1;             // read

template <class T>
std::string Encode(uint32_t magic, T& value) {
  std::ostringstream out;
  {
    cereal::PortableBinaryOutputArchive ar(out);
    uint32_t version = kVersion;
    ar(magic, version, value);
  }
  return out.str();
}

template <class T>
Status Decode(const std::string& bytes, uint32_t magic, const std::string& what, T* value) {
  std::istringstream in(bytes);
  try {
    BoundedInputArchive ar(in, bytes.size());
    uint32_t m = 0, version = 0;
    ar(m, version);
    if (m != magic) return Status::Corruption(what + ": not a pacset store record");
    if (version < kOldestVersion || version > kVersion)
      return Status::NotSupported(what + ": record version " + std::to_string(version) +
                                  " (this pacset reads versions " + std::to_string(kOldestVersion) +
                                  " to " + std::to_string(kVersion) + ")");
    ar.record_version = version;
    ar(*value);
  } catch (const std::exception& e) {
    return Status::Corruption(what + ": truncated or corrupt record (" + e.what() + ")");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeForestInfo(const ForestInfo& info) {
  ForestInfo copy = info;  // cereal's serialize() takes a mutable reference
  return Encode(kForestInfoMagic, copy);
}

Status DecodeForestInfo(const std::string& bytes, const std::string& what, ForestInfo* info) {
  return Decode(bytes, kForestInfoMagic, what, info);
}

template <class Archive>
void serialize(Archive& ar, DirCatalog& c) {
  ar(BoundMap(c.current), BoundMap(c.last_generation), BoundMap(c.generations));
}

std::string EncodeDirCatalog(const DirCatalog& catalog) {
  DirCatalog copy = catalog;
  return Encode(kDirCatalogMagic, copy);
}

Status DecodeDirCatalog(const std::string& bytes, const std::string& what, DirCatalog* catalog) {
  return Decode(bytes, kDirCatalogMagic, what, catalog);
}

int64_t NowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace store_internal
}  // namespace pacset
