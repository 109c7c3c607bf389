#include "fs/internal/forest_table.h"

#include <cstring>

#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

std::string FileNameOf(const std::string& forest) { return forest + ".pac"; }

bool ForestNameOf(const char* file, std::string* forest) {
  const size_t n = std::strlen(file);
  if (n <= 4 || std::strcmp(file + n - 4, ".pac") != 0) return false;
  forest->assign(file, n - 4);
  return ValidateForestName(*forest).ok();
}

StatusOr<std::vector<std::string>> ForestTable::Refresh() {
  uint64_t ticket;
  {
    MutexLock lock(&mu_);
    ticket = ++refreshes_started_;
  }
  PACSET_RETURN_IF_ERROR(store_->Refresh());
  PACSET_ASSIGN_OR_RETURN(std::vector<ForestInfo> list, store_->List());
  std::vector<std::string> changed;
  std::vector<Unpin> unpins;
  {
    MutexLock lock(&mu_);
    if (ticket < applied_refresh_) return changed;  // overtaken by a later listing
    applied_refresh_ = ticket;
    std::map<std::string, ForestInfo> next;
    for (auto& info : list) next[info.name] = info;
    for (const auto& [name, info] : next) {
      auto it = catalog_.find(name);
      if (it == catalog_.end() || it->second.generation != info.generation) changed.push_back(name);
    }
    for (const auto& [name, info] : catalog_)
      if (!next.count(name)) changed.push_back(name);
    catalog_.swap(next);
    changed_names_.insert(changed.begin(), changed.end());
    last_refresh_ = std::chrono::steady_clock::now();
    // Old generations nobody has open can go now.
    std::vector<std::shared_ptr<ForestInode>> all;
    for (auto& [ino, f] : inodes_) all.push_back(f);
    for (auto& f : all) ReleaseUnusedLocked(f, &unpins);
  }
  DoUnpins(unpins);
  return changed;
}

std::vector<std::string> ForestTable::TakeChangedNames() {
  MutexLock lock(&mu_);
  std::vector<std::string> names(changed_names_.begin(), changed_names_.end());
  changed_names_.clear();
  return names;
}

void ForestTable::RefreshIfOlder(std::chrono::milliseconds max_age) {
  {
    MutexLock lock(&mu_);
    if (std::chrono::steady_clock::now() - last_refresh_ < max_age) return;
  }
  auto s = Refresh();
  if (!s.ok()) Log(LOG_WARNING, "catalog refresh failed: %s", s.status().ToString().c_str());
}

std::shared_ptr<ForestInode> ForestTable::Lookup(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = catalog_.find(name);
  if (it == catalog_.end()) return nullptr;
  auto f = InodeForLocked(it->second);
  f->nlookup++;
  return f;
}

std::shared_ptr<ForestInode> ForestTable::Find(fuse_ino_t ino) {
  MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? nullptr : it->second;
}

std::shared_ptr<ForestInode> ForestTable::FindGatherable(fuse_ino_t ino, uint32_t uid) {
  MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end() || it->second->opens <= 0) return nullptr;
  const ForestInode& f = *it->second;
  return IsCurrentLocked(f) || f.opens_by_uid.count(uid) ? it->second : nullptr;
}

void ForestTable::Forget(fuse_ino_t ino, uint64_t n) {
  std::vector<Unpin> unpins;
  {
    MutexLock lock(&mu_);
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) return;
    auto f = it->second;
    f->nlookup = f->nlookup > n ? f->nlookup - n : 0;
    ReleaseUnusedLocked(f, &unpins);
  }
  DoUnpins(unpins);
}

Status ForestTable::Open(const std::shared_ptr<ForestInode>& f, uint32_t uid, bool* first_open) {
  {
    MutexLock lock(&mu_);
    *first_open = f->opens++ == 0;
    while (f->pin_busy) pin_cv_.Wait(&mu_);
    if (f->pinned) {
      f->opens_by_uid[uid]++;
      return Status::Ok();
    }
    f->pin_busy = true;
  }
  Status s = store_->Pin(f->name, f->info.generation);
  std::vector<Unpin> unpins;
  {
    MutexLock lock(&mu_);
    f->pin_busy = false;
    if (s.ok()) {
      f->pinned = true;
      f->opens_by_uid[uid]++;
    } else {
      f->opens--;
      *first_open = false;
      ReleaseUnusedLocked(f, &unpins);
    }
  }
  pin_cv_.SignalAll();
  DoUnpins(unpins);
  if (!s.ok())
    Log(LOG_ERR, "cannot pin forest '%s' generation %llu: %s", f->name.c_str(),
        static_cast<unsigned long long>(f->info.generation), s.ToString().c_str());
  return s;
}

