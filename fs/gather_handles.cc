#include "fs/internal/gather_handles.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

int GatherHandles::Open(uint32_t uid, uint64_t* fh) {
  std::string line;
  int err = 0;
  {
    MutexLock lock(&mu_);
    const bool trusted = Trusted(uid);
    Usage& pool = trusted ? trusted_ : others_;
    auto user = trusted ? users_.end() : users_.find(uid);
    const uint64_t user_handles = user == users_.end() ? 0 : user->second.handles;
    if (!trusted && user_handles >= limits_.handles_per_user) {
      err = EMFILE;
      line = RefusedLocked(kUserHandles, uid, user_handles);
    } else if (pool.handles >= limits_.handles) {
      err = ENFILE;
      line = RefusedLocked(kHandles, uid, pool.handles);
    }
    if (err != 0) {
      ++refused_opens_;
    } else {
      if (!trusted) users_[uid].handles++;
      pool.handles++;
      *fh = ++next_fh_;
      handles_.emplace(*fh, Handle{uid, 0, nullptr});
      peak_since_trim_ = std::max(peak_since_trim_, HeldLocked());
    }
  }
  if (!line.empty()) Log(LOG_WARNING, "%s", line.c_str());
  return err;
}

int GatherHandles::SetRequest(uint64_t fh, std::shared_ptr<const Request> r) {
  const uint64_t bytes = RequestBytes(r->blocks.size());
  std::string line;
  int err = 0;
  {
    MutexLock lock(&mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return EBADF;
    Handle& h = it->second;
    const bool trusted = Trusted(h.uid);
    Usage& pool = trusted ? trusted_ : others_;
    Usage* user = trusted ? nullptr : &users_[h.uid];  // there while h is open
    // Only what the request adds counts: a handle may always replace its
    // request with one as large.
    const uint64_t adds = bytes > h.bytes ? bytes - h.bytes : 0;
    if (user && user->bytes + adds > limits_.bytes_per_user) {
      err = ENOMEM;
      line = RefusedLocked(kUserBytes, h.uid, user->bytes);
    } else if (pool.bytes + adds > limits_.bytes) {
      err = ENOMEM;
      line = RefusedLocked(kBytes, h.uid, pool.bytes);
    }
    if (err != 0) {
      ++refused_requests_;
    } else {
      if (user) user->bytes = user->bytes - h.bytes + bytes;
      pool.bytes = pool.bytes - h.bytes + bytes;
      h.bytes = bytes;
      h.request.swap(r);  // the old request is freed below, without the lock
      peak_since_trim_ = std::max(peak_since_trim_, HeldLocked());
    }
  }
  if (!line.empty()) Log(LOG_WARNING, "%s", line.c_str());
  return err;
}

bool GatherHandles::Get(uint64_t fh, std::shared_ptr<const Request>* r) const {
  MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  if (it == handles_.end()) return false;
  *r = it->second.request;
  return true;
}

bool GatherHandles::Close(uint64_t fh) {
  Handle closed;  // its request is freed without the lock
  bool trim = false;
  {
    MutexLock lock(&mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return false;
    closed = std::move(it->second);
    handles_.erase(it);
    if (Trusted(closed.uid)) {
      trusted_.handles--;
      trusted_.bytes -= closed.bytes;
    } else {
      auto user = users_.find(closed.uid);
      if (user != users_.end()) {
        user->second.handles--;
        user->second.bytes -= closed.bytes;
        if (user->second.handles == 0) users_.erase(user);
      }
      others_.handles--;
      others_.bytes -= closed.bytes;
    }
    const uint64_t held = HeldLocked();
    if (peak_since_trim_ >= held + kTrimBytes) {
      peak_since_trim_ = held;
      trim = true;
    }
  }
  return trim;
}

GatherHandles::Usage GatherHandles::UsageOf(uint32_t uid) const {
  MutexLock lock(&mu_);
  if (Trusted(uid)) return trusted_;
  auto it = users_.find(uid);
  return it == users_.end() ? Usage{} : it->second;
}

GatherHandles::Totals GatherHandles::totals() const {
  MutexLock lock(&mu_);
  Totals t;
  t.all.handles = others_.handles + trusted_.handles;
  t.all.bytes = others_.bytes + trusted_.bytes;
  t.refused_opens = refused_opens_;
  t.refused_requests = refused_requests_;
  return t;
}

std::string GatherHandles::RefusedLocked(Limit limit, uint32_t uid, uint64_t held) {
  LogSlot& slot = log_[limit];
  slot.refused++;
  const auto now = std::chrono::steady_clock::now();
  if (slot.logged && now - slot.last < kLogEvery) return "";
  const std::string who = limit == kUserHandles || limit == kUserBytes
                              ? "user " + std::to_string(uid)
                          : Trusted(uid) ? "root and the mounting user"
                                         : "users other than root and the mounting user";
  std::string line = "gather file: " + who;
  switch (limit) {
    case kUserHandles:
      line += " has " + std::to_string(held) + " handles open (max_gather_handles_per_user=" +
              std::to_string(limits_.handles_per_user) + "): opens refused with EMFILE";
      break;
    case kHandles:
      line += " have " + std::to_string(held) +
              " handles open (max_gather_handles=" + std::to_string(limits_.handles) +
              "): opens refused with ENFILE";
      break;
    case kUserBytes:
      line += "'s requests hold " + std::to_string(held) +
              " bytes (gather_memory_per_user=" + std::to_string(limits_.bytes_per_user) +
              "): requests refused with ENOMEM";
      break;
    case kBytes:
    case kLimits:
      line += ": requests hold " + std::to_string(held) +
              " bytes (gather_memory=" + std::to_string(limits_.bytes) +
              "): requests refused with ENOMEM";
      break;
  }
  line += " (" + std::to_string(slot.refused) + (slot.refused == 1 ? " refusal" : " refusals") +
          (slot.logged ? " since the last such line" : "") + "; logged at most once a minute)";
  slot.logged = true;
  slot.last = now;
  slot.refused = 0;
  return line;
}

}  // namespace fs_internal
}  // namespace pacset
