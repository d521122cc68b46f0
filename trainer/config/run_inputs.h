// run_inputs.h: the files and directories a run reads, so that no output
// of any mode (loop/run_outputs.h, modes/inference.cpp) is one of them.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/train_config.h"

namespace ddp {

// The files and directories the run reads, as given (those that exist).
std::vector<std::string> run_input_paths(const TrainConfig& config);

}  // namespace ddp
