// test_step_status.cpp: the device-resident step state (step_status.h) and
// what it buys: the same rule as the host LossScaler, the same scalars as
// the host computed, a training loop that does not read the device each
// step, and steps replayed from a capture (--cuda-graph, emulated on the CPU
// by RecordingBackend) that train exactly as eager steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops/step_state.h"
#include "support/lowp_format.h"
#include "support/recording_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"
#include "trainer/optim/loss_scaler.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

using test::bits_of;

StepStatus initial_status(const LossScalerConfig& c) {
  StepStatus s{};
  const LossScalerState init = LossScaler(c).state();
  s.scale = init.scale;
  s.growth_tracker = init.growth_tracker;
  s.hysteresis_left = init.hysteresis_left;
  return s;
}

// Random overflow patterns through step_status_finish on the CPU backend,
// against the host LossScaler and counts kept here independently.
TEST(StepStatusRule, FinishMatchesTheHostScalerAndCountsOverRandomFlags) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  for (int trial = 0; trial < 40; ++trial) {
    LossScalerConfig c;
    c.mode = trial % 5 == 4 ? LossScaleMode::Static : LossScaleMode::Dynamic;
    c.init_scale = std::ldexp(1.0, static_cast<int>(rng() % 30));
    c.growth_interval = 1 + static_cast<int64_t>(rng() % 5);
    c.hysteresis = 1 + static_cast<int64_t>(rng() % 3);
    c.min_scale = trial % 3 == 0 ? 4.0 : 0.0;
    const int64_t max_bad = 1 + static_cast<int64_t>(rng() % 6);
    const LossScaleRule rule = loss_scale_rule(c, max_bad);
    LossScaler host(c);
    StepStatus s = initial_status(c);
    const double p_overflow = 0.1 + 0.8 * static_cast<double>(rng() % 100) / 100.0;
    int64_t skipped = 0, streak = 0, giveup = 0;
    bool momentum_started = false;
    StepStatusPrepare prepare;
    prepare.status = &s;
    prepare.backward_divisor = 1.0;
    prepare.unscale_divisor = 1.0;
    prepare.lr = 0.1f;
    StepStatusFinish finish;
    finish.rule = rule;
    finish.status = &s;
    for (int64_t i = 1; i <= 200; ++i) {
      const bool overflow = std::bernoulli_distribution(p_overflow)(rng);
      step_status_prepare(cpu, prepare);
      ASSERT_EQ(s.step_scale, host.scale());
      if (overflow) s.nonfinite = 1;
      step_status_finish(cpu, finish);
      host.update(overflow);
      skipped += overflow;
      streak = overflow ? streak + 1 : 0;
      if (streak == max_bad && giveup == 0) giveup = i;
      momentum_started |= !overflow;
      ASSERT_EQ(s.scale, host.scale()) << "trial " << trial << " step " << i;
      ASSERT_EQ(s.growth_tracker, host.state().growth_tracker);
      ASSERT_EQ(s.hysteresis_left, host.state().hysteresis_left);
      ASSERT_EQ(s.nonfinite, 0) << "the flag must be cleared for the next step";
      ASSERT_EQ(s.last_skipped, overflow ? 1 : 0);
      ASSERT_EQ(s.steps_done, i);
      ASSERT_EQ(s.skipped_total, skipped);
      ASSERT_EQ(s.bad_streak, streak);
      ASSERT_EQ(s.giveup_step, giveup);
      ASSERT_EQ(s.momentum_initialized, momentum_started ? 1 : 0);
    }
  }
}

// The scalars prepare derives on the device are the bits the host used to
// compute (trainer.cpp before the state moved): float(S / (K F)) and
// float(1 / (S N / F)).
TEST(StepStatusRule, PrepareGivesTheHostScalarsBitwise) {
  std::mt19937_64 rng(test::test_seed());
  CpuBackend cpu(1);
  for (int i = 0; i < 2000; ++i) {
    StepStatus s{};
    s.scale = std::ldexp(1.0 + static_cast<double>(rng() % 1000) / 1000.0, static_cast<int>(rng() % 60) - 10);
    const double micro = 1 + static_cast<double>(rng() % 8), predivide = 1.0 + static_cast<double>(rng() % 7);
    const double world = 1 + static_cast<double>(rng() % 16);
    const float lr = std::uniform_real_distribution<float>(1e-4f, 1.0f)(rng);
    StepStatusPrepare prepare;
    prepare.status = &s;
    prepare.backward_divisor = micro * predivide;
    prepare.unscale_divisor = world / predivide;
    prepare.lr = lr;
    step_status_prepare(cpu, prepare);
    ASSERT_EQ(bits_of(s.backward_scale), bits_of(static_cast<float>(s.scale / (micro * predivide))));
    ASSERT_EQ(bits_of(s.inv_scale), bits_of(static_cast<float>(1.0 / (s.scale * (world / predivide)))));
    ASSERT_EQ(bits_of(s.lr), bits_of(lr));
    ASSERT_EQ(s.step_scale, s.scale);
  }
}

TrainConfig small_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 24, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000000;
  c.lr_schedule = LrScheduleKind::Cosine;
  c.data.synthetic_train_samples = 600;
  c.data.synthetic_test_samples = 64;
  return c;
}

using RunResult = test::TrainingRun;
using test::train_with;

