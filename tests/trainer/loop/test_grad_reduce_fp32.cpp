// test_grad_reduce_fp32.cpp: --grad-reduce-dtype fp32 at one rank. There
// is no sum to make, so the FP32 path's arithmetic (an exact widening, the
// identity "sum", one FP32 multiply by 1/S) is the 16-bit path's
// (unscale_element): a run gives the same master weights and test loss, bit
// for bit, at every --zero stage, with SGD clipped by the global norm (the
// FP32 gradients the norm reads), AdamW, an injected overflow (the check on
// the FP32 sums) and a dynamic loss scale. The sums over ranks are the MPI
// suites' (tests/mpi/mpi_test_grad_reduce_fp32.cpp).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "support/lowp_format.h"
#include "support/precision_config.h"
#include "support/temp_dir.h"
#include "support/test_support.h"
#include "support/training_run_support.h"

namespace ddp {
namespace {

class GradReduceFp32 : public ::testing::TestWithParam<Precision> {};

TrainConfig mlp_run() {
  TrainConfig c;
  c.data.kind = "synthetic";
  c.mlp.layer_widths = {10, 32, 10};
  c.loss = LossKind::MeanSquaredError;
  c.loss_name = "mse";
  c.batch_size = 32;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.clip_grad_norm = 0.5;
  c.log_every = 1000;
  c.steps = 12;
  c.data.synthetic_train_samples = 500;
  c.data.synthetic_test_samples = 100;
  c.inject_overflow_steps = {4};
  return c;
}

TEST_P(GradReduceFp32, AtOneRankTheFp32SumsGiveTheLowpSumsBits) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set DDP_TEST_SEED to reproduce)");
  const test::TempDir dir("grad_reduce_fp32");
  std::mt19937_64 rng(seed);
  const std::string text = dir.path() + "/text.txt";
  test::write_random_letters(text, rng, 6000, 12);
  GptConfig gpt;
  gpt.n_layer = 2;
  gpt.n_head = 2;
  gpt.n_embd = 32;
  gpt.block_size = 16;
  gpt.vocab_size = 256;
  const TrainConfig runs[] = {mlp_run(), test::gpt_text_run(gpt, text, 16, 256, 6)};
  CpuBackend cpu(1, GetParam());
  for (const TrainConfig& run : runs) {
    for (const int stage : {0, 1, 2, 3}) {
      TrainConfig c = test::in_precision(run, GetParam());
      c.seed = seed;
      c.zero_stage = stage;
      c.bucket_mb = c.first_bucket_mb = 4.0 / 1024;  // several buckets: the staging buffers are reused
      if (stage == 2) c.grad_accum = 1;              // stage 2 shards the gradients: no accumulation
      if (!c.inject_overflow_steps.empty()) c.loss_scaler.mode = LossScaleMode::Dynamic;  // bf16 too
      SCOPED_TRACE(c.model + " --zero " + std::to_string(stage));
      const test::TrainingRun lowp = test::train_with(cpu, c);
      c.grad_reduce_fp32 = true;
      const test::TrainingRun fp32 = test::train_with(cpu, c);
      ASSERT_EQ(fp32.master.size(), lowp.master.size());
      size_t differ = 0;
      for (size_t i = 0; i < lowp.master.size(); ++i)
        differ += test::bits_of(fp32.master[i]) != test::bits_of(lowp.master[i]);
      EXPECT_EQ(differ, 0u) << "of " << lowp.master.size() << " master weights";
      EXPECT_EQ(test::bits_of(static_cast<float>(fp32.summary.test_loss)),
                test::bits_of(static_cast<float>(lowp.summary.test_loss)));
      EXPECT_EQ(fp32.summary.skipped_steps, lowp.summary.skipped_steps);
      if (!c.inject_overflow_steps.empty()) {
        EXPECT_GE(lowp.summary.skipped_steps, 1) << "the overflow was not seen";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GradReduceFp32, ::testing::ValuesIn(test::kBothPrecisions),
                         test::precision_test_name);

}  // namespace
}  // namespace ddp
