// stop_signal.cpp
#include "trainer/stop_signal.h"

#include <csignal>

namespace ddp {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

// Only async-signal-safe calls here: sigaction and raise.
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
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and writes resume after the flag is set
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int pending_stop_signal() { return g_stop_signal; }

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "signal " + std::to_string(signal_number);
  }
}

}  // namespace ddp
