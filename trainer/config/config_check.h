// config_check.h: whether a TrainConfig's values make sense, wherever the
// config came from (the command line through launch/options.cpp, or code:
// a test, another front end). parse_options and the Trainer both call it,
// so a config built in code is refused with the same line as the flag that
// sets the field. Which flags were given where (contradictions between the
// config file and the command line, "--x needs --y") is the command line's
// business: launch/options_check.h.
#pragma once

#include "trainer/config/train_config.h"

namespace ddp {

// Throws ddp::Error on the first value outside its sense, in one line naming
// the flag that sets the field (fields are flags: `momentum` is --momentum).
void check_train_config(const TrainConfig& config);

// The rules that depend on the world size: batch products that fit, ZeRO
// groups that divide the world, ranks named by test hooks that exist.
// Throws ddp::Error naming the flag. `ddp_train --check-worlds` runs it, and
// training's resolve_batch_per_rank, for each world size it is given.
void check_config_for_world(const TrainConfig& config, int world_size);

// The shapes of the lines above, for flags checked elsewhere (--bench-*):
// "<flag> must be positive", "<flag> must be a finite number >= 0".
void require_positive(double value, const char* flag);
void require_non_negative(double value, const char* flag);

// Both checks, returning `config` unchanged: for a constructor's initializer
// list, where the check must run before any member reads the config.
const TrainConfig& checked_train_config(const TrainConfig& config, int world_size);

}  // namespace ddp
