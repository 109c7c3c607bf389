// Whole-buffer positional reads and writes (retrying short transfers and
// EINTR), shared by the .pac reader (layout/) and the file-backed stores, and
// reading a whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace pacset {

// pread/pwrite of exactly n bytes. PreadFull reports a short file as
// kCorruption naming `what`; an OS error is kIOError "read <what>: <strerror>".
Status PreadFull(int fd, char* buf, size_t n, uint64_t offset, const std::string& what);
Status PwriteFull(int fd, const char* buf, size_t n, uint64_t offset, const std::string& what);

// The whole contents of the file at `path` (read until EOF, so it works on
// pipes and on files whose size is not known in advance, e.g. FUSE files).
// Errors: "open PATH: <strerror>" (kNotFound when missing), "read PATH: ...".
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace pacset
