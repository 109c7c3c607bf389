#include "store/internal/uring_file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>
#include <vector>

#include "store/internal/file_util.h"
#include "util/status.h"
#include "util/uring_reads.h"

namespace pacset {
namespace store_internal {
namespace {

class UringMultiReadFile final : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  // `fd`: the same file, opened again (RocksDB's own descriptor is private
  // to its file object).
  UringMultiReadFile(std::unique_ptr<rocksdb::FSRandomAccessFile> base, UniqueFd fd)
      : FSRandomAccessFileOwnerWrapper(std::move(base)), fd_(std::move(fd)) {}

  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (n <= 1 || !fd_.valid()) return target()->MultiRead(reqs, n, options, dbg);
    std::vector<int> fds(n, fd_.get());
    std::vector<uint64_t> offsets(n);
    std::vector<uint32_t> lens(n);
    std::vector<char*> bufs(n);
    std::vector<int> res(n);
    for (size_t i = 0; i < n; ++i) {
      if (reqs[i].scratch == nullptr || reqs[i].len > static_cast<size_t>(INT32_MAX))
        return target()->MultiRead(reqs, n, options, dbg);
      offsets[i] = reqs[i].offset;
      lens[i] = static_cast<uint32_t>(reqs[i].len);
      bufs[i] = reqs[i].scratch;
    }
    if (!UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), n, res.data()))
      return target()->MultiRead(reqs, n, options, dbg);
    for (size_t i = 0; i < n; ++i) {
      if (res[i] < 0) {
        reqs[i].result = rocksdb::Slice();
        reqs[i].status = rocksdb::IOStatus::IOError(
            Status::FromErrno("read at offset " + std::to_string(reqs[i].offset), -res[i])
                .message());
      } else {
        reqs[i].result = rocksdb::Slice(reqs[i].scratch, static_cast<size_t>(res[i]));
        reqs[i].status = rocksdb::IOStatus::OK();
      }
    }
    return rocksdb::IOStatus::OK();
  }

 private:
  UniqueFd fd_;
};

class UringMultiReadFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit UringMultiReadFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
      : FileSystemWrapper(base) {}
  const char* Name() const override { return "PacsetUringMultiRead"; }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& path,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> base;
    rocksdb::IOStatus s = target()->NewRandomAccessFile(path, options, &base, dbg);
    if (!s.ok()) return s;
    // With direct reads RocksDB aligns each request's offset, length and
    // buffer (RandomAccessFileReader::MultiRead) before it gets here, so the
    // second descriptor is opened with O_DIRECT too.
    UniqueFd fd;
    if (UringAvailable()) {
      const int direct = options.use_direct_reads ? O_DIRECT : 0;
      fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | direct));
      // The reads name exactly the blocks they want: no kernel readahead.
      if (fd.valid() && !direct) (void)posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
    }
    *result = std::make_unique<UringMultiReadFile>(std::move(base), std::move(fd));
    return rocksdb::IOStatus::OK();
  }
};

}  // namespace

bool UringMultiReadUsable() {
#if defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return false;
#endif
#endif
  return UringAvailable();
}

std::shared_ptr<rocksdb::FileSystem> NewUringMultiReadFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& base) {
  return std::make_shared<UringMultiReadFileSystem>(base);
}

}  // namespace store_internal
}  // namespace pacset
