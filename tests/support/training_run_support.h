// training_run_support.h: one single-process training run of a config on a
// backend, and what the step-state and optimizer tests compare of it.
#pragma once

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "trainer/loop/trainer.h"

namespace ddp::test {

struct TrainingRun {
  std::vector<float> master;  // the snapshot's master weights (packed)
  TrainSummary summary;
  TrainState state;
  StateBytes held;  // the run's memory by class at its end (report/memory_report.h)
};

inline TrainingRun train_with(Backend& backend, const TrainConfig& c) {
  SingleProcessCommunicator comm;
  Trainer t(c, backend, comm, load_train_test(c.data, c.seed));
  t.prepare();
  TrainingRun r;
  r.summary = t.run();
  r.state = t.snapshot();
  r.master = r.state.master_weights_fp32;
  r.held = t.state_bytes();
  return r;
}

// A byte text of `size` letters drawn from the first `letters` of the
// alphabet, written to `path`.
inline void write_random_letters(const std::string& path, std::mt19937_64& rng, size_t size, int letters) {
  std::string text(size, ' ');
  for (char& ch : text) ch = static_cast<char>('a' + rng() % static_cast<uint64_t>(letters));
  std::ofstream(path, std::ios::binary) << text;
}

// What the GPT run-setting tests (--recompute, --classifier-chunk,
// --classifier-logits) train through the trainer: `gpt` on the byte text
// at `text_path` in windows of `context`, its vocabulary `vocab_size`,
// AdamW 3e-3 at a constant rate, batch 4 in two accumulated micro-batches,
// `steps` steps, no step logs.
inline TrainConfig gpt_text_run(const GptConfig& gpt, const std::string& text_path, int context, int vocab_size,
                                int64_t steps) {
  TrainConfig c;
  c.model = "gpt";
  c.gpt = gpt;
  c.data.kind = "text";
  c.data.train_text = text_path;
  c.data.block_size = context;
  c.data.vocab_size = vocab_size;
  c.data.val_fraction = 0.1;
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  c.batch_size = 4;
  c.grad_accum = 2;
  c.steps = steps;
  c.log_every = 1000000;
  c.lr_schedule = LrScheduleKind::Constant;
  return c;
}

}  // namespace ddp::test
