// Turning SIGBUS on a mapped .pac file into a Status.
//
// A page of a mapped file that cannot be read (pacsetfs answers EIO for a
// corrupt or unreachable block) reaches the reader as SIGBUS. Code that
// touches a mapping arms a per-thread recovery point first:
//
//   SigbusScope scope(base, size);
//   if (sigsetjmp(*scope.env(), 1) != 0) return scope.Error(name);
//   scope.Arm();
//   ... touch the mapping (no objects with destructors created here) ...
//   scope.Disarm();
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
