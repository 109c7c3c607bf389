#include "protocol/gather.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/file_io.h"
#include "util/le_fields.h"

namespace pacset {

std::string EncodeGatherRequest(uint64_t inode, const uint64_t* blocks, size_t count) {
  std::string out(kGatherHeaderBytes + 8 * count, '\0');
  PutField<uint32_t>(out.data(), 0, kGatherMagic);
  PutField<uint32_t>(out.data(), 4, static_cast<uint32_t>(count));
  PutField<uint64_t>(out.data(), 8, inode);
  for (size_t i = 0; i < count; ++i) PutField<uint64_t>(out.data(), 16 + 8 * i, blocks[i]);
  return out;
}

StatusOr<GatherRequest> ParseGatherRequest(const char* data, size_t size) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("gather request: " + why);
  };
  if (size < kGatherHeaderBytes)
    return bad(std::to_string(size) + " bytes, shorter than the 16-byte header");
  if (GetField<uint32_t>(data, 0) != kGatherMagic) return bad("bad magic (not PGR1)");
  const uint32_t count = GetField<uint32_t>(data, 4);
  if (count == 0 || count > kMaxGatherBlocks)
    return bad("count " + std::to_string(count) + " not in 1.." + std::to_string(kMaxGatherBlocks));
  if (size != kGatherHeaderBytes + 8 * uint64_t{count})
    return bad(std::to_string(size) + " bytes for " + std::to_string(count) + " blocks (expected " +
               std::to_string(kGatherHeaderBytes + 8 * uint64_t{count}) + ")");
  GatherRequest r;
  r.inode = GetField<uint64_t>(data, 8);
  r.blocks.resize(count);
  for (uint32_t i = 0; i < count; ++i) r.blocks[i] = GetField<uint64_t>(data, 16 + 8 * i);
  return r;
}

std::string EncodeForestGather(const uint64_t* blocks, size_t count) {
  std::string out(kForestGatherIoctlBytes, '\0');
  PutField<uint32_t>(out.data(), 0, kForestGatherMagic);
  PutField<uint32_t>(out.data(), 4, static_cast<uint32_t>(count));
  for (size_t i = 0; i < count && i < kMaxForestGatherBlocks; ++i)
    PutField<uint64_t>(out.data(), 16 + 8 * i, blocks[i]);
  return out;
}

StatusOr<GatherRequest> ParseForestGather(const char* data, size_t size) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("forest gather request: " + why);
  };
  if (size != kForestGatherIoctlBytes)
    return bad(std::to_string(size) + " bytes (expected " +
               std::to_string(kForestGatherIoctlBytes) + ")");
  if (GetField<uint32_t>(data, 0) != kForestGatherMagic) return bad("bad magic (not PGR2)");
  const uint32_t count = GetField<uint32_t>(data, 4);
  if (count > kMaxForestGatherBlocks)
    return bad("count " + std::to_string(count) + " over " +
               std::to_string(kMaxForestGatherBlocks));
  if (GetField<uint64_t>(data, 8) != 0) return bad("unknown flags");
  GatherRequest r;
  r.blocks.resize(count);
  for (uint32_t i = 0; i < count; ++i) r.blocks[i] = GetField<uint64_t>(data, 16 + 8 * i);
  return r;
}

std::unique_ptr<GatherChannel> GatherChannel::Open(const std::string& path, int forest_fd) {
  struct stat forest;
  if (fstat(forest_fd, &forest) != 0 || !S_ISREG(forest.st_mode)) return nullptr;
  const std::string gather = DirName(path) + "/.pacsetfs/" + kGatherFileName;
  const int fd = ::open(gather.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return nullptr;
  struct stat st;
  // On the forest's own mount (st_dev), a regular file: a directory of
  // forests elsewhere with a planted `.pacsetfs/gather` gets nothing.
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != forest.st_dev) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<GatherChannel>(new GatherChannel(fd, forest.st_ino, path));
}

GatherChannel::~GatherChannel() { ::close(fd_); }

Status GatherChannel::Gather(const uint64_t* blocks, size_t count, uint32_t block_size, char* out) {
  if (count == 0) return Status::Ok();
  if (count > kMaxGatherBlocks)
    return Status::InvalidArgument("gather of " + std::to_string(count) + " blocks, more than " +
                                   std::to_string(kMaxGatherBlocks));
  const std::string req = EncodeGatherRequest(inode_, blocks, count);
  ssize_t w;
  do w = ::pwrite(fd_, req.data(), req.size(), 0);
  while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(req.size()))
    return Status::IOError(what_ + ": gather request for " + std::to_string(count) +
                           " blocks: " + (w < 0 ? std::strerror(errno) : "short write"));
  const uint64_t want = uint64_t{count} * block_size;
  for (uint64_t got = 0; got < want;) {
    const ssize_t r = ::pread(fd_, out + got, want - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return Status::IOError(what_ + ": gather of " + std::to_string(count) + " blocks (block " +
                             std::to_string(blocks[got / block_size]) +
                             "): " + (r < 0 ? std::strerror(errno) : "ended early"));
    got += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

namespace {

int ForestGatherIoctl(int fd, const std::string& req) {
  int r;
  do r = ::ioctl(fd, kForestGatherIoctl, req.data());
  while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : r;
}

}  // namespace

std::unique_ptr<ForestGather> ForestGather::Open(int forest_fd, std::string what) {
  struct stat st;
  if (fstat(forest_fd, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  // The probe: 0 from a pacsetfs that knows the request; ENOTTY from any
  // other file (or an older pacsetfs).
  if (ForestGatherIoctl(forest_fd, EncodeForestGather(nullptr, 0)) != 0) return nullptr;
  return std::unique_ptr<ForestGather>(new ForestGather(forest_fd, std::move(what)));
}

Status ForestGather::Gather(const uint64_t* blocks, size_t count, uint32_t block_size,
                            char* out) const {
  if (count == 0) return Status::Ok();
  if (count > kMaxForestGatherBlocks)
    return Status::InvalidArgument("forest gather of " + std::to_string(count) +
                                   " blocks, more than " + std::to_string(kMaxForestGatherBlocks));
  const int r = ForestGatherIoctl(fd_, EncodeForestGather(blocks, count));
  if (r < 0)
    return Status::IOError(what_ + ": gather of " + std::to_string(count) +
                           " blocks: " + std::strerror(-r));
  // From the page cache, where the daemon put them (or, for any it did not,
  // through the daemon as any read).
  for (size_t i = 0; i < count;) {
    size_t j = i + 1;
    while (j < count && blocks[j] == blocks[j - 1] + 1) ++j;
    const uint64_t want = uint64_t{j - i} * block_size;
    PACSET_RETURN_IF_ERROR(PreadFull(fd_, out + i * block_size, want, blocks[i] * block_size,
                                     what_ + " block " + std::to_string(blocks[i])));
    i = j;
  }
  return Status::Ok();
}

}  // namespace pacset
