#include <algorithm>
#include <cstdlib>
#include <string>

#include "fs/pacsetfs.h"
#include "util/size.h"

namespace pacset {
namespace {

// Ceilings of the gather file's caps (protocol/gather.h, "Limits"): far above any
// engine's use, and what an operator's typo cannot exceed.
constexpr uint64_t kMaxGatherHandles = uint64_t{1} << 24;
constexpr uint64_t kMaxGatherMemory = uint64_t{1} << 36;
// Ceilings of the read-ahead for page-faulting readers (fs/internal/fault_readahead.h).
constexpr uint64_t kMaxFaultReadahead = uint64_t{64} << 20;
constexpr uint64_t kMaxFaultReadaheadHeld = uint64_t{1} << 36;

}  // namespace

Status ParseMountOptionString(const std::string& list, MountOptions* o) {
  // Mount-table options that mean nothing to this filesystem.
  static const char* kIgnored[] = {"dev",      "nodev", "suid",    "nosuid",   "exec",  "noexec",
                                   "defaults", "auto",  "noauto",  "user",     "users", "nofail",
                                   "_netdev",  "atime", "noatime", "relatime", "async", "sync",
                                   "nouser",   "owner", "group"};
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t c = list.find(',', pos);
    if (c == std::string::npos) c = list.size();
    const std::string opt = list.substr(pos, c - pos);
    pos = c + 1;
    if (opt.empty()) continue;
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : opt.substr(eq + 1);
    auto number = [&](uint64_t* out) -> Status {
      if (val.empty()) return Status::InvalidArgument("option " + key + " needs a value");
      PACSET_ASSIGN_OR_RETURN(*out, ParseByteSize(val, "option " + key));
      return Status::Ok();
    };
    uint64_t v = 0;
    if (std::find(std::begin(kIgnored), std::end(kIgnored), key) != std::end(kIgnored) ||
        key.rfind("x-", 0) == 0 || key == "comment") {
      continue;
    } else if (key == "ro") {
      o->read_only = true;
    } else if (key == "rw") {
      o->read_only = false;
    } else if (key == "password_file") {
      if (val.empty()) return Status::InvalidArgument("option password_file needs a path");
      o->password_file = val;
    } else if (key == "allow_other") {
      o->allow_other = true;
    } else if (key == "auto_unmount") {
      o->auto_unmount = true;
    } else if (key == "no_auto_unmount") {
      o->auto_unmount = false;
    } else if (key == "store") {
      o->store_uri = val;
    } else if (key == "cache_size") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->cache_bytes = v;
    } else if (key == "trace") {
      o->trace_path = val;
    } else if (key == "store_timeout") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->store_timeout_ms = static_cast<int>(v);
    } else if (key == "catalog_refresh") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->catalog_refresh_ms = static_cast<int>(std::max<uint64_t>(v, 10));
    } else if (key == "push_blocks") {
      o->push_blocks = true;
    } else if (key == "no_push_blocks") {
      o->push_blocks = false;
    } else if (key == "direct_store_reads") {
      o->direct_store_reads = true;
    } else if (key == "no_direct_store_reads") {
      o->direct_store_reads = false;
    } else if (key == "prefetch_bins") {
      o->prefetch_bins = true;
    } else if (key == "readahead") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_readahead = static_cast<uint32_t>(std::min<uint64_t>(v, 1 << 20));
    } else if (key == "fault_readahead") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->fault_readahead = std::min<uint64_t>(v, kMaxFaultReadahead);
    } else if (key == "fault_readahead_file_max") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->fault_readahead_file_max = v;
    } else if (key == "fault_readahead_per_user") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->fault_readahead_per_user = std::min<uint64_t>(v, kMaxFaultReadaheadHeld);
    } else if (key == "fault_readahead_total") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->fault_readahead_total = std::min<uint64_t>(v, kMaxFaultReadaheadHeld);
    } else if (key == "threads") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_threads = static_cast<int>(std::clamp<uint64_t>(v, 1, 1024));
    } else if (key == "max_gather_handles_per_user") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_gather_handles_per_user = std::min<uint64_t>(v, kMaxGatherHandles);
    } else if (key == "max_gather_handles") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->max_gather_handles = std::min<uint64_t>(v, kMaxGatherHandles);
    } else if (key == "gather_memory_per_user") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->gather_memory_per_user = std::min<uint64_t>(v, kMaxGatherMemory);
    } else if (key == "gather_memory") {
      PACSET_RETURN_IF_ERROR(number(&v));
      o->gather_memory = std::min<uint64_t>(v, kMaxGatherMemory);
    } else if (key == "debug") {
      o->debug = true;
      o->foreground = true;
    } else {
      return Status::InvalidArgument("unknown mount option '" + key + "'");
    }
  }
  // A user's cap above the total would never be reached.
  o->max_gather_handles_per_user = std::min(o->max_gather_handles_per_user, o->max_gather_handles);
  o->gather_memory_per_user = std::min(o->gather_memory_per_user, o->gather_memory);
  o->fault_readahead_per_user = std::min(o->fault_readahead_per_user, o->fault_readahead_total);
  return Status::Ok();
}

}  // namespace pacset
