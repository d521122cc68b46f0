// test_training_adamw.cpp: --optimizer adamw through the Trainer on the CPU
// backend: a run trains (the test loss falls), skipped steps (injected
// overflows) leave t (StepStatus::steps_taken) and the weights as they
// were, and steps replayed from a capture (--cuda-graph, emulated by
// RecordingBackend) train bit for bit as eager ones, so the step reads lr
// and t from the step state rather than freezing them at capture.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "support/lowp_format.h"
#include "support/recording_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

TrainConfig adamw_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 24, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.optimizer = OptimizerKind::AdamW;
  c.batch_size = 16;
  c.lr = 1e-2;
  c.weight_decay = 0.01;
  c.log_every = 1000000;
  c.lr_schedule = LrScheduleKind::Cosine;
  c.data.synthetic_train_samples = 600;
  c.data.synthetic_test_samples = 64;
  c.seed = test::test_seed();
  return c;
}

using RunResult = test::TrainingRun;
using test::train_with;

size_t bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  size_t d = a.size() == b.size() ? 0 : a.size() + b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d += test::bits_of(a[i]) != test::bits_of(b[i]);
  return d;
}

TEST(TrainingAdamW, ARunTrainsTheTestLossFalls) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  TrainConfig c = adamw_config();
  CpuBackend cpu(1);
  c.steps = 1;
  const RunResult start = train_with(cpu, c);
  c.steps = 120;
  const RunResult trained = train_with(cpu, c);
  EXPECT_EQ(trained.summary.optimizer_steps, trained.summary.steps - trained.summary.skipped_steps);
  EXPECT_LT(trained.summary.test_loss, 0.5 * start.summary.test_loss)
      << "test loss " << start.summary.test_loss << " after 1 step, " << trained.summary.test_loss << " after 120";
}

// A skipped step takes nothing: t counts only the steps taken, and a run
// whose last step is skipped ends with the weights of the run one step
// shorter (constant lr, so the schedule is the same for both).
TEST(TrainingAdamW, SkippedStepsKeepTAndTheWeights) {
  TrainConfig c = adamw_config();
  c.lr_schedule = LrScheduleKind::Constant;
  c.inject_overflow_steps = {3, 8};
  c.steps = 12;
  CpuBackend cpu(1);
  const RunResult skipping = train_with(cpu, c);
  EXPECT_GE(skipping.summary.skipped_steps, 2);
  EXPECT_EQ(skipping.summary.optimizer_steps, c.steps - skipping.summary.skipped_steps);

  c.steps = 7;
  c.inject_overflow_steps = {3};
  const RunResult shorter = train_with(cpu, c);
  c.steps = 8;
  c.inject_overflow_steps = {3, 8};
  const RunResult last_skipped = train_with(cpu, c);
  EXPECT_EQ(last_skipped.summary.optimizer_steps, shorter.summary.optimizer_steps);
  EXPECT_EQ(bit_differences(last_skipped.master, shorter.master), 0u);
}

// Checkpoint format 2 holds AdamW's moments and t: a run stopped mid-way
// and resumed ends bit for bit where the straight run ends, skipped steps
// before and after the resume included, and its checkpoint's state is
// the straight run's.
TEST(TrainingAdamW, StopAndResumeIsBitwiseIdentical) {
  SCOPED_TRACE("seed " + std::to_string(test::test_seed()));
  const test::TempDir temp_dir("adamw_resume");
  const std::string& dir = temp_dir.path();
  TrainConfig c = adamw_config();
  c.inject_overflow_steps = {4, 19};
  c.steps = 30;
  CpuBackend cpu(1);
  const RunResult straight = train_with(cpu, c);
  TrainConfig first = c;
  first.checkpoint_dir = dir;
  first.stop_after_steps = 13;
  train_with(cpu, first);
  TrainConfig second = c;
  second.checkpoint_dir = dir;
  second.resume = true;
  const RunResult resumed = train_with(cpu, second);
  EXPECT_EQ(resumed.summary.steps, 17);
  EXPECT_EQ(resumed.summary.optimizer_steps, straight.summary.optimizer_steps);
  EXPECT_EQ(bit_differences(resumed.master, straight.master), 0u);
  EXPECT_EQ(bit_differences(resumed.state.momentum_fp32, straight.state.momentum_fp32), 0u);
  EXPECT_EQ(bit_differences(resumed.state.second_moment_fp32, straight.state.second_moment_fp32), 0u);
  EXPECT_FALSE(straight.state.second_moment_fp32.empty());
}

// A checkpoint of another optimizer means nothing to this one: refused in
// one line naming both.
TEST(TrainingAdamW, ResumingAnSgdCheckpointIsRefused) {
  const test::TempDir temp_dir("adamw_sgd");
  const std::string& dir = temp_dir.path();
  TrainConfig c = adamw_config();
  c.optimizer = OptimizerKind::Sgd;
  c.steps = 3;
  c.checkpoint_dir = dir;
  CpuBackend cpu(1);
  train_with(cpu, c);
  c.optimizer = OptimizerKind::AdamW;
  c.steps = 6;
  c.resume = true;
  try {
    train_with(cpu, c);
    ADD_FAILURE() << "resumed an SGD checkpoint with AdamW";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer mismatch: the checkpoint holds sgd state, this run uses "
                                         "--optimizer adamw"),
              std::string::npos)
        << e.what();
  }
}

TEST(TrainingAdamW, ReplayedCapturesTrainExactlyAsEagerSteps) {
  for (const Precision p : test::kBothPrecisions) {  // BF16's range is FP32's: 2^127 overflows its gradients
    SCOPED_TRACE(precision_name(p));
    TrainConfig c = adamw_config();
    c.precision = p;
    c.epochs = 2;
    c.log_every = 7;
    c.loss_scaler.mode = LossScaleMode::Dynamic;
    // Overflows inside replays, backed off on the device.
    c.loss_scaler.init_scale = std::ldexp(1.0, p == Precision::Bf16 ? 127 : 40);
    c.loss_scaler.growth_interval = 5;
    c.inject_overflow_steps = {20, 33};
    CpuBackend cpu(1, p);
    const RunResult eager = train_with(cpu, c);
    ASSERT_GT(eager.summary.skipped_steps, 3) << "the test needs overflowing steps";

    c.cuda_graph = true;
    RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true, p);
    const RunResult replayed = train_with(graphs, c);
    EXPECT_GT(graphs.replays, eager.summary.steps / 2) << "most steps should be replays";
    EXPECT_EQ(replayed.summary.skipped_steps, eager.summary.skipped_steps);
    EXPECT_EQ(replayed.summary.optimizer_steps, eager.summary.optimizer_steps);
    EXPECT_EQ(bit_differences(replayed.master, eager.master), 0u) << "of " << eager.master.size() << " master weights";
  }
}

}  // namespace
}  // namespace ddp
