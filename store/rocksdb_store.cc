// rocksdb:PATH — the embedded default: one RocksDB key per block (key layout
// in store/internal/backends.h).
//
// Writers open the database as its primary instance, one process at a time:
// each first takes an exclusive flock on PATH/writer.lock (before RocksDB's
// own LOCK, whose DB::Open rotates the shared info LOG first), so a second
// writer waits up to StoreOptions::busy_timeout_ms and then fails with
// "store is busy". Readers
// (read_only) open a secondary instance with a private directory (under
// PATH/secondary when writable, else /tmp) and see the primary's changes after
// Refresh(), which calls TryCatchUpWithPrimary.
//
// Import: blocks are written in 4 MiB batches without the WAL; Publish flushes
// the memtable (so the blocks are in synced table files) and then writes one
// WriteBatch that switches the catalog entry, records the generation and
// removes the pending marker, also without the WAL, and flushes it
// (WriteCatalog says why). A crash before that flush leaves only the pending
// marker (written, synced, by BeginGeneration) and some blocks, which
// CollectGarbage deletes.
//
// Options, chosen by measurement (bench/rocksdb_options_bench, 2026-11-29, on
// this project's 2-core VM: 512 MiB of blocks whose payloads are those of a
// real .pac (a 40-tree random forest on Fashion-MNIST), settled after import,
// 30000 random single-block gets per run, medians of 3 round-robin rounds,
// warm page cache; "hot": 90% of gets on 10% of the blocks; "mix": gets right
// after another forest's import left unsettled L0 files spanning our keys):
//
//                      4 KiB blocks                   64 KiB blocks
//   variant       p50 us  hot  mix   table MiB   p50 us  hot   mix   table MiB
//   chosen          3.9   2.3  3.7     522        10.2   7.5  10.1     513
//   snappy          5.7   2.5  4.6     422        64.2   7.4  63.3     364
//   lz4             5.0   2.5  4.3     422        20.4   7.0  20.3     338
//   zstd            9.9   2.5 10.4     268        54.4   7.1  55.0     223
//   no bloom        4.1   2.8  4.7     522         9.7   6.9  10.9     513
//   table blk 16K   4.4   2.3  4.5     516         9.9   7.4  10.5     513
//   table blk 64K   6.4   2.3  6.6     514         9.9   7.6  10.4     513
//   cache 8 MiB     3.6   3.0  3.6                 9.2   8.8   9.4
//   cache 256 MiB   5.2   2.4  6.0                 8.7   7.6   9.0
//   no block cache  3.2   2.8  3.0                 9.0   8.7   9.3
//   rocksdb crc     4.1   2.2  3.9                13.2   7.6  13.6
//
// So: no compression (lz4 saves 19%/34% of the space but costs 1.3x/2x the
// latency; zstd 2.5x/5x); a 10-bit bloom filter (nothing to gain once settled,
// but ~1 us (20%) at 4 KiB while another import's L0 files overlap our keys,
// for 10 bits per block of memory); 4 KiB table blocks (one 4 KiB block per
// table block; larger table blocks read more per get; irrelevant at 64 KiB);
// a 64 MiB block cache by default (StoreOptions; best on the hot-set
// workload, within 0.7 us of no cache on uniform gets where every cache
// insert is wasted); RocksDB's own block checksums off (every get is checked
// with the XXH3 block trailer anyway; the CRC costs 3 us per 64 KiB get).
// Measurements on this shared VM vary by +-30% between runs.
#include <fcntl.h>
#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "layout/block.h"
#include "store/block_store.h"
#include "store/internal/backend_plugin.h"
#include "store/internal/backends.h"
#include "store/internal/codec.h"
#include "store/internal/file_util.h"
#include "store/internal/generation_writer.h"
#include "store/internal/uring_file_system.h"
#include "util/atomic_file.h"
#include "util/file_io.h"
#include "util/string_util.h"

