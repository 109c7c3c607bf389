// The rocksdb: and redis: backends as plugins: shared modules that
// OpenBlockStore loads (dlopen) the first time a URI names them, so a program
// that never opens such a store -- `pacset predict` on a local or mounted
// file, a daemon over a dir: store -- loads neither RocksDB nor hiredis and
// runs none of their static initialisers.
//
// Where: PACSET_PLUGIN_RELDIR relative to the running program's directory
// (bin/ -> lib/<multiarch>/pacset/ once installed; the build tree has the
// same shape: tools/pacset finds lib/<multiarch>/pacset/ of the build
// directory), else the installed directory PACSET_PLUGIN_DIR. Nothing from
// the environment: a daemon run by root must not load code named by a user.
//
// Contract: a plugin exports one C symbol, kStoreBackendSymbol, returning its
// StoreBackend. C++ types (StoreOptions, BlockStore, Status) cross the
// boundary, so a plugin must come from the same build as the program: the
// loader refuses one whose `abi` differs (the version and the sizes of the
// types crossing). A plugin links its own copy of the store's common code with
// every symbol hidden but the entry point; the BlockStore it returns is used
// and destroyed through its vtable. Loaded plugins stay loaded.
//
// Built in: a program may link the rocksdb: backend and RocksDB itself
// instead (pacsetfs does: CMakeLists.txt, PACSET_BUILTIN_ROCKSDB);
// LoadStoreBackend("rocksdb") then returns it and looks for no plugin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/block_store.h"
#include "store/internal/backends.h"
#include "util/status.h"

namespace pacset {
namespace store_internal {

inline constexpr char kStoreBackendSymbol[] = "pacset_store_backend_v1";

// What must be equal between a program and its plugins.
inline std::string StoreBackendAbi() {
  return std::string(PACSET_VERSION) + "/" + std::to_string(sizeof(StoreOptions)) + "/" +
         std::to_string(sizeof(Status)) + "/" + std::to_string(sizeof(RedisAddress)) + "/" +
         std::to_string(sizeof(std::string));
}

struct StoreBackend {
  const char* abi = nullptr;  // StoreBackendAbi() of the plugin's build
  // A backend's constructors; null where the plugin has none.
  StatusOr<std::unique_ptr<BlockStore>> (*open_rocksdb)(const std::string& path,
                                                        const StoreOptions& options) = nullptr;
  StatusOr<std::unique_ptr<BlockStore>> (*open_redis)(const RedisAddress& address,
                                                      const StoreOptions& options) = nullptr;
  StatusOr<std::unique_ptr<BlockStore>> (*open_redis_cluster)(
      const std::vector<RedisAddress>& seeds, const StoreOptions& options) = nullptr;
};

// What a plugin's entry point returns: this build's abi and the constructors
// `fill` sets on it, made once.
template <class Fill>
const StoreBackend* PluginStoreBackend(Fill fill) {
  static const std::string abi = StoreBackendAbi();
  static const StoreBackend backend = [&fill] {
    StoreBackend b;
    b.abi = abi.c_str();
    fill(&b);
    return b;
  }();
  return &backend;
}

// The rocksdb: backend's table, for its plugin and for a program that has it
// built in (defined in store/rocksdb_store.cc).
const StoreBackend* RocksDbStoreBackend();

// The plugin of `backend` ("rocksdb", "redis"), or the program's built-in
// backend, loaded on the first call
// (thread-safe), with the constructors of that backend; kNotSupported naming
// the files tried when it is missing, does not load, comes from another build
// or lacks them.
StatusOr<const StoreBackend*> LoadStoreBackend(const std::string& backend);

}  // namespace store_internal
}  // namespace pacset

// Defined by each plugin (store/internal/*_plugin.cc).
extern "C" const pacset::store_internal::StoreBackend* pacset_store_backend_v1();
