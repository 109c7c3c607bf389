#include "util/status.h"

#include <cstring>

namespace pacset {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "Invalid argument";
    case StatusCode::kNotFound:
      return "Not found";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIOError:
      return "I/O error";
    case StatusCode::kNotSupported:
      return "Not supported";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kAlreadyExists:
      return "Already exists";
    case StatusCode::kDeadlineExceeded:
      return "Deadline exceeded";
    case StatusCode::kResourceExhausted:
      return "Resource exhausted";
    case StatusCode::kInternal:
      return "Internal error";
  }
  return "Unknown";
}

Status Status::FromErrno(const std::string& context, int err) {
  StatusCode code = StatusCode::kIOError;
  if (err == ENOENT) code = StatusCode::kNotFound;
  if (err == ENOSPC || err == EDQUOT || err == ENOMEM) code = StatusCode::kResourceExhausted;
  if (err == EEXIST) code = StatusCode::kAlreadyExists;
  return Status(code, context + ": " + std::strerror(err));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace pacset
