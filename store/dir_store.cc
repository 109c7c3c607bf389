// dir:PATH — each generation is a plain .pac file; a batch of blocks is read
// with all its runs of adjacent blocks in flight at once (io_uring; pread
// where the kernel refuses it), without kernel readahead (ReadBlocks).
//
//   PATH/catalog                    DirCatalog (cereal), replaced atomically
//   PATH/lock                       flock: exclusive for catalog changes and GC
//   PATH/forests/NAME/GEN.pac       published generations (current and old)
//   PATH/forests/NAME/GEN.pac.pending  an import in progress, flock'ed by its writer
//   PATH/pins/NAME.GEN.PID          pins (store/internal/file_util.h)
//
// Publish renames GEN.pac.pending to GEN.pac and then replaces the catalog;
// a crash between the two leaves a GEN.pac that is not current, which the
// next CollectGarbage deletes like any other unpinned old generation.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "layout/block.h"
#include "store/block_store.h"
#include "store/internal/backends.h"
#include "store/internal/codec.h"
#include "store/internal/file_util.h"
#include "store/internal/generation_writer.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/string_util.h"
#include "util/uring_reads.h"

namespace pacset {
namespace store_internal {

std::string DirGenerationFile(const std::string& name, uint64_t gen) {
  return "forests/" + name + "/" + std::to_string(gen) + ".pac";
}

namespace {

constexpr char kPendingSuffix[] = ".pac.pending";

class DirStore;

class DirWriter final : public GenerationWriterBase {
 public:
  DirWriter(DirStore* store, std::string name, uint64_t gen, uint32_t block_size,
            uint64_t block_count, UniqueFd fd, std::string path)
      : GenerationWriterBase(std::move(name), gen, block_size, block_count),
        store_(store),
        fd_(std::move(fd)),
        path_(std::move(path)) {}

 private:
  friend class DirStore;
  Status WriteBlock(uint64_t index, const char* block) override;
  Status PublishGeneration(const ForestInfo& info) override;

  DirStore* store_;
  UniqueFd fd_;  // holds the flock that marks the import as alive
  std::string path_;
};

class DirStore final : public BlockStore {
 public:
  DirStore(std::string root, StoreOptions options)
      : root_(std::move(root)), options_(std::move(options)), pins_(root_ + "/pins") {}

  Status Init();

  StatusOr<std::unique_ptr<GenerationWriter>> BeginGeneration(const std::string& name,
                                                              uint32_t block_size,
                                                              uint64_t block_count) override;
  StatusOr<ForestInfo> Lookup(const std::string& name) override;
  StatusOr<std::vector<ForestInfo>> List() override;
  Status Delete(const std::string& name) override;
  Status Pin(const std::string& name, uint64_t gen) override;
  Status Unpin(const std::string& name, uint64_t gen) override;
  StatusOr<uint64_t> CollectGarbage() override;
  StatusOr<StoreStats> Stat() override;
  Status Refresh() override;
  // A batch's blocks are read at once through an io_uring (ReadBlocks);
  // where the kernel refuses it, with a pread each: then 32 calls at once,
  // like the engine's pread pool (engine/internal/read_threads.h).
  uint32_t read_parallelism() const override { return UringAvailable() ? 1 : 32; }

  Status PublishWriter(DirWriter* w, const ForestInfo& info);

 protected:
  Status ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                    std::vector<std::string>* out) override;

 private:
  std::string CatalogPath() const { return root_ + "/catalog"; }
  std::string ForestDir(const std::string& name) const { return root_ + "/forests/" + name; }
  std::string GenFile(const std::string& name, uint64_t gen) const {
    return root_ + "/" + DirGenerationFile(name, gen);
  }
  StatusOr<UniqueFd> LockCatalog() { return LockFile(root_ + "/lock", LockMode::kExclusive); }
  StatusOr<DirCatalog> ReadCatalog();
  Status WriteCatalog(const DirCatalog& c) {
    return WriteFileAtomically(CatalogPath(), EncodeDirCatalog(c));
  }
  Status CheckWritable() const {
    if (options_.read_only)
      return Status::NotSupported("store dir:" + root_ + " was opened read-only");
    return Status::Ok();
  }
  // A generation file, open up to three times: `scattered` without kernel
  // readahead for single blocks anywhere in the file, `runs` with it for runs
  // of adjacent blocks (a sequential reader's windows, which the kernel then
  // reads further ahead of; readahead is per open file), and `direct` with
  // O_DIRECT (StoreOptions::direct_reads; not valid where the file system
  // refuses it) for single blocks whose size is a multiple of
  // kDirectReadAlign.
  struct GenFds {
    UniqueFd runs, scattered, direct;
  };
  StatusOr<std::shared_ptr<GenFds>> OpenGeneration(const std::string& name, uint64_t gen,
                                                   uint64_t first_block);
  void ForgetFd(const std::string& name, uint64_t gen) {
    std::lock_guard<std::mutex> lock(fd_mu_);
    fds_.erase({name, gen});
  }

