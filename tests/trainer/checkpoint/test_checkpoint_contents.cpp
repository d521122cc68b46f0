// test_checkpoint_contents.cpp: what a checkpoint holds: every field survives
// a round trip bitwise (random bit patterns, the default state), and the
// contents are checked against the resuming run with each mismatch named.
// (Whether the values make sense: test_checkpoint_validation.cpp.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "checkpoint_test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_validation.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/models/mlp/mlp_config.h"

namespace ddp {
namespace {

using namespace test;  // checkpoint_test_support.h: states, byte surgery, the fixture

// ---- round trips ---------------------------------------------------------------------

TEST_F(CheckpointFormat, RandomStatesRoundTripBitwise) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  for (int trial = 0; trial < 20; ++trial) {
    const TrainState want = random_state(rng_, 40);
    expect_same_state(want, parse_checkpoint(serialize_checkpoint(want), "memory"));
    const std::string file = path(checkpoint_file_name(trial));
    write_checkpoint_atomic(file, want);
    expect_same_state(want, read_checkpoint(file));
  }
}

TEST_F(CheckpointFormat, DefaultStateRoundTrips) {
  const TrainState empty;
  expect_same_state(empty, parse_checkpoint(serialize_checkpoint(empty), "memory"));
}

// ---- compatibility ----------------------------------------------------------------

TEST_F(CheckpointCompat, MismatchesAreNamed) {
  TrainState ckpt;
  ckpt.model_dims = {784, 512, 10};
  ckpt.activation = "relu";
  ckpt.loss = "xent";
  ckpt.master_weights_fp32.assign(mlp_params(ckpt.model_dims), 0.0f);
  ckpt.momentum_fp32.assign(mlp_params(ckpt.model_dims), 0.0f);
  EXPECT_NO_THROW(
      check_checkpoint_compatible(ckpt, {784, 512, 10}, "relu", "xent", mlp_params({784, 512, 10}), "c.ddpckpt"));

  EXPECT_EQ(
      checkpoint_error_of([&] {
        check_checkpoint_compatible(ckpt, {784, 256, 10}, "relu", "xent", mlp_params({784, 256, 10}), "c.ddpckpt");
      }),
      "checkpoint c.ddpckpt: model shape mismatch: checkpoint has layers 784,512,10, this run 784,256,10");
  EXPECT_EQ(
      checkpoint_error_of([&] {
        check_checkpoint_compatible(ckpt, {784, 512, 10}, "gelu", "xent", mlp_params({784, 512, 10}), "c.ddpckpt");
      }),
      "checkpoint c.ddpckpt: activation mismatch: checkpoint has relu, this run gelu");
  EXPECT_EQ(checkpoint_error_of([&] {
              check_checkpoint_compatible(ckpt, {784, 512, 10}, "relu", "mse", mlp_params({784, 512, 10}), "c.ddpckpt");
            }),
            "checkpoint c.ddpckpt: loss mismatch: checkpoint has xent, this run mse");

  TrainState short_weights = ckpt;
  short_weights.master_weights_fp32.pop_back();
  EXPECT_TRUE(contains(checkpoint_error_of([&] {
                         check_checkpoint_compatible(short_weights, {784, 512, 10}, "relu", "xent",
                                                     mlp_params({784, 512, 10}), "c.ddpckpt");
                       }),
                       "parameter count mismatch"));
  TrainState no_momentum = ckpt;
  no_momentum.momentum_fp32.clear();
  EXPECT_TRUE(contains(checkpoint_error_of([&] {
                         check_checkpoint_compatible(no_momentum, {784, 512, 10}, "relu", "xent",
                                                     mlp_params({784, 512, 10}), "c.ddpckpt");
                       }),
                       "momentum size mismatch"));
}

// Format 2 names its tensors and its model kind: each compared with this run's.
TEST_F(CheckpointCompat, TensorsAndKindMismatchesAreNamed) {
  TrainState ckpt = small_state(3);
  const ParameterRegistry registry = mlp_parameters(ckpt.model_dims);
  EXPECT_NO_THROW(check_checkpoint_tensors(ckpt, registry, "c"));
  EXPECT_NO_THROW(check_checkpoint_model_kind(ckpt, "mlp", "c"));
  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_model_kind(ckpt, "gpt", "c"); }),
            "checkpoint c: model mismatch: the checkpoint holds a mlp, this run trains a gpt");
  TrainState renamed = ckpt;
  renamed.tensors[1].name = "2.gain";
  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_tensors(renamed, registry, "c"); }),
            "checkpoint c: model mismatch: tensor 1 is '2.gain', this run's model has 2.bias there");
  TrainState reshaped = ckpt;
  std::swap(reshaped.tensors[2].shape[0], reshaped.tensors[2].shape[1]);  // 0.weight [2, 3] -> [3, 2]
  EXPECT_EQ(checkpoint_error_of([&] { check_checkpoint_tensors(reshaped, registry, "c"); }),
            "checkpoint c: model mismatch: tensor 0.weight has shape 3,2, this run's 2,3");
  TrainState fewer = ckpt;
  fewer.tensors.pop_back();
  EXPECT_TRUE(contains(checkpoint_error_of([&] { check_checkpoint_tensors(fewer, registry, "c"); }),
                       "tensor 0.bias is not in the checkpoint"));
  TrainState v1 = ckpt;
  v1.tensors.clear();  // format 1 names none: its layout is checked by the dims
  EXPECT_NO_THROW(check_checkpoint_tensors(v1, registry, "c"));
}

}  // namespace
}  // namespace ddp