namespace pacset {
namespace store_internal {

namespace {

void AppendBigEndian64(std::string* s, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) s->push_back(static_cast<char>((v >> shift) & 0xff));
}

uint64_t ReadBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Held (flock, exclusive) by the one writer process, see OpenPrimary.
constexpr char kWriterLockName[] = "writer.lock";

std::string NameKey(char tag, const std::string& name) { return std::string(1, tag) + name; }

std::string GenKey(char tag, const std::string& name, uint64_t gen) {
  std::string k = NameKey(tag, name);
  k.push_back('\0');
  AppendBigEndian64(&k, gen);
  return k;
}

// 'T' NAME '\0' GEN -> NAME, GEN.
bool ParseGenKey(const rocksdb::Slice& key, std::string* name, uint64_t* gen) {
  if (key.size() < 1 + 1 + 8) return false;
  const char* zero = static_cast<const char*>(memchr(key.data() + 1, '\0', key.size() - 1));
  if (zero == nullptr || static_cast<size_t>(key.data() + key.size() - zero) != 9) return false;
  name->assign(key.data() + 1, zero);
  *gen = ReadBigEndian64(zero + 1);
  return true;
}

}  // namespace

std::string RocksDbBlockKey(const std::string& name, uint64_t gen, uint64_t index) {
  std::string k = GenKey('B', name, gen);
  AppendBigEndian64(&k, index);
  return k;
}

namespace {

Status FromRocks(const rocksdb::Status& s, const std::string& context) {
  if (s.ok()) return Status::Ok();
  const std::string m = context + ": " + s.ToString();
  if (s.IsNotFound()) return Status::NotFound(m);
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsNoSpace()) return Status::ResourceExhausted(m);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return Status::Unavailable(m);
  if (s.IsNotSupported()) return Status::NotSupported(m);
  return Status::IOError(m);
}

bool IsLockError(const rocksdb::Status& s) {
  return s.IsIOError() && s.ToString().find("lock") != std::string::npos;
}

// The table files (*.sst) in a store directory; 0 if it cannot be listed.
size_t CountTableFiles(const std::string& path) {
  auto names = ListDir(path);
  if (!names.ok()) return 0;
  return static_cast<size_t>(std::count_if(
      names->begin(), names->end(), [](const std::string& n) { return EndsWith(n, ".sst"); }));
}

// What a secondary instance's catch-up with the primary would read, as a
// string that changes whenever it has something new to read: the store
// directory's mtime (a file created, renamed or removed: a new table, WAL or
// MANIFEST, CURRENT switched) and the size and mtime of every WAL and
// MANIFEST file (appended to by every write and every new version). A
// dozen system calls, against ~0.5 ms for TryCatchUpWithPrimary itself
// (perf, 2026-12-06), which every lookup of a forest file through a mount
// may pay (fs/forest_table.cc: RefreshIfOlder). Empty when the directory
// cannot be read (the caller then catches up anyway).
std::string PrimaryFingerprint(const std::string& path) {
  auto stamp = [](const std::string& p, std::string* out) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return false;
    *out += std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
            std::to_string(st.st_mtim.tv_nsec) + ";";
    return true;
  };
  std::string fp;
  if (!stamp(path, &fp)) return "";
  auto names = ListDir(path);
  if (!names.ok()) return "";
  std::sort(names->begin(), names->end());
  for (const std::string& n : *names) {
    if (!EndsWith(n, ".log") && !StartsWith(n, "MANIFEST-") && n != "CURRENT") continue;
    fp += n + "=";
    if (!stamp(path + "/" + n, &fp)) return "";  // removed meanwhile: something changed
  }
  return fp;
}

class RocksDbStore;

class RocksDbWriter final : public GenerationWriterBase {
 public:
  RocksDbWriter(RocksDbStore* store, std::string name, uint64_t gen, uint32_t block_size,
                uint64_t block_count)
      : GenerationWriterBase(std::move(name), gen, block_size, block_count), store_(store) {}
  ~RocksDbWriter() override;

 private:
  friend class RocksDbStore;
  Status WriteBlock(uint64_t index, const char* block) override;
  Status SendBatchIfFull() override;
  Status PublishGeneration(const ForestInfo& info) override;
  Status WriteBatchOut();

  RocksDbStore* store_;
  rocksdb::WriteBatch batch_;
};

class RocksDbStore final : public BlockStore {
 public:
  RocksDbStore(std::string path, StoreOptions options, RocksDbTuning tuning)
      : path_(std::move(path)),
        options_(std::move(options)),
        tuning_(tuning),
        pins_(path_ + "/pins") {
    read_options_.verify_checksums = tuning_.verify_rocksdb_checksums;
  }
  ~RocksDbStore() override {
    db_.reset();
    writer_lock_.reset();
    secondary_lock_.reset();
    if (!secondary_dir_.empty()) RemoveTree(secondary_dir_);
  }

  Status Open();

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
  // A MultiGet reads the blocks of each batch of up to 32 keys at once
  // through an io_uring (store/internal/uring_file_system.h), one batch after
  // another (MultiGetContext::MAX_BATCH_SIZE in RocksDB's sources). So a big
  // batch (the engine's store source asks for a whole round) is read as up
  // to 8 MultiGets of at least 32 keys on 8 threads, and the daemon's
  // gathers of 32 blocks as one MultiGet on the FUSE thread that got it.
  // Parts of 4 keys on 8 threads cost 30% more daemon CPU for one cold row
  // through a running daemon (18.4 against 14.1 us per block, thread
  // switches and futexes; 2026-12-06, bench/cold_bench.py --mount) and no
  // time. Without io_uring RocksDB reads one block after another: 32 parts
  // of any size, like the engine's pread pool
  // (engine/internal/read_threads.h).
  uint32_t read_parallelism() const override { return env_ != nullptr ? 8 : 32; }
  uint32_t blocks_read_at_once() const override { return env_ != nullptr ? 32 : 1; }

  Status PublishWriter(RocksDbWriter* w, const ForestInfo& info);
  // Writes catalog changes that readers look up (C and G records, what a
  // collection removes) past the WAL and flushes them into a table file.
  // A secondary instance (RocksDB 7.8) keeps in its active memtable what it
  // replayed from a WAL, and a newer value of the same key that reaches it
  // only in a table file (the primary flushed before the reader caught up)
  // stays hidden behind the old one, for good: a reader kept seeing a
  // replaced generation through 20 catch-ups (rocksdb#14444). Records that
  // never pass through a WAL never sit in a reader's memtable. Durable once
  // the flush returns, as the blocks are; a crash before leaves the import's
  // pending marker, which the next collection removes.
  Status WriteCatalog(rocksdb::WriteBatch* batch, const std::string& what);
  void WriterGone(const std::string& name, uint64_t gen) {
    std::lock_guard<std::mutex> lock(write_mu_);
    live_writers_.erase({name, gen});
  }
  rocksdb::DB* db() { return db_.get(); }
  const std::string& where() const { return where_; }

