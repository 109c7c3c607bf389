// libFuzzer target: the requests written to MOUNTPOINT/.pacsetfs/gather
// (protocol/gather.h), which any local user may send to an allow_other mount. A
// request that parses encodes back to exactly the bytes it came from.
#include <cstddef>
#include <cstdint>
#include <string>

#include "protocol/gather.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  auto r = pacset::ParseGatherRequest(bytes, size);
  if (!r.ok()) return 0;
  const std::string again =
      pacset::EncodeGatherRequest(r->inode, r->blocks.data(), r->blocks.size());
  if (again != std::string(bytes, size)) __builtin_trap();
  return 0;
}
