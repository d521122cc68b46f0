// stop_signal.h: SIGINT and SIGTERM as a request to stop training cleanly.
//
// The first signal only sets a flag (the handler does nothing else); the
// training loop reads it at each step boundary, agrees on it with the other
// ranks, writes a checkpoint and ends the process with 128 + the signal
// number, as a shell reports a process killed by it. A second signal restores
// the default action and re-raises itself: the process ends at once.
#pragma once

#include <string>

namespace ddp {

// Installs the handlers for SIGINT and SIGTERM (idempotent).
void install_stop_signal_handlers();

// The first stop signal received since start-up (SIGINT or SIGTERM), or 0.
int pending_stop_signal();

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal_number);

}  // namespace ddp
