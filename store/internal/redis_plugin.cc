// The redis: and redis-cluster: backends as a plugin (store/internal/backend_plugin.h).
#include "store/internal/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const pacset::store_internal::StoreBackend*
pacset_store_backend_v1() {
  static const std::string abi = pacset::store_internal::StoreBackendAbi();
  static const pacset::store_internal::StoreBackend backend = [] {
    pacset::store_internal::StoreBackend b;
    b.abi = abi.c_str();
    b.open_redis = &pacset::store_internal::OpenRedisStore;
    b.open_redis_cluster = &pacset::store_internal::OpenRedisClusterStore;
    return b;
  }();
  return &backend;
}