 protected:
  Status ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                    std::vector<std::string>* out) override;

 private:
  rocksdb::Options MakeOptions() const;
  Status LockWriter();
  Status Busy(const std::string& detail) const;
  Status OpenPrimary(const rocksdb::Options& options);
  Status OpenSecondary(const rocksdb::Options& options);
  Status CheckWritable() const {
    if (options_.read_only)
      return Status::NotSupported("store " + where_ + " was opened read-only");
    return Status::Ok();
  }
  // Calls fn(key, value) for every key starting with `tag`.
  template <class Fn>
  Status ForEach(char tag, Fn fn);
  // The catalog entry of `name`; kNotFound if none.
  StatusOr<ForestInfo> ReadInfo(const std::string& key, const std::string& what);
  void RemoveDeadSecondaries();

  const std::string path_;
  const std::string where_ = "rocksdb:" + path_;
  const StoreOptions options_;
  const RocksDbTuning tuning_;
  // Table reads of a MultiGet all at once (store/internal/uring_file_system.h).
  const std::unique_ptr<rocksdb::Env> env_ =
      UringMultiReadUsable()
          ? rocksdb::NewCompositeEnv(NewUringMultiReadFileSystem(
                rocksdb::FileSystem::Default(), (options_.read_only && options_.direct_reads)))
          : nullptr;
  rocksdb::ReadOptions read_options_;
  std::unique_ptr<rocksdb::DB> db_;
  PinFiles pins_;
  std::string secondary_dir_;
  std::unique_ptr<TempDir> secondary_temp_;  // when secondary_dir_ is under $TMPDIR
  UniqueFd secondary_lock_;
  UniqueFd writer_lock_;    // flock on PATH/writer.lock while this is the primary
  size_t table_files_ = 0;  // *.sst files in path_ when opened
  // A secondary instance: whether the primary wrote anything since its last
  // catch-up (or its open), which Refresh() skips otherwise. Known from a
  // watch of the store directory set up before the open: changes_seen_
  // counts the Refreshes that saw changes, caught_up_to_ is the highest
  // count a catch-up that began after it succeeded from (so one that began
  // earlier, and ends while another runs, does not hide a change). Where
  // inotify is unavailable, from PrimaryFingerprint() before the last
  // catch-up (caught_up_at_).
  std::mutex caught_up_mu_;
  std::optional<DirectoryWatch> primary_watch_;
  uint64_t changes_seen_ = 0;
  uint64_t caught_up_to_ = 0;
  std::string caught_up_at_;
  // A secondary instance's List() while it has not caught up since: nothing
  // it reads changes between catch-ups (a daemon lists at every refresh and
  // at lookups). catch_ups_ counts the starts and ends of catch-ups, so a
  // listing that overlapped one is not kept.
  uint64_t catch_ups_ = 0;
  std::optional<std::vector<ForestInfo>> listed_;

  // Serialises catalog changes and collection in this (the only writer) process.
  std::mutex write_mu_;
  std::set<std::pair<std::string, uint64_t>> live_writers_;
};

RocksDbWriter::~RocksDbWriter() { store_->WriterGone(name(), generation()); }

Status RocksDbWriter::WriteBlock(uint64_t index, const char* block) {
  rocksdb::Status s =
      batch_.Put(RocksDbBlockKey(name(), generation(), index), rocksdb::Slice(block, block_size()));
  return s.ok() ? Status::Ok() : FromRocks(s, store_->where());
}

Status RocksDbWriter::SendBatchIfFull() {
  return batch_.GetDataSize() >= (4u << 20) ? WriteBatchOut() : Status::Ok();
}

Status RocksDbWriter::WriteBatchOut() {
  if (batch_.Count() == 0) return Status::Ok();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // made durable by the flush in Publish
  rocksdb::Status s = store_->db()->Write(wo, &batch_);
  batch_.Clear();
  return FromRocks(s, store_->where() + ": write blocks of " + context());
}

Status RocksDbWriter::PublishGeneration(const ForestInfo& info) {
  return store_->PublishWriter(this, info);
}