  const std::string root_;
  const StoreOptions options_;
  PinFiles pins_;
  std::mutex fd_mu_;
  // Open generation files. An fd of a collected (unlinked) file keeps reading
  // the old bytes; Refresh() and CollectGarbage drop such fds.
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<GenFds>> fds_;
};

Status DirWriter::WriteBlock(uint64_t index, const char* block) {
  return PwriteFull(fd_.get(), block, block_size(), index * uint64_t{block_size()}, path_);
}

Status DirWriter::PublishGeneration(const ForestInfo& info) {
  return store_->PublishWriter(this, info);
}

Status DirStore::Init() {
  const std::string where = "dir:" + root_;
  if (!PathExists(root_)) {
    if (options_.read_only) return Status::NotFound("no store at " + where);
    PACSET_RETURN_IF_ERROR(MakeDirs(root_));
  } else if (!IsDirectory(root_)) {
    return Status::InvalidArgument("store " + where + ": " + root_ + " is not a directory");
  }
  if (!PathExists(CatalogPath())) {
    PACSET_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(root_));
    if (std::find(names.begin(), names.end(), "CURRENT") != names.end())
      return Status::InvalidArgument(root_ + " holds a RocksDB store: open it as rocksdb:" + root_);
    // What another writer creating the store at this moment leaves before
    // its catalog appears: the lock, the two directories, the catalog's
    // temporary file.
    // A writer that finished creating it since the check above may have
    // added more (the catalog, a generation): then it is a store.
    for (const auto& n : names)
      if (n != "lock" && n != "forests" && n != "pins" && n.rfind("catalog.tmp-", 0) != 0 &&
          !PathExists(CatalogPath()))
        return Status::InvalidArgument("store " + where + ": " + root_ +
                                       " is not empty and is not a pacset dir store (no catalog)");
    if (options_.read_only) return Status::NotFound("no store at " + where + " (empty directory)");
    // Created under the catalog lock: concurrent first imports create it once.
    PACSET_ASSIGN_OR_RETURN(UniqueFd lock, LockCatalog());
    PACSET_RETURN_IF_ERROR(MakeDirs(root_ + "/forests"));
    PACSET_RETURN_IF_ERROR(MakeDirs(root_ + "/pins"));
    if (!PathExists(CatalogPath())) PACSET_RETURN_IF_ERROR(WriteCatalog(DirCatalog{}));
  } else if (!options_.read_only) {
    if (::access(root_.c_str(), W_OK) != 0)
      return Status::FromErrno("store " + where + " is not writable (open it read-only to read it)",
                               errno);
    PACSET_RETURN_IF_ERROR(MakeDirs(root_ + "/forests"));
    PACSET_RETURN_IF_ERROR(MakeDirs(root_ + "/pins"));
  }
  return ReadCatalog().status();
}

StatusOr<DirCatalog> DirStore::ReadCatalog() {
  PACSET_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(CatalogPath()));
  DirCatalog c;
  PACSET_RETURN_IF_ERROR(DecodeDirCatalog(bytes, "catalog of store dir:" + root_, &c));
  return c;
}

