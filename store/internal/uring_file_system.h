// RocksDB's files, with a MultiRead that sends all of its reads at once.
//
// RocksDB's MultiGet gathers the data blocks that a batch of up to 32 keys
// needs from one table file and reads them with FSRandomAccessFile::MultiRead.
// Debian's RocksDB is built without liburing, so its Posix files answer a
// MultiRead with one blocking pread after another: a batch of cold blocks
// waits for one device round trip per block. The files of this file system
// answer it with util/uring_reads (every read of the batch in flight at
// once, from the calling thread); everything else is the wrapped file
// system's. Where the kernel refuses io_uring, or RocksDB hands over a
// request without a buffer, the wrapped file's MultiRead serves the batch.
#pragma once

#include <rocksdb/file_system.h>

#include <memory>

namespace pacset {
namespace store_internal {

// Whether RocksDB stores read through this file system: the kernel allows
// io_uring, and this is not a ThreadSanitizer build (RocksDB's threads hand
// these files, and the file system itself, to each other by synchronisation
// TSan cannot see in Debian's uninstrumented library, as tests/tsan.supp
// explains: it reported their construction as racing with their use).
bool UringMultiReadUsable();

// With `direct_reads` (StoreOptions::direct_reads), a batch of reads goes
// past the page cache: the reads' 4 KiB-aligned spans, merged where they
// touch, with O_DIRECT, copied out. A batch that is one run of touching
// reads (a sequential reader's blocks), and every file system that refuses
// O_DIRECT, read through it.
std::shared_ptr<rocksdb::FileSystem> NewUringMultiReadFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& base, bool direct_reads = false);

}  // namespace store_internal
}  // namespace pacset