// The tuning defaults (store/internal/backends.h) are the measured choice
// described at the top of this file.
rocksdb::Options RocksDbStore::MakeOptions() const {
  rocksdb::Options o;
  if (env_ != nullptr) o.env = env_.get();
  o.create_if_missing = !options_.read_only;
  o.max_open_files = -1;  // required by secondary instances; keeps table readers open
  // RocksDB opens table files with this many threads, and starts them anew
  // every time it applies a version: at open and at every catch-up with the
  // primary (Refresh, twice a second in a daemon), even when no file is new.
  // A forest store holds a few files per GB, which one thread opens in well
  // under a millisecond each; the 15 extra threads cost a fresh daemon ~30
  // thread starts before it mounts (strace). Many files (hundreds of GB) still
  // get RocksDB's parallel open.
  o.max_file_opening_threads = table_files_ >= 64 ? 16 : 1;
  // Table files get the kernel's readahead: a forest's blocks are stored in
  // block order and the blocks a row needs cluster, so a cold read often
  // brings its neighbours (bench/cold_bench.py --mount, 2026-12-01: median
  // cold fetch 250 us -> 10 us through pacsetfs, one row 85-95 -> 56-66 ms).
  o.advise_random_on_open = false;
  o.max_background_jobs = 2;
  o.write_buffer_size = 64u << 20;
  o.max_write_buffer_number = 3;
  o.target_file_size_base = 64u << 20;
  o.max_bytes_for_level_base = 256u << 20;
  o.keep_log_file_num = 3;
  o.max_log_file_size = 4u << 20;
  switch (tuning_.compression) {
    case RocksDbTuning::Compression::kNone:
      o.compression = rocksdb::kNoCompression;
      break;
    case RocksDbTuning::Compression::kSnappy:
      o.compression = rocksdb::kSnappyCompression;
      break;
    case RocksDbTuning::Compression::kLz4:
      o.compression = rocksdb::kLZ4Compression;
      break;
    case RocksDbTuning::Compression::kZstd:
      o.compression = rocksdb::kZSTD;
      break;
  }
  rocksdb::BlockBasedTableOptions t;
  const size_t cache = options_.rocksdb_block_cache_bytes;
  if (cache == 0) {
    t.no_block_cache = true;
  } else {
    t.block_cache = rocksdb::NewLRUCache(cache);
  }
  t.block_size = tuning_.table_block_size;
  // One index entry per 4 KiB block: with a restart point at every entry
  // (RocksDB's default) each holds its whole key and block handle, ~37 bytes;
  // every 16th, ~8 (the rest share the key's prefix and delta-encode the
  // handle). The index is read whole when a table opens (a fresh daemon's
  // mount reads it from the disk) and kept in memory while the store is open
  // (max_open_files = -1): ~2 GB for a 300 GB store of 4 KiB blocks. A seek
  // then scans up to 16 entries after its binary search.
  t.index_block_restart_interval = tuning_.index_block_restart_interval;
  if (tuning_.bloom_bits_per_key > 0)
    t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(tuning_.bloom_bits_per_key, false));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

Status RocksDbStore::Open() {
  if (!PathExists(path_)) {
    if (options_.read_only) return Status::NotFound("no store at " + where_);
    PACSET_RETURN_IF_ERROR(MakeDirs(path_));
  } else if (!IsDirectory(path_)) {
    return Status::InvalidArgument("store " + where_ + ": " + path_ + " is not a directory");
  }
  // What an empty store directory may hold: our own files, and (while a
  // writer creates the database) RocksDB's first files.
  auto is_ours = [](const std::string& n) {
    return n == "pins" || n == "secondary" || n == "LOCK" || n == kWriterLockName ||
           n.rfind("LOG", 0) == 0;
  };
  auto is_rocksdb_startup = [](const std::string& n) {
    return n == "IDENTITY" || n.rfind("OPTIONS-", 0) == 0 || n.rfind("MANIFEST-", 0) == 0 ||
           n.find(".log") != std::string::npos || n.rfind(".dbtmp") != std::string::npos;
  };
  auto check_empty = [&](bool creating_is_fine) -> Status {
    if (PathExists(path_ + "/CURRENT")) return Status::Ok();
    PACSET_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(path_));
    // A writer that was creating the store may have finished (CURRENT, then
    // its first tables) between the check above and this listing.
    if (std::find(names.begin(), names.end(), "CURRENT") != names.end()) return Status::Ok();
    if (std::find(names.begin(), names.end(), "catalog") != names.end())
      return Status::InvalidArgument(path_ + " holds a dir store: open it as dir:" + path_);
    bool creating = false;
    for (const auto& n : names) {
      if (is_ours(n)) continue;
      if (creating_is_fine && is_rocksdb_startup(n)) {
        creating = true;
        continue;
      }
      return Status::InvalidArgument("store " + where_ + ": " + path_ +
                                     " is not empty and is not a RocksDB store");
    }
    if (options_.read_only)
      return Status::NotFound("no store at " + where_ +
                              (creating ? " (a writer is creating it)" : " (empty directory)"));
    return Status::Ok();
  };
  // Before the writer lock, so that no lock file is left in a directory that
  // is not a store; again after it, when no other writer can be creating it.
  PACSET_RETURN_IF_ERROR(check_empty(/*creating_is_fine=*/true));
  if (!options_.read_only) {
    PACSET_RETURN_IF_ERROR(LockWriter());
    PACSET_RETURN_IF_ERROR(check_empty(/*creating_is_fine=*/false));
  }
  table_files_ = CountTableFiles(path_);
  const rocksdb::Options o = MakeOptions();
  if (options_.read_only) return OpenSecondary(o);
  PACSET_RETURN_IF_ERROR(MakeDirs(path_ + "/pins"));
  return OpenPrimary(o);
}

Status RocksDbStore::Busy(const std::string& detail) const {
  return Status::Unavailable("store " + where_ +
                             " is busy: another process (pacset import, rm or gc) is writing "
                             "to it; waited " +
                             std::to_string(options_.busy_timeout_ms) + " ms (" + detail + ")");
}

