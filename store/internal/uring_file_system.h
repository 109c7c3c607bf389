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

std::shared_ptr<rocksdb::FileSystem> NewUringMultiReadFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& base);

}  // namespace store_internal
}  // namespace pacset