StatusOr<std::unique_ptr<GenerationWriter>> DirStore::BeginGeneration(const std::string& name,
                                                                      uint32_t block_size,
                                                                      uint64_t block_count) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  if (!IsValidBlockSize(block_size))
    return Status::InvalidArgument("invalid block size " + std::to_string(block_size));
  if (block_count == 0) return Status::InvalidArgument("forest '" + name + "': no blocks");

  PACSET_ASSIGN_OR_RETURN(UniqueFd lock, LockCatalog());
  PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
  uint64_t gen = cat.last_generation[name];
  if (auto it = cat.current.find(name); it != cat.current.end())
    gen = std::max(gen, it->second.generation);
  ++gen;
  while (PathExists(GenFile(name, gen)) || PathExists(GenFile(name, gen) + ".pending")) ++gen;
  cat.last_generation[name] = gen;
  PACSET_RETURN_IF_ERROR(WriteCatalog(cat));

  PACSET_RETURN_IF_ERROR(MakeDirs(ForestDir(name)));
  const std::string path = GenFile(name, gen) + ".pending";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return Status::FromErrno("create " + path, errno);
  PACSET_ASSIGN_OR_RETURN(bool locked, TryLockExclusive(fd.get(), path));
  if (!locked) return Status::Internal(path + " is locked by someone else");
  // Reserve the space now, so a full disk fails the import at its start.
  const uint64_t size = uint64_t{block_size} * block_count;
  int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size));
  if (err == EOPNOTSUPP || err == EINVAL)
    err = ::ftruncate(fd.get(), static_cast<off_t>(size)) == 0 ? 0 : errno;
  if (err != 0) {
    ::unlink(path.c_str());
    return Status::FromErrno("reserve " + std::to_string(size) + " bytes for " + path, err);
  }
  return std::unique_ptr<GenerationWriter>(
      new DirWriter(this, name, gen, block_size, block_count, std::move(fd), path));
}

Status DirStore::PublishWriter(DirWriter* w, const ForestInfo& info) {
  const std::string& name = info.name;
  const uint64_t gen = info.generation;
  PACSET_RETURN_IF_ERROR(FsyncFd(w->fd_.get(), w->path_));
  {
    PACSET_ASSIGN_OR_RETURN(UniqueFd lock, LockCatalog());
    PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
    if (auto it = cat.current.find(name); it != cat.current.end() && it->second.generation >= gen)
      return Status::AlreadyExists(ForestContext(name, gen) + ": generation " +
                                   std::to_string(it->second.generation) +
                                   " was published meanwhile; import again");
    const std::string final_path = GenFile(name, gen);
    if (::rename(w->path_.c_str(), final_path.c_str()) != 0)
      return Status::FromErrno("rename " + w->path_ + " to " + final_path, errno);
    PACSET_RETURN_IF_ERROR(FsyncDir(ForestDir(name)));
    cat.current[name] = info;
    cat.generations[name][gen] = info;
    // On failure the renamed file is an old, unpinned generation: garbage.
    PACSET_RETURN_IF_ERROR(WriteCatalog(cat));
    w->fd_.reset();
  }
  (void)CollectGarbage();  // best effort: the publish itself succeeded
  return Status::Ok();
}

StatusOr<ForestInfo> DirStore::Lookup(const std::string& name) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
  auto it = cat.current.find(name);
  if (it == cat.current.end())
    return Status::NotFound("no forest named '" + name + "' in store dir:" + root_);
  return it->second;
}

StatusOr<std::vector<ForestInfo>> DirStore::List() {
  PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
  std::vector<ForestInfo> out;
  for (auto& [name, info] : cat.current) out.push_back(info);
  return out;
}

Status DirStore::Delete(const std::string& name) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  {
    PACSET_ASSIGN_OR_RETURN(UniqueFd lock, LockCatalog());
    PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
    if (cat.current.erase(name) == 0)
      return Status::NotFound("no forest named '" + name + "' in store dir:" + root_);
    PACSET_RETURN_IF_ERROR(WriteCatalog(cat));
  }
  (void)CollectGarbage();
  return Status::Ok();
}

Status DirStore::Pin(const std::string& name, uint64_t gen) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(UniqueFd lock, pins_.LockShared());
  bool created = false;
  PACSET_RETURN_IF_ERROR(pins_.Pin(name, gen, &created));
  if (!PathExists(GenFile(name, gen))) {
    if (created) (void)pins_.Unpin(name, gen);
    return Status::NotFound(ForestContext(name, gen) + " is no longer in store dir:" + root_);
  }
  return Status::Ok();
}

Status DirStore::Unpin(const std::string& name, uint64_t gen) { return pins_.Unpin(name, gen); }

