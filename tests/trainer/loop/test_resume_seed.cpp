// test_resume_seed.cpp: a resume keeps the data order of the run it
// continues. The order is drawn from --seed; a resume given another --seed
// takes the checkpoint's (checkpointing.h), so its steps read the rows the
// uninterrupted run read, and its checkpoints record the seed of that order.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_dir.h"
#include "trainer/loop/trainer.h"

namespace ddp {
namespace {

TrainConfig shuffled_config(uint64_t seed) {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 16, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 16;
  c.lr = 0.05;
  c.log_every = 1000;
  c.steps = 30;  // 1.5 epochs of 320 samples: the resume lands in the first epoch, the order matters after it
  c.data.synthetic_train_samples = 320;
  c.data.synthetic_test_samples = 64;
  c.seed = seed;
  return c;
}

// The same rows for every run, whatever its --seed: only the order and the
// initial weights follow the seed.
const TrainTestData& fixed_data() {
  static const TrainTestData data = load_train_test(shuffled_config(1).data, 1);
  return data;
}

std::vector<float> train(const TrainConfig& c) {
  CpuBackend cpu(1);
  SingleProcessCommunicator comm;
  Trainer t(c, cpu, comm, fixed_data());
  t.prepare();
  t.run();
  return t.snapshot().master_weights_fp32;
}

TEST(ResumeSeed, AResumeWithAnotherSeedKeepsTheCheckpointsOrder) {
  const test::TempDir scratch("resume-seed");
  const std::string& dir = scratch.path();
  const std::vector<float> straight = train(shuffled_config(5));
  TrainConfig first = shuffled_config(5);
  first.checkpoint_dir = dir;
  first.stop_after_steps = 12;
  train(first);
  TrainConfig second = shuffled_config(9);  // another --seed on the resume's command line
  second.checkpoint_dir = dir;
  second.resume = true;
  const std::vector<float> resumed = train(second);
  ASSERT_EQ(resumed.size(), straight.size());
  EXPECT_EQ(resumed, straight) << "the resumed run read its rows in another order";
  const auto found = list_checkpoints(dir);
  ASSERT_FALSE(found.empty());
  ASSERT_EQ(found.front().first, 30) << "the resumed run wrote no checkpoint of its own";
  EXPECT_EQ(read_checkpoint(found.front().second).seed, 5u) << "the last checkpoint records another order's seed";
  // The seed does change the order: without the resume, seed 9 trains otherwise.
  EXPECT_NE(train(shuffled_config(9)), straight);
}

}  // namespace
}  // namespace ddp
