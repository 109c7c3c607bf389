#include "protocol/control.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

namespace pacset {
namespace {

// /proc/self/mounts escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

std::string ControlCommand::ToLine() const {
  switch (kind) {
    case Kind::kDrop:
      return "drop " + arg + "\n";
    case Kind::kTraceStart:
      return "trace start " + arg + "\n";
    case Kind::kTraceStop:
      return "trace stop\n";
  }
  return "\n";
}

StatusOr<ControlCommand> ParseControlCommand(std::string_view text) {
  std::string cmd(text);
  while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == ' ')) cmd.pop_back();
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("control command '" + cmd + "': " + why +
                                   " (expected: drop NAME, drop *, trace start /PATH, trace stop)");
  };
  if (cmd == "drop") return bad("drop needs a forest name or *");
  if (cmd.rfind("drop ", 0) == 0) {
    const std::string name = cmd.substr(5);
    if (name.empty() || name.find(' ') != std::string::npos)
      return bad("drop takes one forest name or *");
    return ControlCommand::Drop(name);
  }
  if (cmd.rfind("trace start ", 0) == 0) {
    const std::string path = cmd.substr(12);
    if (path.empty() || path[0] != '/') return bad("trace start needs an absolute path");
    return ControlCommand::TraceStart(path);
  }
  if (cmd == "trace stop") return ControlCommand::TraceStop();
  return bad("unknown command");
}

Status SendControlCommand(const std::string& mountpoint, const ControlCommand& cmd) {
  const std::string path = mountpoint + kControlFilePath;
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 && errno == EROFS)
    return Status::FromErrno("pacsetfs on " + mountpoint +
                                 " is mounted read-only (-o ro), which disables its control file",
                             EROFS);
  if (fd < 0)
    return Status::FromErrno(
        "cannot open " + path + " (is pacsetfs mounted on " + mountpoint + "?)", errno);
  const std::string line = cmd.ToLine();
  const ssize_t n = write(fd, line.data(), line.size());
  const int err = n < 0 ? errno : EIO;
  close(fd);
  if (n == static_cast<ssize_t>(line.size())) return Status::Ok();
  if (err == ENOENT && cmd.kind == ControlCommand::Kind::kDrop)
    return Status::NotFound("no forest named '" + cmd.arg + "' on " + mountpoint);
  std::string shown = line;
  shown.pop_back();
  return Status::FromErrno("pacsetfs on " + mountpoint + " refused '" + shown + "'", err);
}

StatusOr<std::string> FindPacsetfsMount(const std::vector<std::string>& args) {
  std::ifstream in("/proc/self/mounts");
  if (!in) return Status::FromErrno("cannot read /proc/self/mounts", errno);
  std::vector<std::string> found;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string dev, dir, type;
    ss >> dev >> dir >> type;
    if (type == "fuse.pacsetfs") found.push_back(UnescapeMountField(dir));
  }
  std::vector<std::string> named;  // mounts the arguments' paths lead into
  for (const auto& a : args) {
    char real[PATH_MAX];
    if (a.find('/') == std::string::npos || !realpath(a.c_str(), real)) continue;
    const std::string path = real;
    for (const auto& m : found) {
      const bool inside = path == m || (path.rfind(m + "/", 0) == 0) || m == "/";
      if (inside && std::find(named.begin(), named.end(), m) == named.end()) named.push_back(m);
    }
  }
  if (named.size() == 1) return named[0];
  if (found.size() == 1) return found[0];
  if (found.empty()) return Status::NotFound("no pacsetfs mount found; mount one or pass --mount");
  std::string all;
  for (const auto& f : found) all += (all.empty() ? "" : ", ") + f;
  return Status::InvalidArgument("several pacsetfs mounts (" + all + "): choose one with --mount");
}

}  // namespace pacset
