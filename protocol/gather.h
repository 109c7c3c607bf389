// The gather file of a pacsetfs mount, MOUNTPOINT/.pacsetfs/gather: many
// blocks of a forest, anywhere in its file, in one round trip. Its protocol,
// and the client the engine uses (engine/pac_file_source.cc).
//
// Why: a page fault or a pread of a forest file is one FUSE request per
// block, and on a virtual machine each request costs the daemon one or two
// thread switches (exits to the hypervisor). A cold row needs ~1,000 blocks
// scattered over the file, which the engine asks for 32 at a time; through
// the gather file each such batch is one write and one read.
//
// Protocol. Open the file O_RDWR (mode 0666: it gives no more than the forest
// files do, see "Who may gather what"; a mount made with -o ro refuses the
// open, and a client then reads the forest file itself). Each
// open file holds at most one request, set by a write(2) of exactly
// 16 + 8 * count bytes, all integers little-endian:
//
//   offset  size  field
//   0       4     magic 0x31524750 ("PGR1")
//   4       4     count: 1 .. kMaxGatherBlocks
//   8       8     inode: st_ino of NAME.pac of this mount, open, that the
//                 writer may read (below)
//   16      8*count  block indexes, each < the forest's block count, in any
//                 order, repeats allowed
//
// Reads of the same open file then return the blocks in request order:
// block i of the request at offset i * block_size, the reply to a read ends
// at count * block_size (a read there returns 0 bytes). The file is
// direct-I/O (no page cache); a request stays until the next write. Each
// block is verified by the daemon as any read is (a corrupt block is never
// returned), and the daemon also pushes the blocks it fetched into the page
// cache of the forest file once no gather is being served, so mappings of
// it see them afterwards.
//
// Who may gather what. A forest's blocks are reachable here only as through
// its file: a request names an inode that has open handles (its generation is
// pinned meanwhile) and that the requesting user could read by opening it
// now, because it is still its name's current generation (anyone may open
// it), or because that user holds a handle of that very inode open. So once
// a forest is removed, or replaced by a new generation, only the users who
// hold the old inode open still gather it; the others, root included, get
// ESTALE, at the write and at the read of a request written before. The user
// is the uid of the write (and of the read), not its pid (the pid is the
// calling thread's, and the engine gathers from threads other than the one
// that opened the forest); a handle of a forest counts for the user who
// opened it (a descriptor passed to another user does not make it theirs).
//
// Limits (mount options; fs/internal/gather_handles.h). Each open handle and
// its request take the daemon's memory, and with allow_other every local
// user may open the file: each user may hold at most
// max_gather_handles_per_user handles (default 4,096; over it the open fails
// with EMFILE) and gather_memory_per_user bytes of requests (default 4 MiB,
// a request counting 8 bytes per block plus 96; over it the write fails with
// ENOMEM and the handle keeps the request it had), and all users but root
// and the mounting user together max_gather_handles (16,384; ENFILE) and
// gather_memory (16 MiB; ENOMEM). Root and the mounting user have a budget
// of those totals of their own. A handle counts for the user who opened it.
// The memory of a closed handle is returned to the system. An engine holds
// a few handles per open forest with requests of at most 32 blocks; a client
// refused at the cap reads the forest file itself.
//
// Errors (the errno of the failing call): open EMFILE or ENFILE over a
// handle cap; write EINVAL for a malformed request, ESTALE when the inode is
// not an open forest of this mount that the writer may read, ENOMEM over a
// memory cap; read EINVAL before any request, EIO when a block cannot be
// read (the daemon logs forest, generation and block), ESTALE when the
// forest's inode is gone or the reader may no longer read it.
//
// ---------------------------------------------------------------------------
// Version 2: a gather on the forest file itself, one round trip (pacsetfs
// since issue 34; ForestGather below is its client).
//
// Why: a gather through the gather file is two FUSE requests (the write,
// then the read), and a cold row of the 682-tree forest is ~22 dependent
// rounds of gathers: each round paid two round trips, and the daemon
// answered each block twice (the read's reply, then a push into the forest
// file's page cache so that mappings see it). FUSE in libfuse 3.14 has no
// request that carries a list in and many blocks out: an ioctl of a regular
// file is "restricted" (the kernel copies at most _IOC_SIZE bytes, under
// 16 KiB, in and out), getxattr returns at most 64 KiB, and a read carries
// only an offset and a size. So the request goes in an ioctl of the forest
// file, and the blocks come back through that file's page cache.
//
// Protocol. On a descriptor of MOUNTPOINT/NAME.pac (opened O_RDONLY, as any
// reader opens it):
//
//   ioctl(fd, kForestGatherIoctl, buf)   buf: kForestGatherIoctlBytes bytes
//
// kForestGatherIoctl = _IOC(_IOC_WRITE, 'P', 0x47, 1040) = 0x44105047 on
// x86-64 and arm64: the kernel copies all 1040 bytes of `buf` to the daemon
// and nothing back. `buf`, little-endian:
//
//   offset  size  field
//   0       4     magic 0x32524750 ("PGR2")
//   4       4     count: 0 .. kMaxForestGatherBlocks (128)
//   8       8     flags: 0 (anything else is EINVAL: room to grow)
//   16      8*128 block indexes; the first `count` are read, each < the
//                 forest's block count, any order, repeats allowed; the
//                 rest is ignored
//
// The daemon reads the blocks (from its cache or the store, each verified as
// any read's), puts each whole block into the page cache of that forest
// file (fuse_lowlevel_notify_store) and then replies: ioctl returns the
// number of blocks it put there (count when all were). The caller then
// reads them with pread(2) of the same file, which finds them in the page
// cache: no further request. A read is always correct: a block the daemon
// did not push (it returns fewer when its workers are busy pushing, or a
// `drop` came meanwhile, which a push would undo) or that the kernel evicted
// since is read by the kernel from the daemon as any read is. count 0 is a
// probe: it returns 0 from a daemon that knows this request.
//
// Who may gather. The request travels with the open file: the daemon
// answers only the user who opened that descriptor (the uid of the ioctl
// must be the uid of the open; EACCES otherwise, so a descriptor passed to
// another user gathers nothing for them), and the file's generation is
// pinned while it is open (so ESTALE never happens to it, however the forest
// is replaced or removed). The daemon keeps nothing between requests:
// no handle, no request, so there is nothing per user to cap; each request
// holds a worker thread until its reply, as a read does.
//
// Errors (errno of ioctl): ENOTTY (or ENOSYS) from a daemon without this
// request (use the gather file); EINVAL for a bad magic, count or flags or a
// block past the forest's end; EACCES as above; EIO when a block cannot be
// read (the daemon logs forest, generation and block; the blocks before it
// may have been pushed); ESTALE if the inode is not a forest of this mount.
//
// Versioning: the gather file (version 1, "PGR1") stays for older engines;
// an engine probes version 2 on the forest file first (ForestGather::Open)
// and falls back to the gather file, then to reading the file.
#pragma once

