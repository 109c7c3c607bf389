// Whole-buffer positional reads and writes (retrying short transfers and
// EINTR), shared by the .pac reader (layout/) and the file-backed stores.
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

}  // namespace pacset