void ForestTable::Release(fuse_ino_t ino, uint32_t uid) {
  std::vector<Unpin> unpins;
  {
    MutexLock lock(&mu_);
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) return;
    auto f = it->second;
    f->opens--;
    auto by = f->opens_by_uid.find(uid);
    if (by != f->opens_by_uid.end() && --by->second <= 0) f->opens_by_uid.erase(by);
    ReleaseUnusedLocked(f, &unpins);
  }
  DoUnpins(unpins);
}

std::vector<std::pair<std::string, fuse_ino_t>> ForestTable::DirEntries() {
  std::vector<std::pair<std::string, fuse_ino_t>> entries;
  MutexLock lock(&mu_);
  fuse_ino_t placeholder = 1u << 30;
  for (const auto& [name, info] : catalog_) {
    auto g = by_gen_.find({name, info.generation});
    entries.push_back({FileNameOf(name), g != by_gen_.end() ? g->second : placeholder++});
  }
  return entries;
}

void ForestTable::Totals(uint64_t* files, uint64_t* bytes) {
  *files = *bytes = 0;
  MutexLock lock(&mu_);
  for (const auto& [n, info] : catalog_) {
    *bytes += info.size_bytes;
    ++*files;
  }
}

Status ForestTable::InodesOf(const std::string& name,
                             std::vector<std::shared_ptr<ForestInode>>* inodes,
                             uint32_t* forest_id) {
  *forest_id = 0;
  MutexLock lock(&mu_);
  if (name != "*") {
    if (!catalog_.count(name) && !forest_ids_.count(name))
      return Status::NotFound("no forest named '" + name + "'");
    auto it = forest_ids_.find(name);
    if (it != forest_ids_.end()) *forest_id = it->second;
  }
  for (auto& [ino, f] : inodes_)
    if (name == "*" || f->name == name) inodes->push_back(f);
  return Status::Ok();
}

void ForestTable::UnpinAll() {
  std::vector<Unpin> unpins;
  {
    MutexLock lock(&mu_);
    std::vector<std::shared_ptr<ForestInode>> all;
    for (auto& [ino, f] : inodes_) all.push_back(f);
    for (auto& f : all) {
      while (f->pin_busy) pin_cv_.Wait(&mu_);
      if (!f->pinned) continue;
      f->pinned = false;
      f->pin_busy = true;
      unpins.push_back({f, false});
    }
  }
  DoUnpins(unpins);
}

std::shared_ptr<ForestInode> ForestTable::InodeForLocked(const ForestInfo& info) {
  auto g = by_gen_.find({info.name, info.generation});
  if (g != by_gen_.end()) return inodes_[g->second];
  auto f = std::make_shared<ForestInode>();
  f->ino = next_ino_++;
  f->name = info.name;
  f->info = info;
  auto id = forest_ids_.find(info.name);
  if (id == forest_ids_.end())
    id = forest_ids_.emplace(info.name, static_cast<uint32_t>(forest_ids_.size() + 1)).first;
  f->forest_id = id->second;
  f->stats = stats_->For(info.name);
  f->stats->generation.store(info.generation, std::memory_order_relaxed);
  inodes_[f->ino] = f;
  by_gen_[{info.name, info.generation}] = f->ino;
  return f;
}

bool ForestTable::IsCurrentLocked(const ForestInode& f) const {
  auto it = catalog_.find(f.name);
  return it != catalog_.end() && it->second.generation == f.info.generation;
}

void ForestTable::ReleaseUnusedLocked(const std::shared_ptr<ForestInode>& f,
                                      std::vector<Unpin>* unpins) {
  if (f->opens > 0) return;
  const bool current = IsCurrentLocked(*f);
  // A pin under way (pin_busy) is an Unpin: an Open in progress counts in opens.
  if (f->pinned && !f->pin_busy && (!current || f->nlookup == 0)) {
    f->pinned = false;
    f->pin_busy = true;
    unpins->push_back({f, !current});
  }
  if (f->nlookup == 0) {
    by_gen_.erase({f->name, f->info.generation});
    inodes_.erase(f->ino);
  }
}

void ForestTable::DoUnpins(const std::vector<Unpin>& unpins) {
  if (unpins.empty()) return;
  for (const Unpin& u : unpins) {
    (void)store_->Unpin(u.inode->name, u.inode->info.generation);
    if (u.drop_cached_blocks) cache_->DropGeneration(u.inode->forest_id, u.inode->info.generation);
  }
  {
    MutexLock lock(&mu_);
    for (const Unpin& u : unpins) u.inode->pin_busy = false;
  }
  pin_cv_.SignalAll();
}

}  // namespace fs_internal
}  // namespace pacset
