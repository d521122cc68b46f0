// test_zero_one_rank.cpp: with one rank, every --zero stage is --zero 0 bit
// for bit (the one range is the whole layout; the reduce-scatter, the
// flag's MAX and the gathers are identities; stage 2's staging and stage
// 3's gather slots hold the same values elsewhere), for the MLP and the
// GPT, SGD with momentum and AdamW clipped by the global norm, with and
// without accumulation, predivision and an injected overflow; stage 1 also
// replayed from an emulated --cuda-graph capture. Many ranks:
// tests/mpi/mpi_test_zero.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "mpi/mpi_gpt_config.h"
#include "support/recording_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"

namespace ddp {
namespace {

TrainConfig mlp_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 24, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000;
  c.lr_schedule = LrScheduleKind::Constant;
  c.data.synthetic_train_samples = 256;
  c.data.synthetic_test_samples = 64;
  c.batch_size = 16;
  return c;
}

int state_bits_differ(const TrainState& a, const TrainState& b) {
  auto differ = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0;
  };
  return differ(a.master_weights_fp32, b.master_weights_fp32) + differ(a.momentum_fp32, b.momentum_fp32) +
         differ(a.second_moment_fp32, b.second_moment_fp32) + (a.skipped_steps != b.skipped_steps) +
         (a.scaler.scale != b.scaler.scale) + (a.optimizer_steps != b.optimizer_steps);
}

TEST(ZeroOneRank, EveryStageIsStageZeroBitForBit) {
  const test::TempDir temp_dir("zero_one_rank");
  const std::string& dir = temp_dir.path();
  for (bool gpt : {false, true}) {
    for (bool adamw : {false, true}) {
      for (int64_t accum : {1, 2}) {
        TrainConfig c = gpt ? test::tiny_gpt_config(dir) : mlp_config();
        c.seed = test::test_seed() % 100000;
        c.steps = 8;
        c.grad_accum = accum;
        c.grad_predivide = 2.0;
        c.inject_overflow_steps = {4};
        if (adamw) {
          c.optimizer = OptimizerKind::AdamW;
          c.lr = 3e-3;
          c.weight_decay = 0.1;
          c.clip_grad_norm = 0.05;
        }
        CpuBackend cpu(1);
        const test::TrainingRun replicated = test::train_with(cpu, c);
        for (int stage : {1, 2, 3}) {
          c.zero_stage = stage;
          const test::TrainingRun sharded = test::train_with(cpu, c);
          EXPECT_EQ(sharded.summary.skipped_steps, 1);
          EXPECT_EQ(state_bits_differ(sharded.state, replicated.state), 0)
              << (gpt ? "GPT" : "MLP") << (adamw ? " AdamW" : " SGD") << " --grad-accum " << accum << " --zero "
              << stage;
          EXPECT_EQ(sharded.summary.test_loss, replicated.summary.test_loss);
          // The sharded paths ran: stage 2's staging (without accumulation)
          // and stage 3's gather slots were allocated, at one rank too.
          EXPECT_EQ(sharded.held.zero_buffers > 0, stage == 3 || (stage == 2 && accum == 1)) << stage << " " << accum;
        }
      }
    }
  }
}

// Stage 1 captures: the step's collectives (here a world of one's) are
// recorded with it, and replays train as the eager stage-0 steps do.
TEST(ZeroOneRank, ReplayedCapturedStageOneStepsTrainAsEagerStageZero) {
  const test::TempDir temp_dir("zero_graph");
  const std::string& dir = temp_dir.path();
  TrainConfig c = test::tiny_gpt_config(dir);
  c.steps = 12;
  c.inject_overflow_steps = {5};
  c.optimizer = OptimizerKind::AdamW;
  c.lr = 3e-3;
  CpuBackend cpu(1);
  const test::TrainingRun eager = test::train_with(cpu, c);
  c.zero_stage = 1;
  c.cuda_graph = true;
  RecordingBackend graphs(DeviceKind::Cuda, /*can_capture=*/true);
  const test::TrainingRun replayed = test::train_with(graphs, c);
  EXPECT_GT(graphs.replays, c.steps / 2) << "most steps should be replays";
  EXPECT_EQ(state_bits_differ(replayed.state, eager.state), 0);
}

}  // namespace
}  // namespace ddp