// On a device the loop must not wait for it every step: the number of host
// reads does not grow with the number of steps between two log points.
TEST(StepState, TrainingStepsDoNotReadTheDevice) {
  TrainConfig c = small_config();
  c.data.synthetic_train_samples = 2000;  // 125 steps per epoch: no evaluation in between
  int waits[2];
  const int steps[2] = {12, 40};
  for (int i = 0; i < 2; ++i) {
    c.steps = steps[i];
    RecordingBackend gpu_like(DeviceKind::Cuda, /*can_capture=*/false);
    train_with(gpu_like, c);
    waits[i] = gpu_like.host_waits;
  }
  EXPECT_EQ(waits[0], waits[1]) << "host waits grew from " << waits[0] << " (" << steps[0] << " steps) to " << waits[1]
                                << " (" << steps[1] << " steps)";
  EXPECT_GT(waits[0], 0);  // the end of the run reads (evaluation, state)
}

// --cuda-graph emulated: captured steps replayed under RecordingBackend give
// the eager CPU run's weights, skips and scale bit for bit. The run covers
// overflows inside replays (an initial scale that overflows FP16, backed off
// on the device), a cosine lr and momentum (read from the step state),
// short last batches and log steps (eager), over several epochs.
// In FP16 and in BF16 (its range is FP32's: a scale of 2^127 overflows its gradients).
TEST(StepState, ReplayedCapturesTrainExactlyAsEagerSteps) {
  for (const Precision p : test::kBothPrecisions) {
    SCOPED_TRACE(precision_name(p));
    TrainConfig c = small_config();
    c.precision = p;
    c.epochs = 3;
    c.log_every = 7;
    c.loss_scaler.mode = LossScaleMode::Dynamic;
    c.loss_scaler.init_scale = std::ldexp(1.0, p == Precision::Bf16 ? 127 : 40);
    c.loss_scaler.growth_interval = 5;
    c.inject_overflow_steps = {20, 33};  // test-hook steps run eagerly amid replays
    CpuBackend cpu(1, p);
    const RunResult eager = train_with(cpu, c);
    ASSERT_GT(eager.summary.skipped_steps, 3) << "the test needs overflowing steps";

    c.cuda_graph = true;
    RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true, p);
    const RunResult replayed = train_with(graphs, c);
    EXPECT_GT(graphs.replays, eager.summary.steps / 2) << "most steps should be replays";
    EXPECT_EQ(replayed.summary.graph_replays, graphs.replays);
    EXPECT_EQ(replayed.summary.skipped_steps, eager.summary.skipped_steps);
    EXPECT_EQ(replayed.state.scaler.scale, eager.state.scaler.scale);
    EXPECT_EQ(replayed.state.scaler.growth_tracker, eager.state.scaler.growth_tracker);
    ASSERT_EQ(replayed.master.size(), eager.master.size());
    size_t differ = 0;
    for (size_t i = 0; i < eager.master.size(); ++i) differ += bits_of(replayed.master[i]) != bits_of(eager.master[i]);
    EXPECT_EQ(differ, 0u) << "of " << eager.master.size() << " master weights";
  }
}

// A capture must follow an eager step of its own kind: after a resume the
// first step may be a log step, whose optimizer takes another route (the
// gradient norm), and must not count as the step that ran the capture's
// kernels once before.
TEST(StepState, TheCaptureFollowsAnEagerStepOfItsOwnKindAfterAResume) {
  TrainConfig c = small_config();
  c.steps = 20;
  c.log_every = 10;
  const test::TempDir temp_dir("capture_resume");
  c.checkpoint_dir = temp_dir.path();
  c.stop_after_steps = 9;
  CpuBackend cpu(1);
  train_with(cpu, c);
  c.stop_after_steps = 0;
  c.resume = true;
  c.cuda_graph = true;  // resumes at step 9: step 10 is a log step
  RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true);
  train_with(graphs, c);
  EXPECT_GT(graphs.replays, 0);
  std::string first;
  for (const std::string& op : graphs.first_seen_in_capture) first += op + " ";
  EXPECT_TRUE(graphs.first_seen_in_capture.empty()) << "first run inside the capture: " << first;
}

// On a device the step state is read every few steps; a run that
// --stop-after-steps ends between two reads must still report a
// --max-bad-steps ending reached before it, not finish as if nothing happened.
TEST(StepState, MaxBadStepsReachedBeforeAStopBetweenReadsIsReported) {
  TrainConfig c = small_config();
  c.data.synthetic_train_samples = 2000;
  c.max_bad_steps = 3;
  c.inject_overflow_every = 1;
  c.stop_after_steps = 10;
  RecordingBackend gpu_like(DeviceKind::Cuda, /*can_capture=*/false);
  try {
    train_with(gpu_like, c);
    FAIL() << "the run ended without the --max-bad-steps error";
  } catch (const AgreedError& e) {
    EXPECT_NE(std::string(e.what()).find("3 consecutive steps (1 to 3)"), std::string::npos) << e.what();
  }
}

TEST(StepState, CudaGraphOnABackendThatCannotCaptureIsRefused) {
  TrainConfig c = small_config();
  c.cuda_graph = true;
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  try {
    Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
    FAIL() << "--cuda-graph on the CPU backend was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda-graph needs a CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp
