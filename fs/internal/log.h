// The daemon's log: stderr while in the foreground (or before the daemon
// detaches), syslog (LOG_DAEMON) once it runs in the background.
#pragma once

#include <syslog.h>

namespace pacset {
namespace fs_internal {

void Log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// From now on, Log writes to syslog with identity "pacsetfs".
void LogToSyslog();

}  // namespace fs_internal
}  // namespace pacset
