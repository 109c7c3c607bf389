// Block stores: where the blocks of packed forests live.
//
// A store holds named forests. Each forest has generations: immutable,
// complete copies of one .pac file (block i of the store = block i of the
// file, trailer included; see layout/block.h). Publishing a new generation is
// atomic: it is written completely, then the catalog entry for the name is
// switched to it in one step. Readers address blocks by (name, generation,
// block), so a reader that looked up generation g keeps reading g while a
// newer one is published.
//
// Backends, chosen by URI (OpenBlockStore):
//   rocksdb:PATH              embedded RocksDB (the default), one key per block
//   dir:PATH                  a directory of plain .pac files, served with pread
//   redis://[:PASSWORD@]HOST:PORT[/DB]   a Redis server shared by many hosts
//   redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]
//                             a Redis Cluster (the seeds: any of its nodes),
//                             blocks spread over its masters by hash slot;
//                             redis+cluster:// is accepted as a synonym
//
// Integrity: every block returned by Get/MultiGet has passed VerifyBlock
// (checksum under the forest's block seed, and position). A mismatch is kCorruption naming forest,
// generation and block; the bytes are never returned.
//
// Garbage: a generation that is no longer current and not pinned is garbage.
// CollectGarbage() deletes garbage generations and leftovers of imports that
// crashed before publishing; Publish and Delete call it (after they succeed;
// a failure to collect does not fail them). A reader that keeps using a
// generation across time (the filesystem, for an open file) pins it; pins
// die with the process that holds them (see Pin()). A reader that did not pin
// may find its generation gone after the next publish: Get then fails with
// kCorruption ("missing from the store").
//
// Generations: numbers are allocated by BeginGeneration from a per-name
// counter that survives Delete, so a (name, generation) pair is never reused
// for different contents. An abandoned import's number is skipped. When two
// imports of one name overlap, the first to publish wins; the other's Publish
// fails with kAlreadyExists if a newer generation is already current.
//
// Pins and pending imports, per backend:
//   rocksdb:, dir:  a pin is a file PATH/pins/NAME.GEN.PID held with flock(2)
//                   by the pinning process; the kernel drops the lock when the
//                   process dies, so CollectGarbage recognises (and removes) a
//                   dead process's pin. A shared/exclusive flock on
//                   PATH/pins/lock orders Pin against CollectGarbage, so Pin
//                   either sees its generation still stored or fails with
//                   kNotFound. A pending import is a "pending" marker
//                   (rocksdb: a key written with the generation counter;
//                   dir: the file forests/NAME/GEN.pac.pending, flock'ed by its
//                   writer). rocksdb has one writer process at a time (its
//                   LOCK file), so markers not owned by a live writer of this
//                   process are leftovers; dir leftovers are pending files
//                   whose flock is free.
//   redis, cluster: a pin or a pending import holds a lease: a key with a TTL
//                   of StoreOptions::lease_ms, refreshed every lease_ms/3 by a
//                   background thread of the store while held. A crashed
//                   process's leases expire and its pins and imports become
//                   garbage one lease period later.
//
// Thread-safety: a BlockStore is safe for concurrent use by many threads;
// every method may be called at any time from any thread. A GenerationWriter
// is used by one thread at a time, and must be destroyed before its store.
//
// Read-only stores (StoreOptions::read_only): BeginGeneration, Delete and
// CollectGarbage fail with kNotSupported; Pin works (it needs write access to
// PATH/pins for rocksdb: and dir:).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace pacset {

// Catalog entry of one forest (serialised with cereal).
struct ForestInfo {
  std::string name;
  uint64_t generation = 0;  // increases with every publish of this name (see top of file)
  uint64_t size_bytes = 0;  // == block_count * block_size
  uint32_t block_size = 0;
  uint64_t block_count = 0;
  uint64_t header_checksum = 0;  // the .pac header checksum, to tell generations apart
  // The seed of the forest's block checksums (PacHeader::block_seed: the
  // .pac file's identity from format version 3, 0 before): every block read
  // is verified with it, so a block of another file at the same index fails.
  uint64_t block_seed = 0;
  int64_t created_unix_ns = 0;
  std::string source_file;     // base name of the imported model or .pac
  std::string source_format;   // "xgboost-json", "sklearn-pickle", "pac", ...
  std::string source_library;  // "xgboost 1.7.4", "scikit-learn 1.2.1", ""
};

