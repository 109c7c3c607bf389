// The catalog and its generations: which forests the store has, and the
// inode of every (forest, generation) the kernel knows about.
//
// A lookup of NAME.pac resolves to the inode of NAME's current generation.
// Open files keep their inode (an immutable generation), which stays pinned
// in the store while it has open handles, and, while current, while the
// kernel still knows it (it will probably be opened again). An inode that is
// neither open nor known to the kernel is forgotten.
//
// Thread-safety: every method may be called from any thread. The lock is
// never held across a store call: Pin and Unpin run outside it, with the
// inode marked pin_busy so that an open waits for a pin change of its own
// generation under way (only opens of that generation wait).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fs/block_cache.h"
#include "fs/internal/inodes.h"
#include "fs/stats.h"
#include "store/block_store.h"
#include "util/mutex.h"
#include "util/status.h"

namespace pacset {
namespace fs_internal {

class ForestTable {
 public:
  // Borrows all three; they must outlive the table.
  ForestTable(BlockStore* store, BlockCache* cache, MountStats* stats)
      : store_(store), cache_(cache), stats_(stats) {}

  // Reloads the catalog from the store and releases generations nobody uses
  // any more. Returns the names whose current generation changed or vanished.
  //
  // Refreshes run at once (the refresher thread, and lookups through
  // RefreshIfOlder) and their listings may come back in any order. A
  // listing is applied only if no refresh that started after it has been
  // applied meanwhile: it may be older than the catalog, and applying it
  // would bring back a generation that lookups had stopped resolving to (a
  // new open would get the old generation after others got the new one).
  // Such a listing changes nothing and returns no names.
  StatusOr<std::vector<std::string>> Refresh() EXCLUDES(mu_);
  // The names whose current generation changed or vanished in any refresh
  // since the previous call: the refresher invalidates their kernel
  // entries, also for changes that a lookup's refresh found first.
  std::vector<std::string> TakeChangedNames() EXCLUDES(mu_);
  // Refresh() unless the catalog is younger than `max_age` (so that a lookup
  // right after an import sees it); failures are logged.
  void RefreshIfOlder(std::chrono::milliseconds max_age) EXCLUDES(mu_);

  // The inode of NAME's current generation, counted as one kernel lookup;
  // null if NAME is not in the catalog.
  std::shared_ptr<ForestInode> Lookup(const std::string& name) EXCLUDES(mu_);
  std::shared_ptr<ForestInode> Find(fuse_ino_t ino) EXCLUDES(mu_);
  // Find, for an inode whose blocks user `uid` may gather (protocol/gather.h): it
  // has open handles (so its generation is pinned), and `uid` could read the
  // file now, because it is still its name's current generation (anyone may
  // open it) or because `uid` holds a handle of it open. A removed forest, or
  // a generation that was replaced, is then no longer reachable by its inode
  // number for users who never opened it.
  std::shared_ptr<ForestInode> FindGatherable(fuse_ino_t ino, uint32_t uid) EXCLUDES(mu_);
  // The kernel forgot `n` lookups of `ino`.
  void Forget(fuse_ino_t ino, uint64_t n) EXCLUDES(mu_);

  // Counts an open of `f` by user `uid` and pins its generation in the store
  // if it is not pinned yet. On failure nothing is counted. Every successful
  // Open needs one Release with the same uid.
  Status Open(const std::shared_ptr<ForestInode>& f, uint32_t uid, bool* first_open) EXCLUDES(mu_);
  // The last handle of an open by `uid` is closed (or its reply to the kernel
  // failed).
  void Release(fuse_ino_t ino, uint32_t uid) EXCLUDES(mu_);

  // The catalog as directory entries: (file name, inode number). Forests not
  // looked up yet get placeholder numbers from 2^30 up.
  std::vector<std::pair<std::string, fuse_ino_t>> DirEntries() EXCLUDES(mu_);
  // Number of forests in the catalog and their total size.
  void Totals(uint64_t* files, uint64_t* bytes) EXCLUDES(mu_);

  // The inodes of forest NAME ("*": of every forest) and NAME's block-cache
  // id (0: none yet, or "*"). kNotFound if NAME is neither in the catalog nor
  // was ever served.
  Status InodesOf(const std::string& name, std::vector<std::shared_ptr<ForestInode>>* inodes,
                  uint32_t* forest_id) EXCLUDES(mu_);

  // Unpins every generation this mount pinned (at unmount).
  void UnpinAll() EXCLUDES(mu_);

 private:
  // A pin to give back, decided under the lock and done after it.
  struct Unpin {
    std::shared_ptr<ForestInode> inode;
    bool drop_cached_blocks;  // an old generation: nobody will read it again
  };

  std::shared_ptr<ForestInode> InodeForLocked(const ForestInfo& info) REQUIRES(mu_);
  bool IsCurrentLocked(const ForestInode& f) const REQUIRES(mu_);
  // Gives up what nobody uses: the pin of a generation that is not open and
  // no longer current (or no longer known to the kernel), and the inode once
  // the kernel has forgotten it.
  void ReleaseUnusedLocked(const std::shared_ptr<ForestInode>& f, std::vector<Unpin>* unpins)
      REQUIRES(mu_);
  void DoUnpins(const std::vector<Unpin>& unpins) EXCLUDES(mu_);

  BlockStore* const store_;
  BlockCache* const cache_;
  MountStats* const stats_;

  Mutex mu_;
  CondVar pin_cv_;  // signalled when an inode's pin_busy clears
  std::map<std::string, ForestInfo> catalog_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_refresh_ GUARDED_BY(mu_){};
  uint64_t refreshes_started_ GUARDED_BY(mu_) = 0;
  uint64_t applied_refresh_ GUARDED_BY(mu_) = 0;         // the refresh whose listing catalog_ is
  std::set<std::string> changed_names_ GUARDED_BY(mu_);  // for TakeChangedNames
  std::unordered_map<fuse_ino_t, std::shared_ptr<ForestInode>> inodes_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, uint64_t>, fuse_ino_t> by_gen_ GUARDED_BY(mu_);
  std::map<std::string, uint32_t> forest_ids_ GUARDED_BY(mu_);
  fuse_ino_t next_ino_ GUARDED_BY(mu_) = kFirstForestIno;
};

}  // namespace fs_internal
}  // namespace pacset
