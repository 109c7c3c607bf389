#include "store/internal/uring_file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "store/internal/file_util.h"
#include "util/file_io.h"
#include "util/status.h"
#include "util/uring_reads.h"

namespace pacset {
namespace store_internal {
namespace {

uint64_t AlignDown(uint64_t x) { return x / kDirectReadAlign * kDirectReadAlign; }
uint64_t AlignUp(uint64_t x) { return AlignDown(x + kDirectReadAlign - 1); }

class UringMultiReadFile final : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  // `fd`: the same file, opened again (RocksDB's own descriptor is private
  // to its file object); `direct_fd`: once more with O_DIRECT, or not valid.
  UringMultiReadFile(std::unique_ptr<rocksdb::FSRandomAccessFile> base, UniqueFd fd,
                     UniqueFd direct_fd)
      : FSRandomAccessFileOwnerWrapper(std::move(base)),
        fd_(std::move(fd)),
        direct_fd_(std::move(direct_fd)) {}

  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (n <= 1 || !fd_.valid()) return target()->MultiRead(reqs, n, options, dbg);
    for (size_t i = 0; i < n; ++i) {
      if (reqs[i].scratch == nullptr || reqs[i].len > static_cast<size_t>(INT32_MAX) / 2)
        return target()->MultiRead(reqs, n, options, dbg);
    }
    std::vector<int> res(n);
    if (!(direct_fd_.valid() && ReadDirect(reqs, n, res.data())) &&
        !ReadBuffered(reqs, n, res.data()))
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
  // Every request into its own buffer through the page cache.
  bool ReadBuffered(rocksdb::FSReadRequest* reqs, size_t n, int* res) {
    std::vector<int> fds(n, fd_.get());
    std::vector<uint64_t> offsets(n);
    std::vector<uint32_t> lens(n);
    std::vector<char*> bufs(n);
    for (size_t i = 0; i < n; ++i) {
      offsets[i] = reqs[i].offset;
      lens[i] = static_cast<uint32_t>(reqs[i].len);
      bufs[i] = reqs[i].scratch;
    }
    return UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), n, res);
  }

  // A batch past the page cache: the requests' aligned spans, those that
  // touch or overlap merged into runs (RocksDB's blocks of 4 KiB values are
  // a little over 4 KiB, so neighbouring blocks share a page), each run read
  // with O_DIRECT into one aligned buffer, then copied out. False (the
  // caller reads through the page cache) when the whole batch is one run of
  // several requests (a sequential reader's blocks: the page cache and its
  // readahead serve those better) or a direct read fails.
  bool ReadDirect(rocksdb::FSReadRequest* reqs, size_t n, int* res) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return reqs[a].offset < reqs[b].offset; });
    struct Run {
      uint64_t begin, end;  // aligned
    };
    std::vector<Run> runs;
    std::vector<size_t> run_of(n);
    uint64_t total = 0;
    for (size_t i : order) {
      const uint64_t begin = AlignDown(reqs[i].offset);
      const uint64_t end = AlignUp(reqs[i].offset + reqs[i].len);
      if (!runs.empty() && begin <= runs.back().end) {
        total += std::max(end, runs.back().end) - runs.back().end;
        runs.back().end = std::max(end, runs.back().end);
      } else {
        runs.push_back({begin, end});
        total += end - begin;
      }
      run_of[i] = runs.size() - 1;
    }
    if (runs.size() == 1) return false;
    std::unique_ptr<char, decltype(&std::free)> buf(
        static_cast<char*>(std::aligned_alloc(kDirectReadAlign, total)), &std::free);
    if (!buf) return false;
    const size_t m = runs.size();
    std::vector<int> fds(m, direct_fd_.get()), got(m);
    std::vector<uint64_t> offsets(m);
    std::vector<uint32_t> lens(m);
    std::vector<char*> bufs(m);
    uint64_t at = 0;
    for (size_t r = 0; r < m; ++r) {
      if (runs[r].end - runs[r].begin > static_cast<uint64_t>(INT32_MAX)) return false;
      offsets[r] = runs[r].begin;
      lens[r] = static_cast<uint32_t>(runs[r].end - runs[r].begin);
      bufs[r] = buf.get() + at;
      at += lens[r];
    }
    if (!UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), m, got.data()))
      return false;
    for (size_t i = 0; i < n; ++i) {
      const size_t r = run_of[i];
      if (got[r] < 0) return false;
      // Bytes of the request within what was read (short at the end of the file).
      const uint64_t skip = reqs[i].offset - offsets[r];
      const uint64_t have = static_cast<uint64_t>(got[r]) > skip ? got[r] - skip : 0;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(have, reqs[i].len));
      std::memcpy(reqs[i].scratch, bufs[r] + skip, len);
      res[i] = static_cast<int>(len);
    }
    return true;
  }

  UniqueFd fd_;
  UniqueFd direct_fd_;
};

class UringMultiReadFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  UringMultiReadFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base, bool direct_reads)
      : FileSystemWrapper(base), direct_reads_(direct_reads) {}
  const char* Name() const override { return "PacsetUringMultiRead"; }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& path,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> base;
    rocksdb::IOStatus s = target()->NewRandomAccessFile(path, options, &base, dbg);
    if (!s.ok()) return s;
    UniqueFd fd, direct_fd;
    if (UringAvailable()) {
      fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      // The reads name exactly the blocks they want: no kernel readahead.
      if (fd.valid()) (void)posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM);
      // Refused (EINVAL) where the file system has no direct I/O.
      if (fd.valid() && direct_reads_)
        direct_fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT));
    }
    *result =
        std::make_unique<UringMultiReadFile>(std::move(base), std::move(fd), std::move(direct_fd));
    return rocksdb::IOStatus::OK();
  }

 private:
  const bool direct_reads_;
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
    const std::shared_ptr<rocksdb::FileSystem>& base, bool direct_reads) {
  return std::make_shared<UringMultiReadFileSystem>(base, direct_reads);
}

}  // namespace store_internal
}  // namespace pacset