StatusOr<uint64_t> DirStore::CollectGarbage() {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_ASSIGN_OR_RETURN(UniqueFd catalog_lock, LockCatalog());
  PACSET_ASSIGN_OR_RETURN(UniqueFd pin_lock, pins_.LockExclusive());
  PACSET_ASSIGN_OR_RETURN(auto live_pins, pins_.LivePins());
  PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
  uint64_t collected = 0;
  bool catalog_changed = false;
  PACSET_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(root_ + "/forests"));
  for (const std::string& name : names) {
    if (!ValidateForestName(name).ok()) continue;  // not ours
    const std::string dir = ForestDir(name);
    auto files = ListDir(dir);
    if (!files.ok()) continue;
    const auto cur = cat.current.find(name);
    bool dir_changed = false;
    for (const std::string& f : *files) {
      const std::string path = dir + "/" + f;
      if (EndsWith(f, kPendingSuffix)) {
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd.valid()) continue;
        PACSET_ASSIGN_OR_RETURN(bool abandoned, TryLockExclusive(fd.get(), path));
        if (!abandoned) continue;  // its writer is alive
        if (::unlink(path.c_str()) != 0) return Status::FromErrno("delete " + path, errno);
        ++collected;
        dir_changed = true;
      } else if (EndsWith(f, ".pac")) {
        uint64_t gen;
        if (!ParseUint64(f.substr(0, f.size() - 4), &gen)) continue;
        if (cur != cat.current.end() && cur->second.generation == gen) continue;
        if (live_pins.count({name, gen}) != 0) continue;
        if (::unlink(path.c_str()) != 0) return Status::FromErrno("delete " + path, errno);
        ForgetFd(name, gen);
        ++collected;
        dir_changed = true;
      }
    }
    if (dir_changed) PACSET_RETURN_IF_ERROR(FsyncDir(dir));
    if (cur == cat.current.end()) ::rmdir(dir.c_str());  // fails while files remain
  }
  // Forget generations whose files are gone (collected above, or lost in a
  // crash between rename and catalog replacement).
  for (auto it = cat.generations.begin(); it != cat.generations.end();) {
    for (auto g = it->second.begin(); g != it->second.end();) {
      if (PathExists(GenFile(it->first, g->first))) {
        ++g;
      } else {
        g = it->second.erase(g);
        catalog_changed = true;
      }
    }
    it = it->second.empty() ? cat.generations.erase(it) : std::next(it);
  }
  if (catalog_changed) PACSET_RETURN_IF_ERROR(WriteCatalog(cat));
  return collected;
}

StatusOr<StoreStats> DirStore::Stat() {
  PACSET_ASSIGN_OR_RETURN(DirCatalog cat, ReadCatalog());
  StoreStats s;
  s.backend = "dir";
  s.location = root_;
  s.forests = cat.current.size();
  for (const auto& [name, gens] : cat.generations) {
    for (const auto& [gen, info] : gens) {
      ++s.generations;
      s.blocks += info.block_count;
      s.bytes += info.size_bytes;
    }
  }
  auto names = ListDir(root_ + "/forests");
  if (names.ok()) {
    for (const std::string& name : *names) {
      auto files = ListDir(ForestDir(name));
      if (!files.ok()) continue;
      for (const std::string& f : *files) s.pending += EndsWith(f, kPendingSuffix) ? 1 : 0;
    }
  }
  return s;
}

Status DirStore::Refresh() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  fds_.clear();
  return Status::Ok();
}

StatusOr<std::shared_ptr<DirStore::GenFds>> DirStore::OpenGeneration(const std::string& name,
                                                                     uint64_t gen,
                                                                     uint64_t first_block) {
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    auto it = fds_.find({name, gen});
    if (it != fds_.end()) return it->second;
  }
  const std::string path = GenFile(name, gen);
  auto f = std::make_shared<DirStore::GenFds>();
  for (UniqueFd* fd : {&f->runs, &f->scattered}) {
    *fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd->valid()) {
      if (errno == ENOENT)
        return Status::NotFound("block " + std::to_string(first_block) +
                                ": missing from the store (no file " + path + ")");
      return Status::FromErrno("open " + path, errno);
    }
  }
  // Single blocks straight from the disk (O_DIRECT), not through the page
  // cache: a block costs no page-cache page to allocate, insert, copy from
  // and reclaim, and the daemon keeps its own cache of blocks anyway. One cold
  // row through a running mount (682-tree forest, 4 KiB, 6 runs x 3
  // alternating): 16.6-16.9 ms against 17.4-18.5, the first row after the
  // mount 26-29 against 32-35 ms, daemon CPU per row ~10% less (fs/DESIGN.md).
  // A file system without direct I/O refuses it at open (EINVAL): the
  // buffered descriptor below then serves.
  if (options_.direct_reads)
    f->direct = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  // Single blocks without kernel readahead: a batch names exactly the blocks
  // it wants. With readahead, a batch of a few hundred scattered blocks read
  // through io_uring waited 10-18 ms for a few of its reads (one cold row,
  // io_uring_enter per batch traced in the daemon; fs/DESIGN.md), and read
  // 8x the bytes it needed (32.9 MiB for a 4.3 MiB row). Runs keep it: with
  // 64 KiB blocks a sequential reader's windows read without it took 1.5x
  // as long.
  (void)posix_fadvise(f->scattered.get(), 0, 0, POSIX_FADV_RANDOM);
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fds_.size() >= 256) fds_.clear();  // bound the open files; in-flight reads keep theirs
  return fds_.emplace(std::make_pair(name, gen), f).first->second;
}

