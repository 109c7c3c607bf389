// What the daemon does for each control command (protocol: fs/control.h).
#include "fs/internal/filesystem.h"
#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

Status PacsetFs::Control(const ControlCommand& cmd) {
  switch (cmd.kind) {
    case ControlCommand::Kind::kDrop: {
      const std::string& name = cmd.arg;
      std::vector<std::shared_ptr<ForestInode>> targets;
      uint32_t id = 0;
      PACSET_RETURN_IF_ERROR(table_->InodesOf(name, &targets, &id));
      // Kernel pages first (this unmaps them from every process), then ours.
      for (auto& f : targets) fuse_lowlevel_notify_inval_inode(se_, f->ino, 0, 0);
      if (name == "*") {
        cache_.Drop(0);
      } else if (id != 0) {
        cache_.Drop(id);
      }
      tracing_.RecordDrop(name);
      Log(LOG_INFO, "dropped caches for %s", name == "*" ? "all forests" : name.c_str());
      return Status::Ok();
    }
    case ControlCommand::Kind::kTraceStart:
      return tracing_.Start(cmd.arg);
    case ControlCommand::Kind::kTraceStop:
      return tracing_.Stop();
  }
  return Status::InvalidArgument("unknown control command");
}

}  // namespace fs_internal
}  // namespace pacset
