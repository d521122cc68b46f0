// test_training.cpp: the training loop end to end on the CPU backend:
// convergence on real data, bitwise resume, weights round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "trainer/data/idx_reader.h"
#include "trainer/params/parameter_store.h"
#include "trainer/loop/trainer.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/checkpoint_v1.h"
#include "trainer/checkpoint/weights_io.h"
#include "support/data_file_support.h"
#include "support/temp_dir.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/test_support.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

Dataset head(const Dataset& d, size_t n) {
  Dataset out = d;
  out.count = std::min(n, d.count);
  out.x.resize(out.count * d.features);
  if (d.is_classification())
    out.labels.resize(out.count);
  else
    out.targets.resize(out.count * d.target_dim);
  return out;
}

TrainConfig synthetic_config() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 32, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 32;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.log_every = 1000;
  c.lr_schedule = LrScheduleKind::Cosine;
  c.data.synthetic_train_samples = 500;  // 16 steps per epoch, last one partial
  c.data.synthetic_test_samples = 100;
  return c;
}

std::vector<float> train(const TrainConfig& c, TrainSummary* summary = nullptr) {
  CpuBackend cpu(1, c.precision);
  SingleProcessCommunicator comm;
  Trainer t(c, cpu, comm, load_train_test(c.data, c.seed));
  t.prepare();
  const TrainSummary s = t.run();
  if (summary) *summary = s;
  return t.snapshot().master_weights_fp32;
}

// The initial weights as a snapshot holds them (packed, registry order).
std::vector<float> packed_initial_weights(const TrainConfig& c) {
  const ParameterRegistry registry = mlp_parameters(c.mlp.layer_widths);
  return registry.pack(registry.initial_values(c.seed));
}

class TrainingResume : public ::testing::TestWithParam<Precision> {};

TEST(TrainingConvergence, FashionMnistSubsetReachesAccuracy) {
  if (!fs::is_directory(kFashionDir)) GTEST_SKIP() << kFashionDir << " missing (Debian dataset-fashion-mnist)";
  TrainConfig c;
  c.mlp.layer_widths = {784, 128, 10};
  c.epochs = 3;
  c.batch_size = 64;
  c.log_every = 100000;
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  TrainTestData data;
  data.train = head(load_fashion_mnist(kFashionDir, true), 6000);
  data.test = head(load_fashion_mnist(kFashionDir, false), 2000);
  Trainer t(c, cpu, comm, std::move(data));
  t.prepare();
  const TrainSummary s = t.run();
  // 6k samples, 3 epochs: PyTorch fp32 reaches ~83% here; the bar leaves room for seeds.
  EXPECT_GE(s.test_accuracy, 0.78) << "test accuracy " << s.test_accuracy;
  EXPECT_LE(s.skipped_steps, 5);  // the initial 65536 scale may overflow a first step or two, as in GradScaler
}

TEST_P(TrainingResume, StopAndResumeIsBitwiseIdentical) {
  const test::TempDir temp_dir("resume");
  const std::string& dir = temp_dir.path();
  TrainConfig c = test::in_precision(synthetic_config(), GetParam());
  c.steps = 40;  // 2.5 epochs: the resume lands mid-epoch
  const std::vector<float> straight = train(c);

  TrainConfig first = c;
  first.checkpoint_dir = dir;
  first.stop_after_steps = 23;
  train(first);
  TrainConfig second = c;
  second.checkpoint_dir = dir;
  second.resume = true;
  TrainSummary s;
  const std::vector<float> resumed = train(second, &s);
  EXPECT_EQ(s.steps, 17);
  EXPECT_EQ(s.final_step, 40);
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) ASSERT_EQ(resumed[i], straight[i]) << "parameter " << i;
}

// A checkpoint of an earlier build (format 1, named .ddpckpt) resumes bit
// for bit: the run's format 2 checkpoint is rewritten as format 1 in its
// place, and a bare --resume takes it.
TEST_P(TrainingResume, AFormat1CheckpointResumesBitwise) {
  const test::TempDir temp_dir("resume_v1");
  const std::string& dir = temp_dir.path();
  TrainConfig c = test::in_precision(synthetic_config(), GetParam());
  c.steps = 40;
  const std::vector<float> straight = train(c);
  TrainConfig first = c;
  first.checkpoint_dir = dir;
  first.stop_after_steps = 23;
  train(first);
  const std::string v2 = dir + "/" + checkpoint_file_name(23);
  const std::vector<uint8_t> v1 = serialize_checkpoint_v1(read_checkpoint(v2));
  fs::remove(v2);
  test::write_bytes(dir + "/ckpt-step000000000023.ddpckpt", v1);
  TrainConfig second = c;
  second.checkpoint_dir = dir;
  second.resume = true;
  TrainSummary s;
  const std::vector<float> resumed = train(second, &s);
  EXPECT_EQ(s.steps, 17);
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) ASSERT_EQ(resumed[i], straight[i]) << "parameter " << i;
  EXPECT_TRUE(fs::exists(dir + "/" + checkpoint_file_name(40)));  // and writes format 2 from there on
}

