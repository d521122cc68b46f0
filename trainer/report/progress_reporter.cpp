// progress_reporter.cpp
#include "trainer/report/progress_reporter.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ddp {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// Open MPI gives every rank a pseudo-terminal whether or not mpirun's own
// output is one, so under mpirun a terminal cannot be told from a log file:
// print plain log lines there.
ProgressReporter::ProgressReporter(bool enabled)
    : enabled_(enabled), tty_(enabled && isatty(STDOUT_FILENO) && !std::getenv("OMPI_COMM_WORLD_SIZE")) {}

std::string ProgressReporter::format(const ProgressSnapshot& s) {
  char comm[48] = "";
  if (s.allreduce_ms_per_step > 0)
    std::snprintf(comm, sizeof comm, "  all-reduce %.2f ms/step", s.allreduce_ms_per_step);
  char buf[320];
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld  step %lld/%lld  loss %.4f  scale %g  %.0f samples/s%s  ETA %s%s",
                static_cast<long long>(s.epoch), static_cast<long long>(s.epochs), static_cast<long long>(s.step),
                static_cast<long long>(s.total_steps), s.loss, s.loss_scale, s.samples_per_s, comm,
                format_duration(s.eta_s).c_str(), s.skipped ? "  (skipped: overflow)" : "");
  return buf;
}

bool ProgressReporter::live_line_due() {
  if (!tty_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200)) return false;
  last_draw_ = now;
  return true;
}

void ProgressReporter::live_line(const ProgressSnapshot& s) {
  if (!tty_) return;
  std::printf("\r\033[K%s", format(s).c_str());
  std::fflush(stdout);
  live_shown_ = true;
}

void ProgressReporter::log_line(const ProgressSnapshot& s) {
  if (!enabled_ || tty_) return;
  std::printf("%s\n", format(s).c_str());
  std::fflush(stdout);
}

void ProgressReporter::finish_live_line() {
  if (live_shown_) std::printf("\r\033[K");
  live_shown_ = false;
}

void ProgressReporter::permanent(const std::string& line) {
  if (!enabled_) return;
  finish_live_line();
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace ddp
