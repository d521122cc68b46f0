// options_check.h: the flags taken as a whole, after each has parsed on its
// own (options.cpp): which flags were given where. Contradictions, flags
// meaningless in this mode, flags that need another, and the --config
// file's own reading. Each problem is one ddp::Error line naming the flags.
// The values of the config that results are checked after, as the
// Trainer checks a config built in code (trainer/config/config_check.h).
#pragma once

#include <string>

#include "launch/cli/options.h"
#include "trainer/config/train_config.h"

namespace ddp {

// Throws ddp::Error on the first problem found. Where a command-line flag
// and a config-file flag disagree, the command line wins (the config's flag
// is dropped from `config`) instead.
void check_flags_as_a_whole(TrainConfig& config, const BenchOptions& bench);

// The --config file's text: a regular file of at most 1 MiB of text (no NUL
// bytes), read through trainer/io/input_file.h (a FIFO or device is refused,
// never waited on).
std::string read_config_text(const std::string& path);

}  // namespace ddp