#include <sys/ioctl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace pacset {

constexpr const char* kGatherFileName = "gather";  // in MOUNTPOINT/.pacsetfs/
constexpr uint32_t kGatherMagic = 0x31524750;      // "PGR1"
constexpr uint32_t kMaxGatherBlocks = 1024;
constexpr size_t kGatherHeaderBytes = 16;

constexpr uint32_t kForestGatherMagic = 0x32524750;  // "PGR2"
constexpr uint32_t kMaxForestGatherBlocks = 128;
constexpr size_t kForestGatherIoctlBytes = 16 + 8 * kMaxForestGatherBlocks;  // 1040
constexpr unsigned int kForestGatherIoctl =
    _IOC(_IOC_WRITE, 'P', 0x47, kForestGatherIoctlBytes);  // 0x44105047

struct GatherRequest {
  uint64_t inode = 0;
  std::vector<uint64_t> blocks;
};

std::string EncodeGatherRequest(uint64_t inode, const uint64_t* blocks, size_t count);
// Version 2: the ioctl's buffer (kForestGatherIoctlBytes) for blocks[0 .. count), count <=
// kMaxForestGatherBlocks; and its parser (inode: unused, 0).
std::string EncodeForestGather(const uint64_t* blocks, size_t count);
StatusOr<GatherRequest> ParseForestGather(const char* data, size_t size);
// kInvalidArgument naming what is wrong with what one write carried.
StatusOr<GatherRequest> ParseGatherRequest(const char* data, size_t size);

// A client's open gather file, for one forest file. Not thread-safe: one
// request at a time (pool them).
class GatherChannel {
 public:
  // The channel for the forest file at `path`, open as `forest_fd`: null
  // when that file is not on a pacsetfs mount that has a gather file (the
  // caller reads the file itself). The gather file is opened without
  // following links and must be on the forest's own mount.
  static std::unique_ptr<GatherChannel> Open(const std::string& path, int forest_fd);
  ~GatherChannel();
  GatherChannel(const GatherChannel&) = delete;
  GatherChannel& operator=(const GatherChannel&) = delete;

  // Blocks blocks[0 .. count) into out (count * block_size bytes, block i
  // at i * block_size); count <= kMaxGatherBlocks. kIOError naming the
  // forest file and the errno on failure.
  Status Gather(const uint64_t* blocks, size_t count, uint32_t block_size, char* out);

 private:
  GatherChannel(int fd, uint64_t inode, std::string what)
      : fd_(fd), inode_(inode), what_(std::move(what)) {}
  const int fd_;
  const uint64_t inode_;
  const std::string what_;  // for errors: the forest file
};

// Version 2, on the forest file's own descriptor. Thread-safe (each call is
// one ioctl and preads; the daemon keeps no state between them).
class ForestGather {
 public:
  // Null unless `forest_fd` is a file of a pacsetfs mount that answers the
  // probe (count 0). The descriptor is borrowed: it must outlive this.
  static std::unique_ptr<ForestGather> Open(int forest_fd, std::string what);

  // Blocks blocks[0 .. count) into out (count * block_size bytes, block i at
  // i * block_size), count <= kMaxForestGatherBlocks: one ioctl, then a pread
  // per run of adjacent blocks (from the page cache). kIOError naming the
  // forest file, the block and the errno on failure.
  Status Gather(const uint64_t* blocks, size_t count, uint32_t block_size, char* out) const;

 private:
  ForestGather(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  const int fd_;
  const std::string what_;
};

}  // namespace pacset
