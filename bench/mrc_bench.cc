// The miss-ratio passes on a large synthetic trace: writes a trace of N
// accesses to D blocks of one forest (4 KiB), Zipf-like popularity (s = 0.9,
// block ids shuffled) with every 16th access part of a sequential scan, then
// times the exact pass and sampled passes (each in its own child process, so
// that its peak RSS is its own) and gives the sampled curves' error against
// the exact one at 1/64 .. 1/1 of the footprint, next to their stated bound.
//   build/bench/mrc_bench TRACE [ACCESSES] [BLOCKS]   (default 100000000 2000000)
// The trace is written once and kept (delete it afterwards: 48 bytes an access),
// and so are the exact pass's figures (TRACE.exact).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "trace/analysis/miss_ratio.h"
#include "trace/trace_format.h"

namespace {

bool WriteTrace(const std::string& path, uint64_t n, uint64_t d) {
  std::FILE* f = std::fopen(path.c_str(), "wbx");
  if (!f) return false;
  char buf[pacset::kTraceHeaderSize];
  pacset::TraceFileHeader h;
  pacset::EncodeTraceHeader(h, buf);
  std::fwrite(buf, 1, sizeof(buf), f);
  pacset::TraceRecord info;
  info.type = pacset::TraceRecordType::kForestInfo;
  info.forest = 1;
  info.generation = 1;
  info.bytes = 4096;
  info.block = d;
  char rec[pacset::kTraceRecordSize];
  pacset::EncodeTraceRecord(info, rec);
  std::fwrite(rec, 1, sizeof(rec), f);
  std::vector<double> cdf(d);
  double sum = 0;
  for (uint64_t i = 0; i < d; ++i) cdf[i] = sum += 1 / std::pow(static_cast<double>(i + 1), 0.9);
  std::vector<uint64_t> perm(d);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(1);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::uniform_real_distribution<double> u(0, sum);
  pacset::TraceRecord r;
  r.type = pacset::TraceRecordType::kBlockAccess;
  r.forest = 1;
  r.generation = 1;
  r.bytes = 4096;
  uint64_t scan = 0;
  std::vector<char> out;
  out.reserve(1 << 22);
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 16 == 0) {
      r.block = scan++ % d;
    } else {
      r.block = perm[std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()];
    }
    r.time_ns = i;
    pacset::EncodeTraceRecord(r, rec);
    out.insert(out.end(), rec, rec + sizeof(rec));
    if (out.size() >= (1 << 22)) {
      std::fwrite(out.data(), 1, out.size(), f);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), f);
  return std::fclose(f) == 0;
}

// Runs one pass in a child: seconds, peak RSS (MiB), and the miss ratio and
// error bound at the footprint fractions (footprint from `fp`, or its own).
struct PassResult {
  double seconds = 0, rss_mib = 0;
  uint64_t footprint = 0;
  double ratio[7] = {}, error[7] = {}, size_error[7] = {};
};

PassResult RunPass(const std::string& path, double rate, uint64_t fp) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    PassResult r;
    const auto t0 = std::chrono::steady_clock::now();
    pacset::MissRatioOptions o;
    o.sample_rate = rate;
    o.seed = 1;
    auto m = pacset::ComputeMissRatio(path, o);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
      _exit(1);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.footprint = fp ? fp : m->all.footprint_bytes();
    for (int k = 0; k < 7; ++k) {
      const auto p = m->all.At(r.footprint >> k);
      r.ratio[k] = p.miss_ratio;
      r.error[k] = p.error;
      r.size_error[k] = p.size_error;
    }
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.rss_mib = ru.ru_maxrss / 1024.0;
    if (write(fds[1], &r, sizeof(r)) != sizeof(r)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  PassResult r;
  if (read(fds[0], &r, sizeof(r)) != sizeof(r)) std::exit(1);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mrc_bench TRACE [ACCESSES] [BLOCKS]\n");
    return 2;
  }
  const std::string path = argv[1];
  const uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100000000;
  const uint64_t d = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 2000000;
  if (access(path.c_str(), F_OK) != 0) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!WriteTrace(path, n, d)) {
      std::perror(path.c_str());
      return 1;
    }
    std::printf("wrote %s: %llu accesses of %llu blocks in %.1f s\n", path.c_str(),
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(d),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // The exact pass's figures are kept in TRACE.exact: later runs (of the
  // sampled passes after a change) reuse them.
  PassResult exact;
  std::FILE* cached = std::fopen((path + ".exact").c_str(), "rb");
  if (!cached || std::fread(&exact, sizeof(exact), 1, cached) != 1) {
    exact = RunPass(path, 1.0, 0);
    if (std::FILE* out = std::fopen((path + ".exact").c_str(), "wb")) {
      std::fwrite(&exact, sizeof(exact), 1, out);
      std::fclose(out);
    }
  }
  if (cached) std::fclose(cached);
  std::printf("exact:        %7.1f s  peak RSS %7.1f MiB  footprint %llu blocks\n", exact.seconds,
              exact.rss_mib, static_cast<unsigned long long>(exact.footprint / 4096));
  for (double rate : {0.01, 0.001}) {
    const PassResult s = RunPass(path, rate, exact.footprint);
    std::printf("rate %-6g:  %7.1f s  peak RSS %7.1f MiB\n", rate, s.seconds, s.rss_mib);
    for (int k = 6; k >= 0; --k)
      std::printf(
          "   cache 1/%-3d of footprint: exact %.4f sampled %.4f  |diff| %.4f  bound "
          "+-%.4f (size +-%.1f%%)\n",
          1 << k, exact.ratio[k], s.ratio[k], std::fabs(s.ratio[k] - exact.ratio[k]), s.error[k],
          100 * s.size_error[k]);
  }
}
