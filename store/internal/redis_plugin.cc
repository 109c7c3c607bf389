// The redis: and redis-cluster: backends as a plugin (store/internal/backend_plugin.h).
#include "store/internal/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const pacset::store_internal::StoreBackend*
pacset_store_backend_v1() {
  using pacset::store_internal::StoreBackend;
  return pacset::store_internal::PluginStoreBackend([](StoreBackend* b) {
    b->open_redis = &pacset::store_internal::OpenRedisStore;
    b->open_redis_cluster = &pacset::store_internal::OpenRedisClusterStore;
  });
}
