// What a block checksum costs, seeded (format version 3: the file's
// identity) against unseeded (versions 1 and 2): XXH3-64 over 64 MiB cut
// into blocks of 256 B, 4 KiB and 64 KiB, best of 15 interleaved rounds.
//   build/bench/checksum_bench
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "layout/block.h"

int main() {
  std::vector<char> buf(64u << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131);
  for (size_t bs : {size_t{256}, size_t{4096}, size_t{65536}}) {
    const size_t n = buf.size() / bs;
    double best[2] = {1e9, 1e9};
    uint64_t sink = 0;
    for (int round = 0; round < 15; ++round) {
      for (int seeded = 0; seeded < 2; ++seeded) {
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t b = 0; b < n; ++b)
          sink +=
              pacset::Checksum64(buf.data() + b * bs, bs - 8, seeded ? 0x9E3779B97F4A7C15ull : 0);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best[seeded] = std::min(best[seeded], s);
      }
    }
    std::printf(
        "%6zu-byte blocks: unseeded %.2f GB/s, seeded %.2f GB/s, seeded/unseeded %.3f"
        " (%.1f ns more a block)   [%llx]\n",
        bs, buf.size() / best[0] / 1e9, buf.size() / best[1] / 1e9, best[1] / best[0],
        (best[1] - best[0]) / n * 1e9, static_cast<unsigned long long>(sink & 0xF));
  }
}
