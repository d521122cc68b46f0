// cuda_test_cuda_graph_training.cpp: --cuda-graph on a real GPU. Two
// Trainers on CudaBackend and a one-rank NcclCommunicator, the same config
// and data, one eager and one with cuda_graph: the replayed run must end with
// the eager run's master weights, momentum, loss-scaler state and skip count
// bit for bit. (StepState.ReplayedCapturesTrainExactlyAsEagerSteps checks
// the trainer's logic on the CPU emulation; this checks the real capture:
// cuBLASLt, our kernels and NCCL inside a CUDA graph, the batch copied into
// the graph's inputs, scalars read from the step state.)
//
// The runs cover what graph_eligible sends either way: log steps and the
// short last step of each epoch (eager), injected overflows (eager, test
// hook), overflows inside replays (an initial scale of 2^40 overflows FP16
// gradients until the device backs it off), growth inside replays (interval
// 5), momentum and a cosine lr (read from the step state), over three
// epochs with evaluation between them. Both losses: MSE reads targets,
// cross-entropy labels. Both precisions: BF16 keeps the dynamic scaler here,
// from 2^126, which overflows BF16 (FP32's range) as 2^40 does FP16: a run
// of this shape on the CPU (ddp_train --data synthetic, bf16) skips 19
// steps (5 from 2^110, none from 2^100).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_backend.h"
#include "support/test_support.h"
#include "trainer/data/data_source.h"
#include "trainer/data/synthetic_data.h"
#include "trainer/loop/trainer.h"
#include "support/gpu_test.h"
#include "support/lowp_format.h"

namespace ddp {
namespace {

using test::bits_of;
uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

size_t count_differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += bits_of(a[i]) != bits_of(b[i]);
  return differ;
}

TrainConfig graph_test_config(LossKind loss, Precision precision) {
  TrainConfig c;
  c.device = "cuda";
  c.precision = precision;
  c.seed = test::test_seed();
  c.mlp.layer_widths = {10, 24, 16, 10};
  c.loss = loss;
  c.loss_name = loss == LossKind::MeanSquaredError ? "mse" : "xent";
  c.batch_size = 16;  // 600 samples: 37 full steps and one of 8 rows per epoch
  c.epochs = 3;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.lr_schedule = LrScheduleKind::Cosine;
  c.log_every = 7;
  c.loss_scaler.init_scale = std::ldexp(1.0, precision == Precision::Bf16 ? 126 : 40);
  c.loss_scaler.growth_interval = 5;
  c.inject_overflow_steps = {20, 33};
  return c;
}

TrainTestData graph_test_data(const TrainConfig& c) {
  TrainTestData d;
  if (c.loss == LossKind::MeanSquaredError) {
    d.train = make_synthetic_dataset(c.seed, 600);
    d.test = make_synthetic_dataset(c.seed, 64, 10, 10, 0.01f, 1);
  } else {
    d.train = make_random_dataset(c.seed, 600, 10, 10, /*classification=*/true);
    d.test = make_random_dataset(c.seed + 1, 64, 10, 10, /*classification=*/true);
  }
  return d;
}

struct GpuRun {
  TrainSummary summary;
  TrainState state;
};

// A backend and communicator of its own per run, destroyed in the order
// main uses: the trainer (it releases its graphs), the communicator, the
// backend.
GpuRun train_on_gpu(const TrainConfig& c) {
  CudaBackend gpu(0, c.precision);
  NcclCommunicator comm(0, 1, gpu.compute_stream(), 0, c.precision);
  Trainer trainer(c, gpu, comm, graph_test_data(c));
  trainer.prepare();
  GpuRun r;
  r.summary = trainer.run();
  r.state = trainer.snapshot();
  return r;
}

// Run as Precisions/CudaGraphTraining.<test>/fp16 and .../bf16.
class CudaGraphTraining : public test::GpuTest, public ::testing::WithParamInterface<Precision> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    int version = 0;
    ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
    if (!nccl_version_supports_capture(version)) GTEST_SKIP() << nccl_capture_unsupported_reason(version);
  }

  void expect_replays_train_as_eager_steps(LossKind loss) {
    SCOPED_TRACE("seed " + std::to_string(test::test_seed()) + " (set DDP_TEST_SEED to reproduce)");
    TrainConfig c = graph_test_config(loss, GetParam());
    const GpuRun eager = train_on_gpu(c);
    ASSERT_EQ(eager.summary.graph_replays, 0);
    ASSERT_GT(eager.summary.skipped_steps, 3) << "the test needs overflowing steps";

    c.cuda_graph = true;
    const GpuRun replayed = train_on_gpu(c);
    EXPECT_GT(replayed.summary.graph_replays, replayed.summary.steps / 2) << "most steps should be replays";
    EXPECT_LT(replayed.summary.graph_replays, replayed.summary.steps) << "log, short and injected steps run eagerly";

    EXPECT_EQ(replayed.summary.steps, eager.summary.steps);
    EXPECT_EQ(replayed.state.step, eager.state.step);
    EXPECT_EQ(replayed.summary.skipped_steps, eager.summary.skipped_steps);
    EXPECT_EQ(replayed.state.skipped_steps, eager.state.skipped_steps);
    EXPECT_EQ(bits_of(replayed.state.scaler.scale), bits_of(eager.state.scaler.scale));
    EXPECT_EQ(replayed.state.scaler.growth_tracker, eager.state.scaler.growth_tracker);
    EXPECT_EQ(replayed.state.scaler.hysteresis_left, eager.state.scaler.hysteresis_left);
    EXPECT_EQ(replayed.state.momentum_initialized, eager.state.momentum_initialized);
    ASSERT_FALSE(eager.state.master_weights_fp32.empty());
    EXPECT_EQ(count_differing(replayed.state.master_weights_fp32, eager.state.master_weights_fp32), 0u)
        << "master weights differ, of " << eager.state.master_weights_fp32.size();
    EXPECT_EQ(count_differing(replayed.state.momentum_fp32, eager.state.momentum_fp32), 0u)
        << "momentum differs, of " << eager.state.momentum_fp32.size();
    // Same weights, same evaluation.
    EXPECT_EQ(bits_of(replayed.summary.test_loss), bits_of(eager.summary.test_loss));
  }
};

TEST_P(CudaGraphTraining, MseReplayedStepsTrainBitForBitAsEagerSteps) {
  expect_replays_train_as_eager_steps(LossKind::MeanSquaredError);
}

TEST_P(CudaGraphTraining, XentReplayedStepsTrainBitForBitAsEagerSteps) {
  expect_replays_train_as_eager_steps(LossKind::SoftmaxCrossEntropy);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGraphTraining, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
