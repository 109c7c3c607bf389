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

// Opens the store to serve; called on a thread of its own.
using StoreOpener = std::function<StatusOr<std::unique_ptr<BlockStore>>()>;

// Mounts opts.mountpoint, serving the store `open_store` returns, in this
// process and thread until it is unmounted (or a signal). The store opens
// while the kernel mounts (a fresh daemon's first row waits for both, not for
// one after the other); if it cannot be opened, the mount is undone and its
// error returned. `on_mounted` runs once the mount is up and serving.
// opts.store_uri only names the store (stats, fsname).
Status ServeStore(const MountOptions& opts, const StoreOpener& open_store,
                  const std::function<void()>& on_mounted);
// The same for a store that is already open.
Status ServeStore(const MountOptions& opts, std::unique_ptr<BlockStore> store,
                  const std::function<void()>& on_mounted);

}  // namespace fs_internal
}  // namespace pacset
