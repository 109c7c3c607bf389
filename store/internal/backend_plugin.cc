#include "store/internal/backend_plugin.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "util/file_io.h"

// Defined where a program has the rocksdb: backend built in
// (store/internal/rocksdb_builtin.cc); null elsewhere.
extern "C" const pacset::store_internal::StoreBackend* pacset_builtin_rocksdb_backend()
    __attribute__((weak));

namespace pacset {
namespace store_internal {
namespace {

// The directories a plugin is looked for in, in order (see the header).
std::vector<std::string> PluginDirs() {
  std::vector<std::string> dirs;
  const std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) dirs.push_back(exe_dir + "/" + PACSET_PLUGIN_RELDIR);
  dirs.push_back(PACSET_PLUGIN_DIR);
  return dirs;
}

StatusOr<const StoreBackend*> Load(const std::string& backend) {
  if (backend == "rocksdb" && pacset_builtin_rocksdb_backend != nullptr)
    return pacset_builtin_rocksdb_backend();
  const std::string file = "store-" + backend + ".so";
  std::string tried;
  for (const std::string& dir : PluginDirs()) {
    const std::string path = dir + "/" + file;
    if (!PathExists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_LOCAL: its symbols stay its own (all hidden but the entry point
    // anyway). RTLD_LAZY: the functions of RocksDB and libstdc++ it calls are
    // bound on first call, not all ~6,000 at once (a fresh daemon's mount).
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr)
      return Status::NotSupported("the " + backend + ": store backend " + path +
                                  " does not load: " + dlerror());
    auto* entry =
        reinterpret_cast<decltype(&pacset_store_backend_v1)>(dlsym(handle, kStoreBackendSymbol));
    const StoreBackend* b = entry != nullptr ? entry() : nullptr;
    const bool complete =
        b != nullptr &&
        (backend == "rocksdb" ? b->open_rocksdb != nullptr
                              : b->open_redis != nullptr && b->open_redis_cluster != nullptr);
    if (!complete || b->abi == nullptr || b->abi != StoreBackendAbi()) {
      dlclose(handle);
      return Status::NotSupported("the " + backend + ": store backend " + path + " is not the " +
                                  backend + " plugin of this build of pacset " + PACSET_VERSION +
                                  " (reinstall the package)");
    }
    return b;  // stays loaded: its stores may outlive any caller
  }
  return Status::NotSupported("the " + backend + ": store backend is not installed (looked for " +
                              tried + ")");
}

}  // namespace

StatusOr<const StoreBackend*> LoadStoreBackend(const std::string& backend) {
  static std::mutex mu;
  static std::map<std::string, StatusOr<const StoreBackend*>>* loaded =
      new std::map<std::string, StatusOr<const StoreBackend*>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(backend);
  if (it == loaded->end()) it = loaded->emplace(backend, Load(backend)).first;
  return it->second;
}

}  // namespace store_internal
}  // namespace pacset