Status DirStore::ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                            std::vector<std::string>* out) {
  PACSET_ASSIGN_OR_RETURN(std::shared_ptr<GenFds> file,
                          OpenGeneration(forest.name, forest.generation, blocks.front()));
  out->resize(blocks.size());
  const uint64_t bs = forest.block_size;
  // Each run of adjacent blocks (a single block, or a reader's window ahead)
  // is one read; all of a batch's runs are in flight at once
  // (util/uring_reads.h). A run whose read failed or came short is read
  // again with pread, whose error names it.
  struct Run {
    size_t first, end;  // blocks[first, end)
  };
  constexpr uint64_t kMaxRunBytes = 64 << 20;  // one read's length fits its int result
  std::vector<Run> runs;
  for (size_t i = 0; i < blocks.size();) {
    size_t j = i + 1;
    while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1 && (j + 1 - i) * bs <= kMaxRunBytes)
      ++j;
    runs.push_back({i, j});
    i = j;
  }
  // A single block is read straight into its string (through O_DIRECT: into
  // an aligned buffer, then copied); a longer run into one buffer, then split.
  const bool direct = file->direct.valid() && bs % kDirectReadAlign == 0;
  std::unique_ptr<char, decltype(&std::free)> aligned(
      direct ? static_cast<char*>(std::aligned_alloc(kDirectReadAlign, runs.size() * bs)) : nullptr,
      &std::free);
  if (direct && !aligned) return Status::ResourceExhausted("out of memory for a block batch");
  // Run buffers are left unzeroed: the read fills them before any use.
  std::vector<std::unique_ptr<char[]>> bufs_of_runs(runs.size());
  std::vector<uint64_t> offsets(runs.size());
  std::vector<uint32_t> lens(runs.size());
  std::vector<char*> bufs(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    offsets[r] = blocks[run.first] * bs;
    lens[r] = static_cast<uint32_t>((run.end - run.first) * bs);
    if (run.end - run.first == 1 && direct) {
      bufs[r] = aligned.get() + r * bs;
    } else if (run.end - run.first == 1) {
      (*out)[run.first].resize(bs);
      bufs[r] = (*out)[run.first].data();
    } else {
      bufs_of_runs[r].reset(new char[lens[r]]);
      bufs[r] = bufs_of_runs[r].get();
    }
  }
  std::vector<int> fds(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    const bool single = runs[r].end - runs[r].first == 1;
    fds[r] = !single ? file->runs.get() : direct ? file->direct.get() : file->scattered.get();
  }
  std::vector<int> res(runs.size(), -1);
  if (runs.size() > 1) {
    if (!UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), runs.size(),
                      res.data()))
      res.assign(runs.size(), -1);
  } else if (direct && fds[0] == file->direct.get()) {
    const ssize_t n = ::pread(fds[0], bufs[0], lens[0], static_cast<off_t>(offsets[0]));
    res[0] = n < 0 ? -errno : static_cast<int>(n);
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    if (res[r] != static_cast<int>(lens[r])) {
      const std::string what =
          (run.end - run.first == 1 ? "block " + std::to_string(blocks[run.first])
                                    : "blocks " + std::to_string(blocks[run.first]) + ".." +
                                          std::to_string(blocks[run.end - 1])) +
          " of " + GenFile(forest.name, forest.generation);
      // Again through the page cache (a direct read may be refused, e.g.
      // by a device with larger sectors), whose error names the block.
      const int fd = fds[r] == file->direct.get() ? file->scattered.get() : fds[r];
      PACSET_RETURN_IF_ERROR(PreadFull(fd, bufs[r], lens[r], offsets[r], what));
    }
    if (direct && run.end - run.first == 1) (*out)[run.first].assign(bufs[r], bs);
    if (run.end - run.first > 1)
      for (size_t k = run.first; k < run.end; ++k)
        (*out)[k].assign(bufs[r] + (k - run.first) * bs, bs);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<BlockStore>> OpenDirStore(const std::string& path,
                                                   const StoreOptions& options) {
  auto store = std::make_unique<DirStore>(path, options);
  PACSET_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<BlockStore>(std::move(store));
}

}  // namespace store_internal
}  // namespace pacset
