// A helper process for the store tests: it does one thing to a store, prints
// "ready ..." on stdout and then waits to be killed (SIGKILL), so tests can
// observe what a crashed importer, a dead reader's pin or a busy writer leaves.
//
//   store_child import URI NAME BLOCK_SIZE TOTAL PUT LEASE_MS
//   store_child pin URI NAME GEN READ_ONLY LEASE_MS
//   store_child hold URI              (keeps a writer open)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/block_store.h"
#include "testkit/test_blocks.h"

using namespace pacset;

namespace {

int Fail(const Status& s) {
  std::printf("error %s\n", s.ToString().c_str());
  std::fflush(stdout);
  return 1;
}

[[noreturn]] void WaitForever() {
  for (;;) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1], uri = argv[2];
  StoreOptions options;
  options.busy_timeout_ms = 500;
  if (mode == "import" && argc == 8) {
    options.lease_ms = std::atoi(argv[7]);
    auto store = OpenBlockStore(uri, options);
    if (!store.ok()) return Fail(store.status());
    const uint32_t bs = static_cast<uint32_t>(std::atoi(argv[4]));
    const uint64_t total = std::strtoull(argv[5], nullptr, 10);
    const uint64_t put = std::strtoull(argv[6], nullptr, 10);
    auto w = (*store)->BeginGeneration(argv[3], bs, total);
    if (!w.ok()) return Fail(w.status());
    for (uint64_t i = 0; i < put; ++i) {
      Status s = (*w)->Put(i, store_test::MakeBlock(bs, i, (*w)->generation()).data());
      if (!s.ok()) return Fail(s);
    }
    std::printf("ready %llu\n", static_cast<unsigned long long>((*w)->generation()));
    std::fflush(stdout);
    WaitForever();
  }
  if (mode == "pin" && argc == 7) {
    options.read_only = std::atoi(argv[5]) != 0;
    options.lease_ms = std::atoi(argv[6]);
    auto store = OpenBlockStore(uri, options);
    if (!store.ok()) return Fail(store.status());
    Status s = (*store)->Pin(argv[3], std::strtoull(argv[4], nullptr, 10));
    if (!s.ok()) return Fail(s);
    std::printf("ready\n");
    std::fflush(stdout);
    WaitForever();
  }
  if (mode == "hold" && argc == 3) {
    auto store = OpenBlockStore(uri, options);
    if (!store.ok()) return Fail(store.status());
    std::printf("ready\n");
    std::fflush(stdout);
    WaitForever();
  }
  return 2;
}
