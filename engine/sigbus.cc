#include <signal.h>

#include <cstring>
#include <mutex>

#include "engine/internal/sigbus.h"

namespace pacset {
namespace {

struct ThreadState {
  sigjmp_buf env;
  volatile sig_atomic_t armed = 0;
  uintptr_t lo = 0, hi = 0;
  uintptr_t fault = 0;
};
thread_local ThreadState tls_state;

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  ThreadState& s = tls_state;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (s.armed && addr >= s.lo && addr < s.hi) {
    s.armed = 0;
    s.fault = addr;
    siglongjmp(s.env, 1);
  }
  // Not ours: die as SIGBUS would have killed us.
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallHandlerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace

SigbusScope::SigbusScope(const void* base, uint64_t size, uint32_t block_size)
    : base_(reinterpret_cast<uintptr_t>(base)), size_(size), block_size_(block_size) {
  InstallHandlerOnce();
}

sigjmp_buf* SigbusScope::env() { return &tls_state.env; }

void SigbusScope::Arm() {
  tls_state.lo = base_;
  tls_state.hi = base_ + size_;
  tls_state.fault = 0;
  tls_state.armed = 1;
}

void SigbusScope::Disarm() { tls_state.armed = 0; }

Status SigbusScope::Error(const std::string& name) const {
  const uint64_t off = tls_state.fault - base_;
  return Status::IOError(name + ": block " + std::to_string(off / block_size_) + " (offset " +
                         std::to_string(off) +
                         ") could not be read: the filesystem reported an I/O error (a corrupt "
                         "or unreachable block; see the pacsetfs log)");
}

}  // namespace pacset
