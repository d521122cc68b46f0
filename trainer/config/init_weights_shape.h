// init_weights_shape.h: a GPT's shape from the weights it starts from, when
// they say it: --init-weights of a Hugging Face GPT-2 directory (its
// config.json) or model.safetensors (its tensors; n_head from --n-head).
// Called once the flags are read and checked together, before the config's
// own checks, so the rest of the run sees the weights' shape as if the flags
// had given it.
#pragma once

#include <string>

#include "trainer/config/train_config.h"

namespace ddp {

// Sets --n-layer, --n-head, --n-embd from the weights; a flag given with
// another value is refused in one line naming both. --block-size must fit
// n_positions; --generate takes n_positions as its context unless
// --block-size is given. Returns a note for the run's log ("" for weights
// that are not Hugging Face's, or a model that is not the GPT).
std::string bind_to_init_weights_shape(TrainConfig& config);

}  // namespace ddp
