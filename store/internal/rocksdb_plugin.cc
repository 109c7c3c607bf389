// The rocksdb: backend as a plugin (store/internal/backend_plugin.h).
#include "store/internal/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const pacset::store_internal::StoreBackend*
pacset_store_backend_v1() {
  using pacset::store_internal::StoreBackend;
  return pacset::store_internal::PluginStoreBackend([](StoreBackend* b) {
    b->open_rocksdb = [](const std::string& path, const pacset::StoreOptions& options) {
      return pacset::store_internal::OpenRocksDbStore(path, options);  // the default tuning
    };
  });
}
