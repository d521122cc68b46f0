// checkpoint_validation.h: whether a decoded checkpoint means something the
// trainer could have written. The checksum (checkpoint.cpp) only proves the
// bytes are the ones some writer produced; a writer with a bug, a tool, or a
// hand-edited file can produce a valid checksum over epoch -1, a NaN loss
// scale or NaN weights, which the trainer would index with or divide by.
//
// Only the invariants that hold for every checkpoint, whatever the run, are
// checked here (field ranges and the relations between the fields); what
// depends on the run resuming it (data set size, global batch, world size,
// the model it was started with) is the trainer's to check, except the
// model itself, compared here with check_checkpoint_compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/train_state.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

// Throws CheckpointError(name, problem) (trainer/checkpoint/checkpoint.h) for the first
// field out of range, with a one-line problem naming the field and its
// value, e.g. "corrupt contents: step is -5 (must be >= 0)". Reads each
// buffer once; returns normally when every check holds.
void validate_checkpoint_contents(const TrainState& s, const std::string& name);

// Throws CheckpointError naming the first difference between the checkpoint's
// model (shape, activation, loss, and the buffer sizes of this run's
// parameter count) and this run's, e.g. "model shape mismatch: checkpoint has layers 784,512,10,
// this run 784,256,10". The seed is the caller's to compare (policy).
void check_checkpoint_compatible(const TrainState& ckpt, const std::vector<int64_t>& model_dims,
                                 const std::string& activation, const std::string& loss, size_t parameter_count,
                                 const std::string& name);

// The model kind ("mlp") against this run's: checked first, since the
// dims of one kind mean nothing to another.
void check_checkpoint_model_kind(const TrainState& ckpt, const std::string& model_kind, const std::string& name);
// A language model's tokenizer against this run's (its data's): a model
// trained on bytes cannot go on with GPT-2's ids of the same count. Either
// side "" (not known) is not a mismatch.
void check_checkpoint_tokenizer(const TrainState& ckpt, const std::string& tokenizer, const std::string& name);
// Version 2 names its tensors: each name and shape, in order, against this
// run's registry; CheckpointError naming the first tensor that differs.
void check_checkpoint_tensors(const TrainState& ckpt, const ParameterRegistry& registry, const std::string& name);
// A resume continues the optimizer it was written with ("sgd", "adamw"):
// another one's state means nothing to it.
void check_checkpoint_optimizer(const TrainState& ckpt, const std::string& optimizer, const std::string& name);

}  // namespace ddp
