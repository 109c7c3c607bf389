// The rocksdb: backend as a plugin (store/internal/backend_plugin.h).
#include "store/internal/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const pacset::store_internal::StoreBackend*
pacset_store_backend_v1() {
  return pacset::store_internal::RocksDbStoreBackend();
}
