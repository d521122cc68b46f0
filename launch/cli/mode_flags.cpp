// mode_flags.cpp
#include "launch/cli/mode_flags.h"

#include <cstring>
#include <string>

#include "kernels/error.h"

namespace ddp {
namespace {

// Modes as bits, for the table's columns.
constexpr unsigned kTrain = 1u << static_cast<unsigned>(RunMode::Train);
constexpr unsigned kEval = 1u << static_cast<unsigned>(RunMode::EvalOnly);
constexpr unsigned kPredict = 1u << static_cast<unsigned>(RunMode::Predict);
constexpr unsigned kGenerate = 1u << static_cast<unsigned>(RunMode::Generate);
constexpr unsigned kBench = 1u << static_cast<unsigned>(RunMode::Bench);
constexpr unsigned kWeightsReaders = kTrain | kEval | kPredict | kGenerate;  // start from given weights

struct ModeFlag {
  const char* flag;
  unsigned modes;                // the modes that read it
  unsigned bare_resume_modes;    // and those that read it only for a bare --resume
};

// Every flag that some mode does not read. One row a flag; a flag not here
// is read by every mode (the model's shape, the device, the precision...).
constexpr ModeFlag kModeFlags[] = {
    // What only training writes, and its length.
    {"save-weights", kTrain, 0},
    {"steps", kTrain, 0},
    {"epochs", kTrain, 0},
    {"stop-after-steps", kTrain, 0},
    {"checkpoint-every", kTrain, 0},
    {"keep-checkpoints", kTrain, 0},
    {"async-checkpoint", kTrain, 0},
    {"eval-every", kTrain, 0},
    {"sample-every", kTrain, 0},
    {"sample-length", kTrain, 0},
    {"no-shuffle", kTrain, 0},
    {"drop-last", kTrain, 0},
    // Where a run starts and what it records.
    {"checkpoint-dir", kTrain, kEval | kPredict | kGenerate},
    {"resume", kWeightsReaders, 0},
    {"init-weights", kWeightsReaders, 0},
    {"metrics", kTrain | kEval, 0},
    {"trace", kTrain | kBench, 0},
    {"trace-steps", kTrain | kBench, 0},
    // The data files: --predict reads its rows, --generate its prompt,
    // --bench random data of the model's shape.
    {"data-dir", kTrain | kEval, 0},
    {"train-images", kTrain | kEval, 0},
    {"train-labels", kTrain | kEval, 0},
    {"test-images", kTrain | kEval, 0},
    {"test-labels", kTrain | kEval, 0},
    {"train-x", kTrain | kEval, 0},
    {"train-y", kTrain | kEval, 0},
    {"test-x", kTrain | kEval, 0},
    {"test-y", kTrain | kEval, 0},
    {"train-csv", kTrain | kEval, 0},
    {"test-csv", kTrain | kEval, 0},
    {"synthetic-samples", kTrain | kEval, 0},
    {"train-text", kTrain | kEval, 0},
    {"val-text", kTrain | kEval, 0},
    {"val-fraction", kTrain | kEval, 0},
    {"token-format", kTrain | kEval, 0},
    // The optimizer, its schedule and the loss scale: what a step reads.
    {"optimizer", kTrain | kBench, 0},
    {"lr", kTrain | kBench, 0},
    {"momentum", kTrain | kBench, 0},
    {"nesterov", kTrain | kBench, 0},
    {"beta1", kTrain | kBench, 0},
    {"beta2", kTrain | kBench, 0},
    {"eps", kTrain | kBench, 0},
    {"weight-decay", kTrain | kBench, 0},
    {"clip-grad-norm", kTrain | kBench, 0},
    {"lr-schedule", kTrain | kBench, 0},
    {"warmup-steps", kTrain | kBench, 0},
    {"lr-step-size", kTrain | kBench, 0},
    {"lr-gamma", kTrain | kBench, 0},
    {"lr-scaling", kTrain | kBench, 0},
    {"base-batch", kTrain | kBench, 0},
    {"loss-scale", kTrain | kBench, 0},
    {"init-scale", kTrain | kBench, 0},
    {"growth-factor", kTrain | kBench, 0},
    {"backoff-factor", kTrain | kBench, 0},
    {"growth-interval", kTrain | kBench, 0},
    {"hysteresis", kTrain | kBench, 0},
    {"min-loss-scale", kTrain | kBench, 0},
    {"max-bad-steps", kTrain | kBench, 0},
    {"grad-accum", kTrain | kBench, 0},
    {"grad-predivide", kTrain | kBench, 0},
    {"grad-reduce-dtype", kTrain | kBench, 0},
    {"bucket-mb", kTrain | kBench, 0},
    {"first-bucket-mb", kTrain | kBench, 0},
    // The test hooks fire in training steps.
    {"inject-overflow", kTrain | kBench, 0},
    {"inject-overflow-every", kTrain | kBench, 0},
    {"inject-overflow-rank", kTrain | kBench, 0},
    {"stall-at-step", kTrain, 0},
    {"stall-rank", kTrain, 0},
};

struct ModeText {
  RunMode mode;
  const char* flag;
  const char* what;  // why most flags mean nothing there
};
constexpr ModeText kModeTexts[] = {
    {RunMode::Train, "", ""},
    {RunMode::EvalOnly, "--eval-only", "it trains nothing and writes nothing but --metrics"},
    {RunMode::Predict, "--predict", "it reads no data set and writes nothing but --predictions"},
    {RunMode::Generate, "--generate", "it reads no data and writes nothing but the bytes on stdout"},
    {RunMode::Bench, "--bench", "it times steps on random data and writes nothing but its JSON line"},
};

const ModeText& text_of(RunMode mode) { return kModeTexts[static_cast<size_t>(mode)]; }

unsigned bit(RunMode mode) { return 1u << static_cast<unsigned>(mode); }

const ModeFlag* row_of(const char* flag) {
  for (const ModeFlag& row : kModeFlags)
    if (std::strcmp(row.flag, flag) == 0) return &row;
  return nullptr;
}

}  // namespace

RunMode run_mode(const TrainConfig& c, const BenchOptions& bench) {
  if (c.given_flags.count("predict") > 0 || c.given_flags.count("predictions") > 0) return RunMode::Predict;
  if (c.given_flags.count("generate") > 0) return RunMode::Generate;
  if (c.eval_only) return RunMode::EvalOnly;
  if (bench.enabled) return RunMode::Bench;
  return RunMode::Train;
}

const char* run_mode_flag(RunMode mode) { return text_of(mode).flag; }

bool mode_reads_flag(RunMode mode, const char* flag) {
  const ModeFlag* row = row_of(flag);
  return row == nullptr || (row->modes & bit(mode)) != 0;
}

void check_mode_flags(const TrainConfig& c, RunMode mode) {
  if (mode == RunMode::Train) return;
  const bool bare_resume = c.resume && c.resume_path.empty();
  for (const ModeFlag& row : kModeFlags) {
    if (c.command_line_flags.count(row.flag) == 0 || (row.modes & bit(mode)) != 0) continue;
    const std::string flag = std::string("--") + row.flag;
    if ((row.bare_resume_modes & bit(mode)) != 0) {
      if (bare_resume) continue;
      throw Error(flag + " has no meaning with " + text_of(mode).flag + " unless a bare --resume looks in it");
    }
    throw Error(flag + " has no meaning with " + text_of(mode).flag + " (" + text_of(mode).what + ")");
  }
}

}  // namespace ddp