// How errors name a generation: "forest 'x' generation 3".
std::string ForestContext(const std::string& name, uint64_t generation);

// Forest names: 1..200 bytes of [A-Za-z0-9._-], not starting with '.', not
// "." or "..": clear kInvalidArgument otherwise.
Status ValidateForestName(const std::string& name);

struct StoreOptions {
  int connect_timeout_ms = 2000;  // redis
  int io_timeout_ms = 5000;       // redis: per command
  std::string password;           // redis AUTH when the URI has none (else $REDISCLI_AUTH)
  size_t rocksdb_block_cache_bytes = 64u << 20;  // measured, see store/rocksdb_store.cc; 0: none
  bool read_only = false;  // open for reading only (rocksdb: secondary instance)
  // redis: lifetime of a pin's or a pending import's lease; refreshed every
  // lease_ms/3 while held, so a crashed holder's generation is garbage after it.
  int lease_ms = 30000;
  // rocksdb writers: how long to wait for another writer process (its LOCK)
  // before failing with kUnavailable ("store is busy").
  int busy_timeout_ms = 5000;
  // Read blocks past the kernel's page cache (O_DIRECT), for a caller that
  // caches blocks itself (the pacsetfs daemon): no page-cache page is
  // allocated, filled, copied from and reclaimed per block, and memory is not
  // spent on a second copy. dir: single blocks whose size is a multiple of
  // 4 KiB; rocksdb: a read-only instance's MultiGet batches of scattered
  // blocks (store/internal/uring_file_system.h). Runs of adjacent blocks (a
  // sequential reader's) still go through the page cache and its readahead.
  // Ignored where the file system refuses direct I/O.
  bool direct_reads = false;
};

struct StoreStats {
  std::string backend;  // "rocksdb", "dir", "redis", "redis-cluster"
  std::string location;
  uint64_t forests = 0;
  uint64_t generations = 0;  // including pinned old ones
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint64_t pending = 0;  // unpublished generations: imports running or crashed
};

// Writes one generation. Nothing is visible to readers until Publish.
// Destroying an unpublished writer abandons its blocks (they are garbage,
// collected by the next CollectGarbage in any process).
class GenerationWriter {
 public:
  virtual ~GenerationWriter() = default;
  virtual uint64_t generation() const = 0;
  // Stores block `index` (block_size bytes, sealed). Blocks may come in any
  // order; each index in [0, block_count) exactly once.
  virtual Status Put(uint64_t index, const char* block) = 0;
  // Makes the generation current for its name (atomic), after checking every
  // block was written. `info` supplies the metadata; name, generation,
  // block_size, block_count and size_bytes are filled in by the store.
  virtual Status Publish(ForestInfo info) = 0;
};

class BlockStore {
 public:
  virtual ~BlockStore() = default;

  // Starts a new generation of `name` (created on first publish).
  virtual StatusOr<std::unique_ptr<GenerationWriter>> BeginGeneration(const std::string& name,
                                                                      uint32_t block_size,
                                                                      uint64_t block_count) = 0;

  // The current generation of `name` (kNotFound if there is none).
  virtual StatusOr<ForestInfo> Lookup(const std::string& name) = 0;
  virtual StatusOr<std::vector<ForestInfo>> List() = 0;

  // Verified reads. `out` receives block_size bytes per block. A block index
  // beyond forest.block_count is kInvalidArgument; a block that fails
  // verification or is missing is kCorruption naming forest, generation and
  // block. MultiGet fails as a whole on the first bad block (in `blocks`
  // order); use Get per block to find all of them (see VerifyForest).
  Status Get(const ForestInfo& forest, uint64_t block, std::string* out);
  Status MultiGet(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                  std::vector<std::string>* out);
  // Like MultiGet with one outcome per block: (*status)[i] is OK when
  // (*out)[i] holds block blocks[i], else that block's own error. One backend
  // call for the whole batch (RocksDB MultiGet, a redis pipeline, preads);
  // only when it fails is each block read on its own, so a bad block fails
  // itself alone.
  void GetMany(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
               std::vector<std::string>* out, std::vector<Status>* status);

  // Removes `name` from the catalog; its generations become garbage once unpinned.
  virtual Status Delete(const std::string& name) = 0;

