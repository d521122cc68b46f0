// checkpoint_validation.h: whether a decoded checkpoint means something the
// trainer could have written. The checksum (checkpoint.cpp) only proves the
// bytes are the ones some writer produced; a writer with a bug, a tool, or a
// hand-edited file can produce a valid checksum over epoch -1, a NaN loss
// scale or NaN weights, which the trainer would index with or divide by.
//
// Only the invariants that hold for every checkpoint, whatever the run, are
// checked here (field ranges and the relations between the fields); what
// depends on the run resuming it (data set size, global batch, world size,
// the model it was started with) is the trainer's to check.
#pragma once

#include <string>

#include "trainer/train_state.h"

namespace ddp {

// Throws CheckpointError(name, problem) (trainer/checkpoint.h) for the first
// field out of range, with a one-line problem naming the field and its
// value, e.g. "corrupt contents: step is -5 (must be >= 0)". Reads each
// buffer once; returns normally when every check holds.
void validate_checkpoint_contents(const TrainState& s, const std::string& name);

}  // namespace ddp
