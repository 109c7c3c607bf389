// The one place where a Status becomes an errno for the kernel.
#pragma once

#include <cerrno>

#include "util/status.h"

namespace pacset {

// Corruption, I/O errors, an unreachable store and missed deadlines are all
// EIO for a reader: the data could not be delivered. A reader of a mapped
// file sees that as SIGBUS.
inline int StatusToErrno(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    case StatusCode::kNotSupported:
      return ENOTSUP;
    case StatusCode::kAlreadyExists:
      return EEXIST;
    case StatusCode::kResourceExhausted:
      return ENOMEM;
    case StatusCode::kCorruption:
    case StatusCode::kIOError:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kInternal:
      return EIO;
  }
  return EIO;
}

}  // namespace pacset
