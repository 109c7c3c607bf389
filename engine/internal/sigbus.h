// Turning SIGBUS on a mapped .pac file into a Status.
//
// A page of a mapped file that cannot be read (pacsetfs answers EIO for a
// corrupt or unreachable block, a file truncated under us) reaches the
// reader as SIGBUS. The engine reads blocks with pread first (a Status, not
// a signal), so this guards the rare page evicted since and unreadable now.
// Code that touches a mapping arms a per-thread recovery point first:
//
//   SigbusScope scope(base, size, block_size);
//   if (sigsetjmp(*scope.env(), 0) != 0) return scope.Error(name);
//   scope.Arm();
//   PlainLoop(...);  // touches the mapping
//   scope.Disarm();
//
// The jump skips every frame between the fault and the sigsetjmp, so the
// armed code must be plain: no object with a destructor alive in those
// frames (C++ forbids a longjmp over one), no locks, no allocation; it
// reports problems as plain values (engine/internal/walk.h WalkFault) that
// the caller turns into a Status after Disarm. The handler runs with
// SA_NODEFER and an empty mask, so there is no signal mask to restore:
// sigsetjmp(env, 0) avoids a system call per arming.
//
// A SIGBUS outside an armed range keeps its default action (the process dies).
#pragma once

#include <setjmp.h>

#include <cstdint>
#include <string>

#include "util/status.h"

namespace pacset {

class SigbusScope {
 public:
  SigbusScope(const void* base, uint64_t size, uint32_t block_size);
  ~SigbusScope() { Disarm(); }
  sigjmp_buf* env();
  void Arm();
  void Disarm();
  // The error after a jump: names the file, block and offset.
  Status Error(const std::string& name) const;

 private:
  uintptr_t base_;
  uint64_t size_;
  uint32_t block_size_;
};

}  // namespace pacset
