// test_softmax_regression.cpp: a third model, added through the model table
// alone (softmax_regression_spec.h), trains, checkpoints under its own kind
// and is what the catalog and the factory describe and build.
#include <gtest/gtest.h>

#include <random>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "softmax_regression_model.h"
#include "softmax_regression_spec.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/checkpoint/model_kinds.h"
#include "trainer/config/model_catalog.h"
#include "trainer/config/model_factory.h"
#include "trainer/config/model_table.h"
#include "trainer/loop/trainer.h"

namespace ddp::test {
namespace {

constexpr int kIn = 8;
constexpr int kClasses = 4;

// Linearly separable classes: label = argmax(W* x) for a random W*, so a
// softmax regression can learn them and chance is 1 / kClasses.
Dataset separable(uint64_t seed, size_t count) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::mt19937_64 teacher_rng(7);
  std::vector<float> teacher(kIn * kClasses);
  for (float& w : teacher) w = std::normal_distribution<float>(0.0f, 1.0f)(teacher_rng);
  Dataset d;
  d.count = count;
  d.features = kIn;
  d.num_classes = kClasses;
  d.source = "separable";
  for (size_t i = 0; i < count; ++i) {
    int best = 0;
    float best_score = -1e30f;
    std::vector<float> x(kIn);
    for (float& v : x) v = normal(rng);
    for (int k = 0; k < kClasses; ++k) {
      float score = 0.0f;
      for (int j = 0; j < kIn; ++j) score += teacher[k * kIn + j] * x[j];
      if (score > best_score) {
        best_score = score;
        best = k;
      }
    }
    d.x.insert(d.x.end(), x.begin(), x.end());
    d.labels.push_back(best);
  }
  return d;
}

TrainTestData separable_data() { return TrainTestData{separable(1, 512), separable(2, 256)}; }

TrainConfig softmax_config() {
  register_softmax_regression();
  TrainConfig c;
  c.model = kSoftmaxRegression;
  c.mlp.layer_widths = {kIn, kClasses};
  c.loss = LossKind::SoftmaxCrossEntropy;
  c.loss_name = "xent";
  c.batch_size = 32;
  c.lr = 0.5;
  c.epochs = 6;
  c.log_every = 1000;
  return c;
}

struct TrainedRun {
  TrainSummary summary;
  TrainState state;
};

TrainedRun train(const TrainConfig& c) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  Trainer t(c, cpu, comm, separable_data());
  t.prepare();
  TrainedRun r;
  r.summary = t.run();
  r.state = t.snapshot();
  return r;
}

TEST(SoftmaxRegression, TheTableDescribesAndBuildsIt) {
  const TrainConfig c = softmax_config();
  EXPECT_EQ(model_kind_name(c), kSoftmaxRegression);
  EXPECT_EQ(model_summary(c), "softmax regression 8-4");
  const ParameterRegistry registry = model_parameters(c);
  ASSERT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry[0].name, "linear.weight");
  EXPECT_EQ(registry.parameter_count(), static_cast<size_t>(kIn * kClasses + kClasses));
  const std::vector<std::string> kinds = model_kind_names();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), kSoftmaxRegression), kinds.end());
  uint64_t count = 0;
  EXPECT_EQ(checkpoint_dims_problem(kSoftmaxRegression, {kIn, kClasses}, count), "");
  EXPECT_EQ(count, static_cast<uint64_t>(kIn * kClasses + kClasses));
  EXPECT_NE(checkpoint_dims_problem(kSoftmaxRegression, {kIn, 16, kClasses}, count), "");
  CpuBackend cpu(1);
  const std::unique_ptr<Model> built = make_model(c, cpu, 4);
  EXPECT_NE(dynamic_cast<SoftmaxRegressionModel*>(built.get()), nullptr) << "the factory built another model";
  EXPECT_EQ(built->parameters()[0].name, "linear.weight");
}

TEST(SoftmaxRegression, LearnsSeparableClasses) {
  const TrainedRun r = train(softmax_config());
  EXPECT_GT(r.summary.test_accuracy, 0.9) << "chance is " << 1.0 / kClasses;
}

// It is a one-layer MLP by another road: the same tensors drawn in the same
// order, the same GEMMs, so the same weights to the bit. A row that
// routed any part (parameters, build, data check) elsewhere would differ.
TEST(SoftmaxRegression, MatchesTheOneLayerMlpBitForBit) {
  TrainConfig mlp = softmax_config();
  mlp.model = "mlp";
  const TrainedRun ours = train(softmax_config());
  const TrainedRun theirs = train(mlp);
  ASSERT_EQ(ours.state.master_weights_fp32.size(), theirs.state.master_weights_fp32.size());
  EXPECT_EQ(ours.state.master_weights_fp32, theirs.state.master_weights_fp32);
  EXPECT_EQ(ours.summary.test_loss, theirs.summary.test_loss);
}

TEST(SoftmaxRegression, CheckpointsUnderItsOwnKind) {
  const TempDir dir("softmax-regression");
  TrainConfig c = softmax_config();
  c.checkpoint_dir = dir.path();
  train(c);
  const auto found = list_checkpoints(c.checkpoint_dir);
  ASSERT_FALSE(found.empty());
  const TrainState s = read_checkpoint(found.front().second);
  EXPECT_EQ(s.model_kind, kSoftmaxRegression);
  EXPECT_EQ(s.model_dims, (std::vector<int64_t>{kIn, kClasses}));
  // An MLP run of the same widths refuses to resume it.
  TrainConfig mlp = c;
  mlp.model = "mlp";
  mlp.resume = true;
  try {
    train(mlp);
    FAIL() << "an MLP run resumed a softmax regression's checkpoint";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("model mismatch"), std::string::npos) << e.what();
  }
}

TEST(SoftmaxRegression, AnUnknownModelNamesTheTable) {
  register_softmax_regression();
  try {
    model_row("resnet");
    FAIL() << "an unknown model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kSoftmaxRegression), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gpt"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp::test
