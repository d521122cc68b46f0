// train_state.h: everything a checkpoint holds, independent of the world
// size: the model's shape, FP32 master weights and momentum in the flat
// parameter layout, the loss scaler's state, and the position of the LR
// schedule and the sampler. Resuming from it continues bitwise-exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/optim/loss_scaler_state.h"

namespace ddp {

// The most iterations a run may have (--steps, or --epochs x steps per
// epoch): far beyond any real run, and small enough that no step count or
// product of one with a batch overflows. A checkpoint's step is bounded by it.
constexpr int64_t kMaxTrainSteps = int64_t{1} << 40;

// One parameter tensor of the packed layout: its state_dict name and shape.
struct StateTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool operator==(const StateTensor& o) const { return name == o.name && shape == o.shape; }
};

struct TrainState {
  uint32_t format_version = 2;  // of the file it was read from (checkpoint_v1.h, checkpoint_v2.h)

  // Model: its kind ("mlp"), and the shape: the dims its kind defines (config/model_factory.h; for the
  // MLP its widths: input, hidden..., output), activation and loss names as
  // on the command line ("relu"/"gelu", "xent"/"mse").
  std::vector<int64_t> model_dims;
  std::string activation;
  std::string loss;

  std::string model_kind = "mlp";
  // A language model's tokenizer (tokenizer/tokenizer_kind.h: "bytes",
  // "gpt2"); "" where the run knew none, or the file predates the record.
  std::string tokenizer;
  // The parameter tensors in the order they are packed below (registry
  // order). Version 1 did not name them (empty: the MLP's layout).
  std::vector<StateTensor> tensors;

  // The parameter tensors packed back to back in registry order, no
  // padding (ParameterRegistry::pack: for the MLP the layout of version 1,
  // last layer first); the model's parameter count each.
  std::vector<float> master_weights_fp32;
  std::vector<float> momentum_fp32;       // SGD momentum, or AdamW's exp_avg
  std::vector<float> second_moment_fp32;  // AdamW's exp_avg_sq; empty for SGD
  bool momentum_initialized = false;      // PyTorch SGD: first step copies the gradient

  // The optimizer: "sgd" or "adamw" (optim/optimizer_kind.h), the settings
  // it ran with (flag name without "--" -> value as text: for the record and
  // the notes of a resume that changes them), and the steps it actually
  // took (skipped ones not counted: AdamW's bias-correction t).
  std::string optimizer = "sgd";
  std::map<std::string, std::string> optimizer_settings;
  int64_t optimizer_steps = 0;

  LossScalerState scaler;
  // The working precision it trained in ("fp16" or "bf16", --precision);
  // "" in files that predate the record (fp16). The masters are FP32
  // either way: a resume in the other precision restores them unchanged.
  std::string precision;

  // Position: global iteration index of the next step (skipped steps count),
  // the epoch it belongs to, and how many samples of that epoch (global, over
  // all ranks) were already consumed.
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t epoch_sample_offset = 0;
  int64_t skipped_steps = 0;

  // RNG: the shuffle is a pure function of (seed, epoch); the seed is kept so
  // a resume with a different --seed is detected.
  uint64_t seed = 0;

  // Lineage: drawn at random when a run starts from scratch and carried by
  // every run that resumes from it, so pruning (--keep-checkpoints) can tell
  // this run's checkpoints from another run's in the same directory. 0: not
  // recorded (a checkpoint written before lineages existed).
  uint64_t run_id = 0;
  // The data the position above refers to: the training set's sample count
  // and the global batch (samples per step over all ranks) it was written
  // with, so a resume on other data is noticed. 0: not recorded.
  uint64_t train_samples = 0;
  int64_t global_batch = 0;
};

}  // namespace ddp