// Held from before the store is looked at until the database is closed.
// DB::Open rotates the info LOG (renaming it to LOG.old.*) before it takes
// RocksDB's LOCK, and creates its files one by one, so two writers opening at
// once raced: one failed with a raw "IO error ... LOG.old", or found a store
// being created "not empty and not a RocksDB store". Behind this lock one
// process at a time creates, inspects and opens the store for writing.
Status RocksDbStore::LockWriter() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
  const std::string lock_path = path_ + "/" + kWriterLockName;
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!lock.valid()) return Status::FromErrno("open lock file " + lock_path, errno);
  for (;;) {
    PACSET_ASSIGN_OR_RETURN(bool locked, TryLockExclusive(lock.get(), lock_path));
    if (locked) break;
    if (std::chrono::steady_clock::now() >= deadline) return Busy(lock_path + " is locked");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  writer_lock_ = std::move(lock);
  return Status::Ok();
}

Status RocksDbStore::OpenPrimary(const rocksdb::Options& options) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
  // RocksDB's LOCK still guards against writers that predate writer.lock.
  for (;;) {
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, path_, &db);
    if (s.ok()) {
      db_.reset(db);
      break;
    }
    if (!IsLockError(s)) return FromRocks(s, "open store " + where_);
    if (std::chrono::steady_clock::now() >= deadline) return Busy(s.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  RemoveDeadSecondaries();
  return Status::Ok();
}

namespace {

// A reader's info log: nothing. A secondary instance writes its LOG (the
// options dump, ~9 KB formatted with the local time, then lines at every
// catch-up) into its private directory, which is removed when it closes; a
// fresh daemon wrote it before it could mount. What goes wrong comes back as
// a status. Every virtual that rocksdb::Logger defines inline is overridden:
// a base one used here would be compiled into this program, and RocksDB's
// own loggers would then call this program's copy (in the TSan build, an
// instrumented one that reports RocksDB's unsynchronised log level).
class NoInfoLog : public rocksdb::Logger {
 public:
  NoInfoLog() : rocksdb::Logger(rocksdb::InfoLogLevel::HEADER_LEVEL) {}
  void LogHeader(const char* /*format*/, va_list /*ap*/) override {}
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
  void Logv(const rocksdb::InfoLogLevel /*level*/, const char* /*format*/,
            va_list /*ap*/) override {}
  size_t GetLogFileSize() const override { return 0; }
  void Flush() override {}
  // The highest level: RocksDB formats no line below it.
  rocksdb::InfoLogLevel GetInfoLogLevel() const override {
    return rocksdb::InfoLogLevel::HEADER_LEVEL;
  }
  void SetInfoLogLevel(const rocksdb::InfoLogLevel /*level*/) override {}
};

}  // namespace

Status RocksDbStore::OpenSecondary(const rocksdb::Options& base) {
  rocksdb::Options options = base;
  options.info_log = std::make_shared<NoInfoLog>();
  std::random_device rd;
  const std::string leaf = std::to_string(::getpid()) + "-" + std::to_string(rd());
  if (::access(path_.c_str(), W_OK) == 0 && MakeDirs(path_ + "/secondary").ok()) {
    secondary_dir_ = path_ + "/secondary/" + leaf;
  } else {
    // A shared directory: a TempDir, so the name is fresh and ours (mode 0700).
    auto temp = TempDir::Create("pacset-secondary");
    if (!temp.ok())
      return temp.status().WithContext("create a directory for reading store " + where_);
    secondary_temp_ = std::move(*temp);
    secondary_dir_ = secondary_temp_->path();
  }
  PACSET_RETURN_IF_ERROR(MakeDirs(secondary_dir_));
  // Held while this instance lives, so the primary can remove dead ones' dirs.
  PACSET_ASSIGN_OR_RETURN(secondary_lock_,
                          LockFile(secondary_dir_ + "/owner.lock", LockMode::kShared));
  rocksdb::DB* db = nullptr;
  // OpenAsSecondary replays the primary's MANIFEST and WAL files itself: the
  // instance is caught up without a Refresh(), up to what the primary wrote
  // before the watch (or the fingerprint) began.
  StatusOr<DirectoryWatch> watch = tuning_.watch_writer_directory
                                       ? DirectoryWatch::Open(path_)
                                       : Status::NotSupported("not asked to watch " + path_);
  std::string fingerprint = watch.ok() ? "" : PrimaryFingerprint(path_);
  rocksdb::Status s = rocksdb::DB::OpenAsSecondary(options, path_, secondary_dir_, &db);
  if (!s.ok()) return FromRocks(s, "open store " + where_ + " for reading");
  db_.reset(db);
  std::lock_guard<std::mutex> lock(caught_up_mu_);
  if (watch.ok()) primary_watch_.emplace(std::move(*watch));
  caught_up_at_ = std::move(fingerprint);
  return Status::Ok();
}

