// progress_reporter.h: what a person watching the run sees. On a terminal a
// live line (epoch, step/total, loss, loss scale, samples/s, ETA) redrawn at
// most a few times a second; otherwise one line per --log-every steps.
// Permanent lines (evaluations, notices) are printed above the live line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp {

struct ProgressSnapshot {
  int64_t epoch = 0, epochs = 0;  // 1-based epoch of this step
  int64_t step = 0, total_steps = 0;
  double loss = 0.0;
  double loss_scale = 0.0;
  double samples_per_s = 0.0;
  double allreduce_ms_per_step = 0.0;  // log lines only (0: not shown)
  double eta_s = 0.0;
  bool skipped = false;
};

class ProgressReporter {
 public:
  explicit ProgressReporter(bool enabled);
  bool is_terminal() const { return tty_; }
  // Terminal: true when the live line is due for a redraw.
  bool live_line_due();
  void live_line(const ProgressSnapshot& s);
  void log_line(const ProgressSnapshot& s);
  void permanent(const std::string& line);
  void finish_live_line();

 private:
  static std::string format(const ProgressSnapshot& s);
  bool enabled_;
  bool tty_;
  bool live_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

std::string format_duration(double seconds);

}  // namespace ddp
