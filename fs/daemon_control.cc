// What the daemon does for each control command (protocol: protocol/control.h).
#include "fs/internal/filesystem.h"
#include "fs/internal/log.h"

namespace pacset {
namespace fs_internal {

void PacsetFs::Control(const ControlCommand& cmd, std::function<void(Status)> done) {
  switch (cmd.kind) {
    case ControlCommand::Kind::kDrop: {
      const std::string name = cmd.arg;
      std::vector<std::shared_ptr<ForestInode>> targets;
      uint32_t id = 0;
      Status s = table_->InodesOf(name, &targets, &id);
      if (!s.ok()) return done(s);
      // Kernel pages first (this unmaps them from every process), then ours,
      // then the reply: a drop is complete when the write returns. The
      // invalidation runs on the notifier thread (see fs/internal/notifier.h).
      notifier_->Invalidate(std::move(targets), [this, name, id, done = std::move(done)] {
        if (name == "*") {
          cache_.Drop(0);
        } else if (id != 0) {  // 0: never served, nothing cached
          cache_.Drop(id);
        }
        tracing_.RecordDrop(name);
        Log(LOG_INFO, "dropped caches for %s", name == "*" ? "all forests" : name.c_str());
        done(Status::Ok());
      });
      return;
    }
    case ControlCommand::Kind::kTraceStart:
      return done(tracing_.Start(cmd.arg));
    case ControlCommand::Kind::kTraceStop:
      return done(tracing_.Stop());
  }
  done(Status::InvalidArgument("unknown control command"));
}

}  // namespace fs_internal
}  // namespace pacset
