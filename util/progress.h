// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace pacset {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, bool enabled)
      : label_(std::move(label)),
        total_(total ? total : 1),
        enabled_(enabled && isatty(STDERR_FILENO)) {}
  ~ProgressBar() { Finish(); }

  void Update(uint64_t done) {
    if (!enabled_) return;
    const int percent = static_cast<int>(done * 100 / total_);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    const int width = 40, filled = percent * width / 100;
    std::fprintf(stderr, "\r%-10s [%s%s] %3d%%", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), percent);
    std::fflush(stderr);
  }
  void Finish() {
    if (!enabled_ || finished_) return;
    Update(total_);
    std::fputc('\n', stderr);
    finished_ = true;
  }

 private:
  std::string label_;
  uint64_t total_;
  bool enabled_;
  int last_percent_ = -1;
  bool finished_ = false;
};

}  // namespace pacset
