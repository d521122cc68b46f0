// options.h: the command line and --config INI file (Boost.Program_options)
// turned into a TrainConfig. The command line overrides the file.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/rank_agreement.h"
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
  // Every flag parse_options knows, "--name" and its value as text (given,
  // from --config, or defaulted; "(unset)" without a default), in --help's
  // order: what the start-up agreement compares (run_settings.h).
  std::vector<Setting> flag_values;
  // --check-worlds: the world sizes to check the config at, and nothing
  // else to do (empty: run as the flags say).
  std::vector<int64_t> check_worlds;
};

// Throws ddp::Error with one line naming the flag on anything malformed.
ParsedOptions parse_options(int argc, const char* const argv[]);

}  // namespace ddp
