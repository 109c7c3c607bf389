// libFuzzer target: the store's catalog records (store/internal/codec.h),
// which a shared store (redis:) receives from every host that writes to it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "store/internal/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  pacset::ForestInfo info;
  if (pacset::store_internal::DecodeForestInfo(bytes, "fuzz", &info).ok() &&
      pacset::store_internal::EncodeForestInfo(info).empty())
    __builtin_trap();
  pacset::store_internal::DirCatalog catalog;
  (void)pacset::store_internal::DecodeDirCatalog(bytes, "fuzz", &catalog);
  return 0;
}
