#include "fs/internal/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace pacset {
namespace fs_internal {
namespace {
std::atomic<bool> g_use_syslog{false};
}  // namespace

void Log(int level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (g_use_syslog.load()) {
    vsyslog(level, fmt, ap);
  } else {
    std::fprintf(stderr, "pacsetfs: ");
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
  }
  va_end(ap);
}

void LogToSyslog() {
  openlog("pacsetfs", LOG_PID, LOG_DAEMON);
  g_use_syslog = true;
}

}  // namespace fs_internal
}  // namespace pacset