void RocksDbStore::RemoveDeadSecondaries() {
  auto names = ListDir(path_ + "/secondary");
  if (!names.ok()) return;
  for (const auto& n : *names) {
    const std::string dir = path_ + "/secondary/" + n;
    UniqueFd fd(::open((dir + "/owner.lock").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) continue;  // being created, or not ours
    auto free = TryLockExclusive(fd.get(), dir);
    if (free.ok() && *free) RemoveTree(dir);
  }
}

template <class Fn>
Status RocksDbStore::ForEach(char tag, Fn fn) {
  const std::string lower(1, tag), upper(1, static_cast<char>(tag + 1));
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro = read_options_;
  ro.iterate_upper_bound = &upper_slice;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(lower); it->Valid(); it->Next()) PACSET_RETURN_IF_ERROR(fn(it->key(), it->value()));
  return FromRocks(it->status(), "scan store " + where_);
}

StatusOr<ForestInfo> RocksDbStore::ReadInfo(const std::string& key, const std::string& what) {
  std::string value;
  rocksdb::Status s = db_->Get(read_options_, key, &value);
  if (s.IsNotFound()) return Status::NotFound(what + " is not in store " + where_);
  PACSET_RETURN_IF_ERROR(FromRocks(s, "read " + what + " from store " + where_));
  ForestInfo info;
  PACSET_RETURN_IF_ERROR(DecodeForestInfo(value, what + " in store " + where_, &info));
  return info;
}

StatusOr<std::unique_ptr<GenerationWriter>> RocksDbStore::BeginGeneration(const std::string& name,
                                                                          uint32_t block_size,
                                                                          uint64_t block_count) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  if (!IsValidBlockSize(block_size))
    return Status::InvalidArgument("invalid block size " + std::to_string(block_size));
  if (block_count == 0) return Status::InvalidArgument("forest '" + name + "': no blocks");

  std::lock_guard<std::mutex> lock(write_mu_);
  uint64_t gen = 0;
  std::string counter;
  rocksdb::Status s = db_->Get(read_options_, NameKey('N', name), &counter);
  if (s.ok() && counter.size() == 8) {
    gen = ReadBigEndian64(counter.data());
  } else if (!s.IsNotFound()) {
    PACSET_RETURN_IF_ERROR(FromRocks(s, "read generation counter of '" + name + "'"));
  }
  auto current = ReadInfo(NameKey('C', name), "forest '" + name + "'");
  if (current.ok()) gen = std::max(gen, current->generation);
  ++gen;

  ForestInfo pending;
  pending.name = name;
  pending.generation = gen;
  pending.block_size = block_size;
  pending.block_count = block_count;
  pending.size_bytes = uint64_t{block_size} * block_count;
  pending.created_unix_ns = NowUnixNs();
  counter.clear();
  AppendBigEndian64(&counter, gen);
  rocksdb::WriteBatch batch;
  batch.Put(NameKey('N', name), counter);
  batch.Put(GenKey('P', name, gen), EncodeForestInfo(pending));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  PACSET_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "begin import into " + where_));
  live_writers_.insert({name, gen});
  return std::unique_ptr<GenerationWriter>(
      new RocksDbWriter(this, name, gen, block_size, block_count));
}

Status RocksDbStore::PublishWriter(RocksDbWriter* w, const ForestInfo& info) {
  const std::string& name = info.name;
  const uint64_t gen = info.generation;
  const std::string context = ForestContext(name, gen);
  PACSET_RETURN_IF_ERROR(w->WriteBatchOut());
  rocksdb::FlushOptions fo;
  fo.wait = true;
  PACSET_RETURN_IF_ERROR(FromRocks(db_->Flush(fo), "flush store " + where_));
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    auto current = ReadInfo(NameKey('C', name), "forest '" + name + "'");
    if (current.ok() && current->generation >= gen)
      return Status::AlreadyExists(context + ": generation " + std::to_string(current->generation) +
                                   " was published meanwhile; import again");
    const std::string encoded = EncodeForestInfo(info);
    rocksdb::WriteBatch batch;
    batch.Put(NameKey('C', name), encoded);
    batch.Put(GenKey('G', name, gen), encoded);
    batch.Delete(GenKey('P', name, gen));
    PACSET_RETURN_IF_ERROR(WriteCatalog(&batch, "publish " + context));
    live_writers_.erase({name, gen});
  }
  (void)CollectGarbage();  // best effort: the publish itself succeeded
  return Status::Ok();
}

Status RocksDbStore::WriteCatalog(rocksdb::WriteBatch* batch, const std::string& what) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  PACSET_RETURN_IF_ERROR(FromRocks(db_->Write(wo, batch), what));
  rocksdb::FlushOptions fo;
  fo.wait = true;
  return FromRocks(db_->Flush(fo), what + ": flush");
}

StatusOr<ForestInfo> RocksDbStore::Lookup(const std::string& name) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  auto info = ReadInfo(NameKey('C', name), "forest '" + name + "'");
  if (!info.ok() && info.status().IsNotFound())
    return Status::NotFound("no forest named '" + name + "' in store " + where_);
  return info;
}

StatusOr<std::vector<ForestInfo>> RocksDbStore::List() {
  uint64_t catch_ups = 0;
  if (options_.read_only) {
    std::lock_guard<std::mutex> lock(caught_up_mu_);
    if (listed_) return *listed_;
    catch_ups = catch_ups_;
  }
  std::vector<ForestInfo> out;
  PACSET_RETURN_IF_ERROR(ForEach('C', [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
    ForestInfo info;
    PACSET_RETURN_IF_ERROR(DecodeForestInfo(v.ToString(), "catalog entry in " + where_, &info));
    out.push_back(std::move(info));
    return Status::Ok();
  }));
  if (options_.read_only) {
    std::lock_guard<std::mutex> lock(caught_up_mu_);
    if (catch_ups == catch_ups_) listed_ = out;
  }
  return out;
}

