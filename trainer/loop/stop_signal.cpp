// stop_signal.cpp
#include "trainer/loop/stop_signal.h"

#include <unistd.h>

#include <csignal>

namespace ddp {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_phase = static_cast<std::sig_atomic_t>(StopSignalPhase::StartUp);

// What follows "stopped by SIGTERM " in each phase that exits at once.
const char* phase_tail(StopSignalPhase phase) {
  switch (phase) {
    case StopSignalPhase::StartUp:
      return "during start-up; nothing was trained or written";
    case StopSignalPhase::Bench:
      return "during --bench; nothing was written";
    case StopSignalPhase::Finished:
      return "after the run had finished; its results were written";
    case StopSignalPhase::Training:
      break;
  }
  return nullptr;
}

// The name of a signal the handler is installed for, else nullptr: no
// number to format in a signal handler.
const char* stop_signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return nullptr;
  }
}

// The exit line with its newline into `out`, e.g. "ddp_train: stopped by
// SIGTERM during start-up; nothing was trained or written" (async-signal-
// safe: plain copies, no allocation); returns its length.
size_t format_exit_line(char* out, size_t capacity, StopSignalPhase phase, int signal_number) {
  const char* tail = phase_tail(phase);
  if (tail == nullptr) return 0;
  size_t n = 0;
  const char* name = stop_signal_name(signal_number);
  for (const char* piece : {"ddp_train: stopped by ", name != nullptr ? name : "a signal", " ", tail, "\n"})
    for (const char* c = piece; *c != '\0' && n < capacity; ++c) out[n++] = *c;
  return n;
}

// Only async-signal-safe calls here: write, _exit, sigaction and raise.
extern "C" void on_stop_signal(int signal_number) {
  if (g_stop_signal != 0) {  // the second one: the default action, now
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signal_number, &dfl, nullptr);
    raise(signal_number);  // blocked until this handler returns, then delivered
    return;
  }
  g_stop_signal = signal_number;
  const auto phase = static_cast<StopSignalPhase>(g_phase);
  if (phase == StopSignalPhase::Training) return;
  // _exit, not exit: no atexit handlers or stdio flushes, which are not
  // safe here. An output file being written is left as its writer leaves
  // it on a crash (checkpoints: a temporary file only).
  char line[160];
  const size_t length = format_exit_line(line, sizeof line, phase, signal_number);
  const ssize_t ignored = write(STDERR_FILENO, line, length);
  (void)ignored;
  _exit(128 + signal_number);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // In Training, blocking reads and writes resume after the flag is set; in
  // the other phases the handler never returns.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // Open MPI's mpirun passes SIGUSR1 on to every rank at once and kills
  // nothing (SIGTERM it passes on only odls_base_sigkill_timeout seconds
  // later, and SIGKILL as long after): the stop request that a plain mpirun
  // delivers whatever its kill timeout.
  sigaction(SIGUSR1, &action, nullptr);
}

void set_stop_signal_phase(StopSignalPhase phase) { g_phase = static_cast<std::sig_atomic_t>(phase); }

int pending_stop_signal() { return g_stop_signal; }

std::string signal_name(int signal_number) {
  const char* name = stop_signal_name(signal_number);
  return name != nullptr ? name : "signal " + std::to_string(signal_number);
}

}  // namespace ddp
