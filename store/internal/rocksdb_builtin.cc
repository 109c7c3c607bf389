// The rocksdb: backend built into a program rather than loaded as a plugin
// (store/internal/backend_plugin.h, "Built in"), under the name the loader
// looks for.
#include "store/internal/backend_plugin.h"

extern "C" const pacset::store_internal::StoreBackend* pacset_builtin_rocksdb_backend() {
  return pacset::store_internal::RocksDbStoreBackend();
}
