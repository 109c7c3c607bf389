// The control file of a pacsetfs mount, MOUNTPOINT/.pacsetfs/control: its
// protocol, and the client side used by `pacsetfs drop-cache` and
// `pacset-trace record`.
//
// One command per write(2), trailing newlines and spaces ignored:
//   drop NAME          make forest NAME cold: drop its pages from the kernel's
//                      page cache (even from live mappings) and the daemon's
//                      cache; the write returns when that is done
//   drop *             the same for every forest
//   trace start PATH   log block accesses to the absolute PATH
//   trace stop         stop logging
// The write fails with the errno of the daemon's Status (fs/errno.h): ENOENT
// for an unknown forest, EINVAL for a malformed command.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace pacset {

constexpr const char* kControlFilePath = "/.pacsetfs/control";  // under the mount point
constexpr const char* kStatsFilePath = "/.pacsetfs/stats";

struct ControlCommand {
  enum class Kind { kDrop, kTraceStart, kTraceStop };
  Kind kind = Kind::kDrop;
  std::string arg;  // kDrop: a forest name or "*"; kTraceStart: the path

  static ControlCommand Drop(std::string name) { return {Kind::kDrop, std::move(name)}; }
  static ControlCommand TraceStart(std::string path) {
    return {Kind::kTraceStart, std::move(path)};
  }
  static ControlCommand TraceStop() { return {Kind::kTraceStop, ""}; }
  // The line written to the control file, newline included.
  std::string ToLine() const;
};

// Parses what one write to the control file carried.
StatusOr<ControlCommand> ParseControlCommand(std::string_view text);

// Writes `cmd` to the control file of the pacsetfs mount at `mountpoint`.
// kNotFound for a drop of an unknown forest; the daemon's refusal otherwise.
Status SendControlCommand(const std::string& mountpoint, const ControlCommand& cmd);

// The pacsetfs mount a command works on: the one that the paths among `args`
// (a command line) lead into, if they lead into exactly one; else the only
// pacsetfs mount in /proc/self/mounts. An error naming the mounts when that
// is ambiguous, kNotFound when there is none.
StatusOr<std::string> FindPacsetfsMount(const std::vector<std::string>& args = {});

}  // namespace pacset