  // Keeps generation `gen` of `name` from being collected until Unpin or
  // until this process exits. Pins are counted per process (per store object
  // for redis). kNotFound if the generation is no longer stored (collected
  // between Lookup and Pin): look it up again.
  virtual Status Pin(const std::string& name, uint64_t gen) = 0;
  virtual Status Unpin(const std::string& name, uint64_t gen) = 0;

  // Deletes garbage generations and leftovers of crashed or abandoned imports
  // (see top of file); returns how many generations it deleted.
  virtual StatusOr<uint64_t> CollectGarbage() = 0;

  virtual StatusOr<StoreStats> Stat() = 0;

  // Makes catalog changes by other processes visible (rocksdb secondary
  // instances); a no-op where reads are always current.
  virtual Status Refresh() { return Status::Ok(); }

  // How many MultiGet calls on disjoint blocks are worth running at once
  // from different threads, for a reader that needs many blocks: redis 1
  // (a MultiGet is one round trip already), dir and rocksdb more (each
  // MultiGet reads its blocks one after another; parallel reads overlap on
  // the device). Measured by bench/store_predict_bench.py.
  virtual uint32_t read_parallelism() const { return 1; }
  // How many blocks one MultiGet call has in flight together: a part of a
  // batch smaller than this only adds a thread and its switches, so
  // ParallelReads splits a batch into parts of at least this many blocks.
  // RocksDB reads a MultiGet's keys 32 at a time (with io_uring, each 32 at
  // once); a store that reads one block after another, 1.
  virtual uint32_t blocks_read_at_once() const { return 1; }

 protected:
  // Unverified reads, implemented by each backend. Must fill exactly
  // forest.block_size bytes per block or return an error (kNotFound for a
  // missing block is reported as corruption by the caller).
  virtual Status ReadBlocks(const ForestInfo& forest, const std::vector<uint64_t>& blocks,
                            std::vector<std::string>* out) = 0;
  friend class FaultInjectionStore;
};

// Opens a store by URI (see top of file). Creates a rocksdb: or dir: store
// (and its parent directories) that does not exist yet unless
// options.read_only. Errors: a malformed URI or unknown scheme, a path that is
// a file, a non-empty directory that is not a store of that kind (the message
// names the right scheme when it is one of ours) are kInvalidArgument; a
// read-only open of a missing store is kNotFound; a rocksdb: writer that finds
// another writer process waits options.busy_timeout_ms and then fails with
// kUnavailable ("store is busy"); an unreachable redis server is kUnavailable
// within options.connect_timeout_ms; a wrong or missing redis password or a
// database the server does not have is kInvalidArgument; a redis-cluster:
// seed that is not a cluster node is kInvalidArgument, a cluster with a slot
// that no master serves kUnavailable. PATH may be relative (made absolute) or
// start with "~/".
StatusOr<std::unique_ptr<BlockStore>> OpenBlockStore(const std::string& uri,
                                                     const StoreOptions& options = {});

// The default store URI: $PACSET_STORE, else rocksdb:/var/lib/pacsetfs/store
// for root, else rocksdb:$HOME/.local/share/pacsetfs/store.
std::string DefaultStoreUri();

// `uri` with its password, if any, replaced by "***" (redis://:***@HOST:PORT),
// for every message, log line, mount table entry and stats file that shows a
// store. Everything between "//" and the last '@' but a user name counts as
// the password, so a malformed URI is redacted too.
std::string RedactStoreUri(const std::string& uri);
// Where RedactStoreUri finds the password: [first, second); empty if none.
std::pair<size_t, size_t> StoreUriPasswordSpan(const std::string& uri);
// Overwrites with '*', in place, the password of every store URI among a
// program's arguments (argv[1..argc-1]), once they are parsed: any local user
// sees a process's command line (ps, /proc/PID/cmdline, which the kernel
// reads from this very memory), and the daemon and `pacset predict --store
// ... --input -` run for long.
void HideStorePasswords(int argc, char** argv);

// Where a redis password comes from when the URI has none:
// StoreOptions::password, else this environment variable (the one redis-cli
// reads), so that it need not be on any command line.
constexpr const char* kRedisPasswordEnv = "REDISCLI_AUTH";

}  // namespace pacset
