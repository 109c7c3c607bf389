#include "fs/control.h"

#include <fcntl.h>
#include <unistd.h>

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
  if (cmd.rfind("drop", 0) == 0) {
    std::string name = cmd.size() > 4 ? cmd.substr(5) : "*";
    if (name.empty()) name = "*";
    return ControlCommand::Drop(name);
  }
  if (cmd.rfind("trace start ", 0) == 0) return ControlCommand::TraceStart(cmd.substr(12));
  if (cmd == "trace stop") return ControlCommand::TraceStop();
  return Status::InvalidArgument("unknown control command '" + cmd +
                                 "' (expected: drop NAME, drop *, trace start /PATH, trace stop)");
}

Status SendControlCommand(const std::string& mountpoint, const ControlCommand& cmd) {
  const std::string path = mountpoint + kControlFilePath;
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
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

StatusOr<std::string> FindPacsetfsMount() {
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
  if (found.size() == 1) return found[0];
  if (found.empty()) return Status::NotFound("no pacsetfs mount found; mount one or pass --mount");
  std::string all;
  for (const auto& f : found) all += (all.empty() ? "" : ", ") + f;
  return Status::InvalidArgument("several pacsetfs mounts (" + all + "): choose one with --mount");
}

}  // namespace pacset
