// Serving a store that is already open: the part of `pacsetfs mount` after
// the store is opened (fs/mount.cc). Tests use it to serve a real store
// behind a wrapper (FaultInjectionStore) on a real mount.
#pragma once

#include <functional>
#include <memory>

#include "fs/pacsetfs.h"
#include "store/block_store.h"
#include "util/status.h"

namespace pacset {
namespace fs_internal {

// Mounts opts.mountpoint, serving `store`, in this process and thread until
// it is unmounted (or a signal). `on_mounted` runs once the mount is up.
// opts.store_uri only names the store (stats, fsname).
Status ServeStore(const MountOptions& opts, std::unique_ptr<BlockStore> store,
                  const std::function<void()>& on_mounted);

}  // namespace fs_internal
}  // namespace pacset