Status RocksDbStore::Delete(const std::string& name) {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    PACSET_RETURN_IF_ERROR(Lookup(name).status());
    rocksdb::WriteBatch batch;
    batch.Delete(NameKey('C', name));
    PACSET_RETURN_IF_ERROR(WriteCatalog(&batch, "delete '" + name + "' from " + where_));
  }
  (void)CollectGarbage();
  return Status::Ok();
}

Status RocksDbStore::Pin(const std::string& name, uint64_t gen) {
  PACSET_RETURN_IF_ERROR(ValidateForestName(name));
  PACSET_ASSIGN_OR_RETURN(UniqueFd lock, pins_.LockShared());
  bool created = false;
  PACSET_RETURN_IF_ERROR(pins_.Pin(name, gen, &created));
  // A secondary may not have seen a collection that finished before we took
  // the lock: catch up before checking.
  Status s = options_.read_only ? Refresh() : Status::Ok();
  if (s.ok()) {
    std::string ignored;
    s = FromRocks(db_->Get(read_options_, GenKey('G', name, gen), &ignored),
                  ForestContext(name, gen));
    if (s.IsNotFound())
      s = Status::NotFound(ForestContext(name, gen) + " is no longer in store " + where_);
  }
  if (!s.ok() && created) (void)pins_.Unpin(name, gen);
  return s;
}

Status RocksDbStore::Unpin(const std::string& name, uint64_t gen) { return pins_.Unpin(name, gen); }

StatusOr<uint64_t> RocksDbStore::CollectGarbage() {
  PACSET_RETURN_IF_ERROR(CheckWritable());
  std::vector<std::pair<std::string, uint64_t>> ranges;  // generations whose blocks go
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    PACSET_ASSIGN_OR_RETURN(UniqueFd pin_lock, pins_.LockExclusive());
    PACSET_ASSIGN_OR_RETURN(auto live_pins, pins_.LivePins());
    std::map<std::string, uint64_t> current;
    PACSET_RETURN_IF_ERROR(ForEach('C', [&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
      ForestInfo info;
      PACSET_RETURN_IF_ERROR(DecodeForestInfo(v.ToString(), "catalog entry in " + where_, &info));
      current[k.ToString().substr(1)] = info.generation;
      return Status::Ok();
    }));
    rocksdb::WriteBatch batch;
    auto collect = [&](char tag, const std::string& name, uint64_t gen) {
      batch.DeleteRange(GenKey('B', name, gen), GenKey('B', name, gen + 1));
      batch.Delete(GenKey(tag, name, gen));
      ranges.emplace_back(name, gen);
    };
    PACSET_RETURN_IF_ERROR(ForEach('G', [&](const rocksdb::Slice& k, const rocksdb::Slice&) {
      std::string name;
      uint64_t gen;
      if (!ParseGenKey(k, &name, &gen)) return Status::Ok();
      auto cur = current.find(name);
      if (cur != current.end() && cur->second == gen) return Status::Ok();
      if (live_pins.count({name, gen}) != 0) return Status::Ok();
      collect('G', name, gen);
      return Status::Ok();
    }));
    PACSET_RETURN_IF_ERROR(ForEach('P', [&](const rocksdb::Slice& k, const rocksdb::Slice&) {
      std::string name;
      uint64_t gen;
      if (!ParseGenKey(k, &name, &gen)) return Status::Ok();
      // One writer process at a time: a marker not owned by a live writer of
      // this process belongs to an import that crashed or was abandoned.
      if (live_writers_.count({name, gen}) != 0) return Status::Ok();
      collect('P', name, gen);
      return Status::Ok();
    }));
    if (ranges.empty()) return uint64_t{0};
    // Whole table files holding only garbage go at once, without compaction.
    for (const auto& [name, gen] : ranges) {
      const std::string begin = GenKey('B', name, gen), end = GenKey('B', name, gen + 1);
      rocksdb::Slice b(begin), e(end);
      PACSET_RETURN_IF_ERROR(FromRocks(
          rocksdb::DeleteFilesInRange(db_.get(), db_->DefaultColumnFamily(), &b, &e, false),
          "collect " + ForestContext(name, gen)));
    }
    PACSET_RETURN_IF_ERROR(WriteCatalog(&batch, "collect garbage in " + where_));
  }
  // Reclaim the space of what the range deletions cover.
  for (const auto& [name, gen] : ranges) {
    const std::string begin = GenKey('B', name, gen), end = GenKey('B', name, gen + 1);
    rocksdb::Slice b(begin), e(end);
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
    (void)db_->CompactRange(co, &b, &e);
  }
  RemoveDeadSecondaries();
  return uint64_t{ranges.size()};
}

