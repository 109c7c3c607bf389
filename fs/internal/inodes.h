// The inodes of a pacsetfs mount and what a forest inode carries.
//
//   1 root, 2 .pacsetfs/, 3 .pacsetfs/stats, 4 .pacsetfs/control, 5
//   .pacsetfs/gather (protocol/gather.h), and one
//   inode per (forest, generation) from 16 up.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "fs/stats.h"
#include "store/block_store.h"

namespace pacset {
namespace fs_internal {

constexpr fuse_ino_t kRootIno = FUSE_ROOT_ID;  // 1
constexpr fuse_ino_t kCtlDirIno = 2;
constexpr fuse_ino_t kStatsIno = 3;
constexpr fuse_ino_t kControlIno = 4;
constexpr fuse_ino_t kGatherIno = 5;
constexpr fuse_ino_t kFirstForestIno = 16;
constexpr const char* kCtlDirName = ".pacsetfs";

// One generation of one forest. Everything but the counters that ForestTable
// guards is set at creation and never changes, so holders of the shared_ptr
// read it without a lock.
struct ForestInode {
  fuse_ino_t ino = 0;
  std::string name;
  uint32_t forest_id = 0;  // for the block cache
  ForestInfo info;
  std::shared_ptr<ForestStats> stats;

  // Guarded by ForestTable's lock (not annotated: the lock lives there).
  uint64_t nlookup = 0;
  int64_t opens = 0;
  // Open handles by the uid that opened them (ForestTable::FindGatherable),
  // counted once an open has succeeded; a uid goes with its last handle.
  std::map<uint32_t, int64_t> opens_by_uid;
  bool pinned = false;    // the store holds this mount's pin of the generation
  bool pin_busy = false;  // a Pin or Unpin of it is under way (without the lock)
};

// "NAME.pac" for forest NAME.
std::string FileNameOf(const std::string& forest);
// The forest a file name stands for; false for anything else.
bool ForestNameOf(const char* file, std::string* forest);

}  // namespace fs_internal
}  // namespace pacset
