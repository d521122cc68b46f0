// mode_flags.h: which flags each mode of ddp_train reads, as one table.
// Training reads every flag; --eval-only, --predict, --generate and --bench
// each read only part of them, and a flag on the command line that the
// run's mode does not read is refused in one line, the same way for every
// mode ("--steps has no meaning with --predict (...)"). A --config file's
// flag is not refused: a config carries a whole run's flags.
#pragma once

#include "launch/cli/options.h"
#include "trainer/config/train_config.h"

namespace ddp {

enum class RunMode { Train, EvalOnly, Predict, Generate, Bench };

// The run's mode; the modes that contradict each other (two given) are
// refused before this is asked.
RunMode run_mode(const TrainConfig& config, const BenchOptions& bench);

// "--eval-only", "--predict", ... ("" for Train).
const char* run_mode_flag(RunMode mode);

// Throws ddp::Error naming the first flag given on the command line that
// `mode` does not read. Train reads them all (a mode's own flags, given
// without it, are each a "needs" error of options_check.cpp).
void check_mode_flags(const TrainConfig& config, RunMode mode);

// Whether `mode` reads `flag` (without the leading dashes); a flag the
// table does not list is read by every mode.
bool mode_reads_flag(RunMode mode, const char* flag);

}  // namespace ddp
