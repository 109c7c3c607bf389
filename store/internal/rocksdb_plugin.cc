// The rocksdb: backend as a plugin (store/internal/backend_plugin.h).
#include "store/internal/backend_plugin.h"

namespace {

pacset::StatusOr<std::unique_ptr<pacset::BlockStore>> Open(const std::string& path,
                                                           const pacset::StoreOptions& options) {
  return pacset::store_internal::OpenRocksDbStore(path, options);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const pacset::store_internal::StoreBackend*
pacset_store_backend_v1() {
  static const std::string abi = pacset::store_internal::StoreBackendAbi();
  static const pacset::store_internal::StoreBackend backend = [] {
    pacset::store_internal::StoreBackend b;
    b.abi = abi.c_str();
    b.open_rocksdb = &Open;
    return b;
  }();
  return &backend;
}
