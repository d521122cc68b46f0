// stop_signal.h: SIGINT, SIGTERM and SIGUSR1 as a request to stop, in
// every phase of a run. SIGUSR1 is the one Open MPI's mpirun forwards to the
// ranks at once, without the kill that follows its SIGTERM (a scheduler's
// --signal=USR1@SECONDS, or `kill -USR1` of mpirun).
//
// What the first signal does depends on the phase the process is in:
//   StartUp, Bench, Finished: nothing is worth saving (nothing was trained
//     yet, --bench keeps nothing, or the run's results are already written),
//     so the handler writes one line to stderr and ends the process with
//     _exit(128 + the signal number), as a shell reports a process the signal
//     killed. A process blocked opening or reading a file ends too.
//   Training (the loop, the final evaluation and the final writes): the
//     handler only sets a flag; the trainer reads it at step boundaries and
//     at the end, agrees on it with the other ranks, writes a checkpoint and
//     returns 128 + the signal number.
// A second signal restores the default action and re-raises itself: the
// process ends at once, in any phase.
#pragma once

#include <string>

namespace ddp {

enum class StopSignalPhase {
  StartUp,   // from install until the training loop: exit at once
  Bench,     // --bench: exit at once
  Training,  // set the flag; the trainer stops at the next agreed point
  Finished,  // the run's results are written: exit at once
};

// Installs the handlers for SIGINT, SIGTERM and SIGUSR1 (idempotent), in the phase
// StartUp unless another was set before.
void install_stop_signal_handlers();

// Sets what the next first signal does (see above). A signal already pending
// stays pending: the caller that leaves Training reads it first.
void set_stop_signal_phase(StopSignalPhase phase);

// The first stop signal received since start-up (SIGINT, SIGTERM or
// SIGUSR1), or 0.
int pending_stop_signal();

// "SIGINT", "SIGTERM", "SIGUSR1", or "signal N".
std::string signal_name(int signal_number);

}  // namespace ddp
