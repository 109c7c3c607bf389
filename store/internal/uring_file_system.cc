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
    if (!(direct_fd_.valid() && ReadRuns(reqs, n, /*direct=*/true, res.data())) &&
        !ReadRuns(reqs, n, /*direct=*/false, res.data()))
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
  // Reads a batch as runs: the requests' spans (with `direct`, aligned to
  // kDirectReadAlign) merged where they touch or overlap, each run one read
  // into one buffer, then copied out to its requests. RocksDB asks for whole
  // table blocks, and a block holding a 4 KiB value is a little over 4 KiB,
  // so a forest's neighbouring blocks touch (and with `direct` share a
  // page): one read of a run instead of a read per block. With `direct`
  // (past the page cache, O_DIRECT): false when the whole batch is one run
  // of several requests (a sequential reader's blocks: the page cache and
  // its readahead serve those better) or a read fails, and the caller reads
  // through the page cache. Without: false only when io_uring is refused; a
  // failed run's requests get its -errno.
  bool ReadRuns(rocksdb::FSReadRequest* reqs, size_t n, bool direct, int* res) {
    const uint64_t align = direct ? kDirectReadAlign : 1;
    auto down = [&](uint64_t x) { return x / align * align; };
    auto up = [&](uint64_t x) { return down(x + align - 1); };
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return reqs[a].offset < reqs[b].offset; });
    struct Run {
      uint64_t begin, end;
      size_t requests;
    };
    std::vector<Run> runs;
    std::vector<size_t> run_of(n);
    for (size_t i : order) {
      const uint64_t begin = down(reqs[i].offset), end = up(reqs[i].offset + reqs[i].len);
      if (!runs.empty() && begin <= runs.back().end) {
        runs.back().end = std::max(end, runs.back().end);
        ++runs.back().requests;
      } else {
        runs.push_back({begin, end, 1});
      }
      run_of[i] = runs.size() - 1;
    }
    if (direct && runs.size() == 1) return false;
    const size_t m = runs.size();
    // A buffered run of one request is read straight into its buffer.
    uint64_t total = 0;
    for (const Run& r : runs) {
      if (r.end - r.begin > static_cast<uint64_t>(INT32_MAX)) return false;
      if (direct || r.requests > 1) total += r.end - r.begin;
    }
    std::unique_ptr<char, decltype(&std::free)> buf(
        total == 0 ? nullptr
                   : static_cast<char*>(direct ? std::aligned_alloc(kDirectReadAlign, total)
                                               : std::malloc(total)),
        &std::free);
    if (total != 0 && !buf) return false;
    std::vector<int> fds(m, direct ? direct_fd_.get() : fd_.get()), got(m);
    std::vector<uint64_t> offsets(m);
    std::vector<uint32_t> lens(m);
    std::vector<char*> bufs(m, nullptr);
    uint64_t at = 0;
    for (size_t r = 0; r < m; ++r) {
      offsets[r] = runs[r].begin;
      lens[r] = static_cast<uint32_t>(runs[r].end - runs[r].begin);
      if (direct || runs[r].requests > 1) {
        bufs[r] = buf.get() + at;
        at += lens[r];
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (bufs[run_of[i]] == nullptr) bufs[run_of[i]] = reqs[i].scratch;
    if (!UringReadAll(fds.data(), offsets.data(), lens.data(), bufs.data(), m, got.data()))
      return false;
    for (size_t i = 0; i < n; ++i) {
      const size_t r = run_of[i];
      if (got[r] < 0) {
        if (direct) return false;
        res[i] = got[r];
        continue;
      }
      // Bytes of the request within what was read (short at the end of the file).
      const uint64_t skip = reqs[i].offset - offsets[r];
      const uint64_t have = static_cast<uint64_t>(got[r]) > skip ? got[r] - skip : 0;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(have, reqs[i].len));
      if (bufs[r] != reqs[i].scratch) std::memcpy(reqs[i].scratch, bufs[r] + skip, len);
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