TEST_P(TrainingResume, ExtendingAConstantScheduleRunIsBitwiseIdentical) {
  // N steps, checkpoint, resume for M more == N + M steps in one run.
  const test::TempDir temp_dir("extend");
  const std::string& dir = temp_dir.path();
  TrainConfig c = test::in_precision(synthetic_config(), GetParam());
  c.lr_schedule = LrScheduleKind::Constant;
  c.steps = 30;
  const std::vector<float> straight = train(c);
  TrainConfig first = c;
  first.steps = 18;
  first.checkpoint_dir = dir;
  train(first);
  TrainConfig second = c;
  second.checkpoint_dir = dir;
  second.resume = true;
  const std::vector<float> resumed = train(second);
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) ASSERT_EQ(resumed[i], straight[i]) << "parameter " << i;
}

TEST(TrainingWeights, SaveThenInitRoundTrips) {
  const test::TempDir temp_dir("weights");
  const std::string& dir = temp_dir.path();
  TrainConfig c = synthetic_config();
  c.steps = 5;
  c.save_weights_dir = dir + "/w";
  const std::vector<float> trained = train(c);
  const ParameterRegistry registry = mlp_parameters(c.mlp.layer_widths);
  EXPECT_EQ(registry.pack(load_weights_npy(dir + "/w", registry)), trained);  // snapshots hold tensors packed
  // Starting from them with a zero learning-rate step changes nothing.
  TrainConfig again = synthetic_config();
  again.steps = 1;
  again.init_weights_dir = dir + "/w";
  again.lr = 1e-30;
  again.momentum = 0;
  const std::vector<float> reloaded = train(again);
  ASSERT_EQ(reloaded.size(), trained.size());
  for (size_t i = 0; i < trained.size(); ++i) ASSERT_EQ(reloaded[i], trained[i]);
}

TEST(TrainingSynthetic, RegressionLossFalls) {
  TrainConfig c = synthetic_config();
  c.steps = 200;
  TrainSummary s;
  train(c, &s);
  // Targets have unit variance; a trained Linear fit leaves about the noise.
  EXPECT_LT(s.test_loss, 0.05) << s.test_loss;
  EXPECT_TRUE(std::isnan(s.test_accuracy));
}

// --grad-accum 4 at batch 8 sees the same 32 samples per step as batch 32
// (no shuffle) and averages the micro-batch means, which equals the mean
// over 32 rows: the runs differ by FP16 rounding of the accumulated
// gradients only. Tolerance 0.5% of the update after 15 steps (an
// accumulation that summed instead of averaged would be off by ~300%).
TEST(TrainingSemantics, GradientAccumulationMatchesOneLargeBatch) {
  TrainConfig big = synthetic_config();
  big.shuffle = false;
  big.steps = 15;
  big.seed = test::test_seed() % 1000;
  big.loss_scaler.init_scale = 1024;  // no overflow: both runs must take every step
  TrainConfig accum = big;
  accum.batch_size = 8;
  accum.grad_accum = 4;
  TrainSummary sb, sa;
  const auto wb = train(big, &sb), wa = train(accum, &sa);
  ASSERT_EQ(sb.skipped_steps + sa.skipped_steps, 0);
  const auto start = packed_initial_weights(big);
  EXPECT_LT(test::relative_update_difference(wa, wb, start), 5e-3) << "seed " << big.seed;
}

// --grad-predivide F scales the gradients by 1/F before the (here trivial)
// all-reduce and by F after: with F a power of two every FP16 value keeps
// its bits unless it underflows, so the update barely moves.
TEST(TrainingSemantics, PredivideLeavesTheUpdateUnchanged) {
  TrainConfig plain = synthetic_config();
  plain.steps = 15;
  plain.seed = test::test_seed() % 1000;
  TrainConfig pre = plain;
  pre.grad_predivide = 4.0;
  const auto wp = train(plain), wq = train(pre);
  const auto start = packed_initial_weights(plain);
  EXPECT_LT(test::relative_update_difference(wq, wp, start), 1e-3) << "seed " << plain.seed;
}

INSTANTIATE_TEST_SUITE_P(Precisions, TrainingResume, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