StatusOr<StoreStats> RocksDbStore::Stat() {
  StoreStats st;
  st.backend = "rocksdb";
  st.location = path_;
  PACSET_RETURN_IF_ERROR(ForEach('C', [&](const rocksdb::Slice&, const rocksdb::Slice&) {
    ++st.forests;
    return Status::Ok();
  }));
  PACSET_RETURN_IF_ERROR(ForEach('G', [&](const rocksdb::Slice&, const rocksdb::Slice& v) {
    ForestInfo info;
    PACSET_RETURN_IF_ERROR(DecodeForestInfo(v.ToString(), "generation record in " + where_, &info));
    ++st.generations;
    st.blocks += info.block_count;
    st.bytes += info.size_bytes;
    return Status::Ok();
  }));
  PACSET_RETURN_IF_ERROR(ForEach('P', [&](const rocksdb::Slice&, const rocksdb::Slice&) {
    ++st.pending;
    return Status::Ok();
  }));
  return st;
}

Status RocksDbStore::Refresh() {
  if (!options_.read_only) return Status::Ok();
  // Looked at before the catch-up: whatever the primary writes meanwhile is
  // seen by the next Refresh, which catches up again. A catch-up that fails
  // leaves caught_up_to_ behind, so the next Refresh retries.
  std::string fingerprint;
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(caught_up_mu_);
    if (primary_watch_) {
      if (primary_watch_->Changed()) ++changes_seen_;
      if (caught_up_to_ == changes_seen_) return Status::Ok();
      target = changes_seen_;
    } else {
      fingerprint = PrimaryFingerprint(path_);
      if (!fingerprint.empty() && fingerprint == caught_up_at_) return Status::Ok();
    }
    ++catch_ups_;
    listed_.reset();
  }
  rocksdb::Status s = db_->TryCatchUpWithPrimary();
  std::lock_guard<std::mutex> lock(caught_up_mu_);
  ++catch_ups_;
  listed_.reset();
  PACSET_RETURN_IF_ERROR(FromRocks(s, "catch up with the writer of " + where_));
  caught_up_to_ = std::max(caught_up_to_, target);
  caught_up_at_ = std::move(fingerprint);
  return Status::Ok();
}

Status RocksDbStore::ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                                std::vector<std::string>* out) {
  out->resize(blocks.size());
  if (blocks.size() == 1) {
    rocksdb::PinnableSlice value;
    rocksdb::Status s =
        db_->Get(read_options_, db_->DefaultColumnFamily(),
                 RocksDbBlockKey(forest.name, forest.generation, blocks[0]), &value);
    if (s.IsNotFound())
      return Status::NotFound("block " + std::to_string(blocks[0]) + ": missing from the store");
    PACSET_RETURN_IF_ERROR(FromRocks(s, "block " + std::to_string(blocks[0])));
    (*out)[0].assign(value.data(), value.size());
    return Status::Ok();
  }
  std::vector<std::string> keys(blocks.size());
  std::vector<rocksdb::Slice> slices(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    keys[i] = RocksDbBlockKey(forest.name, forest.generation, blocks[i]);
    slices[i] = keys[i];
  }
  std::vector<rocksdb::PinnableSlice> values(blocks.size());
  std::vector<rocksdb::Status> statuses(blocks.size());
  db_->MultiGet(read_options_, db_->DefaultColumnFamily(), blocks.size(), slices.data(),
                values.data(), statuses.data());
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (statuses[i].IsNotFound())
      return Status::NotFound("block " + std::to_string(blocks[i]) + ": missing from the store");
    PACSET_RETURN_IF_ERROR(FromRocks(statuses[i], "block " + std::to_string(blocks[i])));
    // Without a block cache RocksDB copies each value into the slice's own
    // string: take that string rather than copy it again.
    std::string* self = values[i].GetSelf();
    if (!values[i].IsPinned() && values[i].data() == self->data() &&
        values[i].size() == self->size()) {
      (*out)[i].swap(*self);
    } else {
      (*out)[i].assign(values[i].data(), values[i].size());
    }
  }
  return Status::Ok();
}

}  // namespace

Status SettleRocksDbStore(const std::string& path, const StoreOptions& options,
                          const RocksDbTuning& tuning) {
  auto store = std::make_unique<RocksDbStore>(path, options, tuning);
  PACSET_RETURN_IF_ERROR(store->Open());
  rocksdb::DB* db = store->db();
  for (;;) {
    uint64_t pending = 0, compactions = 0, flushes = 0;
    db->GetIntProperty(rocksdb::DB::Properties::kCompactionPending, &pending);
    db->GetIntProperty(rocksdb::DB::Properties::kNumRunningCompactions, &compactions);
    db->GetIntProperty(rocksdb::DB::Properties::kNumRunningFlushes, &flushes);
    if (pending == 0 && compactions == 0 && flushes == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<BlockStore>> OpenRocksDbStore(const std::string& path,
                                                       const StoreOptions& options,
                                                       const RocksDbTuning& tuning) {
  auto store = std::make_unique<RocksDbStore>(path, options, tuning);
  PACSET_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<BlockStore>(std::move(store));
}

const StoreBackend* RocksDbStoreBackend() {
  return PluginStoreBackend([](StoreBackend* b) {
    b->open_rocksdb = [](const std::string& path, const StoreOptions& options) {
      return OpenRocksDbStore(path, options);  // the default tuning
    };
  });
}

}  // namespace store_internal
}  // namespace pacset
