// options.h: the command line and --config INI file (Boost.Program_options)
// turned into a TrainConfig. The command line overrides the file.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/train_config.h"

namespace ddp {

// `--bench`: time the training step on random data of the model's shape.
struct BenchOptions {
  bool enabled = false;
  int64_t warmup_steps = 20;
  int64_t timed_steps = 100;
  double peak_tflops = 0.0;  // 0: from the GPU name, unknown on CPU
};

struct ParsedOptions {
  TrainConfig config;
  BenchOptions bench;
  bool show_help = false;
  std::string help_text;
};

// Throws ddp::Error with one line naming the flag on anything malformed.
ParsedOptions parse_options(int argc, const char* const argv[]);

}  // namespace ddp
