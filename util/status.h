// Status and StatusOr: how every pacsetfs module reports failure.
//
// No exception crosses a module boundary. A function that can fail returns
// Status (or StatusOr<T> when it also produces a value); callers must look at
// it ([[nodiscard]]). Messages are written for the person running the tool:
// they name the file, field, line or block and say what is wrong, never dump
// raw bytes. The filesystem turns a Status into an errno in exactly one place
// (fs/errno.h).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace pacset {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    // the caller's input is malformed (model, CSV, option)
  kNotFound = 2,           // a named forest, file or key does not exist
  kCorruption = 3,         // stored data failed a checksum or structural check
  kIOError = 4,            // the operating system or a store failed an operation
  kNotSupported = 5,       // valid input that this version cannot handle
  kUnavailable = 6,        // a store cannot be reached right now (may recover)
  kAlreadyExists = 7,      // a name is taken
  kDeadlineExceeded = 8,   // an operation did not finish in its time budget
  kResourceExhausted = 9,  // disk full, memory bound hit
  kInternal = 10,          // a broken invariant in pacsetfs itself
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  // An IOError built from errno, e.g. IOErrorFromErrno("open forest.pac", errno).
  static Status FromErrno(const std::string& context, int err);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }

  // "Corruption: forest 'x' block 7: checksum mismatch"; "OK" for success.
  std::string ToString() const;

  // A copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "StatusOr built from an OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace pacset

#define PACSET_CONCAT_INNER_(a, b) a##b
#define PACSET_CONCAT_(a, b) PACSET_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK Status.
#define PACSET_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::pacset::Status pacset_status_ = (expr);        \
    if (!pacset_status_.ok()) return pacset_status_; \
  } while (0)

// `lhs` = the value of a StatusOr `expr`, or return its error.
#define PACSET_ASSIGN_OR_RETURN(lhs, expr) \
  PACSET_ASSIGN_OR_RETURN_IMPL_(PACSET_CONCAT_(pacset_statusor_, __LINE__), lhs, expr)
#define PACSET_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
